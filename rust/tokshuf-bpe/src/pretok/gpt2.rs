//! GPT-2 / r50k / p50k:
//! `'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//! (tiktoken spells it with possessive quantifiers and `\s++$|\s+(?!\S)|\s`: the same matches).

use super::ascii::Masks;
use super::scan::{class_at, contraction_cs, run, run_l, trailing_whitespace, whitespace_run, Scanner};
use super::window::{contractions, near_unknown, Window};
use crate::unicode::{L, N, O};

#[derive(Clone, Copy)]
pub(crate) struct Gpt2;

impl Scanner for Gpt2 {
    #[inline(always)]
    fn next(&self, t: &[u8], pos: usize) -> usize {
        let b = t[pos];
        if b == b'\'' {
            if let Some(k) = contraction_cs(t, pos) {
                return pos + k;
            }
        }
        // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: L, N, O partition the non-space characters,
        // so the class of the first non-space character picks the alternative.
        if b == b' ' {
            let (c2, l2) = class_at(t, pos + 1);
            let m = c2 & (L | N | O);
            if m == L {
                return run_l(t, pos + 1 + l2);
            }
            if m != 0 {
                return run(t, pos + 1 + l2, m);
            }
        }
        let (c, l) = class_at(t, pos);
        let m = c & (L | N | O);
        if m == L {
            return run_l(t, pos + l);
        }
        if m != 0 {
            return run(t, pos + l, m);
        }
        let (end, last, _) = whitespace_run(t, pos);
        trailing_whitespace(t, pos, end, last)
    }
}

impl Window for Gpt2 {
    const FOLD: bool = false;
    const CASED: bool = false;
    const CONTEXT: usize = 4;
    const LOOKAHEAD: usize = 1;

    #[inline(always)]
    fn starts(&self, m: &Masks, at_text_start: bool, reaches_end: bool) -> (u64, u64) {
        gpt2_starts(m, at_text_start, reaches_end)
    }
}

/// The piece starts of a window of GPT-2-split text, and the positions where they are known.
///
/// In ASCII (and the multi-byte characters the window knows, byte for byte), with `p` the
/// previous character and `n` the next one:
/// - a letter, digit or other character starts a piece unless `p` has its class (the same run)
///   or is a space (which prefixes it: ` ?\p{L}+` and so on);
/// - whitespace starts a piece after non-whitespace, and as the last character of a run followed
///   by non-whitespace (`\s+(?!\S)` leaves it to prefix the next piece, or to stand alone);
/// - an apostrophe that starts a piece and begins a contraction (`'s` … `'re`) makes that a
///   piece, and a piece starts right after it.
///
/// The start-ness of position `i` thus depends on bytes `i - 4 ..= i + 1` only; it is known when
/// their classes are and they are inside the window (or past the text's start or end).
#[inline(always)]
pub(crate) fn gpt2_starts(m: &Masks, at_text_start: bool, reaches_end: bool) -> (u64, u64) {
    let letter = m.letter | m.mb_letter;
    let nonws = m.inr & !m.ws;
    let other = nonws & !(letter | m.digit);
    let same = (letter & letter << 1) | (m.digit & m.digit << 1) | (other & other << 1);
    let s_nonws = nonws & !same & !(m.space << 1);
    let s_ws = m.ws & (!(m.ws << 1) | nonws >> 1);
    let apos = m.apos & s_nonws;
    let (c2, c3) = contractions(m, apos);
    let inside = (c2 | c3) << 1 | c3 << 2;
    let starts = ((s_nonws | s_ws) & !inside | c2 << 2 | c3 << 3) & m.inr;
    (starts, !near_unknown::<Gpt2>(m, at_text_start, reaches_end))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::Pattern;

    /// The window scanner, the scalar one and the regex agree on `text`.
    fn check(text: &str) {
        crate::pretok::assert_agrees(Gpt2, Pattern::Gpt2, text);
    }

    #[test]
    fn window_edges_and_contractions() {
        for text in [
            "",
            "'",
            "'s",
            "x's'll 'VE 're'd''s ''m 't",
            "a  's  'll\n'd\t're",
            " \n \t x \r\n",
            "ab12 34,. ;;x  \t\u{b}y\u{c}z",
        ] {
            check(text);
        }
        // Every shape near every window edge: a prefix shifts the text across the 64-byte steps.
        let body = "I'm here: don't  stop 123abc  'll\n\n it's\t'd x'sa é'd 'é ''s\u{3000}'s";
        for k in 0..140 {
            check(&format!("{}{body}", "a ".repeat(k / 2) + &"b".repeat(k % 2)));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn window_scanner_matches_the_regex(text in proptest::collection::vec(
            proptest::sample::select(vec![
                "a", "b", "s", "l", "e", "v", "r", "d", "m", "t", "S", "L", "1", "0", " ", " ", "  ", "\t",
                "\n", "\r\n", "\u{b}", "'", "'", ",", ".", "é", "中", "\u{a0}", "\u{3000}", "²", "'s", "'ll", "ſ", "’", "😀", "\u{301}", "٣٣",
                "×", "ÿ", "ł", "ŗ", "ж", "Ѿ", "…", "‰", "\u{2028}", "\u{200b}", "\u{2009}", "a’", "’s",
            ]),
            0..200,
        )) {
            check(&text.concat());
        }
    }
}
