//! The merge list of a Hugging Face BPE as a flat table: `(left id, right id)` → `(priority,
//! merged id)`, one 16-byte slot per pair at most half full, so a lookup is one cache line and
//! the lookups a merge will need can be prefetched together.

const EMPTY: u64 = u64::MAX;

pub(crate) struct PairTable {
    /// `(key, value)`: key `left << 32 | right`, value `priority << 32 | merged`.
    slots: Vec<(u64, u64)>,
    mask: usize,
}

#[inline(always)]
fn key(left: u32, right: u32) -> u64 {
    u64::from(left) << 32 | u64::from(right)
}

#[inline(always)]
fn home(key: u64, mask: usize) -> usize {
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & mask
}

impl PairTable {
    /// The pairs of `list` (keys `left << 32 | right`, each once; no id is `u32::MAX`).
    pub fn new(list: impl ExactSizeIterator<Item = (u64, u64)>) -> PairTable {
        let n = (list.len() * 2).max(16).next_power_of_two();
        let mut t = PairTable { slots: vec![(EMPTY, 0); n], mask: n - 1 };
        for (k, v) in list {
            debug_assert_ne!(k, EMPTY);
            let mut i = home(k, t.mask);
            while t.slots[i].0 != EMPTY {
                i = (i + 1) & t.mask;
            }
            t.slots[i] = (k, v);
        }
        t
    }

    #[inline(always)]
    pub fn prefetch(&self, left: u32, right: u32) {
        if let Some(s) = self.slots.get(home(key(left, right), self.mask)) {
            crate::table::prefetch(s);
        }
    }

    /// `priority << 32 | merged` of the pair, if it merges.
    #[inline(always)]
    pub fn get(&self, left: u32, right: u32) -> Option<u64> {
        let k = key(left, right);
        let mut i = home(k, self.mask);
        loop {
            let (sk, v) = self.slots[i];
            if sk == k {
                return Some(v);
            }
            if sk == EMPTY {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_and_no_other() {
        let list: Vec<(u64, u64)> =
            (0..300u32).map(|l| (key(l, l * 7 % 301), u64::from(l) << 32 | u64::from(l + 1000))).collect();
        let t = PairTable::new(list.into_iter());
        for l in 0..300u32 {
            assert_eq!(t.get(l, l * 7 % 301), Some(u64::from(l) << 32 | u64::from(l + 1000)));
            assert_eq!(t.get(l, l * 7 % 301 + 1), None);
            assert_eq!(t.get(l + 1000, l), None);
        }
    }
}
