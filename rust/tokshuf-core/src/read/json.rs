//! Pulling the requested text fields out of one JSON line, the way Megatron's
//! `preprocess_data.py` reads them (Python's `json.loads`, then `data[key]`): a string is one
//! sentence, a list of strings is several. As with `json.loads`, a repeated key keeps its last
//! value whatever the earlier ones were, and the non-finite numbers Python writes (`NaN`,
//! `Infinity`, `-Infinity`) are numbers.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::field::Field;
use crate::error::BadInputReason;

/// Why a line was rejected, with a message naming the problem.
pub type Rejection = (BadInputReason, String);

struct Str<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            // (serde_json gives a string as one of these two, never as a `String`.)
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// How values are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldOptions {
    /// Accept a list of strings as a list of sentences (Megatron's rule). When false a list is
    /// `not_string`, like any other non-string value.
    pub sentence_lists: bool,
}

impl Default for FieldOptions {
    fn default() -> Self {
        Self { sentence_lists: true }
    }
}

/// The value of a requested key: a string or a list of strings, or why it is not text (the
/// value is read to its end either way: a later value of the same key may replace it).
struct FieldSeed<'r> {
    key: &'r str,
    sentence_lists: bool,
}

/// A requested key's sentences, or why its value is no text.
type Value<'a> = Result<Field<'a>, Rejection>;

/// Why the value of `key` is no text: it is `kind` ("null", "a number", ...).
pub(super) fn describe(kind: &str, key: &str) -> String {
    format!("the value of {key:?} is {kind}, expected a string or a list of strings")
}

/// Why the list under `key` is no sentences: it holds `kind`.
pub(super) fn describe_item(kind: &str, key: &str) -> String {
    format!("the list under {key:?} holds {kind}, expected only strings")
}

impl<'de> DeserializeSeed<'de> for FieldSeed<'_> {
    type Value = Value<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed<'_> {
    type Value = Value<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or a list of strings")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Ok(Field { sentences: vec![Cow::Borrowed(v)] }))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Ok(Field { sentences: vec![Cow::Owned(v.to_owned())] }))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut sentences = Vec::new();
        let mut rejection = (!self.sentence_lists).then(|| self.not_string("a list"));
        while rejection.is_none() {
            match seq.next_element::<serde_json::Value>()? {
                None => return Ok(Ok(Field { sentences })),
                Some(serde_json::Value::String(s)) => sentences.push(Cow::Owned(s)),
                Some(other) => {
                    rejection = Some((BadInputReason::NotString, describe_item(kind_of(&other), self.key)));
                }
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Err(rejection.expect("set")))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Err(self.not_string("an object")))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Err(self.not_string("a boolean")))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Err(self.not_string("a number")))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Err(self.not_string("a number")))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Err(self.not_string("a number")))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Err(self.not_string("null")))
    }
}

impl FieldSeed<'_> {
    fn not_string(&self, kind: &str) -> Rejection {
        (BadInputReason::NotString, describe(kind, self.key))
    }
}

fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The whole line: an object whose requested keys are collected.
struct LineSeed<'r> {
    keys: &'r [String],
    reason: &'r Cell<Option<BadInputReason>>,
    options: FieldOptions,
}

impl<'de> DeserializeSeed<'de> for LineSeed<'_> {
    type Value = Vec<Option<Value<'de>>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for LineSeed<'_> {
    type Value = Vec<Option<Value<'de>>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found: Vec<Option<Value<'de>>> = vec![None; self.keys.len()];
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match self.keys.iter().position(|k| *k == *key.0) {
                // Duplicate keys: the last one wins, as with Python's json.loads.
                Some(i) => {
                    let seed = FieldSeed { key: &self.keys[i], sentence_lists: self.options.sentence_lists };
                    found[i] = Some(map.next_value_seed(seed)?);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        self.not_object("a list")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        self.not_object("a string")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        self.not_object("a boolean")
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        self.not_object("a number")
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        self.not_object("a number")
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        self.not_object("a number")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.not_object("null")
    }
}

impl LineSeed<'_> {
    fn not_object<T, E: de::Error>(&self, kind: &str) -> Result<T, E> {
        self.reason.set(Some(BadInputReason::NotObject));
        Err(E::custom(format!("the line is {kind}, expected a JSON object")))
    }
}

fn classify(e: &serde_json::Error) -> BadInputReason {
    let msg = e.to_string();
    if e.is_eof() {
        BadInputReason::TruncatedJson
    } else if msg.contains("surrogate") || msg.contains("unicode code point") || msg.contains("hex escape") {
        BadInputReason::LoneSurrogate
    } else {
        BadInputReason::InvalidJson
    }
}

/// The fields named by `keys` (in that order) of one JSON line, or why the line is unusable
/// (Megatron's reading: a string is one sentence, a list of strings several).
pub fn extract_fields<'a>(line: &'a [u8], keys: &[String]) -> Result<Vec<Field<'a>>, Rejection> {
    extract_fields_with(line, keys, FieldOptions::default())
}

/// [`extract_fields`] with options.
pub fn extract_fields_with<'a>(
    line: &'a [u8],
    keys: &[String],
    options: FieldOptions,
) -> Result<Vec<Field<'a>>, Rejection> {
    // Most lines are objects whose requested values are strings: read those without serde (and
    // check their UTF-8 on the way).
    if let Some(fields) = super::fast_json::fields(line, keys) {
        return Ok(fields);
    }
    extract_fields_reference(line, keys, options)
}

/// [`extract_fields_with`] through serde alone: the reference the fast reader is tested against,
/// and the reader of the lines it declines (kept out of line: the common case stays small).
#[doc(hidden)]
#[inline(never)]
pub fn extract_fields_reference<'a>(
    line: &'a [u8],
    keys: &[String],
    options: FieldOptions,
) -> Result<Vec<Field<'a>>, Rejection> {
    serde_fields(checked_text(line)?, keys, options)
}

/// The line as text, unless it is not UTF-8, starts with a byte-order mark or is blank.
fn checked_text(line: &[u8]) -> Result<&str, Rejection> {
    let text = std::str::from_utf8(line).map_err(|e| utf8_rejection(line, &e))?;
    if text.starts_with('\u{feff}') {
        return Err((BadInputReason::Bom, "the line starts with a UTF-8 byte-order mark".into()));
    }
    if text.trim_ascii().is_empty() {
        return Err((BadInputReason::BlankLine, "the line is empty".into()));
    }
    Ok(text)
}

fn serde_fields<'a>(text: &'a str, keys: &[String], options: FieldOptions) -> Result<Vec<Field<'a>>, Rejection> {
    let reason = Cell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = LineSeed { keys, reason: &reason, options }.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    let found = match parsed {
        Ok(found) => found,
        Err(e) => {
            let rejection = (reason.get().unwrap_or_else(|| classify(&e)), e.to_string());
            // serde_json knows no `NaN` or `Infinity`: read the line again with them as `0`,
            // padded to their length, which leaves every other byte (and error column) in place.
            return match (rejection.0, with_finite_numbers(text)) {
                (BadInputReason::InvalidJson, Some(finite)) => serde_fields(&finite, keys, options)
                    .map(|fields| fields.into_iter().map(Field::into_owned).collect()),
                _ => Err(rejection),
            };
        }
    };
    // Each key's own problem, in key order.
    found
        .into_iter()
        .zip(keys)
        .map(|(f, k)| f.unwrap_or_else(|| Err((BadInputReason::MissingKey, format!("the key {k:?} is missing")))))
        .collect()
}

/// `text` with each `NaN`, `Infinity` and `-Infinity` that stands where a value can start (not
/// inside a string) written as `0` and spaces, or `None` if it has none: the numbers Python's
/// `json` writes for non-finite floats (and reads back).
fn with_finite_numbers(text: &str) -> Option<String> {
    const WORDS: [&[u8]; 3] = [b"NaN", b"Infinity", b"-Infinity"];
    if !WORDS[..2].iter().any(|w| memchr::memmem::find(text.as_bytes(), w).is_some()) {
        return None;
    }
    let mut out = text.as_bytes().to_vec();
    let (mut in_string, mut escaped, mut value_may_start, mut changed) = (false, false, true, false);
    let mut i = 0;
    while i < out.len() {
        let c = out[i];
        if in_string {
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else if let Some(word) = WORDS.iter().find(|w| value_may_start && out[i..].starts_with(w)) {
            out[i] = b'0';
            out[i + 1..i + word.len()].fill(b' ');
            (changed, value_may_start) = (true, false);
            i += word.len();
            continue;
        } else if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = c == b'"';
            value_may_start = matches!(c, b'[' | b',' | b':');
        }
        i += 1;
    }
    // Only ASCII words were replaced by ASCII.
    changed.then(|| String::from_utf8(out).expect("still UTF-8"))
}

/// A line that is not UTF-8. A line cut short inside a multi-byte character is a truncated
/// line, not an encoding problem: it ends in an incomplete sequence and what precedes it is an
/// unfinished JSON value.
fn utf8_rejection(line: &[u8], e: &std::str::Utf8Error) -> Rejection {
    let at = e.valid_up_to();
    if e.error_len().is_none() {
        let prefix = std::str::from_utf8(&line[..at]).expect("valid up to here");
        if let Some(j) = serde_json::from_str::<IgnoredAny>(prefix).err().filter(serde_json::Error::is_eof) {
            return (
                BadInputReason::TruncatedJson,
                format!("the line ends inside a multi-byte character and an unfinished JSON value: {j}"),
            );
        }
    }
    (BadInputReason::InvalidUtf8, format!("invalid UTF-8 at byte {at} of the line"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    fn reason(line: impl AsRef<[u8]>) -> BadInputReason {
        extract_fields(line.as_ref(), &keys(&["text"])).unwrap_err().0
    }

    #[test]
    fn strings_lists_escapes_and_duplicates() {
        let k = keys(&["text", "sents"]);
        let f =
            extract_fields(br#"{"sents": ["a", "", "b\n"], "x": {"y": [1, 2]}, "text": "h\u00e9\"llo"}"#, &k).unwrap();
        assert_eq!(f[0].sentences, vec!["hé\"llo"]);
        assert_eq!(f[1].sentences, vec!["a", "", "b\n"]);
        let f = extract_fields(br#"{"text": "first", "text": "second"}"#, &keys(&["text"])).unwrap();
        assert_eq!(f[0].sentences, vec!["second"]);
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value_whatever_came_before() {
        let text = |line: &str| extract_fields(line.as_bytes(), &keys(&["text"])).map(|f| f[0].sentences.concat());
        for earlier in ["null", "5", "-2.5e3", "true", "[\"a\", 1]", "[1, [2]]", "{\"a\": {\"b\": [1]}}", "[]", "\"s\""]
        {
            let line = format!(r#"{{"text": {earlier}, "id": 1, "text": "last"}}"#);
            assert_eq!(text(&line), Ok("last".into()), "{line}");
            let line = format!(r#"{{"text": "first", "text": {earlier}}}"#);
            let got = text(&line);
            if earlier.starts_with('"') || earlier == "[]" {
                assert!(got.is_ok(), "{line}");
            } else {
                assert_eq!(got.unwrap_err().0, BadInputReason::NotString, "{line}");
            }
        }
        // A line that is not JSON stays invalid, whichever value came first.
        assert_eq!(text(r#"{"text": null, "text": "a",}"#).unwrap_err().0, BadInputReason::InvalidJson);
        // Each key's own problem, in key order: a missing first key before a bad second one.
        let k = keys(&["a", "b"]);
        let e = extract_fields(br#"{"b": 1}"#, &k).unwrap_err();
        assert_eq!(e.0, BadInputReason::MissingKey);
        let e = extract_fields(br#"{"b": "x", "a": 1}"#, &k).unwrap_err();
        assert_eq!(e, (BadInputReason::NotString, describe("a number", "a")));
    }

    #[test]
    fn python_non_finite_numbers_are_numbers() {
        let k = keys(&["text"]);
        for line in [
            r#"{"text": "hello", "score": NaN}"#,
            r#"{"score": Infinity, "text": "hello"}"#,
            r#"{"v": [NaN, -Infinity, {"w": Infinity}], "text": "hello", "u": "\u00e9"}"#,
            "{\"a\":NaN,\"text\":\"hello\",\"b\":[ -Infinity ,Infinity]}",
            r#"{"text": "hello", "text2": NaN, "t": ["NaN \" Infinity"]}"#,
        ] {
            let f = extract_fields(line.as_bytes(), &k).unwrap_or_else(|e| panic!("{line}: {e:?}"));
            assert_eq!(f[0].sentences, vec!["hello"], "{line}");
            // The same fields from the reference reader (the fast one read most of these).
            assert_eq!(Ok(f), extract_fields_reference(line.as_bytes(), &k, FieldOptions::default()), "{line}");
        }
        // Text that spells them is text.
        let f = extract_fields(br#"{"text": "NaN", "x": [1, "Infinity"]}"#, &k).unwrap();
        assert_eq!(f[0].sentences, vec!["NaN"]);
        assert_eq!(reason(r#"{"text": NaN}"#), BadInputReason::NotString);
        assert_eq!(reason(r#"{"text": [-Infinity]}"#), BadInputReason::NotString);
        assert_eq!(reason("NaN"), BadInputReason::NotObject);
        // Only where a value can start, spelled as Python spells them.
        for bad in [
            r#"{"text": "a", "x": -NaN}"#,
            r#"{"text": "a", "x": NaNx}"#,
            r#"{"text": "a", "x": nan}"#,
            r#"{"text": "a", "x": inf}"#,
            r#"{"text": "a", "x": Infinity1}"#,
            r#"{"text": "a", NaN: 1}"#,
            r#"{"text": "a", "x": +Infinity}"#,
            r#"{"text": "a", "x": 1 NaN}"#,
        ] {
            assert_eq!(reason(bad), BadInputReason::InvalidJson, "{bad}");
        }
    }

    #[test]
    fn lists_can_be_refused() {
        let strict = FieldOptions { sentence_lists: false };
        let e = extract_fields_with(br#"{"text": ["a", "b"]}"#, &keys(&["text"]), strict).unwrap_err();
        assert_eq!(e.0, BadInputReason::NotString);
        assert!(e.1.contains("a list"), "{}", e.1);
    }

    #[test]
    fn each_kind_of_bad_line_has_its_reason() {
        assert_eq!(reason(r#"{"text": "cut"#), BadInputReason::TruncatedJson);
        assert_eq!(reason(r#"{"text": "a",}"#), BadInputReason::InvalidJson);
        assert_eq!(reason(r#"{'text': 'a'}"#), BadInputReason::InvalidJson);
        assert_eq!(reason(r#"{"text": "a"} x"#), BadInputReason::InvalidJson);
        assert_eq!(reason(r#"["text"]"#), BadInputReason::NotObject);
        assert_eq!(reason("null"), BadInputReason::NotObject);
        assert_eq!(reason(r#"{"content": "a"}"#), BadInputReason::MissingKey);
        assert_eq!(reason(r#"{"text": null}"#), BadInputReason::NotString);
        assert_eq!(reason(r#"{"text": 3}"#), BadInputReason::NotString);
        assert_eq!(reason(r#"{"text": ["a", 1]}"#), BadInputReason::NotString);
        assert_eq!(reason(r#"{"text": "\ud83d"}"#), BadInputReason::LoneSurrogate);
        assert_eq!(reason("  \t"), BadInputReason::BlankLine);
        assert_eq!(reason("\u{feff}{\"text\": \"a\"}"), BadInputReason::Bom);
        assert_eq!(reason(b"{\"text\": \"\xff\"}"), BadInputReason::InvalidUtf8);
        assert_eq!(reason(b"{\"text\": \"\xe2\x82 x\"}"), BadInputReason::InvalidUtf8);
        // Cut inside "é" (c3 a9): a truncated line.
        assert_eq!(reason(b"{\"text\": \"caf\xc3"), BadInputReason::TruncatedJson);
        // A complete value followed by a stray lead byte is not.
        assert_eq!(reason(b"{\"text\": \"a\"}\xc3"), BadInputReason::InvalidUtf8);
        for s in [r#"{"text": "\udc00 x"}"#, r#"{"text": "\udfff x \ud800"}"#, r#"{"text": "\ud83d x"}"#] {
            assert_eq!(reason(s), BadInputReason::LoneSurrogate, "{s}");
        }
        // A line cut right after a surrogate escape is truncated, not a lone surrogate.
        assert_eq!(reason(r#"{"text": "ab\ud83d"#), BadInputReason::TruncatedJson);
    }
}
