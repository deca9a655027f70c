//! One GPTDataset's indices from (sequence lengths, split range, sample count, config, seed),
//! with Megatron's RNG call order: one `RandomState(seed)` per dataset, the document shuffle(s),
//! then the shuffle-index shuffle(s).

use super::array::IndexArray;
use super::document_index::build_document_index;
use super::epochs::{plan_epochs, EpochPlan};
use super::sample_index::{build_sample_index_from_lengths, num_samples as count_samples};
use super::shuffle_index::{build_shuffle_index, repeat_shuffle_index};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::rng::RandomState;

/// How the epochs of a dataset are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scheme {
    /// Megatron-LM's GPTDataset: one permutation over all epochs (separate final epoch < 80 %).
    #[default]
    Megatron,
    /// Seed 000's Nanoset variant: one shuffled epoch, its shuffle index repeated
    /// `num_samples / len + 1` times, so every epoch serves the same order.
    Repeat,
}

impl std::str::FromStr for Scheme {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "megatron" => Ok(Scheme::Megatron),
            "repeat" => Ok(Scheme::Repeat),
            _ => Err(Error::invalid(format!("unknown index scheme {s:?} (expected \"megatron\" or \"repeat\")"))),
        }
    }
}

/// Everything besides the data that determines the arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GptConfig {
    /// Tokens per sample, without the extra token.
    pub sequence_length: u64,
    /// `add_extra_token_to_sequence` (each sample reads one more token, for the labels).
    pub add_extra_token: bool,
    /// `random_seed` (numpy accepts `[0, 2^32)`).
    pub seed: u32,
    /// Drop the last partial sample (always for train/test; configurable for valid).
    pub drop_last_partial_sequence: bool,
    /// Epoch ordering.
    pub scheme: Scheme,
}

/// The three arrays and how they were planned.
#[derive(Debug, Clone)]
pub struct GptIndices {
    /// int32 (int64 for sequence ids ≥ 2^31), length `epochs × sequences`.
    pub document_index: IndexArray,
    /// int32 or int64, `[samples + 1, 2]`.
    pub sample_index: IndexArray,
    /// uint32 or int64; its length is the dataset's length.
    pub shuffle_index: IndexArray,
    /// Epochs and the separate-final-epoch decision.
    pub plan: EpochPlan,
}

/// Σ `sizes[beg..end]`, rejecting negative lengths (a corrupt index).
pub fn tokens_in_range(sizes: &[i32], beg: u64, end: u64) -> Result<u64> {
    let range = sizes.get(beg as usize..end as usize).ok_or_else(|| {
        Error::invalid(format!("split range [{beg}, {end}) exceeds the dataset's {} sequences", sizes.len()))
    })?;
    let mut total = 0u64;
    for (i, &s) in range.iter().enumerate() {
        if s < 0 {
            return Err(Error::invalid(format!("sequence {} has a negative length ({s})", beg as usize + i)));
        }
        total += s as u64;
    }
    Ok(total)
}

/// Build the document, sample and shuffle indices of sequences `[beg, end)` of a dataset whose
/// sequence lengths are `sizes`, for `num_samples` samples (`None`: one epoch).
pub fn build_gpt_indices(
    sizes: &[i32],
    (beg, end): (u64, u64),
    num_samples: Option<u64>,
    cfg: &GptConfig,
    cancel: &Cancel,
) -> Result<GptIndices> {
    let seq = cfg.sequence_length;
    let extra = u64::from(cfg.add_extra_token);
    let tokens = tokens_in_range(sizes, beg, end)?;
    let requested = match cfg.scheme {
        Scheme::Megatron => num_samples,
        Scheme::Repeat => None,
    };
    if tokens == 0 {
        // Also for the repeat scheme, which builds one epoch regardless.
        plan_epochs(0, num_samples, seq, extra)?;
    }
    let plan = plan_epochs(tokens, requested, seq, extra)?;
    let mut rng = RandomState::new(cfg.seed);
    let lens = &sizes[beg as usize..end as usize]; // in range: `tokens_in_range` checked it
    let docs = build_document_index(lens, beg, plan.num_epochs, plan.separate_final_epoch, &mut rng, cancel)?;
    cancel.check()?;
    let total = count_samples(plan.num_epochs, tokens, seq, extra, cfg.drop_last_partial_sequence)?;
    let first = if plan.separate_final_epoch { plan.samples_sans_final_epoch } else { total };
    let n_docs = docs.index.len();
    // The shuffle index needs only the RNG state and the sample count, both known now: build it
    // while the sample index is walked.
    let (sample_index, shuffle_index) = crate::parallel::pool(None).install(|| {
        rayon::join(
            || build_sample_index_from_lengths(&docs.lengths, n_docs, seq, extra, total, cancel),
            || build_shuffle_index(first, total, &mut rng, cancel),
        )
    });
    let document_index = docs.index;
    let (sample_index, mut shuffle_index) = (sample_index?, shuffle_index?);
    if cfg.scheme == Scheme::Repeat {
        shuffle_index = repeat_shuffle_index(&shuffle_index, num_samples)?;
    }
    Ok(GptIndices { document_index, sample_index, shuffle_index, plan })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(seq: u64) -> GptConfig {
        GptConfig {
            sequence_length: seq,
            add_extra_token: true,
            seed: 1234,
            drop_last_partial_sequence: true,
            scheme: Scheme::Megatron,
        }
    }

    #[test]
    fn nanotron_tv1() {
        let sizes = [5, 3, 7, 2, 6];
        let c = Cancel::new();
        let g = build_gpt_indices(&sizes, (0, 5), Some(3), &cfg(4), &c).unwrap();
        assert_eq!(g.document_index.view().to_vec(), [4, 0, 1, 2, 3]);
        assert_eq!(g.shuffle_index.view().to_vec(), [3, 2, 1, 0, 4]);
        assert_eq!(g.sample_index.view().to_vec(), [0, 0, 0, 4, 1, 2, 2, 1, 3, 2, 3, 6]);
        let g = build_gpt_indices(&sizes, (0, 5), Some(12), &cfg(4), &c).unwrap();
        assert_eq!(g.shuffle_index.view().to_vec(), [3, 9, 2, 1, 7, 5, 4, 0, 8, 6, 10, 16, 12, 15, 14, 11, 13]);
        let g = build_gpt_indices(&sizes, (0, 5), Some(15), &cfg(4), &c).unwrap();
        assert_eq!(g.shuffle_index.view().to_vec(), [8, 1, 15, 4, 3, 7, 11, 10, 14, 13, 2, 6, 9, 0, 5, 12, 16]);
    }

    #[test]
    fn repeat_scheme_tiles_one_epoch() {
        let sizes = [5, 3, 7, 2, 6];
        let c = Cancel::new();
        let one = build_gpt_indices(&sizes, (0, 5), None, &cfg(4), &c).unwrap();
        let rep = GptConfig { scheme: Scheme::Repeat, ..cfg(4) };
        let g = build_gpt_indices(&sizes, (0, 5), Some(12), &rep, &c).unwrap();
        assert_eq!(g.document_index.view().to_vec(), one.document_index.view().to_vec());
        let m = one.shuffle_index.len();
        assert_eq!(g.shuffle_index.len(), (12 / m + 1) * m);
        assert_eq!(&g.shuffle_index.view().to_vec()[m..2 * m], &one.shuffle_index.view().to_vec()[..]);
    }

    #[test]
    fn empty_split_with_samples_raises() {
        let c = Cancel::new();
        let e = build_gpt_indices(&[5, 3], (2, 2), Some(10), &cfg(4), &c).unwrap_err();
        assert!(e.to_string().contains("no tokens"), "{e}");
        let g = build_gpt_indices(&[5, 3], (2, 2), None, &cfg(4), &c).unwrap();
        assert_eq!(g.shuffle_index.len(), 0);
        assert!(build_gpt_indices(&[5, -3], (0, 2), None, &cfg(4), &c).is_err());
    }
}
