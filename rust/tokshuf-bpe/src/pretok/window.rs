//! Running a [`Scanner`] a 64-byte window at a time. In ASCII text, whether a piece starts at a
//! position depends on a few neighbours (and, for some patterns, on the runs around it), so the
//! starts of a whole window come from its class masks with a handful of shifts, and each piece
//! then costs one bit search. The multi-byte characters of web text that the window can class
//! from their bytes alone (accented Latin and Cyrillic letters, typographic punctuation) count as
//! runs of their class, byte for byte, so a letter run goes on through `é` as through `e`; the
//! rules then read the one-character prefix of a word at the end of that character. Positions
//! whose start-ness the window cannot tell (next to another multi-byte character, or too near its
//! edges) are left to the scalar scanner. (Taking a window with multi-byte characters a
//! character at a time, each written as an ASCII byte of its class in a copy, was no faster: the
//! copy and the class lookups cost what the scalar scanner's calls did. Comparing bytes in place
//! costs a few vector instructions per window that holds any.)

use super::ascii::{classify, Masks};
use super::scan::{Cursor, Scanner};

/// A split pattern whose piece starts in ASCII text can be computed from a window's masks.
pub(crate) trait Window: Scanner {
    /// Whether the contraction letters match in either case (`(?i:...)`).
    const FOLD: bool;
    /// Whether the pattern's letter classes split words by case: the window then knows only
    /// the multi-byte letters whose case it tells ([`Masks::mb_upper`]).
    const CASED: bool;
    /// How many bytes before a position can decide whether a piece starts there (beyond the
    /// runs a pattern fills through itself).
    const CONTEXT: usize;
    /// How many bytes after a position can decide it.
    const LOOKAHEAD: usize;

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
        let m = classify(t, w, P::FOLD, P::CASED);
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
                // With its left context in the window, a position is known unless a run crosses.
                self.load(t, from.saturating_sub(P::CONTEXT));
                off = from - self.w;
                if self.valid >> off & 1 == 0 {
                    // Up to the window's next known position, piece by piece.
                    let known = (self.valid >> off << off).trailing_zeros();
                    self.scalar_until = self.w + known.min(64 - P::CONTEXT as u32) as usize;
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

    #[inline(always)]
    fn fill(&mut self, t: &[u8], mut pos: usize, ends: &mut [usize]) -> usize {
        let mut n = 0;
        while n < ends.len() && pos < t.len() {
            pos = self.next(t, pos);
            ends[n] = pos;
            n += 1;
            // The starts the window shows after `pos`, up to its next unknown position, are what
            // the next calls would return: one bit search each instead of a call.
            let off = (pos + 1).wrapping_sub(self.w);
            if off < 64 {
                let ahead = !0u64 << off;
                let unknown = (!self.valid & ahead).trailing_zeros();
                let before_unknown = if unknown < 64 { (1u64 << unknown) - 1 } else { !0 };
                let mut starts = self.starts & ahead & before_unknown;
                while starts != 0 && n < ends.len() {
                    pos = self.w + starts.trailing_zeros() as usize;
                    ends[n] = pos;
                    n += 1;
                    starts &= starts - 1;
                }
            }
        }
        n
    }
}

/// The positions of `W`'s window `m` whose start-ness depends on bytes (in
/// `i - W::CONTEXT ..= i + W::LOOKAHEAD`) that it cannot see: around the multi-byte characters
/// whose class it does not know, and at its edges.
#[inline(always)]
pub(crate) fn near_unknown<W: Window>(m: &Masks, at_text_start: bool, reaches_end: bool) -> u64 {
    let na = m.unknown();
    let mut unknown = 0;
    for k in 1..=W::LOOKAHEAD {
        unknown |= na >> k;
    }
    for k in 0..=W::CONTEXT {
        unknown |= na << k;
    }
    if !at_text_start {
        unknown |= (1 << W::CONTEXT) - 1;
    }
    if !reaches_end {
        unknown |= !(!0u64 >> W::LOOKAHEAD);
    }
    unknown
}

/// `\p{N}{1,3}`'s starts in the runs of `digit`: each run's first digit, then every third,
/// doubling the reach at each step.
#[inline(always)]
pub(crate) fn digit_starts(digit: u64) -> u64 {
    let mut starts = digit & !(digit << 1);
    let mut run = digit & digit << 1 & digit << 2; // bit i: i-2 ..= i are digits
    let mut step = 3;
    while step < 64 {
        starts |= starts << step & run;
        run &= run << step;
        step *= 2;
    }
    starts
}

/// The contractions at the apostrophes `apos`: those of two bytes (`'s 'd 'm 't`) and of three
/// (`'ll 've 're`), each marked at its apostrophe.
#[inline(always)]
pub(crate) fn contractions(m: &Masks, apos: u64) -> (u64, u64) {
    let c2 = apos & m.sdmt >> 1;
    let c3 = apos & ((m.l >> 1 & m.l >> 2) | (m.vr >> 1 & m.e >> 2));
    (c2, c3)
}

/// The whitespace starts of `\s*[\r\n]+|\s+(?!\S)|\s+` (cl100k, o200k), with `taken` the line
/// breaks a preceding piece takes: the first of a run, and the last before a non-space, as
/// `(first_or_last, after_last_break)`; the second is the first `h` after a run's last line break.
#[inline(always)]
pub(crate) fn whitespace_starts(m: &Masks, taken: u64) -> (u64, u64) {
    let (ws, nl) = (m.ws, m.nl);
    let h = ws & !nl;
    let first = ws & !(ws << 1) & !taken;
    let before_nonws = h & (m.inr & !ws) >> 1;
    let ends_at_nl = fill_down(nl >> 1 & h, h);
    (first | before_nonws, h & nl << 1 & !ends_at_nl)
}

/// The bits of `runs` reachable from a bit of `seeds` by going up (towards later bytes) through
/// `runs`: adding a run's lowest seed carries through the rest of the run.
#[inline(always)]
pub(crate) fn fill_up(seeds: u64, runs: u64) -> u64 {
    let s = seeds & runs;
    ((runs.wrapping_add(s) ^ runs) | s) & runs
}

/// [`fill_up`] towards earlier bytes. Carries only go up, so the seeds spread down in six
/// doubling steps instead: after the step of `k`, bit `i` is set if a seed lies in `i..i + 2k`
/// with the run unbroken up to it, and `whole` marks the bits `i` whose bytes `i..i + 2k` are
/// all in the runs. (Reversing the bits to use [`fill_up`] took three times the instructions:
/// x86 has no instruction for it.)
#[inline(always)]
pub(crate) fn fill_down(seeds: u64, runs: u64) -> u64 {
    let (mut filled, mut whole) = (seeds & runs, runs);
    for k in [1, 2, 4, 8, 16, 32] {
        filled |= filled >> k & whole;
        whole &= whole >> k;
    }
    filled
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::{Cl100k, Gpt2, O200k};
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

    /// Piece ends one `next` at a time, the reference for `fill`.
    fn ends_by_next<C: Cursor>(mut cursor: C, t: &[u8]) -> Vec<usize> {
        let (mut ends, mut pos) = (Vec::new(), 0);
        while pos < t.len() {
            pos = cursor.next(t, pos);
            ends.push(pos);
        }
        ends
    }

    fn ends_by_fill<C: Cursor>(mut cursor: C, t: &[u8], room: usize) -> Vec<usize> {
        let (mut ends, mut buf, mut pos) = (Vec::new(), vec![0; room], 0);
        while pos < t.len() {
            let n = cursor.fill(t, pos, &mut buf);
            assert!(n > 0, "no piece at {pos}");
            ends.extend_from_slice(&buf[..n]);
            pos = buf[n - 1];
        }
        ends
    }

    fn fill_is_next_repeated<P: Window + Copy>(pattern: P, text: &str) -> Result<(), TestCaseError> {
        let t = text.as_bytes();
        let expected = ends_by_next(WindowCursor::new(pattern), t);
        for room in [1, 2, 7, 64] {
            prop_assert_eq!(&ends_by_fill(WindowCursor::new(pattern), t, room), &expected, "room {}", room);
        }
        Ok(())
    }

    /// Mostly ASCII words, spaces, digits and contractions, some multi-byte characters: texts
    /// long enough to cross several windows, with known and unknown stretches.
    fn mixed_text() -> impl Strategy<Value = String> {
        let piece = proptest::sample::select(
            &["the", " cat", "'s", "'LL", " ", "  ", "\n\n", " \t", "123456", "!?", " é", "中文", "😀", "\r\n ", "x"][..],
        );
        proptest::collection::vec(piece, 0..80).prop_map(|v| v.concat())
    }

    /// Multi-byte characters at every offset from a window's edges and from the end of the text.
    #[test]
    fn multibyte_characters_at_window_edges() {
        let agree = |text: &str| {
            use crate::Pattern;
            crate::pretok::assert_agrees(Gpt2, Pattern::Gpt2, text);
            crate::pretok::assert_agrees(
                Cl100k { trailing_run_whole: true, single_digits: false },
                Pattern::Cl100k,
                text,
            );
            crate::pretok::assert_agrees(
                Cl100k { trailing_run_whole: false, single_digits: true },
                Pattern::Qwen2,
                text,
            );
            crate::pretok::assert_agrees(O200k::BASE, Pattern::O200k, text);
            crate::pretok::assert_agrees(O200k::TEKKEN, Pattern::Tekken, text);
        };
        // Multi-byte characters up to the end of the text, after a run of them with no space.
        agree("す。 新しい値を設定する場合はそれを入力し、 ");
        for c in ["é", "中", "😀", "。", "\u{a0}", "٣", "ʰ", "’", "ж", "Ж", "×", "…", "\u{2028}"] {
            for k in 0..70 {
                agree(&format!("{}{} x{}. y'd{}し、 ", "a".repeat(k), c.repeat(40), c.repeat(3), c.repeat(k % 5)));
            }
        }
    }

    proptest! {
        #[test]
        fn fill_returns_what_next_would(text in mixed_text()) {
            fill_is_next_repeated(Gpt2, &text)?;
            for single_digits in [false, true] {
                fill_is_next_repeated(Cl100k { trailing_run_whole: true, single_digits }, &text)?;
                fill_is_next_repeated(Cl100k { trailing_run_whole: false, single_digits }, &text)?;
            }
            fill_is_next_repeated(O200k::BASE, &text)?;
            fill_is_next_repeated(O200k::TEKKEN, &text)?;
        }

        #[test]
        fn fills_walk_the_runs(seeds: u64, runs: u64, sparse: u64, a in 0..64u32, b in 0..64u32) {
            // Random runs are short; a run of `a..=b` (any length up to the whole window) with
            // random ones around it tests the long reaches.
            let long = (!0u64 >> (63 - a.max(b))) & (!0u64 << a.min(b));
            for runs in [runs, runs | long, long] {
                for s in [seeds, seeds & sparse, seeds & sparse & sparse.rotate_left(7), 1 << a.max(b)] {
                    prop_assert_eq!(fill_up(s, runs), walk(s, runs, true));
                    prop_assert_eq!(fill_down(s, runs), walk(s, runs, false));
                }
            }
        }
    }
}
