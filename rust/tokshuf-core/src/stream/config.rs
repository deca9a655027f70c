//! The settings that determine a stream. Everything a worker emits is a pure function of these,
//! the documents, the worker's global rank and the world's worker count.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Settings of one stream (shared by every worker).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    /// The seed of every permutation and random draw.
    pub seed: u64,
    /// Documents of each sub-dataset are split into this many logical shards.
    pub logical_shards: u32,
    /// Relative weight of each sub-dataset (integers; the mixer uses them exactly).
    pub weights: Vec<u64>,
    /// Tokens per output line (`seq_length + 1` for next-token prediction).
    pub line_len: usize,
    /// Documents are cut into chunks of at most this many tokens; the mixer switches sub-datasets
    /// only at chunk boundaries.
    pub chunk_size: u64,
    /// Token added before every document.
    #[serde(default)]
    pub bos: Option<u32>,
    /// Token added after every document.
    #[serde(default)]
    pub eos: Option<u32>,
    /// Ids removed from a document's ends (at most one token at each end) before bos/eos are added.
    #[serde(default)]
    pub strip: Vec<u32>,
    /// Documents shorter than this (after strip, with bos/eos) are skipped; empty ones always are.
    #[serde(default = "one")]
    pub min_length: u64,
    /// Lines held by the shuffle buffer (0: no buffer).
    #[serde(default)]
    pub shuffle_window: usize,
}

fn one() -> u64 {
    1
}

impl StreamConfig {
    /// Check the settings, naming the bad value and what is allowed.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::invalid(m));
        if self.logical_shards == 0 {
            return bad("logical_shards must be at least 1".into());
        }
        if self.weights.is_empty() {
            return bad("at least one sub-dataset is needed".into());
        }
        if self.weights.iter().all(|&w| w == 0) {
            return bad(format!("weights {:?}: at least one must be positive", self.weights));
        }
        if self.weights.iter().any(|&w| w > 1 << 40) {
            return bad(format!("weights {:?}: each must be at most 2^40", self.weights));
        }
        if self.line_len < 2 {
            return bad(format!("line length {} must be at least 2 (seq_length >= 1)", self.line_len));
        }
        if self.chunk_size == 0 {
            return bad("chunk_size must be at least 1".into());
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) fn test_config(weights: Vec<u64>) -> StreamConfig {
    StreamConfig {
        seed: 7,
        logical_shards: 4,
        weights,
        line_len: 9,
        chunk_size: 5,
        bos: None,
        eos: Some(0),
        strip: vec![],
        min_length: 1,
        shuffle_window: 0,
    }
}
