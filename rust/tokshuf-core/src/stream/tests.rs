//! Worker-level properties on in-memory corpora: resume is bit-exact, tokens are conserved,
//! a rescale neither loses nor repeats, and the mixer bound holds through packing.

use std::collections::HashMap;

use proptest::prelude::*;

use super::config::{test_config, MixPhase, StreamConfig};
use super::source::{DocSource, VecSource};
use super::state::WorkerState;
use super::worker::{Line, WorkerStream};

/// Sub-dataset `s` of `sizes[s]` documents; token ids are globally unique (never 0 = eos).
fn corpus(sizes: &[Vec<usize>]) -> Vec<Vec<Vec<u32>>> {
    let mut ids = 1u32..;
    sizes.iter().map(|docs| docs.iter().map(|&n| ids.by_ref().take(n).collect()).collect()).collect()
}

fn sources(c: &[Vec<Vec<u32>>]) -> Vec<Box<dyn DocSource>> {
    c.iter().map(|d| Box::new(VecSource::new(d.clone())) as Box<dyn DocSource>).collect()
}

fn lines(w: &mut WorkerStream, n: usize) -> Vec<Line> {
    (0..n)
        .map(|_| {
            let mut l = Line::default();
            w.next_line(&mut l).unwrap();
            l
        })
        .collect()
}

fn round_trip(st: &WorkerState) -> WorkerState {
    let mut back =
        WorkerState::from_words(&st.row_words(), &st.buffer_words(), st.mixer.clone(), st.rng_counter, st.batches)
            .unwrap();
    back.history = WorkerState::history_from_words(&st.history_words(), st.mixer.len()).unwrap();
    (back.phase, back.step, back.step_stride) = (st.phase, st.step, st.step_stride);
    back
}

/// `n` batches of `b` lines, each as its tokens.
fn batches(w: &mut WorkerStream, n: usize, b: usize) -> Vec<Vec<i64>> {
    let s = w.config().line_len - 1;
    (0..n)
        .map(|_| {
            let (mut input, mut label) = (vec![0i64; b * s], vec![0i64; b * s]);
            w.next_batch(b, &mut input, Some(&mut label), None, &mut vec![]).unwrap();
            input.extend(label);
            input
        })
        .collect()
}

/// Phases starting at `starts` (the first is moved to 0), with weights cycling through `weights`.
fn schedule(starts: &[u64], weights: &[Vec<u64>]) -> Vec<MixPhase> {
    let mut at: Vec<u64> = starts.to_vec();
    at.sort_unstable();
    at.dedup();
    at[0] = 0;
    at.dedup();
    at.iter()
        .enumerate()
        .map(|(k, &s)| MixPhase { start_step: s, weights: weights[k % weights.len()].clone() })
        .collect()
}

/// Worst |t_i·W − w_i·T| / W over sub-datasets, in tokens.
fn deviation(tokens: &[u64], weights: &[u64]) -> f64 {
    let (t, w): (u64, u64) = (tokens.iter().sum(), weights.iter().sum());
    tokens
        .iter()
        .zip(weights)
        .map(|(&ti, &wi)| (ti as f64 * w as f64 - wi as f64 * t as f64).abs() / w as f64)
        .fold(0.0, f64::max)
}

fn cfg_with(window: usize, shards: u32, weights: Vec<u64>) -> StreamConfig {
    StreamConfig { shuffle_window: window, logical_shards: shards, ..test_config(weights) }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Stop after k lines, save, reopen from the state: the next lines are identical.
    #[test]
    fn resume_is_bit_exact(
        sizes in proptest::collection::vec(proptest::collection::vec(0usize..14, 1..12), 1..3),
        window in 0usize..5, k in 0usize..40, workers in 1u32..3,
    ) {
        let c = corpus(&sizes);
        let cfg = cfg_with(window, 4, vec![2; c.len()]);
        for w in 0..workers {
            let Ok(mut a) = WorkerStream::new(cfg.clone(), sources(&c), w, workers, None) else { continue };
            let mut probe = WorkerStream::new(cfg.clone(), sources(&c), w, workers, None).unwrap();
            let mut l = Line::default();
            if probe.next_line(&mut l).is_err() { continue; }  // this worker owns no text
            let _ = lines(&mut a, k);
            let st = round_trip(&a.state());
            let mut b = WorkerStream::new(cfg.clone(), sources(&c), w, workers, Some(st)).unwrap();
            prop_assert_eq!(lines(&mut a, 20), lines(&mut b, 20));
        }
    }

    /// Without a buffer, every owned token is read exactly once in epoch 0 of its shard, even
    /// when W1 workers save and W2 workers continue from the pooled rows.
    #[test]
    fn rescale_loses_and_repeats_nothing(
        docs in proptest::collection::vec(0usize..9, 1..40),
        w1 in 1u32..5, w2 in 1u32..5, cut in 0usize..12,
    ) {
        let c = corpus(&[docs]);
        let cfg = cfg_with(0, 6, vec![1]);
        let mut count: HashMap<u32, usize> = HashMap::new();
        let mut tally = |l: &Line| {
            let mut at = 0;
            for seg in &l.segments {
                if seg.epoch == 0 {
                    for &t in &l.tokens[at..at + seg.len as usize] {
                        if t != 0 { *count.entry(t).or_default() += 1; }
                    }
                }
                at += seg.len as usize;
            }
        };
        let mut rows = vec![];
        for w in 0..w1 {
            let mut s = WorkerStream::new(cfg.clone(), sources(&c), w, w1, None).unwrap();
            for _ in 0..cut {
                let mut l = Line::default();
                if s.next_line(&mut l).is_err() { break; }
                tally(&l);
            }
            rows.extend(round_trip(&s.state()).rows);
        }
        let n_docs = c[0].len() as u64;
        for w in 0..w2 {
            let owned = super::partition::worker_shards(6, w2, w);
            let st = WorkerState {
                rows: rows.iter().copied().filter(|r| owned.contains(&r.1)).collect(),
                mixer: vec![0],
                ..WorkerState::default()
            };
            let mut s = WorkerStream::new(cfg.clone(), sources(&c), w, w2, Some(st)).unwrap();
            let done = |s: &WorkerStream| s.state().rows.iter().all(|r| {
                r.2.epoch >= 1 || super::partition::shard_docs(n_docs, 6, r.1).is_empty()
            });
            for _ in 0..500 {
                if done(&s) { break; }
                let mut l = Line::default();
                if s.next_line(&mut l).is_err() { break; }
                tally(&l);
            }
        }
        for (d, doc) in c[0].iter().enumerate() {
            for t in doc {
                prop_assert_eq!(count.get(t).copied().unwrap_or(0), 1, "token {} of document {}", t, d);
            }
        }
    }

    /// Through packing, every sub-dataset stays within one chunk of its share at every line end.
    #[test]
    fn mixing_bound_holds_per_line(
        weights in proptest::collection::vec(1u64..9, 2..5),
        seed: u64,
    ) {
        let sizes: Vec<Vec<usize>> = (0..weights.len()).map(|i| (0..30).map(|d| (d * 7 + i * 3 + seed as usize % 5) % 23).collect()).collect();
        let c = corpus(&sizes);
        let mut cfg = cfg_with(0, 2, weights.clone());
        cfg.seed = seed;
        let mut s = WorkerStream::new(cfg.clone(), sources(&c), 0, 1, None).unwrap();
        let wsum: u64 = weights.iter().sum();
        for _ in 0..200 {
            let mut l = Line::default();
            s.next_line(&mut l).unwrap();
            let st = s.state();
            let total: u64 = st.mixer.iter().sum();
            for (i, &t) in st.mixer.iter().enumerate() {
                let dev = (i128::from(t) * i128::from(wsum) - i128::from(weights[i]) * i128::from(total)).abs();
                prop_assert!(dev <= i128::from(cfg.chunk_size * wsum), "sub {} off by {}/{}", i, dev, wsum);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Every phase's tokens stay within one chunk of its weights: while the phase runs (its
    /// live counters) and once it is left (its counters in the history).
    #[test]
    fn each_phase_is_mixed_by_its_own_weights(
        weights in proptest::collection::vec(proptest::collection::vec(0u64..6, 3), 2..5),
        starts in proptest::collection::vec(0u64..30, 1..4),
        stride in 1u64..4, seed: u64,
    ) {
        prop_assume!(weights.iter().all(|w| w.iter().any(|&x| x > 0)));
        let sizes: Vec<Vec<usize>> =
            (0..3).map(|i| (0..25).map(|d| 1 + (d * 7 + i * 3 + seed as usize % 5) % 23).collect()).collect();
        let c = corpus(&sizes);
        let mut cfg = cfg_with(0, 2, vec![1; 3]);
        cfg.mix = schedule(&starts, &weights);
        cfg.seed = seed;
        let rows = (0..3).flat_map(|sub| (0..2).map(move |l| (sub, l, super::substream::Row::default()))).collect();
        let st = WorkerState { step_stride: stride, rows, mixer: vec![0; 3], ..WorkerState::default() };
        let mut w = WorkerStream::new(cfg.clone(), sources(&c), 0, 1, Some(st)).unwrap();
        let chunk = cfg.chunk_size as f64;
        for _ in 0..40 {
            let step = w.step();
            let _ = batches(&mut w, 1, 2);
            let s = w.state();
            prop_assert_eq!(s.phase as usize, cfg.phase_at(step));
            prop_assert!(deviation(&s.mixer, &cfg.mix[s.phase as usize].weights) <= chunk + 1e-9,
                "step {} phase {} tokens {:?} earlier phases {:?}", step, s.phase, s.mixer, s.history);
            for (p, counters) in &s.history {
                prop_assert!(deviation(counters, &cfg.mix[*p as usize].weights) <= chunk + 1e-9);
            }
            prop_assert_eq!(s.step, step + stride);
        }
    }

    /// A resume at any batch, before, at or after a phase boundary, continues bit-exactly.
    #[test]
    fn resume_across_phases_is_bit_exact(
        starts in proptest::collection::vec(0u64..12, 1..4), k in 0usize..14, window in 0usize..3,
    ) {
        let c = corpus(&[vec![5, 9, 3, 12, 7, 4, 8], vec![6, 2, 11, 5, 9]]);
        let mut cfg = cfg_with(window, 4, vec![1, 1]);
        cfg.mix = schedule(&starts, &[vec![3, 1], vec![1, 0], vec![1, 4]]);
        let mut a = WorkerStream::new(cfg.clone(), sources(&c), 0, 1, None).unwrap();
        let _ = batches(&mut a, k, 2);
        let st = round_trip(&a.state());
        let mut b = WorkerStream::new(cfg.clone(), sources(&c), 0, 1, Some(st)).unwrap();
        prop_assert_eq!(batches(&mut a, 12, 2), batches(&mut b, 12, 2));
        prop_assert_eq!(a.state(), b.state());
    }
}
