//! The document index (`GPTDataset._build_document_index`): the split's sequence ids repeated
//! once per epoch (epoch-major), shuffled in one call so epochs interleave; with a separate final
//! epoch, the first `E - 1` epochs and the last one are shuffled by two consecutive calls.

use super::array::{IndexArray, Owned};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::rng::RandomState;

/// A document index and, aligned with it, the length of each entry's sequence.
#[derive(Debug, Clone)]
pub struct DocumentIndex {
    /// The document index (int32, or int64 for sequence ids ≥ 2^31).
    pub index: IndexArray,
    /// `sizes[index[d]]` for every position d (what the sample-index walk reads).
    pub lengths: Vec<i32>,
}

/// Build the document index over sequence ids `[beg, beg + lengths.len())`, whose lengths are
/// `lengths`, for `num_epochs` epochs.
///
/// The element type is int32 as in Megatron. Sequence ids ≥ 2^31 would wrap to negative ids in
/// Megatron (`astype(int32)`); here they switch the array to int64 instead.
///
/// Each id is shuffled together with its length: the swaps touch the same cache lines either way,
/// and the sample index then reads lengths in order instead of gathering them at random.
pub fn build_document_index(
    lens: &[i32],
    beg: u64,
    num_epochs: u64,
    separate_final_epoch: bool,
    rng: &mut RandomState,
    cancel: &Cancel,
) -> Result<DocumentIndex> {
    let per_epoch = lens.len() as u64;
    let end = beg + per_epoch;
    let total = per_epoch
        .checked_mul(num_epochs)
        .and_then(|t| usize::try_from(t).ok())
        .ok_or_else(|| Error::invalid(format!("{num_epochs} epochs of {per_epoch} sequences do not fit in memory")))?;
    let first = if separate_final_epoch && num_epochs > 1 { total - per_epoch as usize } else { total };
    if end <= 1 << 31 {
        let mut v: Vec<(i32, i32)> = crate::alloc::try_with_capacity(total, "the document index")?;
        for _ in 0..num_epochs {
            v.extend((beg..end).map(|i| i as i32).zip(lens.iter().copied()));
        }
        shuffle_parts(&mut v, first, rng, cancel)?;
        let (ids, lengths) = v.into_iter().unzip();
        Ok(DocumentIndex { index: IndexArray::from_owned(Owned::I32(ids)), lengths })
    } else {
        let mut v: Vec<(i64, i32)> = crate::alloc::try_with_capacity(total, "the document index")?;
        for _ in 0..num_epochs {
            v.extend((beg..end).map(|i| i as i64).zip(lens.iter().copied()));
        }
        shuffle_parts(&mut v, first, rng, cancel)?;
        let (ids, lengths) = v.into_iter().unzip();
        Ok(DocumentIndex { index: IndexArray::from_owned(Owned::I64(ids)), lengths })
    }
}

/// Shuffle `v[..first]`, then (if not empty) `v[first..]`: Megatron's two consecutive calls.
pub(super) fn shuffle_parts<T>(v: &mut [T], first: usize, rng: &mut RandomState, cancel: &Cancel) -> Result<()> {
    let (a, b) = v.split_at_mut(first);
    rng.shuffle_cancellable(a, cancel)?;
    if !b.is_empty() {
        rng.shuffle_cancellable(b, cancel)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanotron_tv1_document_indices() {
        // doc lengths [5,3,7,2,6], seed 1234 (nanotron spec TV1).
        let c = Cancel::new();
        let sizes = [5, 3, 7, 2, 6];
        let build = |epochs, sep| build_document_index(&sizes, 0, epochs, sep, &mut RandomState::new(1234), &c);
        let one = build(1, false).unwrap();
        assert_eq!(one.index.view().to_vec(), [4, 0, 1, 2, 3]);
        assert_eq!(one.lengths, [6, 5, 3, 7, 2]);
        let sep = build(3, true).unwrap();
        assert_eq!(sep.index.view().to_vec(), [2, 2, 4, 1, 0, 3, 4, 0, 1, 3, 0, 4, 3, 2, 1]);
        let joint = build(3, false).unwrap();
        assert_eq!(joint.index.view().to_vec(), [3, 1, 0, 2, 4, 2, 0, 2, 1, 4, 3, 4, 0, 1, 3]);
        let lens: Vec<i32> = joint.index.view().to_vec().iter().map(|&i| sizes[i as usize]).collect();
        assert_eq!(joint.lengths, lens);
    }

    #[test]
    fn ids_past_i32_switch_to_int64() {
        // Megatron's astype(int32) would wrap these to negative ids.
        let beg = 1u64 << 31;
        let d = build_document_index(&[3, 4, 5], beg - 1, 2, false, &mut RandomState::new(0), &Cancel::new()).unwrap();
        assert_eq!(d.index.elem(), crate::megatron::ElemType::I64);
        let mut ids = d.index.view().to_vec();
        ids.sort_unstable();
        let b = beg as i64;
        assert_eq!(ids, [b - 1, b - 1, b, b, b + 1, b + 1]);
        let narrow = build_document_index(&[3], beg - 1, 1, false, &mut RandomState::new(0), &Cancel::new()).unwrap();
        assert_eq!(narrow.index.elem(), crate::megatron::ElemType::I32);
    }
}
