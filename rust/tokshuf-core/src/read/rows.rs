//! The rows of a Parquet or Arrow file as documents: the values of the `--json-keys` columns,
//! read from the Arrow arrays as the JSON line `{"key":value,...}` the row stands for would be.
//!
//! A string is one sentence and a list of strings several (the text borrowed from the arrays,
//! never copied or escaped), whatever the Arrow type holding it: string or binary (plain, large,
//! view, fixed-size), dictionary- or run-end-encoded, in a list, large list, list view or
//! fixed-size list. A null or any other value is `not_string`, with the words the JSON reader
//! uses. The readers decode text columns as bytes, so the UTF-8 of each value is checked here:
//! invalid UTF-8 is `invalid_utf8` for that row alone, and comes first, as a line's encoding is
//! checked before its values are read. The line itself is never written, only measured: its
//! length is the row's size for `--max-line-bytes` and for the decompressed bytes of the summary.
//! A value that is not text measures as `null`, `false`, `0` or `{}`, whatever it holds (it is
//! rejected whatever it holds).

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use arrow_array::cast::AsArray as _;
use arrow_array::types::GenericBinaryType;
use arrow_array::{downcast_dictionary_array, downcast_run_array, Array, ArrayRef, OffsetSizeTrait};
use arrow_buffer::ArrowNativeType as _;
use arrow_schema::DataType as T;

use super::field::Field;
use super::json::{describe, describe_item, FieldOptions, Rejection};
use crate::error::BadInputReason;

/// The `--json-keys` columns of some rows (shared by the batches cut from one record batch).
#[derive(Debug, Clone)]
pub struct Rows {
    columns: Arc<[ArrayRef]>,
    /// Bytes of the JSON lines the batch's rows (those not too long) stand for.
    bytes: usize,
}

impl Rows {
    /// `columns` (in key order), of which a batch holding `bytes` of JSON lines is cut.
    pub(super) fn new(columns: Arc<[ArrayRef]>, bytes: usize) -> Rows {
        Rows { columns, bytes }
    }

    /// Bytes of the JSON lines the batch's rows (those not too long) stand for.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The fields of row `row` (one per key, `keys` naming them in messages), or why it is
    /// rejected, as for the JSON line it stands for.
    pub fn fields(&self, row: usize, keys: &[String], options: FieldOptions) -> Result<Vec<Field<'_>>, Rejection> {
        let fields: Result<Vec<_>, _> =
            self.columns.iter().zip(keys).map(|(c, k)| field(c.as_ref(), row, k, options)).collect();
        // Invalid UTF-8 anywhere in the row is what a JSON line is rejected for, whatever else
        // is wrong with it.
        fields.map_err(|first| {
            self.columns.iter().zip(keys).find_map(|(c, k)| invalid_utf8(c.as_ref(), row, k)).unwrap_or(first)
        })
    }
}

/// The length of every row of `columns` (in key order) as the JSON line it stands for, without
/// its newline.
pub(super) fn line_lengths(columns: &[ArrayRef], keys: &[String]) -> Vec<usize> {
    let rows = columns.first().map_or(0, |c| c.len());
    let mut lens = vec![1; rows]; // the closing brace
    for (column, key) in columns.iter().zip(keys) {
        // `{"key":` or `,"key":`
        let prefix = 1 + quoted_len(key.as_bytes()) + 1;
        for (i, len) in lens.iter_mut().enumerate() {
            *len += prefix + json_len(column.as_ref(), i);
        }
    }
    lens
}

/// What a value is, as far as a document is concerned.
enum Value<'a> {
    /// A string column's value (Arrow checked its UTF-8).
    Text(&'a str),
    /// A binary column's value, unchecked.
    Bytes(&'a [u8]),
    /// Items `.1` of `.0`.
    List(&'a dyn Array, Range<usize>),
    Other(Kind),
}

#[derive(Clone, Copy)]
enum Kind {
    Null,
    Boolean,
    Number,
    /// Anything else: a struct, a map, a date...
    Object,
}

impl Kind {
    /// As the JSON reader says it.
    fn describe(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Boolean => "a boolean",
            Kind::Number => "a number",
            Kind::Object => "an object",
        }
    }

    /// Its length as `null`, `false`, `0` or `{}`.
    fn json_len(self) -> usize {
        match self {
            Kind::Null => 4,
            Kind::Boolean => 5,
            Kind::Number => 1,
            Kind::Object => 2,
        }
    }
}

/// Row `i` of `array`.
fn value(array: &dyn Array, i: usize) -> Value<'_> {
    if array.is_null(i) {
        return Value::Other(Kind::Null);
    }
    match array.data_type() {
        T::Utf8 => Value::Text(array.as_string::<i32>().value(i)),
        T::LargeUtf8 => Value::Text(array.as_string::<i64>().value(i)),
        T::Utf8View => Value::Text(array.as_string_view().value(i)),
        T::Binary => Value::Bytes(array.as_bytes::<GenericBinaryType<i32>>().value(i)),
        T::LargeBinary => Value::Bytes(array.as_bytes::<GenericBinaryType<i64>>().value(i)),
        T::BinaryView => Value::Bytes(array.as_binary_view().value(i)),
        T::FixedSizeBinary(_) => Value::Bytes(array.as_fixed_size_binary().value(i)),
        T::List(_) => list(array.as_list::<i32>(), i),
        T::LargeList(_) => list(array.as_list::<i64>(), i),
        T::ListView(_) => list_view(array.as_list_view::<i32>(), i),
        T::LargeListView(_) => list_view(array.as_list_view::<i64>(), i),
        T::FixedSizeList(_, _) => {
            let a = array.as_fixed_size_list();
            let start = a.value_offset(i) as usize;
            Value::List(a.values().as_ref(), start..start + a.value_length() as usize)
        }
        // The value of the run row `i` lies in, or of its dictionary key.
        T::RunEndEncoded(..) => downcast_run_array!(
            array => value(array.values().as_ref(), array.get_physical_index(i)),
            t => unreachable!("{t} is run-end encoded")
        ),
        T::Dictionary(..) => downcast_dictionary_array!(
            array => value(array.values().as_ref(), array.keys().value(i).as_usize()),
            t => unreachable!("{t} is a dictionary")
        ),
        T::Boolean => Value::Other(Kind::Boolean),
        t if t.is_numeric() => Value::Other(Kind::Number),
        _ => Value::Other(Kind::Object),
    }
}

fn list<O: OffsetSizeTrait>(array: &arrow_array::GenericListArray<O>, i: usize) -> Value<'_> {
    let offsets = array.value_offsets();
    Value::List(array.values().as_ref(), offsets[i].as_usize()..offsets[i + 1].as_usize())
}

fn list_view<O: OffsetSizeTrait>(array: &arrow_array::GenericListViewArray<O>, i: usize) -> Value<'_> {
    let start = array.value_offsets()[i].as_usize();
    Value::List(array.values().as_ref(), start..start + array.value_sizes()[i].as_usize())
}

/// Row `i` of `array` as the sentences of `key`.
fn field<'a>(array: &'a dyn Array, i: usize, key: &str, options: FieldOptions) -> Result<Field<'a>, Rejection> {
    let not_string = |kind: &str| (BadInputReason::NotString, describe(kind, key));
    let sentences = match value(array, i) {
        Value::Text(t) => vec![Cow::Borrowed(t)],
        Value::Bytes(b) => vec![Cow::Borrowed(utf8(b, key)?)],
        Value::List(..) if !options.sentence_lists => return Err(not_string("a list")),
        Value::List(items, range) => range
            .map(|j| match value(items, j) {
                Value::Text(t) => Ok(Cow::Borrowed(t)),
                Value::Bytes(b) => utf8(b, key).map(Cow::Borrowed),
                Value::List(..) => Err((BadInputReason::NotString, describe_item("a list", key))),
                Value::Other(kind) => Err((BadInputReason::NotString, describe_item(kind.describe(), key))),
            })
            .collect::<Result<_, _>>()?,
        Value::Other(kind) => return Err(not_string(kind.describe())),
    };
    Ok(Field { sentences })
}

fn utf8<'a>(bytes: &'a [u8], key: &str) -> Result<&'a str, Rejection> {
    // The SIMD check first (every value of a text column comes through here); std's for where
    // the error lies.
    simdutf8::basic::from_utf8(bytes).or_else(|_| {
        std::str::from_utf8(bytes).map_err(|e| {
            (BadInputReason::InvalidUtf8, format!("invalid UTF-8 at byte {} of a value of {key:?}", e.valid_up_to()))
        })
    })
}

/// The first invalid UTF-8 in row `i` of `array`, as the rejection of `key`.
fn invalid_utf8(array: &dyn Array, i: usize, key: &str) -> Option<Rejection> {
    match value(array, i) {
        Value::Bytes(b) => utf8(b, key).err(),
        Value::List(items, mut range) => range.find_map(|j| invalid_utf8(items, j, key)),
        Value::Text(_) | Value::Other(_) => None,
    }
}

/// The length of row `i` of `array` as a JSON value.
fn json_len(array: &dyn Array, i: usize) -> usize {
    match value(array, i) {
        Value::Text(t) => quoted_len(t.as_bytes()),
        Value::Bytes(b) => quoted_len(b),
        // `[`, `]` and a comma between items.
        Value::List(items, range) => 1 + range.len().max(1) + range.map(|j| json_len(items, j)).sum::<usize>(),
        Value::Other(kind) => kind.json_len(),
    }
}

/// The length of `bytes` as a JSON string, as JSON writers (Python's `json`, serde_json) write
/// it: in quotes, with `"`, `\` and control characters escaped (`\b`, `\t`, `\n`, `\f` and `\r`
/// in two bytes, the others as `\u00XX`), everything else as is (invalid UTF-8 included).
fn quoted_len(bytes: &[u8]) -> usize {
    #[inline(always)]
    fn extra(b: u8) -> u8 {
        let short = (b == b'"') | (b == b'\\') | (b == b'\n') | (b == b'\r') | (b == b'\t') | (b == 0x08) | (b == 0x0c);
        u8::from(short) | (u8::from((b < 0x20) & !short) * 5)
    }
    // Counted per 32 bytes in `u8` (at most 5 × 32), which the compiler vectorizes: ~10 GB/s.
    let chunks = bytes.chunks_exact(32);
    let tail: usize = chunks.remainder().iter().map(|&b| usize::from(extra(b))).sum();
    let body: usize = chunks.map(|c| usize::from(c.iter().fold(0u8, |n, &b| n + extra(b)))).sum();
    2 + bytes.len() + body + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{ListBuilder, StringBuilder};
    use arrow_array::types::Int32Type;
    use arrow_array::{BinaryArray, BooleanArray, DictionaryArray, Float64Array, Int64Array, StringArray};

    /// The JSON string of `bytes`, escaped as [`quoted_len`] counts.
    fn quoted(bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![b'"'];
        for &b in bytes {
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                0..=0x1f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
                _ => out.push(b),
            }
        }
        out.push(b'"');
        out
    }

    #[test]
    fn every_byte_in_every_position_is_measured() {
        for b in 0..=255u8 {
            for len in [1, 31, 32, 33, 70] {
                for pos in [0, len / 2, len - 1] {
                    let mut bytes = vec![b'a'; len];
                    bytes[pos] = b;
                    assert_eq!(quoted_len(&bytes), quoted(&bytes).len(), "{b} at {pos} of {len}");
                }
            }
        }
        // As a JSON writer writes it (serde_json escapes as Python's `json` does): `\b` and `\f`
        // in two bytes like `\n`.
        for b in 0..0x80u8 {
            let text = format!("a{}b", char::from(b));
            assert_eq!(quoted_len(text.as_bytes()), serde_json::to_string(&text).unwrap().len(), "{b}");
        }
        // Every byte escaped in one 32-byte chunk: the count stays within a `u8`.
        assert_eq!(quoted_len(&[1; 64]), 2 + 6 * 64);
        // A quoted JSON string reads back as the text.
        let text = "q\"b\\s/ nl\nrt\r\ttab\u{0}\u{1f}\u{7f} é€😀\u{2028}";
        let json: String = serde_json::from_slice(&quoted(text.as_bytes())).unwrap();
        assert_eq!(json, text);
    }

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    fn rows(columns: Vec<ArrayRef>) -> Rows {
        Rows::new(columns.into(), 0)
    }

    fn sentences(r: Result<Vec<Field<'_>>, Rejection>) -> Vec<Vec<String>> {
        r.unwrap().into_iter().map(|f| f.sentences.into_iter().map(Cow::into_owned).collect()).collect()
    }

    fn lists() -> ArrayRef {
        let mut b = ListBuilder::new(StringBuilder::new());
        b.append_value([Some("a"), Some(""), Some("b\n")]);
        b.append_value([Some("x"), None]);
        b.append_value::<[Option<&str>; 0], _>([]);
        b.append_null();
        Arc::new(b.finish())
    }

    #[test]
    fn rows_read_as_their_json_lines_would() {
        let text: ArrayRef = Arc::new(StringArray::from(vec![Some("plain \"q\""), None, Some(""), Some("é")]));
        let k = keys(&["text", "sents"]);
        let r = rows(vec![text.clone(), lists()]);
        let all = FieldOptions::default();
        assert_eq!(sentences(r.fields(0, &k, all)), [vec!["plain \"q\""], vec!["a", "", "b\n"]]);
        assert_eq!(sentences(r.fields(2, &k, all)), [vec![""], vec![]]);
        use BadInputReason::NotString;
        assert_eq!(r.fields(1, &k, all).unwrap_err(), (NotString, describe("null", "text")));
        assert_eq!(r.fields(3, &k, all).unwrap_err(), (NotString, describe("null", "sents")));
        let (sents, strict) = (rows(vec![lists()]), FieldOptions { sentence_lists: false });
        let s = keys(&["sents"]);
        assert_eq!(sents.fields(1, &s, all).unwrap_err(), (NotString, describe_item("null", "sents")));
        assert_eq!(sents.fields(0, &s, strict).unwrap_err(), (NotString, describe("a list", "sents")));
        // Text is borrowed from the column.
        let f = r.fields(0, &k, all).unwrap();
        assert!(matches!(f[0].sentences[0], Cow::Borrowed(_)));
        // Other kinds, named as the JSON reader names them.
        let other: Vec<(ArrayRef, &str)> = vec![
            (Arc::new(Int64Array::from(vec![3])), "a number"),
            (Arc::new(Float64Array::from(vec![0.5])), "a number"),
            (Arc::new(BooleanArray::from(vec![true])), "a boolean"),
            (Arc::new(arrow_array::Date32Array::from(vec![1])), "an object"),
        ];
        for (column, kind) in other {
            let e = rows(vec![column]).fields(0, &keys(&["v"]), all).unwrap_err();
            assert_eq!(e, (NotString, describe(kind, "v")));
        }
        // Dictionary-encoded text is its value.
        let dict: DictionaryArray<Int32Type> = vec!["x", "y", "x"].into_iter().collect();
        assert_eq!(sentences(rows(vec![Arc::new(dict)]).fields(2, &keys(&["v"]), all)), [vec!["x"]]);
    }

    #[test]
    fn every_arrow_type_that_holds_text_is_read_as_its_json_value() {
        use arrow_array::builder::{FixedSizeListBuilder, LargeListBuilder};
        use arrow_array::{FixedSizeBinaryArray, GenericListViewArray, RunArray};
        use arrow_buffer::ScalarBuffer;
        let all = FieldOptions::default();
        let one = |column: ArrayRef, row: usize| {
            rows(vec![column])
                .fields(row, &keys(&["v"]), all)
                .map(|f| f[0].sentences.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        let mut fixed = FixedSizeListBuilder::new(StringBuilder::new(), 2);
        for pair in [[Some("a"), Some("b")], [Some("c"), None], [Some("x"), Some("y")]] {
            fixed.values().extend(pair);
            fixed.append(pair[0] != Some("x"));
        }
        let fixed: ArrayRef = Arc::new(fixed.finish());
        assert_eq!(one(fixed.clone(), 0), Ok(vec!["a".into(), "b".into()]));
        assert_eq!(one(fixed.clone(), 1), Err((BadInputReason::NotString, describe_item("null", "v"))));
        assert_eq!(one(fixed.clone(), 2), Err((BadInputReason::NotString, describe("null", "v"))));
        let mut large = LargeListBuilder::new(StringBuilder::new());
        large.append_value([Some("p"), Some("q")]);
        assert_eq!(one(Arc::new(large.finish()), 0), Ok(vec!["p".into(), "q".into()]));
        // Views may overlap and come in any order.
        let items: ArrayRef = Arc::new(StringArray::from(vec!["s0", "s1", "s2"]));
        let field = Arc::new(arrow_schema::Field::new_list_field(T::Utf8, true));
        let view: ArrayRef = Arc::new(GenericListViewArray::<i32>::new(
            field,
            ScalarBuffer::from(vec![1, 0, 2]),
            ScalarBuffer::from(vec![2, 3, 0]),
            items,
            None,
        ));
        assert_eq!(one(view.clone(), 0), Ok(vec!["s1".into(), "s2".into()]));
        assert_eq!(one(view.clone(), 1), Ok(vec!["s0".into(), "s1".into(), "s2".into()]));
        assert_eq!(one(view.clone(), 2), Ok(vec![]));
        let runs: ArrayRef = Arc::new(
            RunArray::<Int32Type>::try_new(
                &arrow_array::Int32Array::from(vec![2, 3, 5]),
                &StringArray::from(vec![Some("run"), None, Some("end")]),
            )
            .unwrap(),
        );
        let got: Vec<_> = (0..5).map(|i| one(runs.clone(), i)).collect();
        let (run, end) = (Ok(vec!["run".to_string()]), Ok(vec!["end".to_string()]));
        let null = Err((BadInputReason::NotString, describe("null", "v")));
        assert_eq!(got, [run.clone(), run, null, end.clone(), end]);
        let fsb: ArrayRef =
            Arc::new(FixedSizeBinaryArray::try_from_iter([b"abcd", b"\xffbcd", b"efgh"].into_iter()).unwrap());
        assert_eq!(one(fsb.clone(), 0), Ok(vec!["abcd".into()]));
        assert_eq!(one(fsb.clone(), 1).unwrap_err().0, BadInputReason::InvalidUtf8);
        // Measured as the JSON lines they stand for (`\xff` is one byte).
        let lens = line_lengths(&[fixed, view, runs.slice(1, 3), fsb], &keys(&["a", "b", "c", "d"]));
        let lines = [
            r#"{"a":["a","b"],"b":["s1","s2"],"c":"run","d":"abcd"}"#,
            r#"{"a":["c",null],"b":["s0","s1","s2"],"c":null,"d":"\xffbcd"}"#,
            r#"{"a":null,"b":[],"c":"end","d":"efgh"}"#,
        ];
        assert_eq!(lens, lines.map(|l| l.replace(r"\xff", "X").len()));
    }

    #[test]
    fn invalid_utf8_comes_before_any_other_problem() {
        let k = keys(&["title", "text"]);
        let title: ArrayRef = Arc::new(StringArray::from(vec![None, Some("t")]));
        let text: ArrayRef = Arc::new(BinaryArray::from(vec![&b"ok \xff"[..], b"fine"]));
        let r = rows(vec![title, text]);
        let e = r.fields(0, &k, FieldOptions::default()).unwrap_err();
        assert_eq!(e.0, BadInputReason::InvalidUtf8);
        assert!(e.1.contains("byte 3") && e.1.contains("\"text\""), "{}", e.1);
        assert_eq!(sentences(r.fields(1, &k, FieldOptions::default())), [vec!["t"], vec!["fine"]]);
    }

    #[test]
    fn lines_are_measured_as_written() {
        let text: ArrayRef = Arc::new(StringArray::from(vec![Some("a\"b\n\u{1}"), None, Some(""), Some("é")]));
        let n: ArrayRef = Arc::new(Int64Array::from(vec![Some(12345), None, Some(1), Some(2)]));
        let lens = line_lengths(&[text, n, lists()], &keys(&["text", "n", "l\n"]));
        let lines = [
            r#"{"text":"a\"b\n\u0001","n":0,"l\n":["a","","b\n"]}"#,
            r#"{"text":null,"n":null,"l\n":["x",null]}"#,
            r#"{"text":"","n":0,"l\n":[]}"#,
            r#"{"text":"é","n":0,"l\n":null}"#,
        ];
        assert_eq!(lens, lines.map(str::len));
    }
}
