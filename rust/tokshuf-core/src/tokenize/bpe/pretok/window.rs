//! Running a [`Scanner`] a 64-byte window at a time. In ASCII text, whether a piece starts at a
//! position depends on a few neighbours (and, for some patterns, on the runs around it), so the
//! starts of a whole window come from its class masks with a handful of shifts, and each piece
//! then costs one bit search. Positions whose start-ness the window cannot tell (next to a
//! non-ASCII byte, or too near its edges) are left to the scalar scanner.

use super::ascii::{classify, Masks};
use super::{Cursor, Scanner};

/// A split pattern whose piece starts in ASCII text can be computed from a window's masks.
pub(crate) trait Window: Scanner {
    /// Whether the contraction letters match in either case (`(?i:...)`).
    const FOLD: bool;

    /// The piece starts of the window `m` (bit `i`: its byte `i`), and the positions where they
    /// are known. `at_text_start`: the window starts the text; `reaches_end`: it holds the end.
    fn starts(&self, m: &Masks, at_text_start: bool, reaches_end: bool) -> (u64, u64);
}

/// A [`Window`] pattern's cursor over one text.
pub(crate) struct WindowCursor<P> {
    pattern: P,
    /// The window's first byte.
    w: usize,
    /// Piece starts in the window (bit `i`: byte `w + i`).
    starts: u64,
    /// Where `starts` is known.
    valid: u64,
    /// Up to here, the window just loaded showed the scalar scanner is needed.
    scalar_until: usize,
}

impl<P: Window> WindowCursor<P> {
    pub(crate) fn new(pattern: P) -> Self {
        WindowCursor { pattern, w: 0, starts: 0, valid: 0, scalar_until: 0 }
    }

    #[inline(always)]
    fn load(&mut self, t: &[u8], w: usize) {
        let m = classify(t, w, P::FOLD);
        let (starts, valid) = self.pattern.starts(&m, w == 0, t.len() - w <= 64);
        (self.w, self.starts, self.valid) = (w, starts, valid);
    }
}

impl<P: Window> Cursor for WindowCursor<P> {
    #[inline(always)]
    fn next(&mut self, t: &[u8], pos: usize) -> usize {
        // Invariant: no piece starts in `pos + 1 .. from`.
        let mut from = pos + 1;
        loop {
            if from >= t.len() {
                return t.len();
            }
            let mut off = from.wrapping_sub(self.w);
            if off >= 64 || self.valid >> off & 1 == 0 {
                if from < self.scalar_until {
                    return self.pattern.next(t, pos);
                }
                // Four bytes of left context make most positions known.
                self.load(t, from.saturating_sub(4));
                off = from - self.w;
                if self.valid >> off & 1 == 0 {
                    // Up to the window's next known position, piece by piece.
                    let known = (self.valid >> off << off).trailing_zeros();
                    self.scalar_until = self.w + known.min(60) as usize;
                    return self.pattern.next(t, pos);
                }
            }
            let ahead = !0u64 << off;
            let start = (self.starts & ahead).trailing_zeros();
            let unknown = (!self.valid & ahead).trailing_zeros();
            if start < unknown {
                return self.w + start as usize;
            }
            if unknown == 64 {
                // Only a window that reaches the end of the text is known to its last bit.
                return t.len();
            }
            from = self.w + unknown as usize;
        }
    }
}

/// The positions where `start`-ness depends only on bytes `i - 4 ..= i + 1` that the window
/// cannot see: around non-ASCII bytes (whose class it does not know) and at its edges.
#[inline(always)]
pub(crate) fn near_unknown(m: &Masks, at_text_start: bool, reaches_end: bool) -> u64 {
    let na = m.non_ascii;
    let mut unknown = na >> 1 | na | na << 1 | na << 2 | na << 3 | na << 4;
    if !at_text_start {
        unknown |= 0xf;
    }
    if !reaches_end {
        unknown |= 1 << 63;
    }
    unknown
}

/// The bits of `runs` reachable from a bit of `seeds` by going up (towards later bytes) through
/// `runs`: adding a run's lowest seed carries through the rest of the run.
#[inline(always)]
pub(crate) fn fill_up(seeds: u64, runs: u64) -> u64 {
    let s = seeds & runs;
    ((runs.wrapping_add(s) ^ runs) | s) & runs
}

/// [`fill_up`] towards earlier bytes.
#[inline(always)]
pub(crate) fn fill_down(seeds: u64, runs: u64) -> u64 {
    fill_up(seeds.reverse_bits(), runs.reverse_bits()).reverse_bits()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The reference: walk each seed through its run.
    fn walk(seeds: u64, runs: u64, up: bool) -> u64 {
        let mut out = 0;
        for i in 0..64i32 {
            if seeds >> i & 1 == 0 {
                continue;
            }
            let mut j = i;
            while (0..64).contains(&j) && runs >> j & 1 == 1 {
                out |= 1 << j;
                j += if up { 1 } else { -1 };
            }
        }
        out
    }

    proptest! {
        #[test]
        fn fills_walk_the_runs(seeds: u64, runs: u64, sparse: u64) {
            for s in [seeds, seeds & sparse, seeds & sparse & sparse.rotate_left(7)] {
                prop_assert_eq!(fill_up(s, runs), walk(s, runs, true));
                prop_assert_eq!(fill_down(s, runs), walk(s, runs, false));
            }
        }
    }
}
