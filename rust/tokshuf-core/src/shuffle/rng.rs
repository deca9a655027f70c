//! The shuffle's random decisions, as pure functions of (seed, labels) on SplitMix64
//! ([`crate::rng::splitmix`]): which cell a context goes to, and the order inside a cell.

pub use crate::rng::{hash, scale, Rng};

/// Domain tag: the cell of a record.
pub const TAG_CELL: u64 = 0x63656c6c; // "cell"
/// Domain tag: the order inside a cell.
pub const TAG_ORDER: u64 = 0x6f726465; // "orde"

/// The cell of the record `id` among `cells`.
pub fn cell_of(seed: u64, id: u64, cells: u32) -> u32 {
    scale(hash(&[seed, TAG_CELL, id]), u64::from(cells)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_roughly_uniform() {
        let n = 16u32;
        let mut counts = vec![0u32; n as usize];
        for id in 0..160_000u64 {
            counts[cell_of(99, id, n) as usize] += 1;
        }
        // Expected 10,000 each, sd 97: allow 6 sd.
        assert!(counts.iter().all(|&c| (9_400..=10_600).contains(&c)), "{counts:?}");
    }
}
