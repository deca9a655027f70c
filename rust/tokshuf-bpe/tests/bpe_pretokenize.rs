//! The hand-written pre-tokenizers against `fancy-regex` (tiktoken's regex engine) running the
//! patterns they replace: the same pieces on adversarial text.

use fancy_regex::Regex;
use proptest::prelude::*;
use tokshuf_bpe::Pattern;

fn oracle(p: Pattern) -> &'static Regex {
    use std::sync::OnceLock;
    static RES: OnceLock<Vec<Regex>> = OnceLock::new();
    let all = RES.get_or_init(|| Pattern::ALL.iter().map(|p| Regex::new(p.regex()).unwrap()).collect());
    &all[Pattern::ALL.iter().position(|q| *q == p).unwrap()]
}

fn regex_split(p: Pattern, text: &str) -> Vec<&str> {
    oracle(p).find_iter(text).map(|m| m.unwrap().as_str()).collect()
}

fn check(text: &str) -> Result<(), TestCaseError> {
    for p in Pattern::ALL {
        let ours = p.split(text);
        prop_assert_eq!(ours.concat(), text);
        prop_assert_eq!(&ours, &regex_split(p, text), "pattern {} on {:?}", p, text);
    }
    Ok(())
}

/// Characters where the patterns' rules meet: contraction letters in both cases (and the long s
/// that folds to `s`), whitespace of every kind, line breaks before punctuation, digits of
/// several scripts, letters of every general category, marks, emoji and joiners.
const TRICKY: &[char] = &[
    'a', 'b', 'x', 'A', 'B', 'X', 's', 't', 'd', 'm', 'l', 'v', 'e', 'r', 'S', 'T', 'D', 'M', 'L', 'V', 'E', 'R', 'ſ',
    'K', '\'', '’', ' ', ' ', ' ', '\t', '\n', '\n', '\r', '\u{b}', '\u{c}', '\u{85}', '\u{a0}', '\u{2028}',
    '\u{3000}', '\u{200b}', '(', ')', '/', '-', '_', '.', ',', '!', '?', '<', '|', '>', '0', '1', '9', '²', 'Ⅷ', '٣',
    '𝟙', '中', 'あ', 'ア', '한', 'ا', 'ع', 'न', 'म', '\u{94d}', 'ก', '\u{e31}', 'ǅ', 'ʰ', 'ß', 'İ', 'Σ', 'σ', 'ς',
    '\u{301}', '\u{302}', '\u{20dd}', '\u{fe0f}', '\u{200d}', '😀', '👩', '🏽', '\u{0}', '\u{7f}', '\u{feff}',
];

fn tricky_text(max: usize) -> impl Strategy<Value = String> {
    let c = prop_oneof![
        8 => proptest::sample::select(TRICKY),
        1 => any::<char>(),
    ];
    proptest::collection::vec(c, 0..max).prop_map(|v| v.into_iter().collect())
}

/// Runs of one character class, to exercise the run boundaries.
fn runs() -> impl Strategy<Value = String> {
    let run = (proptest::sample::select(TRICKY), 1usize..6).prop_map(|(c, n)| std::iter::repeat_n(c, n).collect());
    proptest::collection::vec(run, 0..12).prop_map(|v: Vec<String>| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn tricky_characters(text in tricky_text(40)) {
        check(&text)?;
    }

    #[test]
    fn runs_of_classes(text in runs()) {
        check(&text)?;
    }

    #[test]
    fn any_unicode(text in "\\PC{0,60}") {
        check(&text)?;
    }
}

#[test]
fn known_cases() {
    for text in [
        "x\n ",
        "x\n \n  ",
        "\n\t\t'magic'",
        "\t't_op'",
        "\t(struct",
        "a'ſx 'ſ 'Ll 'lL",
        "\u{301}A \u{301}\u{301}a !\u{301} !!\u{301}x HTMLParser ABC'S",
        "  123 \u{3000}word",
        "",
        " ",
        "\n",
        "'",
    ] {
        check(text).unwrap();
    }
}

#[test]
fn every_code_point_alone_and_in_context() {
    // Each scalar value, alone and between the characters that change how it is split.
    let mut text = String::new();
    for cp in (0..0x11_0000u32).step_by(7) {
        if let Some(c) = char::from_u32(cp) {
            for ctx in ["a", " ", "'", "1", "\n", "A"] {
                text.clear();
                text.push_str(ctx);
                text.push(c);
                text.push_str(ctx);
                text.push(c);
                check(&text).unwrap();
            }
        }
    }
}

#[test]
fn pattern_spellings_resolve() {
    for p in Pattern::ALL {
        assert_eq!(Pattern::from_regex(p.regex()), Some(p));
        assert_eq!(p.name().parse::<Pattern>().unwrap(), p);
    }
    let gpt2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
    assert_eq!(Pattern::from_regex(gpt2), Some(Pattern::Gpt2));
    assert_eq!(Pattern::from_regex(r"\w+"), None);
    assert_eq!("llama3".parse::<Pattern>().unwrap(), Pattern::Cl100kClassic);
    assert_eq!("cl100k_base".parse::<Pattern>().unwrap(), Pattern::Cl100k);
    assert!("bert".parse::<Pattern>().unwrap_err().to_string().contains("o200k"));
}

#[test]
fn documented_splits() {
    use Pattern::*;
    let cases: &[(Pattern, &str, &[&str])] = &[
        (Gpt2, "  word", &[" ", " word"]),
        (Gpt2, "\n\t\t'magic'", &["\n\t", "\t", "'m", "agic", "'"]),
        (Gpt2, "It'S", &["It", "'", "S"]),
        (Cl100k, "It'S", &["It", "'S"]),
        (Cl100k, "x\n ", &["x", "\n "]),
        (Cl100kClassic, "x\n ", &["x", "\n", " "]),
        (Cl100k, "\t(struct 12345", &["\t", "(struct", " ", "123", "45"]),
        (O200k, "HTMLParser's ABC'S", &["HTMLParser's", " ABC'S"]),
        (O200k, "\u{301}A", &["\u{301}", "A"]),
        (O200k, "a/b\n/", &["a", "/b", "\n", "/"]),
        (O200k, "!//\n\nx", &["!//\n\n", "x"]),
    ];
    for (p, text, expected) in cases {
        assert_eq!(&p.split(text), expected, "{p} on {text:?}");
        assert_eq!(&regex_split(*p, text), expected, "fancy-regex {p} on {text:?}");
    }
}
