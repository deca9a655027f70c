//! SplitMix64: the finalizer `mix64` (a bijection of `u64` with full avalanche), hashes of word
//! tuples, and a generator. The shuffle's and the streaming loader's random decisions are drawn
//! from it, keyed by the seed and the content position they concern, never by thread timing or
//! `std`'s `DefaultHasher` (whose output may change between Rust releases).

/// The golden-ratio increment of SplitMix64.
pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's finalizer: a bijection of `u64` with full avalanche.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A 64-bit hash of a tuple of words.
pub fn hash(words: &[u64]) -> u64 {
    words.iter().fold(0x243F_6A88_85A3_08D3, |h, &w| mix64(h.wrapping_add(GOLDEN) ^ w))
}

/// Map a uniform 64-bit value onto `0..n` (multiply-shift; bias below `n / 2^64`).
pub fn scale(x: u64, n: u64) -> u64 {
    ((u128::from(x) * u128::from(n)) >> 64) as u64
}

/// SplitMix64: a small, fast, statistically strong generator for shuffles.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded by a tuple of words.
    pub fn from_words(words: &[u64]) -> Self {
        Self(hash(words))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix64(self.0)
    }

    /// A uniform integer in `0..n` (`n > 0`), exactly unbiased (Lemire's method with rejection).
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// Fisher–Yates: every permutation of `items` equally likely.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_values() {
        // Pinned: changing these changes every output of `tokshuf shuffle` and of the loader.
        assert_eq!(mix64(0), 0);
        assert_eq!(mix64(1), 0x5692_161d_100b_05e5);
        assert_ne!(hash(&[1, 2]), hash(&[2, 1]));
        let mut r = Rng::from_words(&[7]);
        let a: Vec<u64> = (0..3).map(|_| r.below(10)).collect();
        let mut r = Rng::from_words(&[7]);
        let b: Vec<u64> = (0..3).map(|_| r.below(10)).collect();
        assert_eq!(a, b);
    }
    #[test]
    fn shuffle_is_a_uniform_permutation_of_three() {
        let mut counts = std::collections::HashMap::new();
        let mut r = Rng::from_words(&[3]);
        for _ in 0..60_000 {
            let mut v = [0u8, 1, 2];
            r.shuffle(&mut v);
            *counts.entry(v).or_insert(0u32) += 1;
        }
        assert_eq!(counts.len(), 6);
        assert!(counts.values().all(|&c| (9_400..=10_600).contains(&c)), "{counts:?}");
    }

    #[test]
    fn below_covers_the_range() {
        let mut r = Rng::from_words(&[5]);
        let mut seen = [false; 7];
        for _ in 0..1000 {
            seen[r.below(7) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
