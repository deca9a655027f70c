//! Megatron's `normalize(weights)`: `w / numpy.sum(w)` in float64, where `numpy.sum` is
//! numpy's pairwise summation. The summation order decides the last bits of every weight, and
//! the weights decide the blend, so the order is reproduced exactly.

use crate::error::{Error, Result};

/// numpy's `pairwise_sum` for a contiguous float64 array.
pub fn numpy_sum(a: &[f64]) -> f64 {
    const BLOCK: usize = 128;
    let n = a.len();
    // Left to right from 0.0 (not `sum()`, which starts from -0.0).
    let add_all = |start: f64, rest: &[f64]| rest.iter().fold(start, |r, &v| r + v);
    if n < 8 {
        add_all(0.0, a)
    } else if n <= BLOCK {
        let mut r = [a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]];
        let whole = n - n % 8;
        let mut i = 8;
        while i < whole {
            for (j, acc) in r.iter_mut().enumerate() {
                *acc += a[i + j];
            }
            i += 8;
        }
        add_all(((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])), &a[whole..])
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        numpy_sum(&a[..n2]) + numpy_sum(&a[n2..])
    }
}

/// `normalize(weights)` with the checks Megatron lacks: every weight finite and ≥ 0, and a
/// positive sum.
pub fn normalize(weights: &[f64]) -> Result<Vec<f64>> {
    check_weights(weights)?;
    let total = numpy_sum(weights);
    Ok(weights.iter().map(|w| w / total).collect())
}

/// Reject weights that cannot be normalized, naming the culprit.
pub fn check_weights(weights: &[f64]) -> Result<()> {
    if weights.is_empty() {
        return Err(Error::invalid("no weights given: a blend needs at least one dataset"));
    }
    if let Some((i, w)) = weights.iter().enumerate().find(|(_, w)| !w.is_finite() || **w < 0.0) {
        return Err(Error::invalid(format!("weight {i} is {w}; weights must be finite and non-negative")));
    }
    if weights.iter().all(|&w| w == 0.0) {
        return Err(Error::invalid(format!("all {} weights are zero; at least one must be positive", weights.len())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_sums_are_left_to_right_longer_ones_eight_accumulators_then_the_tail() {
        assert_eq!(numpy_sum(&[0.1, 0.2, 0.3]).to_bits(), ((0.0 + 0.1) + 0.2 + 0.3f64).to_bits());
        let a: Vec<f64> = (0..11).map(|i| 1.0 / (i as f64 + 3.0)).collect();
        let r: Vec<f64> = (0..8).map(|j| a[j]).collect();
        let expect = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])) + a[8] + a[9] + a[10];
        assert_eq!(numpy_sum(&a).to_bits(), expect.to_bits());
    }

    #[test]
    fn bad_weights_are_rejected() {
        assert!(normalize(&[]).is_err());
        assert!(normalize(&[0.0, 0.0]).unwrap_err().to_string().contains("zero"));
        assert!(normalize(&[1.0, -0.5]).unwrap_err().to_string().contains("weight 1"));
        assert!(normalize(&[f64::NAN]).is_err());
        assert_eq!(normalize(&[1.0, 3.0]).unwrap(), [0.25, 0.75]);
    }
}
