//! o200k_base:
//! `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
//! `|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
//! `|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//!
//! Mistral's Tekken pattern is the same without the contractions and with single digits
//! (`\p{N}`).
//!
//! The two letter classes overlap (Lm, Lo and marks are in both) and marks are also
//! `[^\r\n\p{L}\p{N}]`, so the first two alternatives are resolved the way a backtracking engine
//! resolves them: optional prefix first taken, then not; `[UP]*` giving characters back.

use super::ascii::Masks;
use super::scan::{
    class_at, contraction_ci, digits_1_3, run, run_letters, trailing_whitespace, whitespace_run, Scanner,
};
use super::window::{contractions, digit_starts, fill_down, fill_up, near_unknown, whitespace_starts, Window};
use crate::unicode::{CRLF, L, LO, N, O, UP};

#[derive(Clone, Copy)]
pub(crate) struct O200k {
    /// The `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` after a word (not in Tekken).
    pub contractions: bool,
    /// `\p{N}` (Tekken) instead of `\p{N}{1,3}`.
    pub single_digits: bool,
}

impl O200k {
    pub(crate) const BASE: O200k = O200k { contractions: true, single_digits: false };
    pub(crate) const TEKKEN: O200k = O200k { contractions: false, single_digits: true };

    /// The end of a word piece that ends at `e`: after its contraction, if any.
    #[inline(always)]
    fn with_contraction(&self, t: &[u8], e: usize) -> usize {
        if self.contractions {
            e + contraction_ci(t, e).unwrap_or(0)
        } else {
            e
        }
    }
}

#[inline(always)]
fn run_lower(t: &[u8], i: usize) -> usize {
    run_letters(t, i, LO, false, true)
}

/// `[UP]*[LO]+` at `q`: the match end, if any. `[UP]*` takes its longest run, then gives back
/// characters until `[LO]+` can start; `[LO]+` then runs as far as it can.
#[inline]
fn upper_then_lower(t: &[u8], q: usize) -> Option<usize> {
    let (mut i, mut last_lo_end) = (q, None);
    loop {
        let (c, l) = class_at(t, i);
        if c & UP == 0 {
            if c & LO != 0 {
                return Some(run_lower(t, i + l));
            }
            return last_lo_end;
        }
        i += l;
        if c & LO != 0 {
            last_lo_end = Some(i);
        }
    }
}

/// `[UP]+[LO]*` at `q`.
#[inline]
fn upper_run_then_lower(t: &[u8], q: usize) -> Option<usize> {
    let (c, _) = class_at(t, q);
    (c & UP != 0).then(|| run_lower(t, run_letters(t, q, UP, true, false)))
}

impl Scanner for O200k {
    #[inline]
    fn next(&self, t: &[u8], pos: usize) -> usize {
        let b = t[pos];
        let (c, l) = class_at(t, pos);
        // ASCII words (`word`, `Word`, ` word`, ` Word`): what the general rules below give
        // when the letters start with at most one ASCII capital followed by a lowercase letter.
        let q = pos + usize::from(b == b' ');
        let word = match (t.get(q), t.get(q + 1)) {
            (Some(x), _) if x.is_ascii_lowercase() => Some(run_lower(t, q + 1)),
            (Some(x), Some(y)) if x.is_ascii_uppercase() && y.is_ascii_lowercase() => Some(run_lower(t, q + 2)),
            _ => None,
        };
        if let Some(e) = word {
            return self.with_contraction(t, e);
        }
        let prefix = c & (L | N | CRLF) == 0; // `[^\r\n\p{L}\p{N}]`
                                              // Each alternative needs a letter or mark where it starts.
        let c2 = class_at(t, pos + l).0;
        let word = (if prefix && c2 & (UP | LO) != 0 { upper_then_lower(t, pos + l) } else { None })
            .or_else(|| if c & (UP | LO) != 0 { upper_then_lower(t, pos) } else { None })
            .or_else(|| if prefix && c2 & UP != 0 { upper_run_then_lower(t, pos + l) } else { None })
            .or_else(|| if c & UP != 0 { upper_run_then_lower(t, pos) } else { None });
        if let Some(e) = word {
            return self.with_contraction(t, e);
        }
        if c & N != 0 {
            return if self.single_digits { pos + l } else { digits_1_3(t, pos, l) };
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
        let tail = |e: usize| {
            let mut e = e;
            while matches!(t.get(e), Some(b'\r' | b'\n' | b'/')) {
                e += 1;
            }
            e
        };
        if b == b' ' {
            let (c2, l2) = class_at(t, pos + 1);
            if c2 & O != 0 {
                return tail(run(t, pos + 1 + l2, O));
            }
        }
        if c & O != 0 {
            return tail(run(t, pos + l, O));
        }
        let (end, last, after_crlf) = whitespace_run(t, pos);
        if let Some(e) = after_crlf {
            return e;
        }
        trailing_whitespace(t, pos, end, last)
    }
}

impl Window for O200k {
    const FOLD: bool = true;
    /// Its two letter classes split words by case: only letters whose case the window tells.
    const CASED: bool = true;
    /// An apostrophe's contraction depends on the letter before it, which may itself end a
    /// contraction that began three bytes earlier.
    const CONTEXT: usize = 7;
    /// Whether an apostrophe is in a word's piece depends on the two letters after it.
    const LOOKAHEAD: usize = 2;

    /// As [`Cl100k`](super::Cl100k)'s rules, with these differences, in ASCII:
    /// - a run of letters also splits before a capital that follows a small letter (a word is
    ///   `[A-Z]*[a-z]+` or `[A-Z]+[a-z]*`);
    /// - a contraction (`'s` … `'re`, either case) belongs to the word before it: an apostrophe
    ///   after a letter that begins one is inside that word's piece (unless the letter is itself
    ///   a contraction's, which is left to the scalar scanner), and the piece ends after it;
    /// - an `O` run's piece takes the run of line breaks and slashes after it.
    #[inline(always)]
    fn starts(&self, m: &Masks, at_text_start: bool, reaches_end: bool) -> (u64, u64) {
        let (ws, nl, digit) = (m.ws, m.nl, m.digit);
        let (letter, upper) = (m.letter | m.mb_letter, m.upper | m.mb_upper);
        let lower = letter & !upper;
        let h = ws & !nl;
        let nonws = m.inr & !ws;
        let other = nonws & !(letter | digit | m.unknown());

        let tail_chars = nl | m.slash;
        let tail_first = nl & other << 1;
        let taken = fill_up(tail_first, tail_chars); // the `[\r\n/]*` after an `O` run
        let after_taken = tail_chars.wrapping_add(tail_first) & !tail_chars & m.inr;

        let o_start = other & !(other << 1) & !(m.space << 1) & !taken;
        // The `[^\r\n\p{L}\p{N}]` that starts a piece, and its last byte, which the word's first
        // letter follows.
        let prefix = o_start | (after_taken & other) | h;
        let prefix_end = prefix & !m.other3 | (prefix & m.other3) << 2;
        let l_start = letter & !(letter << 1) & !(prefix_end << 1) | upper & lower << 1;

        let (ws_starts, after_last_nl) = whitespace_starts(m, taken);

        let apos = if self.contractions { m.apos & letter << 1 } else { 0 };
        let (c2, c3) = contractions(m, apos);
        let inside = c2 | c3 | (c2 | c3) << 1 | c3 << 2;
        // An apostrophe two or three bytes after another: the letter before it may end a contraction.
        let chained = if self.contractions { m.apos & (m.apos << 2 | m.apos << 3) } else { 0 };

        let digit_starts = if self.single_digits { digit } else { digit_starts(digit) };
        let any = o_start | after_taken | l_start | digit_starts | ws_starts | after_last_nl;
        let starts = (any & !inside | c2 << 2 | c3 << 3) & m.inr;

        let seeds =
            near_unknown::<Self>(m, at_text_start, reaches_end) | chained | chained << 1 | chained << 2 | chained << 3;
        // A run of line breaks and slashes may be an unseen `O` run's tail however long it is:
        // whether the byte after it starts a piece, and so whether a letter after that does,
        // is as unknown as the run.
        let tail = fill_up(seeds, tail_chars);
        let unknown = seeds | tail | tail << 1 | tail << 2 | fill_up(seeds, digit) | fill_down(seeds, h);
        (starts, !unknown)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::Pattern;

    /// The window scanner, the scalar one and the regex agree on `text`, for o200k and Tekken.
    fn check(text: &str) {
        crate::pretok::assert_agrees(O200k::BASE, Pattern::O200k, text);
        crate::pretok::assert_agrees(O200k::TEKKEN, Pattern::Tekken, text);
    }

    #[test]
    fn window_edges_runs_and_contractions() {
        for text in [
            "",
            "'",
            "'s",
            "dog's's'S x'LL 'Ve 're'D''s ''m 't",
            "😀\r\n\r\n//'r",
            "é\n\n\n\n\n\n\n\n\n\n//'ab 😀//////////'s",
            "HTMLParser camelCase ABc aBC iPhone's I'M",
            "rock'n'roll don't'll x'sa'sb",
            "a!\n/\n/x !/\nb //\n\n/!c",
            "x\n ",
            "x \n \t",
            "1234567 12 1234567890123\t\t!!a !a\ta\t!a",
        ] {
            check(text);
        }
        let body = "I'M here: Don't  stop 1234567abc  'll\n\n it's\t'd x'sa é'd 'é ''s\u{3000}'s !\n/\n \n \t aBcD's";
        for k in 0..140 {
            check(&format!("{}{body}", "a ".repeat(k / 2) + &"b".repeat(k % 2)));
            check(&format!("{}{body}", "1".repeat(k)));
            check(&format!("{}{body}", " \n".repeat(k / 2)));
            check(&format!("{}{body}", "'s".repeat(k / 2)));
        }
        for k in 0..140 {
            let pad = "a".repeat(k % 70);
            check(&format!("{pad}x\n{}\n y", " ".repeat(k)));
            check(&format!("{pad}—{} \n y", "\n".repeat(k)));
            check(&format!("{pad}!{}x", "\n/".repeat(k / 2)));
            check(&format!("{pad}—{}x", "/\n".repeat(k / 2)));
            check(&format!("{pad}!{}/x", "\n".repeat(k)));
            // An apostrophe at every offset from a window's right edge.
            check(&format!("{} e'll", "a".repeat(k)));
            check(&format!("{} e'llama", "ab ".repeat(k / 3) + &"c".repeat(k % 3)));
            check(&format!("{pad}—{}/x", "\n".repeat(k)));
            check(&format!("{pad}—{}\t/x", "\n".repeat(k)));
            check(&format!("{pad}—{}/'x", "\n".repeat(k)));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn window_scanner_matches_the_regex(text in proptest::collection::vec(
            proptest::sample::select(vec![
                "a", "b", "s", "l", "e", "v", "r", "d", "m", "t", "S", "L", "V", "E", "A", "Q", "1", "0", "123",
                " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\u{b}", "'", "'", "/", "//", ",", "!", "é", "É",
                "中", "\u{a0}", "\u{3000}", "\u{85}", "²", "\u{301}", "ʰ", "'s", "'ll", "ſ", "’", "—", "😀", "ǅ", "\u{212a}", "٣٣",
                "ж", "Ж", "я", "Ѿ", "ѿ", "ß", "ÿ", "Ÿ", "×", "ł", "…", "‰", "\u{2028}", "\u{200b}", "’s", "жЖ", "Жж'S",
            ]),
            0..200,
        )) {
            check(&text.concat());
        }
    }
}
