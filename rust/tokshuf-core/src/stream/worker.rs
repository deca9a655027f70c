//! One global worker's stream: its sub-streams, the mixer, line packing, the shuffle buffer and
//! batch output. This is the hot path; Python only sees whole batches.

use super::config::StreamConfig;
use super::mixer::Mixer;
use super::partition::worker_shards;
use super::permute::derive_key;
use super::source::DocSource;
use super::state::WorkerState;
use super::substream::{Row, Segment, SubStream};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::rng::mix64;

/// One packed line and the document runs it is made of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Line {
    /// `line_len` tokens.
    pub tokens: Vec<u32>,
    /// Consecutive runs of one document, in order; their lengths sum to `line_len`.
    pub segments: Vec<Segment>,
}

/// Element types a batch can be written as.
pub trait TokenOut: Copy + Send {
    /// Convert one id (fails if the type cannot hold it).
    fn put(dst: &mut [Self], src: &[u32]) -> Result<()>;
}

impl TokenOut for i64 {
    fn put(dst: &mut [Self], src: &[u32]) -> Result<()> {
        dst.iter_mut().zip(src).for_each(|(d, &s)| *d = i64::from(s));
        Ok(())
    }
}

impl TokenOut for u32 {
    fn put(dst: &mut [Self], src: &[u32]) -> Result<()> {
        dst.copy_from_slice(src);
        Ok(())
    }
}

impl TokenOut for i32 {
    fn put(dst: &mut [Self], src: &[u32]) -> Result<()> {
        if let Some(&big) = src.iter().find(|&&s| s > i32::MAX as u32) {
            return Err(Error::invalid(format!("token id {big} does not fit int32; use int64 output")));
        }
        dst.iter_mut().zip(src).for_each(|(d, &s)| *d = s as i32);
        Ok(())
    }
}

/// A segment placed in a batch: line index, first position in the line, the run.
pub type Placed = (u32, u32, Segment);

/// The stream of one global worker `worker` of `n_workers`.
pub struct WorkerStream {
    cfg: StreamConfig,
    worker: u32,
    n_workers: u32,
    subs: Vec<SubStream>,
    mixer: Mixer,
    /// The mix phase the mixer follows, the step of the next batch and the steps between two.
    phase: usize,
    step: u64,
    step_stride: u64,
    history: Vec<(u32, Vec<u64>)>,
    buffer: Vec<Line>,
    rng_key: u64,
    rng_counter: u64,
    batches: u64,
    next: Vec<Option<u64>>,
    spare: Line,
    scratch: Line,
}

impl WorkerStream {
    /// Open the stream of global worker `worker` of `n_workers` over one source per
    /// sub-dataset, fresh (`state = None`) or from a saved state.
    pub fn new(
        cfg: StreamConfig,
        sources: Vec<Box<dyn DocSource>>,
        worker: u32,
        n_workers: u32,
        state: Option<WorkerState>,
    ) -> Result<Self> {
        cfg.validate()?;
        let n_sub = cfg.n_sub();
        if sources.len() != n_sub {
            return Err(Error::invalid(format!("{} sources for {n_sub} weights", sources.len())));
        }
        if worker >= n_workers {
            return Err(Error::invalid(format!("worker {worker} out of range for {n_workers} workers")));
        }
        let owned = worker_shards(cfg.logical_shards, n_workers, worker);
        if n_workers > cfg.logical_shards {
            return Err(Error::invalid(format!(
                "{n_workers} global workers (GPUs x DataLoader workers) but only {} logical shards: every \
                 worker needs at least one; raise logical_shards or use fewer workers",
                cfg.logical_shards
            )));
        }
        let state = state.unwrap_or_else(|| WorkerState {
            rows: (0..n_sub as u32).flat_map(|s| owned.clone().map(move |l| (s, l, Row::default()))).collect(),
            mixer: vec![0; n_sub],
            ..WorkerState::default()
        });
        let k = owned.len();
        let mut table: Vec<Vec<Option<Row>>> = vec![vec![None; k]; n_sub];
        for &(sub, shard, row) in &state.rows {
            let slot = table
                .get_mut(sub as usize)
                .zip(shard.checked_sub(owned.start).filter(|&i| (i as usize) < k))
                .map(|(t, i)| &mut t[i as usize]);
            match slot {
                Some(s @ None) => *s = Some(row),
                Some(Some(_)) => {
                    return Err(Error::invalid(format!("the state lists sub-dataset {sub}, shard {shard} twice")))
                }
                None => {
                    return Err(Error::invalid(format!(
                        "the state has a row for sub-dataset {sub}, shard {shard}, which global worker {worker} \
                         of {n_workers} does not own (it owns shards {owned:?} of {n_sub} sub-datasets)"
                    )))
                }
            }
        }
        if state.mixer.len() != n_sub || state.history.iter().any(|(_, c)| c.len() != n_sub) {
            return Err(Error::invalid(format!(
                "mixer state has {} counters for {n_sub} sub-datasets",
                state.mixer.len()
            )));
        }
        let phase = state.phase as usize;
        if phase >= cfg.mix.len() || state.history.iter().any(|&(p, _)| p as usize >= cfg.mix.len()) {
            return Err(Error::invalid(format!(
                "the state refers to mix phase {phase}, but the schedule has {} phases",
                cfg.mix.len()
            )));
        }
        if state.step_stride == 0 {
            return Err(Error::invalid("step_stride must be at least 1".to_string()));
        }
        let mut subs = Vec::with_capacity(n_sub);
        for (i, (src, rows)) in sources.into_iter().zip(table).enumerate() {
            let lacks = |j: usize| {
                Error::invalid(format!("the state lacks sub-dataset {i}, logical shard {}", owned.start as usize + j))
            };
            let rows =
                rows.into_iter().enumerate().map(|(j, r)| r.ok_or_else(|| lacks(j))).collect::<Result<Vec<_>>>()?;
            subs.push(SubStream::new(i as u32, &cfg, src, owned.clone(), &rows)?);
        }
        let mut w = WorkerStream {
            mixer: Mixer::with_tokens(cfg.mix[phase].weights.clone(), state.mixer.clone()),
            phase,
            step: state.step,
            step_stride: state.step_stride,
            history: state.history.clone(),
            rng_key: derive_key(&[cfg.seed, 0x5348_5546, u64::from(worker)]),
            next: vec![None; n_sub],
            cfg,
            worker,
            n_workers,
            subs,
            buffer: vec![],
            rng_counter: state.rng_counter,
            batches: state.batches,
            spare: Line::default(),
            scratch: Line::default(),
        };
        for segs in &state.buffer {
            let line = w.read_line(segs)?;
            w.buffer.push(line);
        }
        Ok(w)
    }

    fn read_line(&mut self, segs: &[Segment]) -> Result<Line> {
        let mut line = Line { tokens: Vec::with_capacity(self.cfg.line_len), segments: segs.to_vec() };
        for s in segs {
            let sub = self.subs.get_mut(s.sub as usize).ok_or_else(|| {
                Error::invalid(format!("a buffered line refers to sub-dataset {}, which does not exist", s.sub))
            })?;
            sub.read_segment(&self.cfg, s, &mut line.tokens)?;
        }
        if line.tokens.len() != self.cfg.line_len {
            return Err(Error::invalid(format!(
                "a buffered line has {} tokens but lines are {} long (seq_length changed?)",
                line.tokens.len(),
                self.cfg.line_len
            )));
        }
        Ok(line)
    }

    pub fn config(&self) -> &StreamConfig {
        &self.cfg
    }

    /// Batches produced since the fresh start.
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// The training step of the next batch.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Set the training step of the next batch and the steps between two batches.
    pub fn set_clock(&mut self, step: u64, stride: u64) -> Result<()> {
        if stride == 0 {
            return Err(Error::invalid("step_stride must be at least 1".to_string()));
        }
        (self.step, self.step_stride) = (step, stride);
        Ok(())
    }

    /// Enter the mix phase of the next batch's step: the counters of a phase left go to the
    /// history, and the new phase's weights apply to every token drawn from here on.
    fn begin_batch(&mut self) {
        let p = self.cfg.phase_at(self.step);
        if p != self.phase {
            let old = self.mixer.restart(self.cfg.mix[p].weights.clone());
            if old.iter().any(|&t| t > 0) {
                self.history.push((self.phase as u32, old));
            }
            self.phase = p;
        }
    }

    fn end_batch(&mut self) {
        self.batches += 1;
        self.step = self.step.saturating_add(self.step_stride);
    }

    /// Documents per sub-dataset, as the sources report them.
    pub fn num_docs(&self) -> Vec<u64> {
        self.subs.iter().map(SubStream::num_docs).collect()
    }

    /// The sub-dataset to read next, `None` if the worker owns no document it can emit.
    fn pick(&mut self) -> Result<Option<usize>> {
        let c = self.cfg.chunk_size;
        // A chunk begun is finished, unless its sub-dataset's weight fell to zero at a phase
        // boundary: it then waits, mid-chunk, for a phase that weighs it again, so that a phase
        // draws nothing from a sub-dataset it does not weigh.
        let mixer = &self.mixer;
        if let Some(i) = self.subs.iter().enumerate().position(|(i, s)| mixer.weight(i) > 0 && s.mid_chunk(c)) {
            return Ok(Some(i));
        }
        for (i, s) in self.subs.iter_mut().enumerate() {
            self.next[i] = if self.mixer.weight(i) > 0 { s.next_chunk(&self.cfg)? } else { None };
        }
        Ok(self.mixer.choose(&self.next))
    }

    fn no_data(&self) -> Error {
        Error::invalid(format!(
            "global worker {} of {} has no document to emit: its logical shards hold only empty or \
             too-short documents; use fewer workers or more logical shards",
            self.worker, self.n_workers
        ))
    }

    /// Pack the next line; `false` (and an empty line) if the worker has no data at all.
    fn fill_line(&mut self, line: &mut Line) -> Result<bool> {
        line.tokens.clear();
        line.segments.clear();
        let len = self.cfg.line_len;
        while line.tokens.len() < len {
            let Some(i) = self.pick()? else {
                if line.tokens.is_empty() {
                    return Ok(false);
                }
                return Err(self.no_data());
            };
            let room = (len - line.tokens.len()) as u64;
            let seg = self.subs[i].emit(&self.cfg, room, &mut line.tokens)?;
            self.mixer.add(i, seg.len);
            match line.segments.last_mut() {
                Some(p)
                    if (p.sub, p.shard, p.epoch, p.doc) == (seg.sub, seg.shard, seg.epoch, seg.doc)
                        && p.start + p.len == seg.start =>
                {
                    p.len += seg.len
                }
                _ => line.segments.push(seg),
            }
        }
        Ok(true)
    }

    fn draw(&mut self, n: usize) -> usize {
        let x = mix64(self.rng_key ^ mix64(self.rng_counter));
        self.rng_counter += 1;
        ((u128::from(x) * n as u128) >> 64) as usize
    }

    /// The next line, through the shuffle buffer: while it holds fewer than `window` lines it
    /// grows by one per output; a line drawn uniformly leaves and a fresh one takes its slot;
    /// a buffer larger than `window` (after a rescale), or held by a worker that owns no
    /// document, shrinks by one per output.
    pub fn next_line(&mut self, out: &mut Line) -> Result<()> {
        let window = self.cfg.shuffle_window;
        if window == 0 && self.buffer.is_empty() {
            return if self.fill_line(out)? { Ok(()) } else { Err(self.no_data()) };
        }
        let mut has_data = true;
        if self.buffer.len() < window {
            let mut l = std::mem::take(&mut self.spare);
            has_data = self.fill_line(&mut l)?;
            if has_data {
                self.buffer.push(l);
            } else {
                self.spare = l;
            }
        }
        if self.buffer.is_empty() {
            return Err(self.no_data());
        }
        let i = self.draw(self.buffer.len());
        if self.buffer.len() <= window && has_data && self.fill_line(out)? {
            std::mem::swap(out, &mut self.buffer[i]);
        } else {
            let l = self.buffer.swap_remove(i);
            self.spare = std::mem::replace(out, l);
        }
        Ok(())
    }

    /// Write the next batch of `batch` lines. With `label`, each line of `line_len` tokens is
    /// split for next-token prediction: `input` gets tokens `0..len-1`, `label` tokens `1..len`
    /// (both `batch × (len-1)`); without, `input` gets whole lines. `positions` (shaped like
    /// `input`) gets each token's position within its document run, restarting at 0 at every
    /// run and line start. The runs go into `placed`.
    pub fn next_batch<T: TokenOut>(
        &mut self,
        batch: usize,
        input: &mut [T],
        mut label: Option<&mut [T]>,
        mut positions: Option<&mut [i32]>,
        placed: &mut Vec<Placed>,
    ) -> Result<()> {
        let len = self.cfg.line_len;
        let s = if label.is_some() { len - 1 } else { len };
        let n = batch * s;
        if input.len() != n
            || label.as_ref().is_some_and(|l| l.len() != n)
            || positions.as_ref().is_some_and(|p| p.len() != n)
        {
            return Err(Error::invalid(format!("output arrays must hold {batch} x {s} elements")));
        }
        placed.clear();
        self.begin_batch();
        let mut line = std::mem::take(&mut self.scratch);
        for b in 0..batch {
            self.next_line(&mut line)?;
            let row = b * s..(b + 1) * s;
            T::put(&mut input[row.clone()], &line.tokens[..s])?;
            if let Some(l) = label.as_deref_mut() {
                T::put(&mut l[row.clone()], &line.tokens[1..])?;
            }
            let mut at = 0usize;
            for seg in &line.segments {
                if let Some(p) = positions.as_deref_mut() {
                    let end = (at + seg.len as usize).min(s);
                    if at < end {
                        let run = &mut p[b * s + at..b * s + end];
                        run.iter_mut().enumerate().for_each(|(k, v)| *v = k as i32);
                    }
                }
                placed.push((b as u32, at as u32, *seg));
                at += seg.len as usize;
            }
        }
        self.scratch = line;
        self.end_batch();
        Ok(())
    }

    /// Produce and drop `n` batches (replaying from a snapshot), checking `cancel` between them.
    pub fn skip_batches(&mut self, n: u64, batch: usize, cancel: &Cancel) -> Result<()> {
        let mut line = std::mem::take(&mut self.scratch);
        for _ in 0..n {
            cancel.check()?;
            self.begin_batch();
            for _ in 0..batch {
                self.next_line(&mut line)?;
            }
            self.end_batch();
        }
        self.scratch = line;
        Ok(())
    }

    /// The state after the last batch.
    pub fn state(&self) -> WorkerState {
        WorkerState {
            rows: self
                .subs
                .iter()
                .enumerate()
                .flat_map(|(i, s)| s.rows().map(move |(id, r)| (i as u32, id, r)))
                .collect(),
            mixer: self.mixer.tokens().to_vec(),
            phase: self.phase as u32,
            step: self.step,
            step_stride: self.step_stride,
            history: self.history.clone(),
            rng_counter: self.rng_counter,
            batches: self.batches,
            buffer: self.buffer.iter().map(|l| l.segments.clone()).collect(),
        }
    }
}
