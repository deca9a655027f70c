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

/// The value of a requested key: a string or a list of strings.
struct FieldSeed<'r> {
    reason: &'r Cell<Option<BadInputReason>>,
    key: &'r str,
}

fn describe(kind: &str, key: &str) -> String {
    format!("the value of {key:?} is {kind}, expected a string or a list of strings")
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
        let mut sentences = Vec::new();
        loop {
            match seq.next_element::<serde_json::Value>() {
                Ok(None) => break,
                Ok(Some(serde_json::Value::String(s))) => sentences.push(Cow::Owned(s)),
                Ok(Some(other)) => {
                    self.reason.set(Some(BadInputReason::NotString));
                    return Err(de::Error::custom(format!(
                        "the list under {:?} holds {}, expected only strings",
                        self.key,
                        kind_of(&other)
                    )));
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
                Some(i) => found[i] = Some(map.next_value_seed(FieldSeed { reason: self.reason, key: &self.keys[i] })?),
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

/// The fields named by `keys` (in that order) of one JSON line, or why the line is unusable.
pub fn extract_fields<'a>(line: &'a [u8], keys: &[String]) -> Result<Vec<Field<'a>>, Rejection> {
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(e) => {
            return Err((BadInputReason::InvalidUtf8, format!("invalid UTF-8 at byte {} of the line", e.valid_up_to())))
        }
    };
    if text.starts_with('\u{feff}') {
        return Err((BadInputReason::Bom, "the line starts with a UTF-8 byte-order mark".into()));
    }
    if text.trim_ascii().is_empty() {
        return Err((BadInputReason::BlankLine, "the line is empty".into()));
    }
    let reason = Cell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = LineSeed { keys, reason: &reason }.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    let found = parsed.map_err(|e| (reason.get().unwrap_or_else(|| classify(&e)), e.to_string()))?;
    found
        .into_iter()
        .zip(keys)
        .map(|(f, k)| f.ok_or_else(|| (BadInputReason::MissingKey, format!("the key {k:?} is missing"))))
        .collect()
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
        assert_eq!(
            extract_fields(b"{\"text\": \"\xff\"}", &keys(&["text"])).unwrap_err().0,
            BadInputReason::InvalidUtf8
        );
    }
}
