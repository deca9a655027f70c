//! Keyed bijections of `0..n` that cost O(1) memory: a balanced Feistel network on the smallest
//! even-width power of two that holds `n`, restricted to `0..n` by cycle walking.
//!
//! Every (seed, sub-dataset, logical shard, epoch) gets its own key, so each epoch of each shard
//! visits its documents in a fresh order, and the order never depends on the topology.

use crate::rng::{mix64, GOLDEN};

const ROUNDS: usize = 6;
/// A key derived from an ordered list of words (`[seed, sub, shard, epoch]`, ...).
pub fn derive_key(words: &[u64]) -> u64 {
    words.iter().fold(GOLDEN, |h, &w| mix64(h ^ mix64(w.wrapping_add(GOLDEN))))
}

/// A pseudo-random permutation of `0..n`.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    half: u32,
    mask: u64,
    keys: [u64; ROUNDS],
}

impl Permutation {
    /// The permutation of `0..n` selected by `key`.
    pub fn new(n: u64, key: u64) -> Self {
        // Integer bit length (never floating point: 2^k + 1 must not round down).
        let bits = if n <= 1 { 2 } else { (u64::BITS - (n - 1).leading_zeros()).max(2) };
        let bits = bits + (bits & 1);
        let half = bits / 2;
        let mask = (1u64 << half) - 1;
        let keys = std::array::from_fn(|r| mix64(key ^ mix64(r as u64 + 1)));
        Permutation { n, half, mask, keys }
    }

    #[inline]
    fn feistel(&self, x: u64) -> u64 {
        let (mut l, mut r) = (x >> self.half, x & self.mask);
        for k in &self.keys {
            let f = mix64(r ^ k) & self.mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half) | r
    }

    /// The image of `i` (`i < n`). The walk stays inside the cycle of `i`, which returns to
    /// `0..n`; the domain is under 4n, so it takes under 4 steps on average.
    #[inline]
    pub fn get(&self, i: u64) -> u64 {
        assert!(i < self.n, "permutation index {i} out of range 0..{}", self.n);
        let mut x = i;
        loop {
            x = self.feistel(x);
            if x < self.n {
                return x;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn image(n: u64, key: u64) -> Vec<u64> {
        let p = Permutation::new(n, key);
        (0..n).map(|i| p.get(i)).collect()
    }

    fn is_permutation(v: &[u64]) -> bool {
        let mut s = v.to_vec();
        s.sort_unstable();
        s.iter().enumerate().all(|(i, &x)| x == i as u64)
    }

    #[test]
    fn edge_sizes_are_permutations() {
        for k in 0..14u32 {
            for n in [(1u64 << k).saturating_sub(1), 1 << k, (1 << k) + 1] {
                assert!(is_permutation(&image(n, 7 + n)), "n = {n}");
            }
        }
        assert!(image(0, 1).is_empty());
    }

    #[test]
    fn keys_change_the_order() {
        let a = image(1000, derive_key(&[1, 0, 3, 0]));
        let b = image(1000, derive_key(&[1, 0, 3, 1]));
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert!(same < 20, "{same} fixed points shared by two epochs");
    }

    #[test]
    fn huge_domains_do_not_overflow() {
        assert!(Permutation::new(u64::MAX, 5).get(u64::MAX - 1) < u64::MAX);
        assert!(Permutation::new((1 << 63) + 1, 5).get(1 << 63) <= 1 << 63);
    }

    #[test]
    fn positions_are_roughly_uniform() {
        // Where does element 0 land, over many keys? Each of 8 buckets should get ~1/8.
        let n = 64u64;
        let mut buckets = [0u32; 8];
        for key in 0..4000u64 {
            buckets[(Permutation::new(n, derive_key(&[key])).get(0) / 8) as usize] += 1;
        }
        assert!(buckets.iter().all(|&b| (400..600).contains(&b)), "{buckets:?}");
    }

    proptest! {
        #[test]
        fn any_size_is_a_permutation(n in 0u64..3000, key: u64) {
            prop_assert!(is_permutation(&image(n, key)));
        }
    }
}
