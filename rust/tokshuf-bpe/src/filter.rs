//! Which short byte strings may be tokens: a Bloom filter small enough to stay in a core's own
//! cache. Merging a piece on a cache miss asks about every substring that could become a part;
//! most are no token, and the filter answers those without touching the large table.

use super::merge::RankTable;
use super::table::hash;

/// Two bits in one 64-bit word per key (one load per question), about 16 bits per key: ~1.5% of
/// the strings that are no token pass.
pub(crate) struct TokenFilter {
    words: Vec<u64>,
    mask: usize,
}

/// The word and the two bits of a key with [`hash`] `h` (bits that the tables' slot indices, the
/// low ones, mostly do not use).
#[inline(always)]
fn bits(h: u64, mask: usize) -> (usize, u64) {
    ((h >> 32) as usize & mask, 1 << ((h >> 20) & 63) | 1 << ((h >> 26) & 63))
}

impl TokenFilter {
    /// A filter that passes every key of `keys`.
    pub fn new(keys: &[u128]) -> TokenFilter {
        let words = (keys.len() * 16 / 64).max(64).next_power_of_two();
        let mut f = TokenFilter { words: vec![0; words], mask: words - 1 };
        for &k in keys {
            let (w, b) = bits(hash(k), f.mask);
            f.words[w] |= b;
        }
        f
    }

    /// False only if `key` (with [`hash`] `h`) is no key of the filter.
    #[inline(always)]
    pub fn may_contain(&self, h: u64) -> bool {
        let (w, b) = bits(h, self.mask);
        self.words[w] & b == b
    }
}

/// A rank table behind a filter of its keys: lookups and prefetches of strings the filter rules
/// out cost no memory access beyond the filter's.
pub(crate) struct Filtered<'a, R> {
    pub filter: &'a TokenFilter,
    pub ranks: &'a R,
}

impl<R: RankTable> RankTable for Filtered<'_, R> {
    #[inline(always)]
    fn prefetch_hashed(&self, key: u128, h: u64) {
        if self.filter.may_contain(h) {
            self.ranks.prefetch_hashed(key, h);
        }
    }
    #[inline(always)]
    fn may_hold(&self, h: u64) -> bool {
        self.filter.may_contain(h)
    }
    #[inline(always)]
    fn prefetch_held(&self, key: u128, h: u64) {
        self.ranks.prefetch_hashed(key, h);
    }
    #[inline(always)]
    fn prefetch_if(&self, key: u128, h: u64, held: bool) {
        self.ranks.prefetch_if(key, h, held);
    }
    #[inline(always)]
    fn rank_held(&self, key: u128, h: u64) -> Option<(u32, u64)> {
        self.ranks.rank_hashed(key, h)
    }
    #[inline(always)]
    fn rank_hashed(&self, key: u128, h: u64) -> Option<(u32, u64)> {
        if self.filter.may_contain(h) {
            self.ranks.rank_hashed(key, h)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::pack;
    use super::*;

    #[test]
    fn passes_every_key_and_few_others() {
        let keys: Vec<u128> = (0..5000u32).map(|i| pack(format!("t{i}").as_bytes())).collect();
        let f = TokenFilter::new(&keys);
        assert!(keys.iter().all(|&k| f.may_contain(hash(k))));
        let passed = (0..100_000u32).filter(|i| f.may_contain(hash(pack(format!("x{i}").as_bytes())))).count();
        assert!(passed < 5000, "{passed} of 100000 strings that are no key passed");
    }
}
