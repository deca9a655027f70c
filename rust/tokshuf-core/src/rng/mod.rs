//! Random streams that reproduce numpy's, so index arrays built here equal those that
//! numpy-based trainers (OLMo-core) build from the same seed.

mod numpy_pcg64;

pub use numpy_pcg64::{seed_words, NumpyGenerator, SeedSequence};
