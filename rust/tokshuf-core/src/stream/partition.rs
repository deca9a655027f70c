//! Exact integer partitions: documents into logical shards, logical shards over global workers.
//!
//! Both are contiguous blocks `[floor(i·n/k), floor((i+1)·n/k))`, computed in 128-bit integers,
//! so every document belongs to exactly one shard and every shard to exactly one worker, for any
//! sizes (no divisibility needed; blocks differ by at most one element).

use std::ops::Range;

#[inline]
fn cut(i: u64, n: u64, k: u64) -> u64 {
    ((u128::from(i) * u128::from(n)) / u128::from(k)) as u64
}

/// The documents of logical shard `shard` when `n_docs` documents are split into `n_shards`.
pub fn shard_docs(n_docs: u64, n_shards: u32, shard: u32) -> Range<u64> {
    let k = u64::from(n_shards.max(1));
    cut(u64::from(shard), n_docs, k)..cut(u64::from(shard) + 1, n_docs, k)
}

/// The logical shards owned by global worker `worker` of `n_workers`.
pub fn worker_shards(n_shards: u32, n_workers: u32, worker: u32) -> Range<u32> {
    // Shards over workers is the same partition as documents over shards.
    let r = shard_docs(u64::from(n_shards), n_workers, worker);
    r.start as u32..r.end as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Blocks `0..k` of a partition of `0..n`: each follows the previous one and holds at most
    /// one more than `n / k`; together they cover `0..n`.
    fn check_partition(n: u64, k: u32, block: impl Fn(u32) -> Range<u64>) -> Result<(), TestCaseError> {
        let mut next = 0;
        for b in 0..k {
            let r = block(b);
            prop_assert_eq!(r.start, next);
            prop_assert!(r.end - r.start <= n / u64::from(k) + 1);
            next = r.end;
        }
        prop_assert_eq!(next, n);
        Ok(())
    }

    proptest! {
        #[test]
        fn documents_are_owned_exactly_once(n_docs in 0u64..500, n_shards in 1u32..80) {
            check_partition(n_docs, n_shards, |s| shard_docs(n_docs, n_shards, s))?;
        }

        #[test]
        fn shards_are_owned_exactly_once(n_shards in 1u32..200, n_workers in 1u32..40) {
            let block = |w| {
                let r = worker_shards(n_shards, n_workers, w);
                u64::from(r.start)..u64::from(r.end)
            };
            check_partition(u64::from(n_shards), n_workers, block)?;
        }
    }

    #[test]
    fn huge_counts_do_not_overflow() {
        let n = u64::MAX - 3;
        assert_eq!(shard_docs(n, 7, 6).end, n);
    }
}
