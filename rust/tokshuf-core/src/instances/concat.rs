//! Concatenate and chunk (OLMo's `NumpyFSLDataset`): each file is cut into consecutive windows of
//! `sequence_length` tokens; the remainder of a file is dropped and no window spans two files.

use super::{positive, Span, U64s};
use crate::error::{Error, Result};

/// Instances each file contributes.
///
/// With `max_target` (a multiple of `seq_len`, for sequence-length warm-up) a file contributes
/// whole windows of `max_target` tokens, each counted as `max_target / seq_len` instances, so a
/// later run at the larger length sees the same tokens in the same order.
pub fn instances_per_file(tokens_per_file: &[u64], seq_len: u64, max_target: Option<u64>) -> Result<Vec<u64>> {
    positive("sequence_length", seq_len)?;
    let unit = match max_target {
        None => seq_len,
        Some(t) if t >= seq_len && t % seq_len == 0 => t,
        Some(t) => {
            return Err(Error::invalid(format!(
                "max_target_sequence_length ({t}) must be a multiple of sequence_length ({seq_len})"
            )))
        }
    };
    Ok(tokens_per_file.iter().map(|&n| (n / unit) * (unit / seq_len)).collect())
}

/// Lengths of the document pieces inside the window `[start, end)`: a boundary after every
/// document end strictly inside the window, plus the window's end, so the lengths sum to the
/// window length (OLMo's `get_document_lengths`, with boundaries from the document index).
///
/// `docs` must be sorted and non-overlapping (as every source produces them).
pub fn window_doc_lens<L: SpanList + ?Sized>(docs: &L, start: u64, end: u64, out: &mut Vec<i32>) {
    // First document ending after `start` (binary search on the sorted ends).
    let (mut lo, mut hi) = (0, docs.count());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if docs.span_at(mid)[1] <= start {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let mut prev = start;
    for k in lo..docs.count() {
        let e = docs.span_at(k)[1];
        if e >= end {
            break;
        }
        out.push((e - prev) as i32);
        prev = e;
    }
    out.push((end - prev) as i32);
}

/// Random access to `(start, end)` pairs, in memory or in a mapped file.
pub trait SpanList {
    fn count(&self) -> usize;
    fn span_at(&self, i: usize) -> Span;
}

impl SpanList for [Span] {
    fn count(&self) -> usize {
        self.len()
    }
    fn span_at(&self, i: usize) -> Span {
        self[i]
    }
}

impl SpanList for U64s {
    fn count(&self) -> usize {
        self.spans()
    }
    fn span_at(&self, i: usize) -> Span {
        self.span(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_file_counts_drop_remainders() {
        assert_eq!(instances_per_file(&[29964, 255, 256], 256, None).unwrap(), vec![117, 0, 1]);
        // 128-token instances counted in 256-token units: 300 tokens → one 256 unit → 2.
        assert_eq!(instances_per_file(&[300], 128, Some(256)).unwrap(), vec![2]);
        assert!(instances_per_file(&[300], 128, Some(200)).is_err());
        assert!(instances_per_file(&[300], 0, None).is_err());
    }

    #[test]
    fn doc_lens_split_at_boundaries_inside_the_window() {
        let docs = [[0, 3], [3, 8], [8, 9], [9, 20]];
        let mut out = Vec::new();
        window_doc_lens(&docs[..], 0, 8, &mut out);
        assert_eq!(out, [3, 5]);
        out.clear();
        window_doc_lens(&docs[..], 4, 12, &mut out);
        assert_eq!(out, [4, 1, 3]);
        out.clear();
        window_doc_lens(&docs[..], 20, 24, &mut out);
        assert_eq!(out, [4]);
    }
}
