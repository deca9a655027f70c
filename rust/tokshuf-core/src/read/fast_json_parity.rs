//! Tests of the fast JSON path (`fast_json`) against the serde reader (`json`) it stands in
//! for: the same fields whenever it reads a line, and it only ever declines otherwise. Here, not
//! in `fast_json`, so that the imports go one way: `json` calls `fast_json`, never the reverse.

use std::borrow::Cow;

use proptest::prelude::*;

use super::fast_json::fields;
use super::field::Field;
use super::json::{extract_fields_reference, FieldOptions};

fn keys() -> Vec<String> {
    vec!["text".into(), "title".into()]
}

/// The fast reader's answer, checked against serde's.
fn fast(line: &str) -> Option<Vec<Field<'_>>> {
    let got = fields(line.as_bytes(), &keys());
    if let Some(f) = &got {
        assert_eq!(
            Ok(f.clone()),
            extract_fields_reference(line.as_bytes(), &keys(), FieldOptions::default()),
            "{line}"
        );
    }
    got
}

fn texts(f: &[Field<'_>]) -> Vec<String> {
    f.iter().map(|f| f.sentences.concat()).collect()
}

#[test]
fn reads_the_common_lines() {
    let cases = [
        (r#"{"text": "plain", "title": "t"}"#, ["plain", "t"]),
        (r#"  {"id":7,"text":"a\nb\t\"q\"\\ \/ \b\f\r","title":""}  "#, ["a\nb\t\"q\"\\ / \x08\x0c\r", ""]),
        (r#"{"text": "caf\u00e9 \ud83d\ude00 \u0000", "title": "x"}"#, ["café 😀 \0", "x"]),
        (
            r#"{"meta": {"a": [1, -2.5e+3, 0, -0.0, 1E9, true, false, null, {}, []], "b": {"c": "d\n"}}, "text": "é ü 中", "title": "y"}"#,
            ["é ü 中", "y"],
        ),
        (r#"{"text": "first", "title": "t", "text": "second"}"#, ["second", "t"]),
        ("{\"text\":\"a\"\r\n,\t\"title\" : \"b\"}\n", ["a", "b"]),
    ];
    for (line, expected) in cases {
        let f = fast(line).unwrap_or_else(|| panic!("not read fast: {line}"));
        assert_eq!(texts(&f), expected, "{line}");
    }
    // Unescaped values are borrowed from the line, escaped ones decoded once.
    let f = fast(r#"{"text": "plain", "title": "a\nb"}"#).unwrap();
    assert!(matches!(f[0].sentences[0], Cow::Borrowed("plain")));
    assert!(matches!(&f[1].sentences[0], Cow::Owned(s) if s == "a\nb"));
}

#[test]
fn leaves_everything_else_to_serde() {
    for line in [
        r#"{"text": ["a", "b"], "title": "t"}"#,
        r#"{"text": 3, "title": "t"}"#,
        r#"{"text": "a"}"#,
        r#"{"te\u0078t": "a", "title": "t"}"#,
        r#"{"text": "\ud83d x", "title": "t"}"#,
        r#"{"text": "\udc00", "title": "t"}"#,
        r#"{"text": "\ud83d\u0041", "title": "t"}"#,
        r#"{"text": "a", "title": "t", "other": "\u00e9"}"#,
        r#"{"text": "a", "title": "t", "n": 01}"#,
        r#"{"text": "a", "title": "t", "n": 1.}"#,
        r#"{"text": "a", "title": "t", "n": -}"#,
        r#"{"text": "a", "title": "t", "n": .5}"#,
        r#"{"text": "a", "title": "t", "n": tru}"#,
        r#"{"text": "a", "title": "t",}"#,
        r#"{"text": "a", "title": "t"} x"#,
        r#"{"text": "a\x", "title": "t"}"#,
        "{\"text\": \"a\u{1}\", \"title\": \"t\"}",
        r#"{"text": "cut"#,
        r#"["text"]"#,
        "",
    ] {
        assert!(fields(line.as_bytes(), &keys()).is_none(), "{line}");
    }
    let deep = format!(r#"{{"text": "a", "title": "t", "x": {}{}}}"#, "[".repeat(150), "]".repeat(150));
    assert!(fields(deep.as_bytes(), &keys()).is_none());
    let ok = format!(r#"{{"text": "a", "title": "t", "x": {}{}}}"#, "[".repeat(50), "]".repeat(50));
    assert!(fast(&ok).is_some());
}

#[test]
fn checks_utf8_wherever_it_lies() {
    let mut long_cut = format!("{{\"text\": \"{}", "a".repeat(20)).into_bytes();
    long_cut.extend_from_slice(b"\xe4\xb8\", \"title\": \"t\"}");
    let bad: Vec<Vec<u8>> = vec![
        b"{\"text\": \"a\xff\", \"title\": \"t\"}".to_vec(),
        b"{\"text\": \"a\\n\xc3\", \"title\": \"t\"}".to_vec(),
        b"{\"id\": \"\xe2\x82\", \"text\": \"a\", \"title\": \"t\"}".to_vec(),
        b"{\"id\": {\"k\xff\": 1}, \"text\": \"a\", \"title\": \"t\"}".to_vec(),
        b"{\"te\xffxt\": \"a\", \"title\": \"t\"}".to_vec(),
        long_cut,
        b"{\"text\": \"\xc0\xaf\", \"title\": \"t\"}".to_vec(),
        b"{\"text\": \"\xed\xa0\x80\", \"title\": \"t\"}".to_vec(),
        b"{\"text\": \"a\", \"title\": \"t\"}\xff".to_vec(),
    ];
    for line in &bad {
        assert!(fields(line, &keys()).is_none(), "{}", String::from_utf8_lossy(line));
        let err = crate::read::extract_fields(line, &keys()).unwrap_err();
        assert_eq!(err.0, crate::error::BadInputReason::InvalidUtf8, "{}", String::from_utf8_lossy(line));
    }
    // Characters across the 16-byte words of the scan, plain and after an escape.
    for text in [format!("{}中é😀", "a".repeat(14)), format!("\\n{}中😀", "é".repeat(7))] {
        let line = format!(r#"{{"text": "{text}", "title": "ü"}}"#);
        let f = fast(&line).unwrap_or_else(|| panic!("not read fast: {line}"));
        assert_eq!(texts(&f), [text.replace("\\n", "\n"), "ü".into()]);
    }
}

/// Escapes at every offset around the 64-byte blocks of the decoder (where the CPU has it): one
/// letter, `\\` alone and in runs, `\u` and surrogate pairs, escaped quotes, an escape cut by a
/// block's end, a closing quote just after one, and non-ASCII text between.
#[test]
fn escapes_across_blocks_agree_with_serde() {
    let escapes: Vec<&str> =
        r#"\n \t \" \\ \/ \b \f \r \u00e9 \ud83d\ude00 \\\\ \\\n \\\" \\\\\\ \u0000"#.split(' ').collect();
    let fill = ["a", "é", "中"];
    for k in 0..140 {
        for (e, escape) in escapes.iter().enumerate() {
            let pad = fill[(k + e) % 3].repeat(k / fill[(k + e) % 3].len());
            let tail = format!(r"x\n{}\ty\\{}", "b".repeat(e * 5), escapes[(e + k) % escapes.len()]);
            for text in [
                format!("{pad}{escape}{tail}"),
                format!("{pad}{escape}"),
                format!("{escape}{pad}{escape}{escape}{tail}{pad}"),
                escape.repeat(k / 2 + 1),
            ] {
                let line = format!(r#"{{"text": "{text}", "title": "t"}}"#);
                let expected = extract_fields_reference(line.as_bytes(), &keys(), FieldOptions::default());
                assert!(expected.is_ok(), "{line}");
                let f = fast(&line).unwrap_or_else(|| panic!("not read fast: {line}"));
                assert_eq!(Ok(f), expected, "{line}");
            }
        }
    }
    // Declined as the scalar reader declines: an invalid escape, a control character and a
    // cut line, each deep in a block of escapes.
    for k in 0..140 {
        let pad = r"\n".repeat(k / 2) + &"a".repeat(k % 2);
        for bad in [r"\x", "\u{1}", r"\u12", r"\ud800"] {
            let line = format!(r#"{{"text": "{pad}{bad}{pad}", "title": "t"}}"#);
            assert!(fields(line.as_bytes(), &keys()).is_none(), "{line}");
        }
        let cut = format!(r#"{{"text": "{pad}\n{pad}"#);
        assert!(fields(cut.as_bytes(), &keys()).is_none(), "{cut}");
    }
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(serde_json::Value::from),
        ".{0,12}".prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map("[a-z]{1,5}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Long strings, whose runs between escapes span the scanners' 16- and 32-byte steps (the
    /// latter where the CPU has AVX2): read, and read as serde reads them.
    #[test]
    fn long_strings_agree_with_serde(
        text in "([a-z ]{0,40}(\\PC|[\n\t\"\\\\\u{1}]))*[a-z ]{0,70}",
        high in "[a-zé€😀 ]{0,50}",
    ) {
        let text = format!("{text}{high}{text}");
        let line = serde_json::to_string(&serde_json::json!({"text": text, "title": high})).unwrap();
        let f = fast(&line).expect("a plain object of strings is read fast");
        prop_assert_eq!(texts(&f), vec![text, high]);
    }

    /// Whatever the line, the answer is serde's: fields when it reads them, or the same
    /// rejection (the fast reader only ever declines).
    #[test]
    fn agrees_with_serde(
        text in "(\\PC|[\n\t\"\\\\\u{1}])*",
        title in ".{0,8}",
        other in json_value(),
        cut in any::<prop::sample::Index>(),
        junk in any::<(prop::sample::Index, u8)>(),
        mangle in 0u8..3,
        non_finite in prop::option::of(prop::sample::select(vec!["NaN", "Infinity", "-Infinity"])),
    ) {
        let obj = serde_json::json!({"id": other, "text": text, "title": title});
        let mut line = serde_json::to_string(&obj).unwrap().into_bytes();
        if let Some(word) = non_finite {
            // A value serde_json cannot write: Python's `json.dumps(float("nan"))`.
            line.splice(1..1, format!(r#""score":[{word},{{"s":{word}}}],"#).into_bytes());
        }
        match mangle {
            0 => {}
            1 => line.truncate(cut.index(line.len() + 1)),
            _ => {
                let at = junk.0.index(line.len() + 1);
                line.insert(at, junk.1);
            }
        }
        let ours = crate::read::extract_fields(&line, &keys());
        prop_assert_eq!(&ours, &extract_fields_reference(&line, &keys(), FieldOptions::default()));
        if mangle == 0 {
            let f = ours.unwrap();
            prop_assert_eq!(texts(&f), vec![text, title]);
            // Read fast unless a value it skips has a `\u` escape.
            if !serde_json::to_string(&other).unwrap().contains("\\u") {
                prop_assert!(fields(&line, &keys()).is_some());
            }
        }
    }
}
