//! Optimized Best-Fit Decreasing packing (OLMo's `NumpyPackedFSLDataset`, after "Fewer
//! Truncations Improve Language Modeling", arXiv 2404.10830).
//!
//! Documents are sorted longest first (stably: equal lengths keep their order, where OLMo's
//! unstable `argsort` leaves ties machine-dependent), and each goes into the open bin with the
//! *least* free space that still fits it, the oldest such bin first; when none fits, a new bin
//! opens. A segment tree over free-space values 1..=S finds that bin in O(log S). The
//! bins, as lists of document lengths, are exactly OLMo's.

use std::collections::VecDeque;

use rayon::prelude::*;

use super::{positive, Span};
use crate::alloc::try_with_capacity;
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::parallel;

/// The packing of one or more groups of documents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packing {
    /// Documents in packing order (per group, longest first); `doc_ids` index this.
    pub docs: Vec<Span>,
    /// Instance `i` holds `doc_ids[offsets[i]..offsets[i + 1]]`; `len = instances + 1`.
    pub offsets: Vec<u64>,
    /// Document ids (into `docs`), instance by instance, in placement order.
    pub doc_ids: Vec<u64>,
}

/// Max-segment tree over leaves `0..n` (leaf `c - 1` is free space `c`).
struct Tree {
    size: usize,
    w: Vec<u64>,
}

impl Tree {
    /// A tree over `n` leaves, all zero, or an error when the machine cannot hold it (`n` is a
    /// user's sequence length: never an abort).
    fn new(n: usize) -> Result<Self> {
        let what = format!("the packing's free-space tree for sequence_length {n}");
        let leaves = n.checked_next_power_of_two().and_then(|size| size.checked_mul(2).map(|all| (size, all)));
        let (size, all) =
            leaves.ok_or_else(|| Error::invalid(format!("{what} cannot be sized: sequence_length too large")))?;
        let mut w = try_with_capacity(all, &what)?;
        w.resize(all, 0);
        Ok(Self { size, w })
    }

    fn set(&mut self, leaf: usize, weight: u64) {
        let mut i = leaf + self.size;
        self.w[i] = weight;
        while i > 1 {
            i /= 2;
            self.w[i] = self.w[2 * i].max(self.w[2 * i + 1]);
        }
    }

    /// The leftmost leaf with weight >= `x` (the caller guarantees one exists).
    fn leftmost_at_least(&self, x: u64) -> usize {
        let mut i = 1;
        while i < self.size {
            i = if self.w[2 * i] >= x { 2 * i } else { 2 * i + 1 };
        }
        i - self.size
    }
}

/// Pack the documents of one group into bins of `seq_len` tokens.
///
/// Every document must be non-empty and at most `seq_len` long (see [`super::limit_spans`]).
/// Returns the documents sorted, each bin's first document id and the ids bin by bin.
pub fn pack(docs: &[Span], seq_len: u64) -> Result<Packing> {
    positive("sequence_length", seq_len)?;
    if let Some(d) = docs.iter().find(|d| d[1] <= d[0] || d[1] - d[0] > seq_len) {
        return Err(Error::invalid(format!(
            "cannot pack document {}..{} into instances of {seq_len} tokens (apply a long_doc_strategy first)",
            d[0], d[1]
        )));
    }
    let s = usize::try_from(seq_len).map_err(|_| Error::invalid("sequence_length too large"))?;
    let mut order: Vec<usize> = (0..docs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(docs[i][1] - docs[i][0]));
    let sorted: Vec<Span> = order.iter().map(|&i| docs[i]).collect();

    // Both tables grow with seq_len, not with the data: reserve them before touching either.
    let mut by_space: Vec<VecDeque<u64>> =
        try_with_capacity(s, &format!("the packing's free-space lists for sequence_length {seq_len}"))?;
    let mut tree = Tree::new(s)?;
    by_space.resize_with(s, VecDeque::new);
    tree.set(s - 1, seq_len); // free space S: "open a new bin", always available
    let mut bin_of = Vec::with_capacity(sorted.len());
    let mut bins = 0u64;
    for d in &sorted {
        let len = d[1] - d[0];
        let cap = tree.leftmost_at_least(len) + 1;
        let bin = if cap == s {
            bins += 1;
            bins - 1
        } else {
            let q = &mut by_space[cap - 1];
            let b = q.pop_front().expect("the tree only points at non-empty free-space lists");
            if q.is_empty() {
                tree.set(cap - 1, 0);
            }
            b
        };
        bin_of.push(bin);
        let left = cap - len as usize;
        if left > 0 {
            let q = &mut by_space[left - 1];
            if q.is_empty() {
                tree.set(left - 1, left as u64);
            }
            q.push_back(bin);
        }
    }

    // Group document ids by bin (counting sort keeps placement order inside a bin).
    let mut offsets = vec![0u64; bins as usize + 1];
    for &b in &bin_of {
        offsets[b as usize + 1] += 1;
    }
    for i in 1..offsets.len() {
        offsets[i] += offsets[i - 1];
    }
    let mut next = offsets.clone();
    let mut doc_ids = vec![0u64; sorted.len()];
    for (id, &b) in bin_of.iter().enumerate() {
        doc_ids[next[b as usize] as usize] = id as u64;
        next[b as usize] += 1;
    }
    Ok(Packing { docs: sorted, offsets, doc_ids })
}

/// Pack several independent groups (OLMo: one per source file or `source_group_size` files) in
/// parallel, concatenating the results in group order.
pub fn pack_groups(groups: &[Vec<Span>], seq_len: u64, threads: Option<usize>, cancel: &Cancel) -> Result<Packing> {
    let packed: Vec<Packing> = parallel::pool(threads).install(|| {
        groups
            .par_iter()
            .map(|g| {
                cancel.check()?;
                pack(g, seq_len)
            })
            .collect::<Result<_>>()
    })?;
    let mut out = Packing { offsets: vec![0], ..Default::default() };
    for p in packed {
        let id_base = out.docs.len() as u64;
        let off_base = *out.offsets.last().expect("starts with 0");
        out.docs.extend_from_slice(&p.docs);
        out.offsets.extend(p.offsets[1..].iter().map(|o| o + off_base));
        out.doc_ids.extend(p.doc_ids.iter().map(|d| d + id_base));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spans(lens: &[u64]) -> Vec<Span> {
        let mut s = 0;
        lens.iter()
            .map(|&l| {
                s += l;
                [s - l, s]
            })
            .collect()
    }

    #[test]
    fn a_sequence_length_no_machine_can_pack_is_an_error_not_an_abort() {
        for seq_len in [1 << 50, u64::MAX / 2, u64::MAX] {
            let err = pack(&spans(&[3, 2]), seq_len).unwrap_err().to_string();
            assert!(err.contains("sequence_length"), "{err}");
        }
    }

    fn bins(p: &Packing) -> Vec<Vec<u64>> {
        p.offsets
            .windows(2)
            .map(|w| {
                let ids = &p.doc_ids[w[0] as usize..w[1] as usize];
                ids.iter().map(|&d| p.docs[d as usize][1] - p.docs[d as usize][0]).collect()
            })
            .collect()
    }

    /// Best fit decreasing by brute force: the tightest open bin, oldest first.
    fn brute(lens: &[u64], cap: u64) -> Vec<Vec<u64>> {
        let mut sorted = lens.to_vec();
        sorted.sort_by(|a, b| b.cmp(a));
        let mut out: Vec<Vec<u64>> = Vec::new();
        let mut free: Vec<u64> = Vec::new();
        // Oldest first among equal free space: the bin that reached that free space first.
        let mut since: Vec<u64> = Vec::new();
        for (t, &l) in sorted.iter().enumerate() {
            let best = (0..out.len()).filter(|&b| free[b] >= l).min_by_key(|&b| (free[b], since[b]));
            let b = best.unwrap_or_else(|| {
                out.push(Vec::new());
                free.push(cap);
                since.push(0);
                out.len() - 1
            });
            out[b].push(l);
            free[b] -= l;
            since[b] = t as u64;
        }
        out
    }

    #[test]
    fn small_example() {
        let p = pack(&spans(&[3, 8, 5, 1, 4]), 8).unwrap();
        assert_eq!(bins(&p), vec![vec![8], vec![5, 3], vec![4, 1]]);
    }

    proptest! {
        #[test]
        fn valid_and_equal_to_brute_force(lens in prop::collection::vec(1u64..=16, 0..200), cap in 16u64..40) {
            let p = pack(&spans(&lens), cap).unwrap();
            let b = bins(&p);
            prop_assert!(b.iter().all(|x| x.iter().sum::<u64>() <= cap && !x.is_empty()));
            let mut ids = p.doc_ids.clone();
            ids.sort_unstable();
            prop_assert_eq!(ids, (0..lens.len() as u64).collect::<Vec<_>>());
            prop_assert_eq!(b, brute(&lens, cap));
        }
    }

    #[test]
    fn groups_concatenate() {
        let g = vec![spans(&[4, 4]), vec![[100, 103]]];
        let p = pack_groups(&g, 8, Some(2), &Cancel::new()).unwrap();
        assert_eq!((p.offsets, p.doc_ids, p.docs[2]), (vec![0, 2, 3], vec![0, 1, 2], [100, 103]));
        assert!(pack(&[[0, 9]], 8).is_err());
    }
}
