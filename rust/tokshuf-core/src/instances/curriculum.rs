//! Sequence-length curricula for VSL training (OLMo's `VSLNaturalCurriculum`,
//! `VSLGrowP2Curriculum`, `VSLGrowLinearCurriculum`): how many global batches each bucket
//! contributes and in what order they come.
//!
//! A global batch holds `global_batch_tokens / L` instances of one bucket length `L`. Batch ids
//! are numbered bucket by bucket (shortest first); the curriculum returns their order. With the
//! same seed the order equals OLMo-core's, which draws from numpy's PCG64.

use std::fmt;

use crate::error::{Error, Result};
use crate::rng::NumpyGenerator;

/// A VSL curriculum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Curriculum {
    /// Every bucket's batches, shuffled globally (a longest-bucket batch first).
    Natural,
    /// `num_cycles` cycles, each of `buckets` sub-cycles whose odds favour longer sequences in
    /// powers of two as the sub-cycle advances.
    GrowP2 {
        /// Cycles per epoch.
        num_cycles: u64,
        /// Cut every bucket to the smallest bucket's batch count.
        balanced: bool,
    },
    /// As `GrowP2` with linearly growing odds.
    GrowLinear {
        /// Cycles per epoch.
        num_cycles: u64,
        /// Cut every bucket to the smallest bucket's batch count.
        balanced: bool,
    },
}

impl Curriculum {
    /// By OLMo's names: `natural`, `grow_p2`, `grow_linear` (the growth ones need `num_cycles`).
    pub fn new(name: &str, num_cycles: Option<u64>, balanced: bool) -> Result<Self> {
        let cycles = || match num_cycles {
            Some(0) => Err(Error::invalid("num_cycles must be positive")),
            Some(n) => Ok(n),
            None => Err(Error::invalid(format!("the {name} curriculum needs num_cycles"))),
        };
        match name {
            "natural" => Ok(Self::Natural),
            "grow_p2" => Ok(Self::GrowP2 { num_cycles: cycles()?, balanced }),
            "grow_linear" => Ok(Self::GrowLinear { num_cycles: cycles()?, balanced }),
            _ => Err(Error::invalid(format!(
                "unknown VSL curriculum {name:?} (expected one of: natural, grow_p2, grow_linear)"
            ))),
        }
    }

    fn growth(&self) -> Option<(u64, bool)> {
        match *self {
            Self::Natural => None,
            Self::GrowP2 { num_cycles, balanced } | Self::GrowLinear { num_cycles, balanced } => {
                Some((num_cycles, balanced))
            }
        }
    }

    /// Batches each bucket contributes: `(length, batches)` for every `(length, instances)`.
    pub fn batches_per_bucket(&self, instances: &[(u64, u64)], global_batch_tokens: u64) -> Result<Vec<(u64, u64)>> {
        let max = instances.iter().map(|b| b.0).max().unwrap_or(0);
        if global_batch_tokens == 0 || max == 0 || !global_batch_tokens.is_multiple_of(max) {
            return Err(Error::invalid(format!(
                "the global batch size ({global_batch_tokens} tokens) must be a positive multiple of \
                 max_sequence_length ({max})"
            )));
        }
        let natural: Vec<(u64, u64)> = instances.iter().map(|&(l, n)| (l, n / (global_batch_tokens / l))).collect();
        Ok(match self.growth() {
            None => natural,
            Some((cycles, true)) => {
                let m = natural.iter().map(|b| b.1).min().unwrap_or(0);
                natural.iter().map(|&(l, _)| (l, cycles * (m / cycles))).collect()
            }
            Some((cycles, false)) => natural.iter().map(|&(l, n)| (l, cycles * (n / cycles))).collect(),
        })
    }

    /// The order of all batch ids `0..Σ batches`.
    pub fn batch_indices(&self, batches: &[(u64, u64)], rng: &mut NumpyGenerator) -> Result<Vec<u64>> {
        match self.growth() {
            None => Ok(natural_order(batches, rng)),
            Some((cycles, _)) => growth_order(batches, cycles, self, rng),
        }
    }

    /// OLMo's `short_str` (used in its cache paths).
    pub fn short_str(&self) -> String {
        let (kind, cycles, balanced) = match *self {
            Self::Natural => return "vsl-natural".into(),
            Self::GrowP2 { num_cycles, balanced } => ("p2", num_cycles, balanced),
            Self::GrowLinear { num_cycles, balanced } => ("linear", num_cycles, balanced),
        };
        format!("vsl-grow-{kind}-{cycles}-cycle{}", if balanced { "-balanced" } else { "" })
    }

    /// Odds of each sub-cycle for bucket `b` of `n` (rising from short to long as the cycle goes).
    fn odds(&self, b: u64, n: u64) -> Vec<f64> {
        let start = n - b;
        (0..n)
            .map(|k| {
                let e = if start + k <= n { start + k } else { start - ((start + k) % n) };
                match self {
                    Self::GrowP2 { .. } => (1u64 << (e - 1)) as f64,
                    _ => e as f64,
                }
            })
            .collect()
    }
}

impl fmt::Display for Curriculum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.short_str())
    }
}

fn natural_order(batches: &[(u64, u64)], rng: &mut NumpyGenerator) -> Vec<u64> {
    let total: u64 = batches.iter().map(|b| b.1).sum();
    let mut order: Vec<u64> = (0..total).collect();
    // A batch of the longest (non-empty) bucket first so that out-of-memory errors show at once.
    // OLMo uses the last bucket even when it is empty, and then fails.
    let Some(&(_, last)) = batches.iter().rev().find(|b| b.1 > 0) else {
        return order;
    };
    let i = rng.integers((total - last) as i64, total as i64) as usize;
    order.swap(0, i);
    rng.shuffle(&mut order[1..]);
    order
}

/// OLMo's `divide_into_buckets`: `n` into `b` parts, larger parts first.
fn divide(mut n: u64, b: u64) -> Vec<u64> {
    (0..b)
        .map(|i| {
            let left = b - i;
            let c = n.div_ceil(left);
            n -= c;
            c
        })
        .collect()
}

/// `n` batches split over sub-cycles in proportion to `odds`, rounding half to even (Python's
/// `round`), any shortfall going to the last sub-cycle. OLMo fails if the rounding overshoots;
/// the excess is taken from the last sub-cycles here.
fn split_by_odds(odds: &[f64], n: u64) -> Vec<u64> {
    let total: f64 = odds.iter().sum();
    let mut out: Vec<u64> = odds.iter().map(|o| ((o / total) * n as f64).round_ties_even() as u64).collect();
    let sum: u64 = out.iter().sum();
    if sum < n {
        *out.last_mut().expect("at least one bucket") += n - sum;
    } else {
        let mut excess = sum - n;
        for c in out.iter_mut().rev() {
            let take = excess.min(*c);
            *c -= take;
            excess -= take;
        }
    }
    out
}

fn growth_order(batches: &[(u64, u64)], cycles: u64, c: &Curriculum, rng: &mut NumpyGenerator) -> Result<Vec<u64>> {
    let nb = batches.len() as u64;
    if nb < 2 {
        return Err(Error::invalid(format!("the {c} curriculum needs at least two bucket lengths")));
    }
    let offsets: Vec<u64> = batches.iter().scan(0, |acc, b| Some(std::mem::replace(acc, *acc + b.1))).collect();
    let per_cycle: Vec<Vec<u64>> = batches.iter().map(|b| divide(b.1, cycles)).collect();
    let odds: Vec<Vec<f64>> = (0..nb).map(|b| c.odds(b, nb)).collect();
    let mut order = Vec::with_capacity(batches.iter().map(|b| b.1 as usize).sum());
    for cycle in 0..cycles as usize {
        // Sub-cycle chunks of this cycle's batch ids, bucket by bucket.
        let chunks: Vec<Vec<std::ops::Range<u64>>> = (0..nb as usize)
            .map(|b| {
                let first = offsets[b] + per_cycle[b][..cycle].iter().sum::<u64>();
                let mut at = first;
                split_by_odds(&odds[b], per_cycle[b][cycle])
                    .into_iter()
                    .map(|n| {
                        at += n;
                        at - n..at
                    })
                    .collect()
            })
            .collect();
        for sub in 0..nb as usize {
            let start = order.len();
            for bucket in &chunks {
                order.extend(bucket[sub].clone());
            }
            rng.shuffle(&mut order[start..]);
        }
    }
    // A batch of the longest bucket first (OOMs early); a no-op if that bucket is empty.
    let last_start = offsets[nb as usize - 1];
    if let Some(i) = order.iter().position(|&b| b >= last_start) {
        order.swap(0, i);
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SeedSequence;

    #[test]
    fn names_and_validation() {
        assert_eq!(Curriculum::new("natural", None, false).unwrap(), Curriculum::Natural);
        assert!(Curriculum::new("grow_p2", None, false).is_err());
        assert!(Curriculum::new("cyclic", None, false).unwrap_err().to_string().contains("grow_linear"));
        let c = Curriculum::new("grow_p2", Some(8), true).unwrap();
        assert_eq!(c.short_str(), "vsl-grow-p2-8-cycle-balanced");
    }

    #[test]
    fn batches_per_bucket_rules() {
        let inst = [(256, 100), (512, 33), (1024, 9)];
        let n = Curriculum::Natural.batches_per_bucket(&inst, 2048).unwrap();
        assert_eq!(n, vec![(256, 12), (512, 8), (1024, 4)]);
        let g = Curriculum::GrowLinear { num_cycles: 3, balanced: false };
        assert_eq!(g.batches_per_bucket(&inst, 2048).unwrap(), vec![(256, 12), (512, 6), (1024, 3)]);
        let g = Curriculum::GrowLinear { num_cycles: 3, balanced: true };
        assert_eq!(g.batches_per_bucket(&inst, 2048).unwrap(), vec![(256, 3), (512, 3), (1024, 3)]);
        assert!(Curriculum::Natural.batches_per_bucket(&inst, 1000).is_err());
    }

    #[test]
    fn orders_are_permutations_with_a_long_batch_first() {
        let rng = |seed| NumpyGenerator::from_seed_sequence(&SeedSequence::new(&[seed]));
        let b = [(256, 16), (512, 8), (1024, 8)];
        for c in [
            Curriculum::Natural,
            Curriculum::GrowP2 { num_cycles: 4, balanced: false },
            Curriculum::GrowLinear { num_cycles: 2, balanced: false },
        ] {
            let o = c.batch_indices(&b, &mut rng(3)).unwrap();
            assert!(o[0] >= 24, "{c}: {o:?}");
            let mut s = o.clone();
            s.sort_unstable();
            assert_eq!(s, (0..32).collect::<Vec<_>>());
        }
        assert_eq!(Curriculum::Natural.batch_indices(&[(256, 0)], &mut rng(0)).unwrap(), Vec::<u64>::new());
    }

    #[test]
    fn odds_follow_olmo() {
        let p2 = Curriculum::GrowP2 { num_cycles: 1, balanced: false };
        assert_eq!(p2.odds(0, 3), vec![4.0, 2.0, 1.0]);
        assert_eq!(p2.odds(2, 3), vec![1.0, 2.0, 4.0]);
        let lin = Curriculum::GrowLinear { num_cycles: 1, balanced: false };
        assert_eq!(lin.odds(1, 3), vec![2.0, 3.0, 1.0]);
        assert_eq!(divide(10, 3), vec![4, 3, 3]);
        assert_eq!(split_by_odds(&[1.0, 2.0, 4.0], 10), vec![1, 3, 6]);
    }
}
