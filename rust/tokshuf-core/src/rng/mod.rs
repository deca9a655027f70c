//! Random streams: SplitMix64 (`splitmix`), whose keyed draws make the shuffle's and the
//! loader's orders pure functions of (seed, content position); and numpy's generators, MT19937
//! (`RandomState`, Megatron's indices) and PCG64 (`Generator`, OLMo-core's), so that index arrays
//! built here equal those that numpy-based trainers build from the same seed.

mod numpy_mt19937;
mod numpy_pcg64;
pub mod splitmix;

pub use numpy_mt19937::RandomState;
pub use numpy_pcg64::{NumpyGenerator, SeedSequence};
pub use splitmix::{hash, mix64, scale, Rng, GOLDEN};
