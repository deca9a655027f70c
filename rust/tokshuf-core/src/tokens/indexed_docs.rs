//! Documents of an indexed dataset as token spans of its `.bin` stream.

use crate::error::{Error, Result};
use crate::indexed::IndexedDataset;

/// `(start, end)` in tokens of every document of `ds`, from the index (no EOS needed).
///
/// The `.bin` must be contiguous (sequence pointers are the running sum of lengths), as every
/// Megatron-compatible writer produces it; otherwise the stream would contain foreign bytes.
pub fn indexed_document_spans(ds: &IndexedDataset) -> Result<Vec<[u64; 2]>> {
    if !ds.is_contiguous() {
        return Err(Error::format(
            ds.idx_path(),
            "the .bin is not contiguous (sequence pointers skip or reorder bytes); rewrite it with `tokshuf merge`",
        ));
    }
    let item = ds.dtype().itemsize() as u64;
    let mut spans = Vec::with_capacity(ds.num_documents());
    let mut at = 0u64;
    for d in 0..ds.num_documents() {
        let start = at;
        for s in ds.document_index(d)..ds.document_index(d + 1) {
            at = ds.sequence_pointer(s as usize) / item + u64::from(ds.sequence_length(s as usize));
        }
        spans.push([start, at]);
    }
    Ok(spans)
}
