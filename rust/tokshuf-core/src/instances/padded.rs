//! One document per instance (OLMo's `NumpyPaddedFSLDataset`): each document becomes one instance
//! of its first `sequence_length` tokens, right-padded by the reader.

use super::{limit_spans, positive, LongDocStrategy, Span};
use crate::error::Result;

/// The token span of each instance: documents truncated to `seq_len` (OLMo truncates although its
/// docs say "fragments"; `Fragment` is offered explicitly). Empty documents make no instance.
pub fn padded_spans(docs: &[Span], seq_len: u64, strategy: LongDocStrategy) -> Result<Vec<Span>> {
    positive("sequence_length", seq_len)?;
    Ok(limit_spans(docs, seq_len, strategy))
}
