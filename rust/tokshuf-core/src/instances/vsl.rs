//! Dataset decomposition for variable sequence length training (OLMo's `NumpyVSLDataset`, after
//! arXiv 2405.13226): each document is cut into pieces whose lengths are its binary
//! decomposition, largest first, capped at `max` (larger powers become several `max` pieces);
//! the cut stops at the first piece shorter than `min`, whose tokens (and the rest) are dropped.
//! Every piece is one instance, so no instance crosses a document boundary.

use super::Span;
use crate::error::{Error, Result};

/// Check `min`/`max` and return the bucket lengths `min, 2 min, ..., max`.
pub fn bucket_lengths(min: u64, max: u64) -> Result<Vec<u64>> {
    for (name, v) in [("min_sequence_length", min), ("max_sequence_length", max)] {
        if !v.is_power_of_two() {
            return Err(Error::invalid(format!("{name} must be a power of 2, got {v}")));
        }
    }
    if min > max {
        return Err(Error::invalid(format!("min_sequence_length ({min}) exceeds max_sequence_length ({max})")));
    }
    Ok(std::iter::successors(Some(min), |&l| (l < max).then_some(l * 2)).collect())
}

/// The pieces of every document, in document order (OLMo's `bucket_documents` with
/// `capped_powers_of_2`).
pub fn decompose(docs: &[Span], min: u64, max: u64) -> Result<Vec<Span>> {
    bucket_lengths(min, max)?;
    let mut out = Vec::new();
    for &[s, e] in docs {
        let n = e.saturating_sub(s);
        let mut at = s;
        for _ in 0..n / max {
            out.push([at, at + max]);
            at += max;
        }
        // The remainder's set bits, largest first; the first one below `min` ends the cut.
        let rest = n % max;
        let mut bit = max >> 1;
        while bit >= min {
            if rest & bit != 0 {
                out.push([at, at + bit]);
                at += bit;
            }
            bit >>= 1;
        }
    }
    Ok(out)
}

/// Instance ids of each bucket (ascending), bucket `k` holding pieces of length `min << k`.
pub fn buckets(pieces: &[Span], min: u64, max: u64) -> Result<Vec<Vec<u64>>> {
    let lengths = bucket_lengths(min, max)?;
    let mut out = vec![Vec::new(); lengths.len()];
    for (i, &[s, e]) in pieces.iter().enumerate() {
        let len = e - s;
        let k = lengths.iter().position(|&l| l == len).ok_or_else(|| {
            Error::invalid(format!("piece {i} has length {len}, which is not a bucket length ({lengths:?})"))
        })?;
        out[k].push(i as u64);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capped_powers(x: u64, cap: u64) -> Vec<u64> {
        // OLMo's capped_powers_of_2, literally.
        let mut powers = Vec::new();
        let mut i = 1;
        while i <= x {
            if i & x != 0 {
                powers.insert(0, i);
            }
            i <<= 1;
        }
        let mut out = Vec::new();
        for p in powers {
            if p > cap {
                out.extend(std::iter::repeat_n(cap, (p / cap) as usize));
            } else {
                out.push(p);
            }
        }
        out
    }

    #[test]
    fn matches_capped_powers_of_two() {
        for n in 0..3000u64 {
            for (min, max) in [(1, 64), (16, 256), (256, 1024)] {
                let mut expect = Vec::new();
                let mut at = 0;
                for x in capped_powers(n, max) {
                    if x < min {
                        break;
                    }
                    expect.push([at, at + x]);
                    at += x;
                }
                assert_eq!(decompose(&[[0, n]], min, max).unwrap(), expect, "n={n} min={min} max={max}");
            }
        }
    }

    #[test]
    fn buckets_and_validation() {
        let p = decompose(&[[0, 10000], [10000, 10300]], 256, 4096).unwrap();
        let lens: Vec<u64> = p.iter().map(|s| s[1] - s[0]).collect();
        assert_eq!(lens, [4096, 4096, 1024, 512, 256, 256]);
        assert_eq!(buckets(&p, 256, 4096).unwrap(), vec![vec![4, 5], vec![3], vec![2], vec![], vec![0, 1]]);
        assert!(bucket_lengths(100, 4096).is_err());
        assert!(bucket_lengths(512, 256).is_err());
        assert_eq!(bucket_lengths(256, 256).unwrap(), vec![256]);
    }
}
