//! cl100k_base and Llama 3. The classic spelling (HF `tokenizer.json`, Meta's Llama 3):
//! `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//! tiktoken's current spelling replaces the whitespace tail with `\s++$|\s*[\r\n]|\s+(?!\S)|\s`,
//! which differs on one input shape: a whitespace run that ends the text and contains a line
//! break before other whitespace (`"x\n "`: classic `"\n"`, `" "`; tiktoken `"\n "`).
//! Qwen2's pattern is the classic one with single digits (`\p{N}` for `\p{N}{1,3}`).

use super::ascii::Masks;
use super::scan::{class_at, contraction_ci, digits_1_3, run, run_l, trailing_whitespace, whitespace_run, Scanner};
use super::window::{contractions, digit_starts, fill_down, fill_up, near_unknown, whitespace_starts, Window};
use crate::unicode::{CRLF, L, N, O};

#[derive(Clone, Copy)]
pub(crate) struct Cl100k {
    /// tiktoken's `\s++$`: a whitespace run reaching the end of the text is one piece.
    pub trailing_run_whole: bool,
    /// `\p{N}` (Qwen2) instead of `\p{N}{1,3}`.
    pub single_digits: bool,
}

impl Scanner for Cl100k {
    #[inline(always)]
    fn next(&self, t: &[u8], pos: usize) -> usize {
        let b = t[pos];
        if b == b'\'' {
            if let Some(k) = contraction_ci(t, pos) {
                return pos + k;
            }
        }
        let (c, l) = class_at(t, pos);
        if c & L != 0 {
            return run_l(t, pos + l);
        }
        // `[^\r\n\p{L}\p{N}]?\p{L}+`: one non-letter, non-digit, non-newline character before letters.
        if c & (N | CRLF) == 0 {
            let (c2, l2) = class_at(t, pos + l);
            if c2 & L != 0 {
                return run_l(t, pos + l + l2);
            }
        }
        if c & N != 0 {
            return if self.single_digits { pos + l } else { digits_1_3(t, pos, l) };
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
        if b == b' ' {
            let (c2, l2) = class_at(t, pos + 1);
            if c2 & O != 0 {
                return run(t, run(t, pos + 1 + l2, O), CRLF);
            }
        }
        if c & O != 0 {
            return run(t, run(t, pos + l, O), CRLF);
        }
        let (end, last, after_crlf) = whitespace_run(t, pos);
        if self.trailing_run_whole && end == t.len() {
            return end;
        }
        // `\s*[\r\n]+`: up to and including the run's last line break.
        if let Some(e) = after_crlf {
            return e;
        }
        trailing_whitespace(t, pos, end, last)
    }
}

impl Window for Cl100k {
    const FOLD: bool = true;
    const CASED: bool = false;
    const CONTEXT: usize = 4;
    const LOOKAHEAD: usize = 1;

    /// In ASCII (and the multi-byte characters the window knows, byte for byte), with `h` the
    /// whitespace other than `\r`/`\n` and `O` what is neither whitespace, letter nor digit, a
    /// piece starts at:
    /// - the first of a run of `O`, unless a space precedes it (` ?[^\s\p{L}\p{N}]+`); an `O` run's
    ///   piece takes the line breaks after it;
    /// - the first of a run of letters, unless an `h` or an `O` that starts a piece precedes it
    ///   (`[^\r\n\p{L}\p{N}]?\p{L}+`);
    /// - every third digit of a run, from its first (`\p{N}{1,3}`);
    /// - whitespace: the first of a run (unless it is a line break that an `O` piece takes, and
    ///   then the first after those breaks), the first after the run's last line break
    ///   (`\s*[\r\n]+`), and the last of a run followed by a non-space (`\s+(?!\S)`); tiktoken's
    ///   `\s++$` makes a run that ends the text one piece;
    /// - contractions (`'s` … `'re`, either case) as in GPT-2.
    ///
    /// Digit runs make a start depend on the run's first digit, and a run of `h` after a line
    /// break on the run's end, so positions whose runs reach an unknown byte are unknown too.
    #[inline(always)]
    fn starts(&self, m: &Masks, at_text_start: bool, reaches_end: bool) -> (u64, u64) {
        let (ws, nl, digit) = (m.ws, m.nl, m.digit);
        let letter = m.letter | m.mb_letter;
        let h = ws & !nl;
        let nonws = m.inr & !ws;
        let other = nonws & !(letter | digit | m.unknown());

        let o_start = other & !(other << 1) & !(m.space << 1);
        // The last byte of the character that starts an `O` run: the one a letter after it follows.
        let o_start_end = o_start & !m.other3 | (o_start & m.other3) << 2;
        let l_start = letter & !(letter << 1) & !(h << 1) & !(o_start_end << 1);

        let taken = nl & other << 1; // line breaks that an `O` piece takes
        let after_taken = nl.wrapping_add(taken) & !nl & ws;
        let (ws_starts, mut after_last_nl) = whitespace_starts(m, taken);
        if self.trailing_run_whole && reaches_end {
            // Clear the starts inside the whitespace run that ends the text.
            let tail = (!0u64).checked_shl(64 - nonws.leading_zeros()).unwrap_or(0);
            after_last_nl &= !tail;
        }

        let apos = m.apos & o_start;
        let (c2, c3) = contractions(m, apos);
        let inside = (c2 | c3) << 1 | c3 << 2;

        let digit_starts = if self.single_digits { digit } else { digit_starts(digit) };
        let any = o_start | l_start | digit_starts | ws_starts | after_taken | after_last_nl;
        let starts = (any & !inside | c2 << 2 | c3 << 3) & m.inr;

        let seeds = near_unknown::<Self>(m, at_text_start, reaches_end);
        let unknown = seeds | fill_up(seeds, digit) | fill_up(seeds, ws) | fill_down(seeds, h);
        (starts, !unknown)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::Pattern;

    /// The window scanner, the scalar one and the regex agree on `text`, in all three spellings.
    fn check(text: &str) {
        for (scanner, p) in [
            (Cl100k { trailing_run_whole: true, single_digits: false }, Pattern::Cl100k),
            (Cl100k { trailing_run_whole: false, single_digits: false }, Pattern::Cl100kClassic),
            (Cl100k { trailing_run_whole: false, single_digits: true }, Pattern::Qwen2),
        ] {
            crate::pretok::assert_agrees(scanner, p, text);
        }
    }

    #[test]
    fn window_edges_runs_and_contractions() {
        for text in [
            "",
            "'",
            "'S",
            "x's'LL 'Ve 're'D''s ''m 't",
            "a  's  'll\n'd\t're",
            " \n \t x \r\n",
            "x\n ",
            "x \n \t",
            "!\n\n \t\n x!\r\n\r\n",
            "1234567 12 1234567890123\t\t!!a !a\ta\t!a",
            "ab12 34,. ;;x  \t\u{b}y\u{c}z",
        ] {
            check(text);
        }
        // Every shape near every window edge: a prefix shifts the text across the 64-byte steps.
        let body = "I'M here: don't  stop 1234567abc  'll\n\n it's\t'd x'sa é'd 'é ''s\u{3000}'s !\n\n \n \t";
        for k in 0..140 {
            check(&format!("{}{body}", "a ".repeat(k / 2) + &"b".repeat(k % 2)));
            check(&format!("{}{body}", "1".repeat(k)));
            check(&format!("{}{body}", " \n".repeat(k / 2)));
        }
        // Long runs that span windows.
        for k in [60, 64, 65, 127, 128, 200] {
            check(&format!("a{}b", "7".repeat(k)));
            check(&format!("a{}b", " ".repeat(k)));
            check(&format!("a{}", " ".repeat(k)));
            check(&format!("a{} \n", " \t".repeat(k)));
            check(&format!("!{} \n b", "\n".repeat(k)));
        }
        // Runs whose far end decides a start: spaces after a line break that meet a line break
        // again past the window's edge or past a non-ASCII space.
        for k in 0..140 {
            let pad = "a".repeat(k % 70);
            check(&format!("{pad}x\n{}\n y", " ".repeat(k)));
            check(&format!("{pad}x\n{}\u{3000}\n y", " ".repeat(k)));
            check(&format!("{pad}—{} \n y", "\n".repeat(k)));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn window_scanner_matches_the_regex(text in proptest::collection::vec(
            proptest::sample::select(vec![
                "a", "b", "s", "l", "e", "v", "r", "d", "m", "t", "S", "L", "V", "E", "1", "0", "123", " ", " ",
                "  ", "\t", "\n", "\r", "\r\n", "\u{b}", "'", "'", ",", ".", "!", "é", "中", "\u{a0}",
                "\u{3000}", "\u{85}", "²", "٣", "'s", "'ll", "ſ", "’", "—", "😀", "\u{301}", "\u{212a}", "٣٣",
                "×", "ÿ", "ł", "ŗ", "ж", "Ѿ", "…", "‰", "\u{2028}", "\u{200b}", "\u{2009}", "a’", "’s",
            ]),
            0..200,
        )) {
            check(&text.concat());
        }
    }
}
