//! The document index (`GPTDataset._build_document_index`): the split's sequence ids repeated
//! once per epoch (epoch-major), shuffled in one call so epochs interleave; with a separate final
//! epoch, the first `E - 1` epochs and the last one are shuffled by two consecutive calls.

use super::array::{IndexArray, Owned};
use super::numpy_rng::RandomState;
use crate::cancel::Cancel;
use crate::error::{Error, Result};

/// Build the document index over sequence ids `[beg, end)` for `num_epochs` epochs.
///
/// The element type is int32 as in Megatron. Sequence ids ≥ 2^31 would wrap to negative ids in
/// Megatron (`astype(int32)`); here they switch the array to int64 instead.
pub fn build_document_index(
    beg: u64,
    end: u64,
    num_epochs: u64,
    separate_final_epoch: bool,
    rng: &mut RandomState,
    cancel: &Cancel,
) -> Result<IndexArray> {
    let per_epoch = end.saturating_sub(beg);
    let total = per_epoch
        .checked_mul(num_epochs)
        .and_then(|t| usize::try_from(t).ok())
        .ok_or_else(|| Error::invalid(format!("{num_epochs} epochs of {per_epoch} sequences do not fit in memory")))?;
    let first = if separate_final_epoch && num_epochs > 1 { total - per_epoch as usize } else { total };
    if end <= 1 << 31 {
        let mut v = Vec::with_capacity(total);
        for _ in 0..num_epochs {
            v.extend(beg as i32..end as i32);
        }
        shuffle_parts(&mut v, first, rng, cancel)?;
        Ok(IndexArray::from_owned(Owned::I32(v)))
    } else {
        let mut v = Vec::with_capacity(total);
        for _ in 0..num_epochs {
            v.extend(beg as i64..end as i64);
        }
        shuffle_parts(&mut v, first, rng, cancel)?;
        Ok(IndexArray::from_owned(Owned::I64(v)))
    }
}

fn shuffle_parts<T>(v: &mut [T], first: usize, rng: &mut RandomState, cancel: &Cancel) -> Result<()> {
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
        let one = build_document_index(0, 5, 1, false, &mut RandomState::new(1234), &c).unwrap();
        assert_eq!(one.view().to_vec(), [4, 0, 1, 2, 3]);
        let sep = build_document_index(0, 5, 3, true, &mut RandomState::new(1234), &c).unwrap();
        assert_eq!(sep.view().to_vec(), [2, 2, 4, 1, 0, 3, 4, 0, 1, 3, 0, 4, 3, 2, 1]);
        let joint = build_document_index(0, 5, 3, false, &mut RandomState::new(1234), &c).unwrap();
        assert_eq!(joint.view().to_vec(), [3, 1, 0, 2, 4, 2, 0, 2, 1, 4, 3, 4, 0, 1, 3]);
    }
}
