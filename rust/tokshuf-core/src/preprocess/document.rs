//! One batch of lines → tokens, with Megatron's per-document rules.

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

/// The fields of every line of a batch, read ahead of tokenization (see [`parse_batch`]).
#[derive(Debug, Default)]
pub struct ParsedLines(Vec<Result<Vec<Field<'static>>, Rejection>>);

/// The fields of line `span` of `batch`, or why it is rejected.
fn line_fields<'b>(
    batch: &'b LineBatch,
    span: &LineSpan,
    rules: &DocumentRules<'_>,
) -> Result<Vec<Field<'b>>, Rejection> {
    match span {
        LineSpan::Text(r) => extract_fields_with(&batch.data[r.clone()], rules.keys, rules.fields),
        LineSpan::TooLong(n) => Err((BadInputReason::LineTooLong, format!("the line has {n} bytes"))),
    }
}

/// Parse every line of `batch` now, so that [`encode_batch_parsed`] only tokenizes: a thread
/// that would otherwise wait (the reader, when every worker is busy) takes the JSON off the
/// workers.
pub fn parse_batch(batch: &LineBatch, rules: &DocumentRules<'_>) -> ParsedLines {
    ParsedLines(
        batch
            .lines
            .iter()
            .map(|span| line_fields(batch, span, rules).map(|f| f.into_iter().map(Field::into_owned).collect()))
            .collect(),
    )
}

/// Tokenize every line of `batch`: for each key, a string value is one sentence and a list is
/// several; zero-token sentences are dropped; with `eod` the id is appended to the last sentence
/// of every document that has at least one token. Stops early (with a partial result) once
/// `cancel` is set.
pub fn encode_batch(
    batch: &LineBatch,
    rules: &DocumentRules<'_>,
    tokenizer: &dyn Tokenizer,
    cancel: &Cancel,
) -> EncodedBatch {
    encode_batch_parsed(batch, None, rules, tokenizer, cancel)
}

/// [`encode_batch`], with the lines' fields already read by [`parse_batch`] when `parsed` is
/// given (the result is the same).
pub fn encode_batch_parsed(
    batch: &LineBatch,
    parsed: Option<&ParsedLines>,
    rules: &DocumentRules<'_>,
    tokenizer: &dyn Tokenizer,
    cancel: &Cancel,
) -> EncodedBatch {
    let keys = rules.keys;
    debug_assert!(parsed.is_none_or(|p| p.0.len() == batch.len()));
    // Room for the tokens of a batch of text (rarely under 4 bytes a token), so that the buffer is
    // not copied as it grows.
    let key = KeyTokens { tokens: Vec::with_capacity(batch.data.len() / 4 / keys.len().max(1)), ..Default::default() };
    let mut out = EncodedBatch { keys: vec![key; keys.len()], lines: batch.len(), ..Default::default() };
    // Reused for every line: no per-document allocation here beyond what parsing needs.
    let mut marks: Vec<(usize, usize)> = Vec::with_capacity(keys.len());
    'lines: for (i, span) in batch.lines.iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let fresh;
        let fields: &[Field<'_>] = match parsed.map(|p| &p.0[i]) {
            Some(Ok(f)) => f,
            Some(Err((reason, msg))) => {
                out.rejected.push((i as u32, *reason, msg.clone()));
                continue;
            }
            None => match line_fields(batch, span, rules) {
                Ok(f) => {
                    fresh = f;
                    &fresh
                }
                Err((reason, msg)) => {
                    out.rejected.push((i as u32, reason, msg));
                    continue;
                }
            },
        };
        // Tokenize every key before committing any, so a rejected line leaves no partial document.
        marks.clear();
        marks.extend(out.keys.iter().map(|k| (k.tokens.len(), k.sequence_lengths.len())));
        for (key, field) in out.keys.iter_mut().zip(fields) {
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
        let batch = reader.next_batch().unwrap().unwrap();
        let keys = ["text".to_string(), "title".to_string()];
        let rules = DocumentRules { keys: &keys, eod: Some(0), fields: FieldOptions::default() };
        let cancel = Cancel::new();
        let now = encode_batch(&batch, &rules, &ByteTokenizer, &cancel);
        let ahead = encode_batch_parsed(&batch, Some(&parse_batch(&batch, &rules)), &rules, &ByteTokenizer, &cancel);
        assert_eq!(summary(&now), summary(&ahead));
        // The cases above are all there: four documents, five rejected lines of four kinds.
        assert_eq!(now.document_lines, [0, 1, 6, 8]);
        let reasons: Vec<_> = now.rejected.iter().map(|r| (r.0, r.1)).collect();
        assert_eq!(
            reasons,
            [
                (2, BadInputReason::InvalidJson),
                (3, BadInputReason::MissingKey),
                (4, BadInputReason::NotString),
                (5, BadInputReason::LineTooLong),
                (7, BadInputReason::BlankLine),
            ]
        );
        // Bytes + 1, then the end of document.
        assert_eq!(now.keys[0].tokens[..6], [113, 109, 98, 106, 111, 0]);
    }
}
