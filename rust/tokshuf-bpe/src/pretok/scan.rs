//! What the scanners share: the traits a split pattern implements ([`Scanner`], and [`Cursor`]
//! for one text), and the character classes and runs their alternatives are made of.

use crate::unicode::{classes, ASCII, CRLF, L, N, S};

/// A split pattern: where the match starting at `pos` (< `text.len()`) ends.
pub(crate) trait Scanner {
    fn next(&self, text: &[u8], pos: usize) -> usize;
}

/// A scanner that carries state from one piece of a text to the next (one per text).
pub(crate) trait Cursor {
    /// Where the piece starting at `pos` (< `text.len()`) ends; `pos` is where the previous ended.
    fn next(&mut self, text: &[u8], pos: usize) -> usize;

    /// The ends of the pieces from `pos` on, into `ends`, as many as fit or as the text has:
    /// how many. What that many calls of `next` return, in order.
    #[inline(always)]
    fn fill(&mut self, text: &[u8], mut pos: usize, ends: &mut [usize]) -> usize {
        let mut n = 0;
        while n < ends.len() && pos < text.len() {
            pos = self.next(text, pos);
            ends[n] = pos;
            n += 1;
        }
        n
    }
}

impl<C: Cursor + ?Sized> Cursor for Box<C> {
    #[inline(always)]
    fn next(&mut self, text: &[u8], pos: usize) -> usize {
        (**self).next(text, pos)
    }
}

impl<S: Scanner + ?Sized> Cursor for &S {
    #[inline(always)]
    fn next(&mut self, text: &[u8], pos: usize) -> usize {
        Scanner::next(*self, text, pos)
    }
}

/// The class flags and byte length of the character at `i` (`(0, 0)` at the end).
#[inline(always)]
pub(crate) fn class_at(t: &[u8], i: usize) -> (u8, usize) {
    let Some(&b0) = t.get(i) else { return (0, 0) };
    if b0 < 0x80 {
        return (ASCII[b0 as usize], 1);
    }
    let (cp, len) = decode_multibyte(t, i, b0);
    (classes().get(cp), len)
}

/// Decode the multi-byte UTF-8 sequence starting with `b0` at `i`. The input is valid UTF-8;
/// a truncated sequence (impossible for `&str`) decodes to U+FFFD's class rather than panicking.
#[inline]
pub(super) fn decode_multibyte(t: &[u8], i: usize, b0: u8) -> (u32, usize) {
    let cont = |k: usize| t.get(i + k).map_or(0, |&b| u32::from(b & 0x3f));
    if b0 < 0xe0 {
        ((u32::from(b0 & 0x1f) << 6) | cont(1), 2)
    } else if b0 < 0xf0 {
        ((u32::from(b0 & 0x0f) << 12) | (cont(1) << 6) | cont(2), 3)
    } else {
        ((u32::from(b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3), 4)
    }
}

/// End of the run of characters whose flags intersect `mask`, starting at `i`.
#[inline(always)]
pub(crate) fn run(t: &[u8], mut i: usize, mask: u8) -> usize {
    loop {
        // ASCII fast path.
        while let Some(&b) = t.get(i) {
            if b >= 0x80 {
                break;
            }
            if ASCII[b as usize] & mask == 0 {
                return i;
            }
            i += 1;
        }
        let (c, l) = class_at(t, i);
        if c & mask == 0 {
            return i;
        }
        i += l;
    }
}

/// How many of the 8 bytes of `v` (little-endian), from the first, are ASCII letters
/// (`upper`/`lower` select the cases), eight bytes at a time without a branch per byte.
#[inline(always)]
fn ascii_prefix(v: u64, upper: bool, lower: bool) -> usize {
    const LO7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HI: u64 = 0x8080_8080_8080_8080;
    const fn splat(b: u8) -> u64 {
        u64::from_le_bytes([b; 8])
    }
    // Byte-wise `lo <= x <= hi` for 7-bit x: adding 0x80 - lo sets the top bit iff x >= lo, with
    // no carry between bytes (x + 0x80 - lo <= 0xff).
    let in_range = |x: u64, lo: u8, hi: u8| (x.wrapping_add(splat(0x80 - lo)) & !x.wrapping_add(splat(0x7f - hi))) & HI;
    let x = v & LO7;
    let mut ok = 0;
    if upper {
        ok |= in_range(x, b'A', b'Z');
    }
    if lower {
        ok |= in_range(x, b'a', b'z');
    }
    let stop = (!ok | v) & HI; // a non-letter ASCII byte or any non-ASCII byte
    (stop.trailing_zeros() / 8) as usize
}

/// End of a run of `mask` characters starting at `i`, where the ASCII members of `mask` are
/// exactly the letters of the selected cases (`L`: both; o200k's `LO`: lower; `UP`: upper).
#[inline(always)]
pub(crate) fn run_letters(t: &[u8], mut i: usize, mask: u8, upper: bool, lower: bool) -> usize {
    loop {
        while let Some(w) = t.get(i..i + 8) {
            let k = ascii_prefix(u64::from_le_bytes(w.try_into().expect("8 bytes")), upper, lower);
            i += k;
            if k < 8 {
                break;
            }
        }
        match t.get(i) {
            None => return i,
            Some(&b) if b < 0x80 => {
                if ASCII[b as usize] & mask == 0 {
                    return i;
                }
                i += 1;
            }
            Some(_) => {
                let (c, l) = class_at(t, i);
                if c & mask == 0 {
                    return i;
                }
                i += l;
            }
        }
    }
}

/// End of the run of `\p{L}` characters starting at `i`.
#[inline(always)]
pub(crate) fn run_l(t: &[u8], i: usize) -> usize {
    run_letters(t, i, L, true, true)
}

/// Up to three `\p{N}` characters starting with the one at `pos` (of length `len`): `\p{N}{1,3}`.
#[inline]
pub(crate) fn digits_1_3(t: &[u8], pos: usize, len: usize) -> usize {
    let mut i = pos + len;
    for _ in 0..2 {
        let (c, l) = class_at(t, i);
        if c & N == 0 {
            break;
        }
        i += l;
    }
    i
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `i` (where `t[i]` is the apostrophe): the match length.
/// Under `(?i)` the `s` also matches U+017F LATIN SMALL LETTER LONG S (simple case folding, as
/// in `regex-syntax` and Oniguruma); no other non-ASCII character folds to these letters.
#[inline]
pub(crate) fn contraction_ci(t: &[u8], i: usize) -> Option<usize> {
    if t.get(i) != Some(&b'\'') {
        return None;
    }
    let a = t.get(i + 1).map(u8::to_ascii_lowercase);
    let b = t.get(i + 2).map(u8::to_ascii_lowercase);
    match (a, b) {
        (Some(b's' | b't' | b'd' | b'm'), _) => Some(2),
        (Some(b'l'), Some(b'l')) | (Some(b'v' | b'r'), Some(b'e')) => Some(3),
        // "ſ" is C5 BF; `to_ascii_lowercase` leaves both bytes alone.
        (Some(0xc5), Some(0xbf)) => Some(3),
        _ => None,
    }
}

/// `'(?:[sdmt]|ll|ve|re)` (GPT-2, case-sensitive) at `i`: the match length.
#[inline]
pub(crate) fn contraction_cs(t: &[u8], i: usize) -> Option<usize> {
    if t.get(i) != Some(&b'\'') {
        return None;
    }
    match (t.get(i + 1), t.get(i + 2)) {
        (Some(b's' | b't' | b'd' | b'm'), _) => Some(2),
        (Some(b'l'), Some(b'l')) | (Some(b'v' | b'r'), Some(b'e')) => Some(3),
        _ => None,
    }
}

/// The whitespace run starting at `pos`, as `(end, start of its last character, end of its
/// last `\r`/`\n` if any)`.
#[inline]
pub(crate) fn whitespace_run(t: &[u8], pos: usize) -> (usize, usize, Option<usize>) {
    let (mut i, mut last, mut after_crlf) = (pos, pos, None);
    loop {
        let (c, l) = class_at(t, i);
        if c & S == 0 {
            return (i, last, after_crlf);
        }
        last = i;
        i += l;
        if c & CRLF != 0 {
            after_crlf = Some(i);
        }
    }
}

/// `\s+(?!\S)|\s+` given the whitespace run at `pos`: the whole run at the end of the text,
/// else the run minus its last character (which then prefixes the next piece), else one char.
#[inline]
pub(crate) fn trailing_whitespace(t: &[u8], pos: usize, end: usize, last: usize) -> usize {
    if end == t.len() || last == pos {
        end
    } else {
        last
    }
}

/// Split `text` with `cursor` (the pieces, in order; for tests and tools).
pub(crate) fn pieces<C: Cursor>(mut cursor: C, text: &str) -> Vec<&str> {
    let t = text.as_bytes();
    let mut pieces = Vec::new();
    let mut ends = [0; 64];
    let mut pos = 0;
    while pos < t.len() {
        let n = cursor.fill(t, pos, &mut ends);
        for &end in &ends[..n] {
            debug_assert!(end > pos && text.is_char_boundary(end));
            pieces.push(&text[pos..end]);
            pos = end;
        }
    }
    pieces
}
