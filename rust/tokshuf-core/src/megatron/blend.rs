//! Blending (`helpers.cpp::build_blending_indices` / `build_exhaustive_blending_indices` and the
//! builder's per-dataset sizes): which dataset serves blended sample s, and which of its samples.
//! Greedy and deterministic (no RNG): pick the dataset furthest behind its share.

use super::array::{IndexArray, Owned};
use crate::cancel::Cancel;
use crate::error::{Error, Result};

/// Megatron stores dataset ids as int16 and asserts fewer than this many datasets.
pub const MAX_DATASETS: usize = 32767;

/// The two blending arrays: `dataset_index` (int16) and `dataset_sample_index` (int64).
#[derive(Debug, Clone)]
pub struct Blend {
    /// Which dataset serves each blended sample.
    pub dataset_index: IndexArray,
    /// Which sample of that dataset.
    pub dataset_sample_index: IndexArray,
}

fn check_count(n: usize) -> Result<()> {
    if n == 0 || n >= MAX_DATASETS {
        return Err(Error::invalid(format!("a blend needs 1 to {} datasets, got {n}", MAX_DATASETS - 1)));
    }
    Ok(())
}

fn finish(index: Vec<i16>, sample: Vec<i64>) -> Blend {
    Blend {
        dataset_index: IndexArray::from_owned(Owned::I16(index)),
        dataset_sample_index: IndexArray::from_owned(Owned::I64(sample)),
    }
}

/// `build_blending_indices(weights, size)`: for each s, the first dataset maximising
/// `weights[d] * max(s, 1) - count[d]` (float64, strict `>`).
///
/// `weights` should be normalized; a zero weight never wins (a tie at zero error goes to a
/// positive-weight dataset), which Megatron leaves undefined by asserting positive weights.
pub fn build_blending_indices(weights: &[f64], size: u64, cancel: &Cancel) -> Result<Blend> {
    check_count(weights.len())?;
    let size =
        usize::try_from(size).map_err(|_| Error::invalid(format!("blend size {size} does not fit in memory")))?;
    let mut counts = vec![0u64; weights.len()];
    let mut index = crate::alloc::try_with_capacity(size, "the blend's dataset index")?;
    let mut sample = crate::alloc::try_with_capacity(size, "the blend's sample index")?;
    let active: Vec<usize> = (0..weights.len()).filter(|&d| weights[d] > 0.0).collect();
    if active.is_empty() {
        return Err(Error::invalid("every blend weight is zero"));
    }
    for s in 0..size {
        if s % (1 << 20) == 0 {
            cancel.check()?;
        }
        let d = active[furthest_behind(&active, weights, &counts, s as u64)];
        index.push(d as i16);
        sample.push(counts[d] as i64);
        counts[d] += 1;
    }
    Ok(finish(index, sample))
}

/// The position in `candidates` of the first dataset furthest behind its share at blended sample
/// `s`: the largest `weights[d] * max(s, 1) - counts[d]` (float64, strict `>`).
fn furthest_behind(candidates: &[usize], weights: &[f64], counts: &[u64], s: u64) -> usize {
    let x = (s as f64).max(1.0);
    let behind = |d: usize| weights[d] * x - counts[d] as f64;
    let (mut best, mut best_err) = (0, behind(candidates[0]));
    for (at, &d) in candidates.iter().enumerate().skip(1) {
        let err = behind(d);
        if err > best_err {
            (best, best_err) = (at, err);
        }
    }
    best
}

/// `build_exhaustive_blending_indices(sizes)`: the same greedy rule with weights
/// `sizes / total`, over the datasets not yet exhausted, until every dataset has given exactly
/// `sizes[d]` samples. Empty datasets take no part (Megatron would pick them and never finish).
pub fn build_exhaustive_blending_indices(sizes: &[u64], cancel: &Cancel) -> Result<Blend> {
    check_count(sizes.len())?;
    let total: u64 = sizes.iter().sum();
    let n = usize::try_from(total).map_err(|_| Error::invalid(format!("blend size {total} does not fit in memory")))?;
    let weights: Vec<f64> = sizes.iter().map(|&s| s as f64 / total as f64).collect();
    let mut unspent: Vec<usize> = (0..sizes.len()).filter(|&d| sizes[d] > 0).collect();
    let mut counts = vec![0u64; sizes.len()];
    let mut index = crate::alloc::try_with_capacity(n, "the blend's dataset index")?;
    let mut sample = crate::alloc::try_with_capacity(n, "the blend's sample index")?;
    let mut s = 0u64;
    while !unspent.is_empty() {
        if s.is_multiple_of(1 << 20) {
            cancel.check()?;
        }
        let at = furthest_behind(&unspent, &weights, &counts, s);
        let d = unspent[at];
        index.push(d as i16);
        sample.push(counts[d] as i64);
        counts[d] += 1;
        if counts[d] == sizes[d] {
            unspent.remove(at);
        }
        s += 1;
    }
    Ok(finish(index, sample))
}

/// `_get_size_per_split_per_dataset`: `ceil(ceil(n * w) * (1 + surplus))` per dataset and split
/// (`None` where the split's count is `None`).
pub fn size_per_split_per_dataset(weights: &[f64], sizes: &[Option<u64>; 3], surplus: f64) -> Vec<[Option<u64>; 3]> {
    weights
        .iter()
        .map(|&w| sizes.map(|n| n.map(|n| (((n as f64 * w).ceil()) * (1.0 + surplus)).ceil() as u64)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_examples() {
        let c = Cancel::new();
        let b = build_blending_indices(&[0.5, 0.3, 0.2], 20, &c).unwrap();
        assert_eq!(b.dataset_index.view().to_vec(), [0, 1, 2, 0, 1, 0, 2, 0, 1, 0, 0, 1, 2, 0, 1, 0, 2, 0, 1, 0]);
        let e = build_exhaustive_blending_indices(&[3, 5, 2], &c).unwrap();
        assert_eq!(e.dataset_index.view().to_vec(), [1, 0, 2, 1, 0, 1, 2, 1, 0, 1]);
        assert_eq!(e.dataset_sample_index.view().to_vec(), [0, 0, 0, 1, 1, 2, 1, 3, 2, 4]);
    }

    #[test]
    fn zero_weights_and_empty_datasets_never_serve() {
        let c = Cancel::new();
        // With [0, .5, .5] Megatron's rule would tie at zero error at s = 2 and pick dataset 0.
        let b = build_blending_indices(&[0.0, 0.5, 0.5], 50, &c).unwrap();
        assert!(b.dataset_index.view().to_vec().iter().all(|&d| d != 0));
        let e = build_exhaustive_blending_indices(&[0, 2, 1], &c).unwrap();
        assert_eq!(e.dataset_index.len(), 3);
        assert!(e.dataset_index.view().to_vec().iter().all(|&d| d != 0));
    }

    #[test]
    fn sizes_with_surplus() {
        let s = size_per_split_per_dataset(&[0.5, 0.3, 0.2], &[Some(1000), Some(100), None], 0.005);
        assert_eq!(s, [[Some(503), Some(51), None], [Some(302), Some(31), None], [Some(201), Some(21), None]]);
        // 0.7 * 7 = 4.8999... → 5; 0.3 * 123457 → 37038.
        assert_eq!(size_per_split_per_dataset(&[0.7], &[Some(7), None, None], 0.0)[0][0], Some(5));
        assert_eq!(size_per_split_per_dataset(&[0.3], &[Some(123_457), None, None], 0.0)[0][0], Some(37038));
    }
}
