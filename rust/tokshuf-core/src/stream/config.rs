//! The settings that determine a stream. Everything a worker emits is a pure function of these,
//! the documents, the worker's global rank and the world's worker count.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One phase of the mix schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixPhase {
    /// The first step of the phase (steps counted from 0: the phase starts after this many).
    pub start_step: u64,
    /// Relative weight of each sub-dataset (integers, at most 2^40, at least one positive).
    pub weights: Vec<u64>,
}

/// Settings of one stream (shared by every worker).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    /// The seed of every permutation and random draw.
    pub seed: u64,
    /// Documents of each sub-dataset are split into this many logical shards.
    pub logical_shards: u32,
    /// The mix schedule: phases in order of their first step, the first at step 0. A phase's
    /// integer weights (one per sub-dataset; the mixer uses them exactly) apply to the tokens
    /// drawn for batches of steps from its `start_step` up to the next phase's.
    pub mix: Vec<MixPhase>,
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
        let Some(first) = self.mix.first() else {
            return bad("the mix schedule needs at least one phase".into());
        };
        if first.start_step != 0 {
            return bad(format!("the first phase of the mix starts at step {}, not 0", first.start_step));
        }
        let n_sub = first.weights.len();
        if n_sub == 0 {
            return bad("at least one sub-dataset is needed".into());
        }
        for (k, p) in self.mix.iter().enumerate() {
            if k > 0 && p.start_step <= self.mix[k - 1].start_step {
                return bad(format!(
                    "mix phases must start at increasing steps; phase {k} starts at step {} after one at step {}",
                    p.start_step,
                    self.mix[k - 1].start_step
                ));
            }
            if p.weights.len() != n_sub {
                return bad(format!("mix phase {k} has {} weights for {n_sub} sub-datasets", p.weights.len()));
            }
            if p.weights.iter().all(|&w| w == 0) {
                return bad(format!("weights {:?} of mix phase {k}: at least one must be positive", p.weights));
            }
            if p.weights.iter().any(|&w| w > 1 << 40) {
                return bad(format!("weights {:?} of mix phase {k}: each must be at most 2^40", p.weights));
            }
        }
        if self.line_len < 2 {
            return bad(format!("line length {} must be at least 2 (seq_length >= 1)", self.line_len));
        }
        if self.chunk_size == 0 {
            return bad("chunk_size must be at least 1".into());
        }
        Ok(())
    }

    /// Number of sub-datasets.
    pub fn n_sub(&self) -> usize {
        self.mix.first().map_or(0, |p| p.weights.len())
    }

    /// The index of the phase in force at `step`.
    pub fn phase_at(&self, step: u64) -> usize {
        self.mix.partition_point(|p| p.start_step <= step).saturating_sub(1)
    }
}

#[cfg(test)]
pub(crate) fn test_config(weights: Vec<u64>) -> StreamConfig {
    StreamConfig {
        seed: 7,
        logical_shards: 4,
        mix: vec![MixPhase { start_step: 0, weights }],
        line_len: 9,
        chunk_size: 5,
        bos: None,
        eos: Some(0),
        strip: vec![],
        min_length: 1,
        shuffle_window: 0,
    }
}
