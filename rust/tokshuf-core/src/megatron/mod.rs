//! Megatron-LM's GPTDataset / BlendedDataset indices, array for array: split parsing, epochs,
//! numpy's legacy RNG, document / sample / shuffle indices, blending, `.npy` caching and sample
//! reads. Pure functions of (sequence lengths, config, seed) returning index arrays.

pub mod array;
pub mod blend;
pub mod document_index;
pub mod epochs;
pub mod gpt;
pub mod normalize;
pub mod npy;
#[cfg(test)]
mod proptests;
pub mod reader;
pub mod sample_index;
pub mod shuffle_index;
pub mod split;

pub use crate::rng::RandomState;
pub use array::{ElemType, IndexArray, IndexView, Owned};
pub use blend::{build_blending_indices, build_exhaustive_blending_indices, size_per_split_per_dataset, Blend};
pub use epochs::{plan_epochs, EpochPlan};
pub use gpt::{build_gpt_indices, GptConfig, GptIndices, Scheme};
pub use normalize::{normalize, numpy_sum};
pub use reader::{read_batch, read_sample, BlendSampleSource, GptSampleSource, Piece, SampleSource};
pub use split::{parse_split, split_matrix, split_ranges, SplitMatrix};
