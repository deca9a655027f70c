//! One batch of lines → tokens, with Megatron's per-document rules.

use std::borrow::Cow;
use std::ops::Range;

use crate::cancel::Cancel;
use crate::error::BadInputReason;
use crate::read::lines::{LineBatch, LineSpan};
use crate::read::{extract_fields_with, Field, FieldOptions, Rejection};
use crate::tokenize::Tokenizer;

/// Tokens of one key for every accepted line of a batch, flattened.
#[derive(Debug, Default, Clone)]
pub struct KeyTokens {
    /// All token ids, document after document.
    pub tokens: Vec<u32>,
    /// Length of every sequence, in order.
    pub sequence_lengths: Vec<u32>,
    /// For every document, the number of sequences it holds.
    pub document_sequences: Vec<u32>,
}

/// The result of tokenizing one batch.
#[derive(Debug, Default)]
pub struct EncodedBatch {
    /// One entry per JSON key.
    pub keys: Vec<KeyTokens>,
    /// For every document, its line's index within the batch.
    pub document_lines: Vec<u32>,
    /// Lines that were rejected: (index within the batch, reason, message).
    pub rejected: Vec<(u32, BadInputReason, String)>,
    /// Lines in the batch.
    pub lines: usize,
}

/// How lines become documents.
#[derive(Debug, Clone, Copy)]
pub struct DocumentRules<'a> {
    /// The JSON keys, one output each.
    pub keys: &'a [String],
    /// Appended to every document with at least one token.
    pub eod: Option<u32>,
    /// How values are read.
    pub fields: FieldOptions,
}

/// A batch whose lines were read ahead of tokenization (see [`parse_batch`]). Text that a line
/// holds as it is stays in the batch's bytes (as ranges, not copies); only text with escapes is
/// kept decoded.
#[derive(Debug)]
pub struct ParsedLines {
    batch: LineBatch,
    lines: Vec<Result<Vec<Vec<Sentence>>, Rejection>>,
}

#[derive(Debug)]
enum Sentence {
    /// `batch.data[range]`, which the parse found to be UTF-8.
    At(Range<usize>),
    Decoded(String),
}

impl ParsedLines {
    /// The batch, for its memory once the lines are encoded.
    pub fn into_batch(self) -> LineBatch {
        self.batch
    }

    fn text<'a>(&'a self, s: &'a Sentence) -> Cow<'a, str> {
        match s {
            // SAFETY: the range was cut from the `&str` the parse made of these very bytes, and
            // `batch` is private and never changed after the parse.
            Sentence::At(r) => Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(&self.batch.data[r.clone()]) }),
            Sentence::Decoded(t) => Cow::Borrowed(t),
        }
    }

    /// The fields of line `i`, borrowing from the batch and from `self`.
    fn fields(&self, i: usize) -> Result<Vec<Field<'_>>, Rejection> {
        let fields = self.lines[i].as_ref().map_err(|(reason, msg)| (*reason, msg.clone()))?;
        Ok(fields.iter().map(|f| Field { sentences: f.iter().map(|s| self.text(s)).collect() }).collect())
    }
}

/// The fields of line `span` of `batch`, or why it is rejected.
fn line_fields<'b>(
    batch: &'b LineBatch,
    span: &LineSpan,
    rules: &DocumentRules<'_>,
) -> Result<Vec<Field<'b>>, Rejection> {
    match span {
        LineSpan::Text(r) => extract_fields_with(&batch.data[r.clone()], rules.keys, rules.fields),
        LineSpan::TooLong(n) => Err((BadInputReason::LineTooLong, format!("the line has {n} bytes"))),
        LineSpan::Row(i) => batch.rows.as_ref().expect("a row span has its rows").fields(*i, rules.keys, rules.fields),
    }
}

/// Parse every line of `batch` now, so that [`encode_batch_parsed`] only tokenizes: a thread
/// that would otherwise wait (the reader, when every worker is busy) takes the JSON off the
/// workers.
pub fn parse_batch(batch: LineBatch, rules: &DocumentRules<'_>) -> ParsedLines {
    let base = batch.data.as_ptr() as usize;
    let end = base + batch.data.len();
    let detach = |c: Cow<'_, str>| match c {
        Cow::Borrowed(t) if t.as_ptr() as usize >= base && t.as_ptr() as usize + t.len() <= end => {
            let at = t.as_ptr() as usize - base;
            Sentence::At(at..at + t.len())
        }
        other => Sentence::Decoded(other.into_owned()),
    };
    let lines = batch
        .lines
        .iter()
        .map(|span| {
            line_fields(&batch, span, rules)
                .map(|f| f.into_iter().map(|f| f.sentences.into_iter().map(detach).collect()).collect())
        })
        .collect();
    ParsedLines { batch, lines }
}

/// Tokenize every line of `batch`: for each key, a string value is one sentence and a list is
/// several; zero-token sentences are dropped; with `eod` the id is appended to the last sentence
/// of every document that has at least one token. Stops early (with a partial result) once
/// `cancel` is set. The first key's tokens go into `spare`'s memory (its ids are dropped).
pub fn encode_batch(
    batch: &LineBatch,
    rules: &DocumentRules<'_>,
    tokenizer: &dyn Tokenizer,
    cancel: &Cancel,
    spare: Vec<u32>,
) -> EncodedBatch {
    encode_lines(batch, |_, span| line_fields(batch, span, rules), rules, tokenizer, cancel, spare)
}

/// [`encode_batch`] of a batch parsed by [`parse_batch`] (the result is the same).
pub fn encode_batch_parsed(
    parsed: &ParsedLines,
    rules: &DocumentRules<'_>,
    tokenizer: &dyn Tokenizer,
    cancel: &Cancel,
    spare: Vec<u32>,
) -> EncodedBatch {
    encode_lines(&parsed.batch, |i, _| parsed.fields(i), rules, tokenizer, cancel, spare)
}

fn encode_lines<'b>(
    batch: &LineBatch,
    mut fields_of: impl FnMut(usize, &LineSpan) -> Result<Vec<Field<'b>>, Rejection>,
    rules: &DocumentRules<'_>,
    tokenizer: &dyn Tokenizer,
    cancel: &Cancel,
    mut spare: Vec<u32>,
) -> EncodedBatch {
    let keys = rules.keys;
    // Room for the tokens of a batch of text, so that the buffer is not copied as it grows.
    let room = crate::tokenize::ids_room(batch.bytes()) / keys.len().max(1);
    spare.clear();
    spare.reserve(room);
    let mut spare = Some(spare);
    let keys_tokens = (0..keys.len())
        .map(|_| KeyTokens { tokens: spare.take().unwrap_or_else(|| Vec::with_capacity(room)), ..Default::default() })
        .collect();
    let mut out = EncodedBatch { keys: keys_tokens, lines: batch.len(), ..Default::default() };
    // Reused for every line: no per-document allocation here beyond what parsing needs.
    let mut marks: Vec<(usize, usize)> = Vec::with_capacity(keys.len());
    'lines: for (i, span) in batch.lines.iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let fields = match fields_of(i, span) {
            Ok(f) => f,
            Err((reason, msg)) => {
                out.rejected.push((i as u32, reason, msg));
                continue;
            }
        };
        // Tokenize every key before committing any, so a rejected line leaves no partial document.
        marks.clear();
        marks.extend(out.keys.iter().map(|k| (k.tokens.len(), k.sequence_lengths.len())));
        for (key, field) in out.keys.iter_mut().zip(&fields) {
            let mut sequences = 0u32;
            for sentence in &field.sentences {
                // Tokenizers append straight to the key's buffer; a failure rolls back below.
                let start = key.tokens.len();
                if let Err(msg) = tokenizer.encode(sentence, &mut key.tokens) {
                    for (k, &(t, s)) in out.keys.iter_mut().zip(&marks) {
                        k.tokens.truncate(t);
                        k.sequence_lengths.truncate(s);
                        k.document_sequences.truncate(out.document_lines.len());
                    }
                    out.rejected.push((i as u32, BadInputReason::Tokenizer, msg));
                    continue 'lines;
                }
                let n = key.tokens.len() - start;
                if n == 0 {
                    continue;
                }
                key.sequence_lengths.push(n as u32);
                sequences += 1;
            }
            if let (Some(eod), true) = (rules.eod, sequences > 0) {
                key.tokens.push(eod);
                *key.sequence_lengths.last_mut().expect("a sequence") += 1;
            }
            key.document_sequences.push(sequences);
        }
        out.document_lines.push(i as u32);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::lines::LineReader;
    use crate::tokenize::ByteTokenizer;

    /// Everything a batch holds, comparable.
    fn summary(e: &EncodedBatch) -> impl PartialEq + std::fmt::Debug {
        let keys: Vec<_> = e
            .keys
            .iter()
            .map(|k| (k.tokens.clone(), k.sequence_lengths.clone(), k.document_sequences.clone()))
            .collect();
        (keys, e.document_lines.clone(), e.rejected.clone(), e.lines)
    }

    #[test]
    fn parsing_ahead_gives_the_same_batch() {
        let input = concat!(
            "{\"text\": \"plain\", \"title\": \"t\"}\n",
            "{\"text\": \"esc\\u00e9\\n\\\"q\\\"\", \"title\": [\"a\", \"\", \"b\"]}\n",
            "not json\n",
            "{\"title\": \"no text\"}\n",
            "{\"text\": 3, \"title\": \"x\"}\n",
            "{\"text\": \"",
            "a very long line that is too long to keep",
            "\", \"title\": \"y\"}\n",
            "{\"text\": \"\", \"title\": \"\"}\n",
            "\n",
            "{\"text\": \"last\", \"title\": \"z\"}\n",
        );
        let mut reader = LineReader::new(std::path::Path::new("t"), input.as_bytes(), 1 << 20, 60);
        let batch = reader.next_batch_in(Vec::new()).unwrap().unwrap();
        let keys = ["text".to_string(), "title".to_string()];
        let rules = DocumentRules { keys: &keys, eod: Some(0), fields: FieldOptions::default() };
        let cancel = Cancel::new();
        let now = encode_batch(&batch, &rules, &ByteTokenizer, &cancel, Vec::new());
        let parsed = parse_batch(batch, &rules);
        let ahead = encode_batch_parsed(&parsed, &rules, &ByteTokenizer, &cancel, vec![7; 3]);
        assert_eq!(summary(&now), summary(&ahead));
        // Text a line holds as it is is read from the batch's bytes, not copied.
        let fields = parsed.fields(0).unwrap();
        assert!(parsed.batch.data.as_ptr_range().contains(&fields[0].sentences[0].as_ptr()));
        assert_eq!(fields[0].sentences[0], "plain");
        // The cases above are all there: four documents, five rejected lines of four kinds.
        assert_eq!(now.document_lines, [0, 1, 6, 8]);
        use BadInputReason::{BlankLine, InvalidJson, LineTooLong, MissingKey, NotString};
        let reasons: Vec<_> = now.rejected.iter().map(|r| (r.0, r.1)).collect();
        assert_eq!(reasons, [(2, InvalidJson), (3, MissingKey), (4, NotString), (5, LineTooLong), (7, BlankLine)]);
        // Bytes + 1, then the end of document.
        assert_eq!(now.keys[0].tokens[..6], [113, 109, 98, 106, 111, 0]);
    }
}
