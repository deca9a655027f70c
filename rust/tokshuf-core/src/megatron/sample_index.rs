//! The sample index (`helpers.cpp::build_sample_idx`): row j = (position in the document index,
//! token offset) where sample j starts. Samples advance by `seq` tokens and each one reads `extra`
//! more, so neighbours overlap by `extra` tokens.

use rayon::prelude::*;

use super::array::{IndexArray, IndexView, Owned};
use crate::cancel::Cancel;
use crate::error::{Error, Result};

/// How many samples `build_sample_idx` makes, with its exact arithmetic: C++ integer division
/// (truncating toward zero) when dropping the last partial sample, otherwise
/// `ceil(float(tokens - extra) / seq)` in IEEE single precision.
pub fn num_samples(num_epochs: u64, tokens_per_epoch: u64, seq: u64, extra: u64, drop_last: bool) -> Result<u64> {
    if seq == 0 {
        return Err(Error::invalid("sequence_length must be positive, got 0"));
    }
    let tokens = num_epochs
        .checked_mul(tokens_per_epoch)
        .and_then(|t| i64::try_from(t).ok())
        .ok_or_else(|| Error::invalid("the token count of all epochs overflows int64"))?;
    let avail = tokens - extra as i64;
    let n = if drop_last { avail / seq as i64 } else { ((avail as f32) / (seq as f32)).ceil() as i64 };
    Ok(n.max(0) as u64)
}

/// Build the `[num_samples + 1, 2]` sample index.
///
/// `sizes` are the lengths of *all* sequences of the dataset (the document index holds ids into
/// it). The element type is int32 unless the document index is longer than `i32::MAX`, as in
/// Megatron.
pub fn build_sample_index(
    sizes: &[i32],
    document_index: IndexView<'_>,
    seq: u64,
    extra: u64,
    num_samples: u64,
    cancel: &Cancel,
) -> Result<IndexArray> {
    let lengths = if num_samples == 0 { Vec::new() } else { gather_lengths(sizes, document_index)? };
    build_sample_index_from_lengths(&lengths, document_index.len(), seq, extra, num_samples, cancel)
}

/// [`build_sample_index`] from the lengths of the document index's entries, in its order.
pub fn build_sample_index_from_lengths(
    lengths: &[i32],
    document_index_len: usize,
    seq: u64,
    extra: u64,
    num_samples: u64,
    cancel: &Cancel,
) -> Result<IndexArray> {
    let rows = usize::try_from(num_samples)
        .ok()
        .and_then(|n| n.checked_add(1))
        .and_then(|n| n.checked_mul(2))
        .ok_or_else(|| Error::invalid(format!("{num_samples} samples do not fit in memory")))?;
    if num_samples > 0 && lengths.is_empty() {
        return Err(Error::invalid(format!("{num_samples} samples requested from an empty document index")));
    }
    const WHAT: &str = "the sample index";
    let mut out = if document_index_len > i32::MAX as usize {
        Owned::I64(crate::alloc::try_with_capacity(rows, WHAT)?)
    } else {
        Owned::I32(crate::alloc::try_with_capacity(rows, WHAT)?)
    };
    walk(lengths, seq as i64, extra as i64, num_samples, cancel, |d, off| match &mut out {
        // Narrow only when every position and offset is ≤ i32::MAX (positions by the length check
        // above; offsets are within an int32 sequence length).
        Owned::I32(v) => v.extend_from_slice(&[d as i32, off as i32]),
        Owned::I64(v) => v.extend_from_slice(&[d as i64, off]),
        _ => unreachable!("the sample index is int32 or int64"),
    })?;
    Ok(IndexArray::pairs(out))
}

/// `sizes[document_index[d]]` for every position d, gathered in parallel (independent loads the
/// CPU overlaps, unlike the walk's).
fn gather_lengths(sizes: &[i32], doc: IndexView<'_>) -> Result<Vec<i32>> {
    const CHUNK: usize = 1 << 16;
    let mut lens = vec![0i32; doc.len()];
    crate::parallel::pool(None).install(|| {
        lens.par_chunks_mut(CHUNK).enumerate().try_for_each(|(c, out)| {
            for (k, o) in out.iter_mut().enumerate() {
                let d = c * CHUNK + k;
                let id = doc.get(d).unwrap_or(-1);
                *o =
                    usize::try_from(id).ok().and_then(|i| sizes.get(i)).copied().ok_or_else(|| {
                        Error::invalid(format!("document index entry {d} is {id}, not a sequence id"))
                    })?;
            }
            Ok::<(), Error>(())
        })
    })?;
    Ok(lens)
}

/// The C++ loop, with 64-bit arithmetic (identical wherever Megatron's int32 does not overflow).
fn walk(
    lens: &[i32],
    seq: i64,
    extra: i64,
    num_samples: u64,
    cancel: &Cancel,
    mut emit: impl FnMut(usize, i64),
) -> Result<()> {
    let last = lens.len().saturating_sub(1);
    let mut d = 0usize;
    let mut off = 0i64;
    emit(d, off);
    for j in 1..=num_samples {
        if j % (1 << 20) == 0 {
            cancel.check()?;
        }
        let mut remaining = seq + extra;
        while remaining != 0 {
            let doc_len = i64::from(lens[d]) - off;
            remaining -= doc_len;
            if remaining <= 0 {
                off += remaining + doc_len - extra;
                remaining = 0;
            } else {
                if d == last {
                    // Out of data: only reached by the padded last sample (no drop_last).
                    off = i64::from(lens[d]) - extra;
                    if off < 0 {
                        // Megatron's `assert sample_idx.min() >= 0` fails here too.
                        return Err(Error::invalid(
                            "the padded last sample would end inside an empty sequence (the last one in the \
                             shuffled document index); Megatron fails on this data too: drop the last partial \
                             sample or remove empty sequences",
                        ));
                    }
                    break;
                }
                d += 1;
                off = 0;
            }
        }
        emit(d, off);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(sizes: &[i32], doc: &[i32], seq: u64, extra: u64, epochs: u64, drop_last: bool) -> Vec<i64> {
        let tokens: u64 = doc.iter().map(|&d| sizes[d as usize] as u64).sum::<u64>() / epochs;
        let n = num_samples(epochs, tokens, seq, extra, drop_last).unwrap();
        build_sample_index(sizes, IndexView::I32(doc), seq, extra, n, &Cancel::new()).unwrap().view().to_vec()
    }

    #[test]
    fn vector_examples() {
        let s = [5, 3, 10, 1, 7];
        assert_eq!(build(&s, &[0, 1, 2, 3, 4], 4, 1, 1, true), [0, 0, 0, 4, 2, 0, 2, 4, 2, 8, 4, 1, 4, 5]);
        assert_eq!(build(&s, &[0, 1, 2, 3, 4], 4, 1, 1, false), [0, 0, 0, 4, 2, 0, 2, 4, 2, 8, 4, 1, 4, 5, 4, 6]);
        assert_eq!(build(&[10], &[0], 3, 0, 1, false), [0, 0, 0, 3, 0, 6, 0, 9, 0, 10]);
    }

    #[test]
    fn float32_ceil_is_reproduced() {
        // One 16,777,218-token sequence, seq 2, extra 1: float32 gives 8,388,608 (exact: 8,388,609).
        assert_eq!(num_samples(1, 16_777_218, 2, 1, false).unwrap(), 8_388_608);
        assert_eq!(num_samples(1, 16_777_218, 2, 1, true).unwrap(), 8_388_608);
        assert_eq!(num_samples(1, 0, 64, 1, true).unwrap(), 0);
        assert_eq!(num_samples(1, 0, 64, 1, false).unwrap(), 0);
    }

    #[test]
    fn corrupt_document_ids_are_errors() {
        let r = build_sample_index(&[4, 4], IndexView::I32(&[0, 7]), 4, 1, 1, &Cancel::new());
        assert!(r.unwrap_err().to_string().contains("not a sequence id"));
    }
}
