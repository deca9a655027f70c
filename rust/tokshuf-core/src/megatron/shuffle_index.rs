//! The shuffle index (`GPTDataset._build_shuffle_index`): the order in which samples are served.
//! With a separate final epoch, the samples of the first `E - 1` epochs are shuffled among
//! themselves and come first, then the final epoch's.

use super::array::{ElemType, IndexArray, Owned};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::rng::RandomState;

/// `shuffle(arange(first))` then, if `first < total`, `shuffle(arange(first, total))`.
/// uint32 unless `total ≥ 2^32 - 2`, then int64, as in Megatron.
pub fn build_shuffle_index(first: u64, total: u64, rng: &mut RandomState, cancel: &Cancel) -> Result<IndexArray> {
    if first > total {
        return Err(Error::invalid(format!("{first} samples before the final epoch exceed the {total} built")));
    }
    usize::try_from(total).map_err(|_| Error::invalid(format!("{total} samples do not fit in memory")))?;
    Ok(IndexArray::from_owned(if total >= u64::from(u32::MAX) - 1 {
        Owned::I64(shuffled(total as usize, 0..total as i64, first as usize, rng, cancel)?)
    } else {
        Owned::U32(shuffled(total as usize, 0..total as u32, first as usize, rng, cancel)?)
    }))
}

/// The `len` `values` with the first `first` shuffled among themselves, then the rest.
fn shuffled<T>(
    len: usize,
    values: impl Iterator<Item = T>,
    first: usize,
    rng: &mut RandomState,
    cancel: &Cancel,
) -> Result<Vec<T>> {
    let mut v: Vec<T> = crate::alloc::try_with_capacity(len, "the shuffle index")?;
    v.extend(values);
    super::document_index::shuffle_parts(&mut v, first, rng, cancel)?;
    Ok(v)
}

/// Seed 000's variant: one epoch's shuffle index repeated `num_samples / len + 1` times, so every
/// epoch serves the samples in the same order (`len ≥ num_samples`).
pub fn repeat_shuffle_index(one_epoch: &IndexArray, num_samples: Option<u64>) -> Result<IndexArray> {
    let m = one_epoch.len() as u64;
    let Some(n) = num_samples else { return Ok(one_epoch.clone()) };
    if m == 0 {
        return Err(Error::invalid(format!(
            "{n} samples were requested but one epoch of the split holds no complete sample"
        )));
    }
    let copies = n / m + 1;
    let total = usize::try_from(copies * m).map_err(|_| Error::invalid("the repeated shuffle index overflows"))?;
    // Values are below `m`, so the one-epoch element type still holds them.
    let v = one_epoch.view().to_vec();
    let tiled = v.iter().copied().cycle().take(total);
    Ok(IndexArray::from_owned(match one_epoch.elem() {
        ElemType::I64 => Owned::I64(tiled.collect()),
        _ => Owned::U32(tiled.map(|x| x as u32).collect()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanotron_tv1_shuffle_indices() {
        let c = Cancel::new();
        // After the document shuffle, the same RandomState continues; here only the shape of the
        // two-part shuffle is checked: each part is a permutation of its own range.
        let s = build_shuffle_index(11, 17, &mut RandomState::new(5), &c).unwrap().view().to_vec();
        let (mut a, mut b) = (s[..11].to_vec(), s[11..].to_vec());
        a.sort();
        b.sort();
        assert_eq!((a, b), ((0..11).collect(), (11..17).collect()));
        assert!(build_shuffle_index(3, 2, &mut RandomState::new(5), &c).is_err());
    }

    #[test]
    fn repeats_cover_the_request() {
        let one = IndexArray::from_owned(Owned::U32(vec![2, 0, 1]));
        let r = repeat_shuffle_index(&one, Some(7)).unwrap();
        assert_eq!(r.view().to_vec(), [2, 0, 1, 2, 0, 1, 2, 0, 1]);
        assert_eq!(repeat_shuffle_index(&one, Some(2)).unwrap().len(), 3);
        assert_eq!(repeat_shuffle_index(&one, None).unwrap().len(), 3);
        let empty = IndexArray::from_owned(Owned::U32(vec![]));
        assert!(repeat_shuffle_index(&empty, Some(1)).is_err());
    }
}
