//! Pulling the requested text fields out of one JSON line, the way Megatron's
//! `preprocess_data.py` reads them: a string is one sentence, a list of strings is several.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::error::BadInputReason;

/// The sentences of one requested key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Field<'a> {
    /// One entry for a string value, one per element for a list value.
    pub sentences: Vec<Cow<'a, str>>,
}

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
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
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

/// The value of a requested key: a string or a list of strings.
struct FieldSeed<'r> {
    reason: &'r Cell<Option<BadInputReason>>,
    key: &'r str,
    sentence_lists: bool,
}

/// Why the value of `key` is no text: it is `kind` ("null", "a number", ...).
pub(super) fn describe(kind: &str, key: &str) -> String {
    format!("the value of {key:?} is {kind}, expected a string or a list of strings")
}

/// Why the list under `key` is no sentences: it holds `kind`.
pub(super) fn describe_item(kind: &str, key: &str) -> String {
    format!("the list under {key:?} holds {kind}, expected only strings")
}

impl<'de> DeserializeSeed<'de> for FieldSeed<'_> {
    type Value = Field<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed<'_> {
    type Value = Field<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or a list of strings")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Field { sentences: vec![Cow::Borrowed(v)] })
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Field { sentences: vec![Cow::Owned(v.to_owned())] })
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Field { sentences: vec![Cow::Owned(v)] })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        if !self.sentence_lists {
            return self.not_string("a list");
        }
        let mut sentences = Vec::new();
        loop {
            match seq.next_element::<serde_json::Value>() {
                Ok(None) => break,
                Ok(Some(serde_json::Value::String(s))) => sentences.push(Cow::Owned(s)),
                Ok(Some(other)) => {
                    self.reason.set(Some(BadInputReason::NotString));
                    return Err(de::Error::custom(describe_item(kind_of(&other), self.key)));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Field { sentences })
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        self.not_string("an object")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        self.not_string("a boolean")
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        self.not_string("a number")
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        self.not_string("a number")
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        self.not_string("a number")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.not_string("null")
    }
}

impl FieldSeed<'_> {
    fn not_string<T, E: de::Error>(&self, kind: &str) -> Result<T, E> {
        self.reason.set(Some(BadInputReason::NotString));
        Err(E::custom(describe(kind, self.key)))
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
    type Value = Vec<Option<Field<'de>>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for LineSeed<'_> {
    type Value = Vec<Option<Field<'de>>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found: Vec<Option<Field<'de>>> = vec![None; self.keys.len()];
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match self.keys.iter().position(|k| *k == *key.0) {
                // Duplicate keys: the last one wins, as with Python's json.loads.
                Some(i) => {
                    let seed = FieldSeed {
                        reason: self.reason,
                        key: &self.keys[i],
                        sentence_lists: self.options.sentence_lists,
                    };
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
    serde_fields(checked_text(line)?, keys, options)
}

/// [`extract_fields_with`] through serde alone: the reference the fast reader is tested against.
#[doc(hidden)]
pub fn extract_fields_reference<'a>(
    line: &'a [u8],
    keys: &[String],
    options: FieldOptions,
) -> Result<Vec<Field<'a>>, Rejection> {
    serde_fields(checked_text(line)?, keys, options)
}

/// The line as text, unless it is not UTF-8, starts with a byte-order mark or is blank.
fn checked_text(line: &[u8]) -> Result<&str, Rejection> {
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(e) => return Err(utf8_rejection(line, &e)),
    };
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
    let found = parsed.map_err(|e| (reason.get().unwrap_or_else(|| classify(&e)), e.to_string()))?;
    found
        .into_iter()
        .zip(keys)
        .map(|(f, k)| f.ok_or_else(|| (BadInputReason::MissingKey, format!("the key {k:?} is missing"))))
        .collect()
}

/// A line that is not UTF-8. A line cut short inside a multi-byte character is a truncated
/// line, not an encoding problem: it ends in an incomplete sequence and what precedes it is an
/// unfinished JSON value.
fn utf8_rejection(line: &[u8], e: &std::str::Utf8Error) -> Rejection {
    let at = e.valid_up_to();
    if e.error_len().is_none() {
        let prefix = std::str::from_utf8(&line[..at]).expect("valid up to here");
        if let Err(j) = serde_json::from_str::<IgnoredAny>(prefix) {
            if j.is_eof() {
                return (
                    BadInputReason::TruncatedJson,
                    format!("the line ends inside a multi-byte character and an unfinished JSON value: {j}"),
                );
            }
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

    fn reason(line: &str) -> BadInputReason {
        extract_fields(line.as_bytes(), &keys(&["text"])).unwrap_err().0
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
        let bytes = |b: &[u8]| extract_fields(b, &keys(&["text"])).unwrap_err().0;
        assert_eq!(bytes(b"{\"text\": \"\xff\"}"), BadInputReason::InvalidUtf8);
        assert_eq!(bytes(b"{\"text\": \"\xe2\x82 x\"}"), BadInputReason::InvalidUtf8);
        // Cut inside "é" (c3 a9): a truncated line.
        assert_eq!(bytes(b"{\"text\": \"caf\xc3"), BadInputReason::TruncatedJson);
        // A complete value followed by a stray lead byte is not.
        assert_eq!(bytes(b"{\"text\": \"a\"}\xc3"), BadInputReason::InvalidUtf8);
        for s in [r#"{"text": "\udc00 x"}"#, r#"{"text": "\udfff x \ud800"}"#, r#"{"text": "\ud83d x"}"#] {
            assert_eq!(reason(s), BadInputReason::LoneSurrogate, "{s}");
        }
        // A line cut right after a surrogate escape is truncated, not a lone surrogate.
        assert_eq!(reason(r#"{"text": "ab\ud83d"#), BadInputReason::TruncatedJson);
    }
}
