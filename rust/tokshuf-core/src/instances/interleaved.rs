//! Interleaved documents (OLMo's `NumpyInterleavedFSLDataset`): the padded dataset's
//! one-document instances are permuted with the seed, and every `docs_per_instance` consecutive
//! ones form an instance whose documents are cut into chunks and interleaved (the reader does the
//! token work). Instances from exempt files pass through un-interleaved, first.

use super::positive;
use crate::error::{Error, Result};
use crate::rng::{NumpyGenerator, SeedSequence};

/// The plan of an interleaved dataset over `num_base` padded instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterleavePlan {
    /// Base instances served as they are (from exempt files), ascending; instances `0..exempt.len()`.
    pub exempt: Vec<u64>,
    /// Permuted interleavable base instances; instance `exempt.len() + j` interleaves
    /// `order[j * k..(j + 1) * k]`. A remainder shorter than `k` is unused.
    pub order: Vec<u64>,
    /// Documents per interleaved instance (`k`).
    pub docs_per_instance: u64,
}

/// Build the plan: `exempt[i]` says whether base instance `i` comes from an exempt file. The
/// permutation is numpy's `default_rng(seed).permutation(interleavable_ids)`, as OLMo's (`seed`
/// holds the integer seed's entropy words, so seeds of any size give numpy's permutation).
pub fn plan(exempt: &[bool], seq_len: u64, docs_per_instance: u64, seed: &SeedSequence) -> Result<InterleavePlan> {
    positive("docs_per_instance", docs_per_instance)?;
    if !seq_len.is_multiple_of(docs_per_instance) {
        return Err(Error::invalid(format!(
            "sequence_length ({seq_len}) must be a multiple of docs_per_instance ({docs_per_instance})"
        )));
    }
    let (mut ex, mut order) = (Vec::new(), Vec::new());
    for (i, &e) in exempt.iter().enumerate() {
        if e { &mut ex } else { &mut order }.push(i as u64);
    }
    NumpyGenerator::from_seed_sequence(seed).shuffle(&mut order);
    Ok(InterleavePlan { exempt: ex, order, docs_per_instance })
}

/// Interleave documents: drop special tokens from each, split each into `chunks` nearly equal
/// parts (`torch.tensor_split`: the first `len % chunks` parts one longer) and emit part 0 of
/// every document, then part 1, and so on.
pub fn interleave<T: Copy>(docs: &[Vec<T>], chunks: usize, out: &mut Vec<T>) {
    let bounds: Vec<Vec<usize>> = docs
        .iter()
        .map(|d| {
            let (q, r) = (d.len() / chunks, d.len() % chunks);
            (0..=chunks).map(|c| c * q + c.min(r)).collect()
        })
        .collect();
    for c in 0..chunks {
        for (d, b) in docs.iter().zip(&bounds) {
            out.extend_from_slice(&d[b[c]..b[c + 1]]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_split_interleaving() {
        let docs = vec![vec![1, 2, 3, 4, 5], vec![10, 11], vec![]];
        let mut out = Vec::new();
        interleave(&docs, 2, &mut out);
        // [1,2,3][4,5] and [10][11]
        assert_eq!(out, [1, 2, 3, 10, 4, 5, 11]);
        out.clear();
        interleave(&docs, 3, &mut out);
        // [1,2][3,4][5] and [10][11][]
        assert_eq!(out, [1, 2, 10, 3, 4, 11, 5]);
    }

    #[test]
    fn plan_splits_exempt_and_permutes_the_rest() {
        let ex = [false, true, false, false, true, false];
        let seed = SeedSequence::new(&[0]);
        let p = plan(&ex, 8, 2, &seed).unwrap();
        assert_eq!(p.exempt, [1, 4]);
        let mut o = p.order.clone();
        o.sort_unstable();
        assert_eq!(o, [0, 2, 3, 5]);
        assert!(plan(&ex, 9, 2, &seed).is_err());
    }
}
