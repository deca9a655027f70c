//! A `tokenizer.json` regex as Oniguruma reads it, spelled for the engines tokshuf runs it on.
//!
//! The `tokenizers` Python package (the reference for ids) compiles the regexes of a file with
//! Oniguruma. tokshuf runs them on its own automaton (`regex-syntax` syntax) or, for files the
//! fast encoder does not read, on the `tokenizers` crate built with `fancy-regex` (whose
//! classes are `regex-syntax`'s). Some constructs mean other things there:
//!
//! - `\w`, `\W`, `[[:alpha:]]` and the other POSIX classes: Oniguruma's are Unicode and not
//!   the same sets as `regex-syntax`'s (whose POSIX classes are ASCII, and whose `\w` includes
//!   `Join_Control` and not `²`). They are rewritten to explicit classes built from Unicode
//!   properties and general categories, equal to Oniguruma's (the definitions below were
//!   derived by asking the Python package about every code point up to U+323FF, and the test
//!   `tests/test_regex_exactness.py` checks them the same way). `\d`, `\D`, `\s`, `\S` mean the
//!   same (`Nd`, `White_Space`) and are spelled out too, so that no reading depends on a default.
//!   Oniguruma's POSIX-named properties (`\p{Word}`, `\p{Alnum}`, ...) and `\p{^X}` likewise;
//!   `\pL` without braces, the text "pL" there, is refused.
//! - `^` and `$` are line anchors in Oniguruma (`$` before any `\n`; `^` after a `\n` that does
//!   not end the text): rewritten to look-arounds for `fancy-regex`, refused by the automaton.
//! - Refused (the reason says which): word boundaries `\b` `\B` (by `\w`), `\Z`, `\G`,
//!   inline flags without a scope (`(?i)` reaches past `|` in Oniguruma), flags other than `i`
//!   (`m` is "dot matches newline" there), case-insensitive groups whose text Oniguruma's full
//!   case folding matches differently (`(?i:ss)` also matches `ß`) or that hold classes, and a
//!   POSIX class outside brackets (`[:alpha:]` alone is a class of its characters).

/// The engine a rewritten regex is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    /// The fast encoder's automaton (`regex-syntax`, no look-around: anchors are left for it to
    /// refuse).
    Automaton,
    /// `fancy-regex`, the `tokenizers` crate's engine here.
    FancyRegex,
}

/// The items (inside brackets) of a class Oniguruma names, and whether it is negated.
struct Items {
    items: String,
    negated: bool,
}

impl Items {
    /// The class: `[items]` (`[^items]` negated), or the items alone inside an enclosing class.
    fn spelled(&self, in_class: bool) -> String {
        match (in_class, self.negated) {
            (true, false) => self.items.clone(),
            (_, negated) => format!("[{}{}]", if negated { "^" } else { "" }, self.items),
        }
    }
}

/// Oniguruma's `[[:word:]]`: letters (`Alphabetic`), marks, decimal digits and connector
/// punctuation.
const POSIX_WORD: &str = r"\p{Alphabetic}\p{M}\p{Nd}\p{Pc}";

/// Oniguruma's `\w` outside brackets: `[[:word:]]`, and below U+0100 every number, `²`, `³`,
/// `¹`, `¼`, `½`, `¾` too (a `\w` alone is matched by character type, from a Latin-1 table below
/// U+0100; inside brackets, `[\w]`, it is `[[:word:]]`).
fn word() -> String {
    format!(r"{POSIX_WORD}[\p{{N}}&&\x{{0}}-\x{{FF}}]")
}

/// The items of a POSIX bracket class, by name, as Oniguruma defines them over Unicode.
fn posix(name: &str) -> Option<&'static str> {
    Some(match name {
        "alnum" => r"\p{Alphabetic}\p{Nd}",
        "alpha" => r"\p{Alphabetic}",
        "ascii" => r"\x{0}-\x{7F}",
        "blank" => r"\p{Zs}\t",
        "cntrl" => r"\p{Cc}",
        "digit" => r"\p{Nd}",
        "graph" => r"[^\p{White_Space}\p{Cc}\p{Cn}]",
        "lower" => r"\p{Lowercase}",
        "print" => r"[^\p{Zl}\p{Zp}\p{Cc}\p{Cn}]",
        "punct" => r"\p{P}\p{S}",
        "space" => r"\p{White_Space}",
        "upper" => r"\p{Uppercase}",
        "word" => POSIX_WORD,
        "xdigit" => r"0-9A-Fa-f",
        _ => return None,
    })
}

/// The class of an escape (`\w`, `\d`, ...), if it is one of those rewritten.
fn escape_class(c: u8, in_class: bool) -> Option<Items> {
    let items = match c.to_ascii_lowercase() {
        b'w' if in_class => POSIX_WORD.to_string(),
        b'w' => word(),
        b'd' => r"\p{Nd}".to_string(),
        b's' => r"\p{White_Space}".to_string(),
        b'h' => "0-9A-Fa-f".to_string(),
        _ => return None,
    };
    // The upper-case escape is the complement.
    Some(Items { items, negated: c.is_ascii_uppercase() })
}

/// `\p{name}` (`\P{name}` if `negated`) spelled for `regex-syntax`, if it must be: Oniguruma's
/// POSIX-named properties that `regex-syntax` lacks or reads otherwise (`Word` is exactly `\w`,
/// Latin-1 numbers included outside brackets; `Alnum`, `Graph`, `Print`, `XDigit`, `Blank` are the
/// POSIX classes), and the negation `\p{^name}`. Other names mean the same in both.
fn property(name: &str, negated: bool, in_class: bool) -> Option<String> {
    let caret = name.starts_with('^');
    let (negated, name) = if caret { (!negated, &name[1..]) } else { (negated, name) };
    let loose: String = name.chars().filter(|c| !matches!(c, ' ' | '_' | '-')).collect::<String>().to_lowercase();
    let items = match loose.as_str() {
        "word" if !in_class => Some(word()),
        "word" => Some(POSIX_WORD.to_string()),
        "alnum" | "graph" | "print" | "xdigit" | "blank" => posix(&loose).map(str::to_string),
        _ => None,
    };
    match items {
        Some(items) => Some(Items { items, negated }.spelled(in_class)),
        None if !caret => None,
        None => Some(format!("\\{}{{{name}}}", if negated { 'P' } else { 'p' })),
    }
}

/// `pattern` spelled for `engine` so that it matches as Oniguruma does, or why that is not
/// possible (a sentence naming the construct).
pub(crate) fn rewrite(pattern: &str, engine: Engine) -> Result<String, String> {
    // Flags that open the pattern apply to all of it in both readings: scope them explicitly.
    if let Some(rest) = pattern.strip_prefix("(?i)") {
        return rewrite(&format!("(?i:{rest})"), engine);
    }
    let b = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut class = 0usize;
    let mut i = 0;
    // `pattern[last..i]` is still to be copied.
    let mut last = 0;
    let replace = |out: &mut String, from: usize, to: usize, last: &mut usize, with: &str| {
        out.push_str(&pattern[*last..from]);
        out.push_str(with);
        *last = to;
    };
    while i < b.len() {
        match b[i] {
            b'\\' if i + 1 < b.len() => {
                let c = b[i + 1];
                if matches!(c, b'p' | b'P') {
                    let Some(rest) = pattern[i + 2..].strip_prefix('{') else {
                        return Err(format!(
                            "it has \\{} without braces (Oniguruma reads \\pL as the text pL, regex-syntax as \\p{{L}})",
                            c as char
                        ));
                    };
                    let Some(close) = rest.find('}') else { return Err("it has an unterminated \\p{".into()) };
                    let end = i + 3 + close + 1;
                    if let Some(with) = property(&rest[..close], c == b'P', class > 0) {
                        replace(&mut out, i, end, &mut last, &with);
                    }
                    i = end;
                    continue;
                }
                if let Some(items) = escape_class(c, class > 0) {
                    replace(&mut out, i, i + 2, &mut last, &items.spelled(class > 0));
                } else if class == 0 {
                    match c {
                        b'b' | b'B' => {
                            return Err(format!(
                                "it uses the word boundary \\{}, which is defined by \\w, whose meaning differs \
                                 between Oniguruma and regex-syntax",
                                c as char
                            ))
                        }
                        b'Z' | b'G' => {
                            return Err(format!(
                                "it uses \\{}, whose meaning differs between Oniguruma and fancy-regex",
                                c as char
                            ))
                        }
                        _ => {}
                    }
                }
                // The whole escape: `\p{..}`, `\x{..}` keep their braces.
                i += 1 + crate::unicode::utf8_len(b[i + 1]);
                if matches!(c, b'x' | b'u') && b.get(i) == Some(&b'{') {
                    while i < b.len() && b[i] != b'}' {
                        i += 1;
                    }
                    i += 1;
                }
                continue;
            }
            b'[' if b.get(i + 1) == Some(&b':') => {
                if class == 0 {
                    return Err(
                        "it has a POSIX class outside brackets (Oniguruma reads [:alpha:] there as a class of \
                         its characters, with a warning)"
                            .into(),
                    );
                }
                let rest = &pattern[i + 2..];
                let Some(close) = rest.find(":]") else {
                    return Err("it has an unterminated POSIX class".into());
                };
                let (negated, name) = match rest[..close].strip_prefix('^') {
                    Some(n) => (true, n),
                    None => (false, &rest[..close]),
                };
                let Some(items) = posix(name) else {
                    return Err(format!("it has the POSIX class [:{}:], which tokshuf does not know", &rest[..close]));
                };
                let with = Items { items: items.to_string(), negated }.spelled(true);
                replace(&mut out, i, i + 2 + close + 2, &mut last, &with);
                i += 2 + close + 2;
                continue;
            }
            b'[' => {
                class += 1;
                i = class_opening_end(b, i);
            }
            b']' if class > 0 => class -= 1,
            b'^' if class == 0 && engine == Engine::FancyRegex => {
                // At the start of the text, or after a `\n` that does not end it.
                replace(&mut out, i, i + 1, &mut last, r"(?:\A|(?<=\n)(?!\z))");
            }
            b'$' if class == 0 && engine == Engine::FancyRegex => {
                replace(&mut out, i, i + 1, &mut last, r"(?=\n|\z)");
            }
            b'(' if class == 0 && b.get(i + 1) == Some(&b'?') => flags(pattern, i)?,
            _ => {}
        }
        i += 1;
    }
    out.push_str(&pattern[last..]);
    Ok(out)
}

/// Where the opening of the class whose `[` is at `i` ends: past a `^`, and past a `]` that
/// comes first (a literal there, not the class's end).
pub(crate) fn class_opening_end(b: &[u8], mut i: usize) -> usize {
    if b.get(i + 1) == Some(&b'^') {
        i += 1;
    }
    if b.get(i + 1) == Some(&b']') {
        i += 1;
    }
    i
}

/// Refuse the inline flags at `pattern[i..]` (`(?`) that Oniguruma reads otherwise.
fn flags(pattern: &str, i: usize) -> Result<(), String> {
    let b = pattern.as_bytes();
    let flags: Vec<u8> = b[i + 2..].iter().take_while(|c| c.is_ascii_alphabetic() || **c == b'-').copied().collect();
    if flags.is_empty() {
        return Ok(());
    }
    if b.get(i + 2 + flags.len()) != Some(&b':') {
        return Err("it has an inline flag group without a scope (its scope differs in Oniguruma)".into());
    }
    if flags.iter().any(|&f| f != b'i') {
        return Err(format!(
            "it has the flags (?{}:...) (m and s mean other things in Oniguruma)",
            String::from_utf8_lossy(&flags)
        ));
    }
    let body = &pattern[i + 3 + flags.len()..];
    let body = &body[..body.find(')').unwrap_or(body.len())];
    let folded = body.to_ascii_lowercase();
    if !body.is_ascii() || ["ss", "st", "ff", "fi", "fl"].iter().any(|pair| folded.contains(pair)) {
        return Err(format!("it has a case-insensitive group {body:?} (Oniguruma folds ß to ss, ﬆ to st, ...)"));
    }
    if body.contains(['\\', '[']) {
        return Err(format!(
            "it has a case-insensitive group with a class {body:?} (Oniguruma folds classes otherwise)"
        ));
    }
    Ok(())
}

/// The regexes in a `tokenizer.json` that change ids (its normalizers' and pre-tokenizers'
/// `Replace` and `Split` patterns), rewritten for `fancy-regex`: the file as the `tokenizers`
/// crate must read it to give the Python package's ids (`None`: unchanged), or why it cannot.
pub fn for_fancy_regex(json: &str) -> Result<Option<String>, String> {
    if !json.contains("\"Regex\"") {
        return Ok(None);
    }
    // A file that is not JSON is left for the library to say so.
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(json) else { return Ok(None) };
    let mut changed = false;
    for key in ["normalizer", "pre_tokenizer"] {
        if let Some(part) = v.get_mut(key) {
            rewrite_in(part, &mut changed)?;
        }
    }
    Ok(changed.then(|| v.to_string()))
}

fn rewrite_in(v: &mut serde_json::Value, changed: &mut bool) -> Result<(), String> {
    match v {
        serde_json::Value::Array(a) => a.iter_mut().try_for_each(|x| rewrite_in(x, changed)),
        serde_json::Value::Object(o) => {
            if let Some(serde_json::Value::String(r)) = o.get_mut("pattern").and_then(|p| p.get_mut("Regex")) {
                let new = rewrite(r, Engine::FancyRegex).map_err(|why| format!("the regex {r:?}: {why}"))?;
                if new != *r {
                    *r = new;
                    *changed = true;
                }
            }
            o.values_mut().try_for_each(|x| rewrite_in(x, changed))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unicode::class_ranges;

    fn ranges(pattern: &str) -> Vec<(u32, u32)> {
        class_ranges(&rewrite(pattern, Engine::Automaton).unwrap())
    }

    fn set(r: &[(u32, u32)]) -> std::collections::BTreeSet<u32> {
        r.iter().flat_map(|&(a, b)| a..=b).collect()
    }

    #[test]
    fn word_is_oniguruma_s() {
        let w = set(&ranges(r"\w"));
        // regex-syntax's \w has Join_Control (ZWNJ, ZWJ) and not the Latin-1 numbers.
        let theirs = set(&class_ranges(r"\w"));
        let diff: Vec<u32> = w.symmetric_difference(&theirs).copied().collect();
        assert_eq!(diff, [0xB2, 0xB3, 0xB9, 0xBC, 0xBD, 0xBE, 0x200C, 0x200D]);
        assert!(w.contains(&0x24B6) && !w.contains(&0x2460) && !w.contains(&0x2070)); // Ⓐ, not ① ⁰
        let not_w = set(&ranges(r"\W"));
        assert!(w.is_disjoint(&not_w));
        // (Ranges span the surrogates.)
        assert_eq!(w.len() + not_w.len(), 0x11_0000);
        // Inside brackets, `\w` is `[[:word:]]`: without the Latin-1 numbers.
        let posix = set(&ranges(r"[[:word:]]"));
        assert_eq!(posix, &w - &set(&[(0xB2, 0xB3), (0xB9, 0xB9), (0xBC, 0xBE)]));
        assert_eq!(set(&ranges(r"[\w]")), posix);
        assert_eq!(ranges(r"[\W]"), ranges(r"[[:^word:]]"));
    }

    #[test]
    fn digits_and_spaces_as_regex_syntax_reads_them() {
        for (ours, theirs) in [(r"\d", r"\d"), (r"\D", r"\D"), (r"\s", r"\s"), (r"\S", r"\S"), (r"[\d\s]", r"[\d\s]")] {
            assert_eq!(ranges(ours), class_ranges(theirs), "{ours}");
        }
    }

    #[test]
    fn posix_classes_are_unicode() {
        assert_eq!(ranges("[[:alpha:]]"), class_ranges(r"\p{Alphabetic}"));
        assert_eq!(ranges("[[:^alpha:]]"), class_ranges(r"\P{Alphabetic}"));
        assert_eq!(ranges("[[:digit:]_]"), class_ranges(r"[\p{Nd}_]"));
        assert_eq!(ranges("[[:punct:]]"), class_ranges(r"[\p{P}\p{S}]"));
        assert_eq!(ranges("[[:xdigit:]]"), class_ranges(r"[0-9a-fA-F]"));
        assert!(set(&ranges("[[:upper:]]")).contains(&0x2160)); // Ⅰ: Uppercase, not Lu
        for name in ["alnum", "ascii", "blank", "cntrl", "graph", "lower", "print", "space", "word"] {
            assert!(!ranges(&format!("[[:{name}:]]")).is_empty(), "{name}");
        }
        assert!(rewrite("[[:bogus:]]", Engine::Automaton).is_err());
        assert!(rewrite("[:alpha:]", Engine::Automaton).is_err());
    }

    #[test]
    fn posix_named_properties() {
        assert_eq!(ranges(r"\p{Word}"), ranges(r"\w"));
        assert_eq!(ranges(r"\P{word}"), ranges(r"\W"));
        assert_eq!(ranges(r"[\p{Word}]"), ranges(r"[[:word:]]"));
        assert_eq!(ranges(r"[\p{^Word}]"), ranges(r"[[:^word:]]"));
        assert_eq!(ranges(r"\p{Alnum}"), ranges(r"[[:alnum:]]"));
        assert_eq!(ranges(r"\p{X_Digit}"), ranges(r"[[:xdigit:]]"));
        assert_eq!(ranges(r"\p{^L}"), class_ranges(r"\P{L}"));
        assert_eq!(ranges(r"\P{^L}"), class_ranges(r"\p{L}"));
        assert_eq!(rewrite(r"\p{L}\P{Greek}", Engine::FancyRegex).unwrap(), r"\p{L}\P{Greek}");
        assert!(rewrite(r"\pL", Engine::FancyRegex).unwrap_err().contains("the text pL"));
    }

    #[test]
    fn anchors_are_line_anchors_for_fancy_regex() {
        let re = fancy_regex::Regex::new(&rewrite(r"^\s+|\s+$|[$^]", Engine::FancyRegex).unwrap()).unwrap();
        let found: Vec<&str> = re.find_iter(" a \n b^$ \n").map(|m| m.unwrap().as_str()).collect();
        assert_eq!(found, [" ", " ", " ", "^", "$", " \n"]);
        // The automaton refuses them itself.
        assert_eq!(rewrite(r"^\s+", Engine::Automaton).unwrap(), r"^[\p{White_Space}]+");
    }

    #[test]
    fn refusals_name_the_construct() {
        for (p, what) in [
            (r"\bx", r"\b"),
            (r"(?i:ss)", "ß"),
            (r"(?i:\w)", "class"),
            (r"a(?i)a", "scope"),
            (r"(?s:.)", "flags"),
            (r"a\Z", r"\Z"),
        ] {
            let e = rewrite(p, Engine::FancyRegex).unwrap_err();
            assert!(e.contains(what), "{p}: {e}");
        }
        assert_eq!(rewrite(r"(?i)a|b", Engine::FancyRegex).unwrap(), r"(?i:a|b)");
        // Escaped and bracketed metacharacters are left alone.
        assert_eq!(rewrite(r"\$\^[\b]\\b", Engine::FancyRegex).unwrap(), r"\$\^[\b]\\b");
    }

    #[test]
    fn a_file_s_regexes_are_rewritten() {
        let json = r#"{"normalizer": {"type": "Replace", "pattern": {"Regex": "\\s+$"}, "content": ""},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated", "invert": false}]},
            "decoder": {"type": "Replace", "pattern": {"Regex": "\\bx"}, "content": ""}}"#;
        let out: serde_json::Value = serde_json::from_str(&for_fancy_regex(json).unwrap().unwrap()).unwrap();
        assert_eq!(out["normalizer"]["pattern"]["Regex"], r"[\p{White_Space}]+(?=\n|\z)");
        assert_eq!(out["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], format!("[{}]+", word()));
        assert_eq!(for_fancy_regex(r#"{"pre_tokenizer": null}"#).unwrap(), None);
        let bad = r#"{"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(?i:ss)"}}}"#;
        assert!(for_fancy_regex(bad).unwrap_err().contains("(?i:ss)"));
    }
}
