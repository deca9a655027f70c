//! Token-exact weighted mixing of sub-datasets, one chunk at a time.
//!
//! The rule is that of WF2Q (worst-case fair weighted fair queueing): among the sub-datasets
//! not ahead of their share (`t_i / w_i <= T / W`), take the one whose next chunk would finish
//! first in the ideal fluid schedule (smallest `(t_i + c_i) / w_i`). It keeps every sub-dataset
//! within one chunk of its exact share `w_i·T` at every chunk boundary, for any weights and
//! chunk sizes. All arithmetic is in integers, so the choice is the same on every machine.
//!
//! A phase of the mix schedule restarts the counters with its weights ([`Mixer::restart`]): the
//! bound then holds for the tokens drawn in that phase alone.

/// Tokens emitted per sub-dataset, and the rule that picks the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mixer {
    weights: Vec<u64>,
    tokens: Vec<u64>,
}

impl Mixer {
    /// Restore counters.
    pub fn with_tokens(weights: Vec<u64>, tokens: Vec<u64>) -> Self {
        assert_eq!(weights.len(), tokens.len());
        Mixer { weights, tokens }
    }

    /// Tokens emitted per sub-dataset.
    pub fn tokens(&self) -> &[u64] {
        &self.tokens
    }

    /// The weight of sub-dataset `i`.
    pub fn weight(&self, i: usize) -> u64 {
        self.weights[i]
    }

    /// Start a new phase with these weights and counters at zero; returns the old counters.
    pub fn restart(&mut self, weights: Vec<u64>) -> Vec<u64> {
        assert_eq!(weights.len(), self.weights.len());
        self.weights = weights;
        std::mem::replace(&mut self.tokens, vec![0; self.weights.len()])
    }

    /// Count `n` tokens emitted from sub-dataset `i`.
    pub fn add(&mut self, i: usize, n: u64) {
        self.tokens[i] += n;
    }

    /// The sub-dataset to take the next chunk from. `next[i]` is the size of sub-dataset `i`'s
    /// next chunk, `None` if it has nothing to give (it then drops out, and the others share
    /// its weight). `None` if no sub-dataset can give anything.
    pub fn choose(&self, next: &[Option<u64>]) -> Option<usize> {
        let live = |i: usize| self.weights[i] > 0 && next[i].is_some();
        let (mut total, mut wsum) = (0u128, 0u128);
        for i in (0..next.len()).filter(|&i| live(i)) {
            total += u128::from(self.tokens[i]);
            wsum += u128::from(self.weights[i]);
        }
        // (index, eligible, finish, weight) of the best so far.
        let mut best: Option<(usize, bool, u128, u128)> = None;
        for i in (0..next.len()).filter(|&i| live(i)) {
            let (t, w) = (u128::from(self.tokens[i]), u128::from(self.weights[i]));
            let eligible = t * wsum <= w * total;
            let finish = t + u128::from(next[i].unwrap_or(0));
            // Eligible beats ineligible; then the earlier finish; ties keep the lower index.
            if best.is_none_or(|(_, ej, fj, wj)| (eligible && !ej) || (eligible == ej && finish * wj < fj * w)) {
                best = Some((i, eligible, finish, w));
            }
        }
        best.map(|(i, ..)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Worst |t_i·W − w_i·T| / W over a run, in tokens.
    fn run(weights: &[u64], sizes: &[u64], steps: usize) -> f64 {
        let mut m = Mixer::with_tokens(weights.to_vec(), vec![0; weights.len()]);
        let w: u64 = weights.iter().sum();
        let mut k = 0usize;
        let mut next: Vec<Option<u64>> = (0..weights.len()).map(|i| Some(sizes[i % sizes.len()])).collect();
        let mut worst = 0f64;
        for _ in 0..steps {
            let i = m.choose(&next).unwrap();
            m.add(i, next[i].unwrap());
            k += 1;
            next[i] = Some(sizes[(k * 7 + i) % sizes.len()]);
            let total: u64 = m.tokens().iter().sum();
            for (j, &t) in m.tokens().iter().enumerate() {
                let dev = (t as f64 * w as f64 - weights[j] as f64 * total as f64).abs() / w as f64;
                worst = worst.max(dev);
            }
        }
        worst
    }

    proptest! {
        #[test]
        fn every_share_stays_within_one_chunk(
            weights in proptest::collection::vec(1u64..50, 1..8),
            sizes in proptest::collection::vec(1u64..64, 1..6),
        ) {
            let c = *sizes.iter().max().unwrap() as f64;
            let worst = run(&weights, &sizes, 600);
            prop_assert!(worst <= c + 1e-9, "deviation {} > chunk {}", worst, c);
        }
    }

    #[test]
    fn skewed_weights_many_sources() {
        let weights = [1456, 1835, 1558, 1851, 450, 1500, 300, 236, 114, 200, 100, 62, 27, 11, 51, 49, 100, 55, 45];
        assert!(run(&weights, &[1024, 1024, 1024, 300, 7], 20000) <= 1024.0);
    }

    #[test]
    fn exhausted_sources_drop_out() {
        let m = Mixer::with_tokens(vec![3, 1, 0], vec![0; 3]);
        assert_eq!(m.choose(&[None, Some(4), Some(4)]), Some(1));
        assert_eq!(m.choose(&[None, None, Some(4)]), None);
    }
}
