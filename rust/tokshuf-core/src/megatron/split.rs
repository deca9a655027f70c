//! Split strings (`"949,50,1"`) → normalized vector → bookend matrix → per-dataset index ranges,
//! exactly as Megatron's `parse_and_normalize_split`, `convert_split_vector_to_split_matrix` and
//! the builder's `int(round(bookend * float(n)))`.

use super::normalize::normalize;
use crate::error::{Error, Result};

/// Bookends `(start, end)` per split; `None` marks a disabled split (zero width).
pub type SplitMatrix = [Option<(f64, f64)>; 3];

/// `parse_and_normalize_split`: the runs of `[.0-9]` as floats, padded with zeros to three,
/// normalized. Unlike Megatron, a minus sign is an error rather than silently dropped.
pub fn parse_split(split: &str) -> Result<[f64; 3]> {
    let bad = |why: String| Error::invalid(format!("invalid split {split:?}: {why}"));
    if split.contains('-') {
        return Err(bad("split weights must be non-negative".into()));
    }
    let parts = split.split(|c: char| !(c.is_ascii_digit() || c == '.')).filter(|p| !p.is_empty());
    let mut values = parts
        .map(|part| part.parse::<f64>().map_err(|_| bad(format!("{part:?} is not a number"))))
        .collect::<Result<Vec<_>>>()?;
    if values.is_empty() || values.len() > 3 {
        return Err(bad(format!(
            "expected 1 to 3 numbers (train, valid, test) such as \"949,50,1\", found {}",
            values.len()
        )));
    }
    values.resize(3, 0.0);
    let v = normalize(&values).map_err(|e| bad(e.to_string()))?;
    Ok([v[0], v[1], v[2]])
}

/// `convert_split_vector_to_split_matrix(vector)`: running sums from 0, zero-width bookends
/// become `None`.
pub fn split_matrix(vector: &[f64; 3]) -> SplitMatrix {
    let mut ends = [0.0f64; 4];
    for i in 0..3 {
        ends[i + 1] = ends[i] + vector[i];
    }
    std::array::from_fn(|i| if ends[i + 1] - ends[i] == 0.0 { None } else { Some((ends[i], ends[i + 1])) })
}

/// The sequence-index range `[beg, end)` of each enabled split over `n` sequences
/// (`int(round(x * float(n)))`, round half to even).
pub fn split_ranges(matrix: &SplitMatrix, n: u64) -> [Option<(u64, u64)>; 3] {
    let at = |x: f64| ((x * n as f64).round_ties_even().max(0.0) as u64).min(n);
    matrix.map(|b| b.map(|(s, e)| (at(s), at(e))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn megatron_examples() {
        let v = parse_split("949,50,1").unwrap();
        assert_eq!(v, [0.949, 0.05, 0.001]);
        let m = split_matrix(&v);
        assert_eq!(split_ranges(&m, 500), [Some((0, 474)), Some((474, 500)), Some((500, 500))]);
        assert_eq!(split_ranges(&m, 501)[2], Some((500, 501)));
        let m = split_matrix(&parse_split("90,10").unwrap());
        assert_eq!(m[2], None);
    }

    #[test]
    fn bad_splits_name_the_problem() {
        assert!(parse_split("").unwrap_err().to_string().contains("1 to 3"));
        assert!(parse_split("1,2,3,4").is_err());
        assert!(parse_split("0,0,0").unwrap_err().to_string().contains("zero"));
        assert!(parse_split("90,-10").unwrap_err().to_string().contains("non-negative"));
        assert!(parse_split("1.2.3").unwrap_err().to_string().contains("not a number"));
        assert_eq!(parse_split(" 8 / 1 / 1 ").unwrap(), [0.8, 0.1, 0.1]);
    }
}
