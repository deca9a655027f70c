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

/// numpy's `random_interval(max)`, for either generator: uniform in `0..=max`, by masking a draw
/// (32 bits while `max` fits them, else 64) to the next `2^k - 1` and rejecting values above `max`.
#[inline(always)]
fn random_interval<G>(g: &mut G, max: u64, next_u32: fn(&mut G) -> u32, next_u64: fn(&mut G) -> u64) -> u64 {
    if max == 0 {
        return 0;
    }
    let mask = u64::MAX >> max.leading_zeros();
    loop {
        let v = if max > u64::from(u32::MAX) { next_u64(g) } else { u64::from(next_u32(g)) } & mask;
        if v <= max {
            return v;
        }
    }
}
