//! OLMo-style instance strategies: pure functions of (document spans, config, seed) that return
//! index arrays, and a reader that turns those arrays into batches.
//!
//! Every token position is global: the files of a dataset are laid end to end ([`TokenStore`])
//! and a document is a `[start, end)` span of that space that never crosses a file.
//!
//! * [`concat`]: fixed-length windows per file (OLMo's `NumpyFSLDataset`), with per-window
//!   document lengths for intra-document masking;
//! * [`padded`]: one document per instance, truncated and padded (`NumpyPaddedFSLDataset`);
//! * [`packed`]: Optimized Best-Fit Decreasing packing (`NumpyPackedFSLDataset`);
//! * [`interleaved`]: chunks of several documents interleaved (`NumpyInterleavedFSLDataset`);
//! * [`vsl`] and [`curriculum`]: dataset decomposition into power-of-two pieces and the
//!   sequence-length curricula (`NumpyVSLDataset`, `VSLCurriculum`).

pub mod concat;
pub mod curriculum;
pub mod interleaved;
pub mod packed;
pub mod padded;
mod reader;
mod store;
pub mod vsl;

pub use reader::{DocLens, Layout, PackedDocLens, Reader, U64s};
pub use store::TokenStore;

use std::str::FromStr;

use crate::error::{Error, Result};

/// A document or instance piece: global token offsets `[start, end)`.
pub type Span = [u64; 2];

/// What to do with documents longer than the sequence length (OLMo's `LongDocStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LongDocStrategy {
    /// Keep the first `max` tokens and drop the rest.
    Truncate,
    /// Split into consecutive pieces of at most `max` tokens.
    Fragment,
}

impl FromStr for LongDocStrategy {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "truncate" => Ok(Self::Truncate),
            "fragment" => Ok(Self::Fragment),
            _ => {
                Err(Error::invalid(format!("unknown long_doc_strategy {s:?} (expected \"truncate\" or \"fragment\")")))
            }
        }
    }
}

/// Apply `strategy` to every document longer than `max` (OLMo's
/// `iter_document_indices_with_max_sequence_length`); empty documents are dropped, since they
/// would only ever be padding.
pub fn limit_spans(docs: &[Span], max: u64, strategy: LongDocStrategy) -> Vec<Span> {
    let mut out = Vec::with_capacity(docs.len());
    for &[s, e] in docs {
        if e <= s {
            continue;
        }
        if e - s <= max {
            out.push([s, e]);
            continue;
        }
        match strategy {
            LongDocStrategy::Truncate => out.push([s, s + max]),
            LongDocStrategy::Fragment => {
                let mut a = s;
                while a < e {
                    out.push([a, (a + max).min(e)]);
                    a += max;
                }
            }
        }
    }
    out
}

/// Check that `n` is positive.
pub(crate) fn positive(name: &str, n: u64) -> Result<u64> {
    if n == 0 {
        return Err(Error::invalid(format!("{name} must be positive, got 0")));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_and_fragment() {
        let docs = [[0, 3], [3, 13], [13, 13], [13, 16]];
        assert_eq!(limit_spans(&docs, 4, LongDocStrategy::Truncate), vec![[0, 3], [3, 7], [13, 16]]);
        assert_eq!(limit_spans(&docs, 4, LongDocStrategy::Fragment), vec![[0, 3], [3, 7], [7, 11], [11, 13], [13, 16]]);
        assert!("chop".parse::<LongDocStrategy>().unwrap_err().to_string().contains("truncate"));
    }
}
