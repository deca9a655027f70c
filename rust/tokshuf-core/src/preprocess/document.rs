//! One batch of lines → tokens, with Megatron's per-document rules.

use crate::cancel::Cancel;
use crate::error::BadInputReason;
use crate::read::lines::{LineBatch, LineSpan};
use crate::read::{extract_fields_with, FieldOptions};
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
    let keys = rules.keys;
    let mut out =
        EncodedBatch { keys: vec![KeyTokens::default(); keys.len()], lines: batch.len(), ..Default::default() };
    // Reused for every line: no per-document allocation here beyond what parsing needs.
    let mut marks: Vec<(usize, usize)> = Vec::with_capacity(keys.len());
    'lines: for (i, span) in batch.lines.iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let range = match span {
            LineSpan::Text(r) => r.clone(),
            LineSpan::TooLong(n) => {
                out.rejected.push((i as u32, BadInputReason::LineTooLong, format!("the line has {n} bytes")));
                continue;
            }
        };
        let fields = match extract_fields_with(&batch.data[range], keys, rules.fields) {
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
