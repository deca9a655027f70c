//! The normalizers of `tokenizer.json` files that the fast encoder reproduces: NFC, Lowercase,
//! Prepend and Replace of a plain string, and sequences of them, applied as `tokenizers` applies
//! them to each stretch of text between added tokens.
//!
//! NFC is computed by the crate `tokenizers` itself uses (`unicode-normalization-alignments`,
//! Unicode 9 tables), so text whose normalization changed in later Unicode versions comes out as
//! it does there. Most text is already NFC: it is recognised without a copy, by its bytes first
//! (nothing below U+0300 changes or combines) and by the quick-check property otherwise.

use std::borrow::Cow;

use unicode_normalization_alignments::{is_nfc_quick, IsNormalized, UnicodeNormalization};

use super::unicode::single_char as one_char;

/// One normalization step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Nfc,
    /// Rust's per-character `to_lowercase` (not Python's `str.lower`: no final sigma).
    Lowercase,
    /// Put this before a non-empty text.
    Prepend(String),
    /// Replace every occurrence of `from` (non-empty), left to right, with `to`.
    Replace {
        from: String,
        to: String,
    },
}

/// A sequence of normalization steps (empty: none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Normalizer {
    steps: Vec<Step>,
}

impl Normalizer {
    pub fn new(steps: Vec<Step>) -> Normalizer {
        Normalizer { steps }
    }

    pub fn is_identity(&self) -> bool {
        self.steps.is_empty()
    }

    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// `text` normalized (borrowed when nothing changes).
    pub fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        let mut steps = self.steps.iter().peekable();
        while let Some(step) = steps.next() {
            match step {
                // SentencePiece's escaping (`▁` before the text, for every space): one copy.
                Step::Prepend(p)
                    if !out.is_empty()
                        && matches!(steps.peek(), Some(Step::Replace { from, .. }) if one_char(from).is_some()) =>
                {
                    let Some(Step::Replace { from, to }) = steps.next() else { unreachable!("peeked") };
                    let c = one_char(from).expect("peeked");
                    let mut s = String::with_capacity(p.len() + out.len() + out.len() / 2);
                    replace_into(&mut s, p, c, to);
                    replace_into(&mut s, &out, c, to);
                    out = Cow::Owned(s);
                }
                Step::Nfc => {
                    if let Cow::Owned(n) = nfc(&out) {
                        out = Cow::Owned(n);
                    }
                }
                Step::Lowercase => {
                    if out.chars().any(|c| c.to_lowercase().ne(std::iter::once(c))) {
                        out = Cow::Owned(out.chars().flat_map(char::to_lowercase).collect());
                    }
                }
                // `tokenizers` leaves an empty text empty (and removes it).
                Step::Prepend(p) if !out.is_empty() => out = Cow::Owned([p, &*out].concat()),
                Step::Prepend(_) => {}
                Step::Replace { from, to } => match one_char(from) {
                    Some(c) if out.contains(c) => {
                        let mut s = String::with_capacity(out.len() + out.len() / 2);
                        replace_into(&mut s, &out, c, to);
                        out = Cow::Owned(s);
                    }
                    Some(_) => {}
                    None if out.contains(from.as_str()) => out = Cow::Owned(out.replace(from.as_str(), to)),
                    None => {}
                },
            }
        }
        out
    }
}

/// Append `src` with every `from` replaced by `to`.
fn replace_into(dst: &mut String, src: &str, from: char, to: &str) {
    let mut last = 0;
    let mut put = |i: usize, len: usize| {
        dst.push_str(&src[last..i]);
        dst.push_str(to);
        last = i + len;
    };
    if from.is_ascii() {
        // One SIMD scan for the whole text (spaces come every few bytes).
        for i in memchr::memchr_iter(from as u8, src.as_bytes()) {
            put(i, 1);
        }
    } else {
        for (i, _) in src.match_indices(from) {
            put(i, from.len_utf8());
        }
    }
    dst.push_str(&src[last..]);
}

/// `text` in NFC, as `tokenizers` normalizes it.
///
/// Only the stretches that may change are normalized: NFC of a text is that of its pieces when
/// it is cut before characters that neither change nor combine with what precedes them
/// (UAX #15's safe points). Every code point below U+0300 is such a character, and so each
/// stretch runs from the character before one that is not (which it may compose with) to the
/// next ASCII byte.
fn nfc(text: &str) -> Cow<'_, str> {
    let t = text.as_bytes();
    let mut out: Option<String> = None;
    let (mut i, mut copied) = (0, 0);
    loop {
        // Below U+0300, UTF-8 lead bytes are below 0xCC. Skip ASCII eight bytes at a time.
        while let Some(w) = t.get(i..i + 8) {
            if u64::from_le_bytes(w.try_into().expect("8 bytes")) & 0x8080_8080_8080_8080 != 0 {
                break;
            }
            i += 8;
        }
        while i < t.len() && t[i] < 0xcc {
            i += 1;
        }
        if i == t.len() {
            break;
        }
        let mut start = i.saturating_sub(1);
        while start > 0 && t[start] & 0xc0 == 0x80 {
            start -= 1;
        }
        let end = t[i..].iter().position(|&b| b < 0x80).map_or(t.len(), |k| i + k);
        let stretch = &text[start..end];
        let unchanged = match is_nfc_quick(stretch.chars()) {
            IsNormalized::Yes => true,
            IsNormalized::No => false,
            IsNormalized::Maybe => stretch.nfc().map(|(c, _)| c).eq(stretch.chars()),
        };
        if !unchanged {
            let o = out.get_or_insert_with(|| String::with_capacity(text.len() + 16));
            o.push_str(&text[copied..start]);
            o.extend(stretch.nfc().map(|(c, _)| c));
            copied = end;
        }
        i = end;
    }
    out.map_or(Cow::Borrowed(text), |mut o| {
        o.push_str(&text[copied..]);
        Cow::Owned(o)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nfc_composes_and_keeps_what_is_already_composed() {
        let n = Normalizer::new(vec![Step::Nfc]);
        assert!(matches!(n.apply("café"), Cow::Borrowed(_)));
        assert_eq!(n.apply("cafe\u{301}"), "café");
        assert_eq!(n.apply("\u{1100}\u{1161}"), "\u{ac00}"); // Hangul jamo compose
        assert!(matches!(n.apply("плохо 中文"), Cow::Borrowed(_)));
        // A singleton decomposition (Ohm sign → Omega) is not NFC.
        assert_eq!(n.apply("\u{2126}"), "\u{3a9}");
        assert!(matches!(nfc("a\u{301}\u{300}"), Cow::Owned(_)));
        assert_eq!(n.apply("a\u{301}\u{300}"), "\u{e1}\u{300}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config { cases: 3000, ..Default::default() })]

        /// Normalizing the stretches that may change normalizes the whole.
        #[test]
        fn nfc_by_stretches_is_nfc(text in proptest::collection::vec(proptest::sample::select(vec![
            'a', 'e', 'A', ' ', '\u{301}', '\u{300}', '\u{327}', '\u{31b}', 'é', 'ǘ', '\u{1100}', '\u{1161}',
            '\u{11a8}', '가', '\u{2126}', 'Å', '\u{212b}', 'ñ', '\u{303}', '中', '\u{3099}', 'か', '\u{0f73}',
            '\u{0b47}', '\u{0b3e}', '\u{2000}', 'ß', '\u{2fa1d}', '\u{1e900}', '\u{ff}', 'x',
        ]), 0..12)) {
            let text: String = text.into_iter().collect();
            let normalized: String = text.nfc().map(|(c, _)| c).collect();
            let ours = nfc(&text);
            proptest::prop_assert_eq!(matches!(ours, Cow::Borrowed(_)), normalized == text, "{:?}", text);
            proptest::prop_assert_eq!(ours, normalized, "{:?}", text);
        }
    }

    #[test]
    fn sentencepiece_style_prepend_and_replace() {
        let n = Normalizer::new(vec![Step::Prepend("▁".into()), Step::Replace { from: " ".into(), to: "▁".into() }]);
        assert_eq!(n.apply("a  b "), "▁a▁▁b▁");
        assert_eq!(n.apply(""), "");
        assert_eq!(n.apply(" "), "▁▁");
    }

    #[test]
    fn lowercase_per_character() {
        let n = Normalizer::new(vec![Step::Lowercase]);
        assert_eq!(n.apply("ΣΑΣ Abc"), "σασ abc");
        assert!(matches!(n.apply("abc"), Cow::Borrowed(_)));
    }
}
