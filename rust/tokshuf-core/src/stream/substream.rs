//! One sub-dataset as one worker sees it: the logical shards it owns, each walked in a fresh
//! keyed permutation every epoch, interleaved so that the shards progress evenly.
//!
//! The only state is one [`Row`] per shard. Which shard comes next is a pure function of the
//! rows (documents already started first, then the least progressed shard), so a worker needs
//! no state of its own to resume, and a shard handed to another worker continues unchanged.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::ops::Range;

use super::chunk::{chunk_end, DocLayout};
use super::config::StreamConfig;
use super::partition::shard_docs;
use super::permute::{derive_key, Permutation};
use super::source::DocSource;
use crate::error::{Error, Result};

/// The state of one logical shard of one sub-dataset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Row {
    /// Epochs of this shard completed (the permutation in use is that of epoch `epoch`).
    pub epoch: u64,
    /// Index, in this epoch's permutation, of the document being read or to read next.
    pub pos: u64,
    /// Emitted tokens of that document already read (0: not started).
    pub offset: u64,
    /// Emitted tokens read from this shard, all epochs.
    pub tokens: u64,
    /// Documents finished, all epochs.
    pub docs: u64,
}

/// A run of one document's emitted tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Sub-dataset index.
    pub sub: u32,
    /// Logical shard.
    pub shard: u32,
    /// The shard's epoch when the run was read.
    pub epoch: u64,
    /// Global document index within the sub-dataset.
    pub doc: u64,
    /// First emitted position.
    pub start: u64,
    pub len: u64,
}

#[derive(Debug)]
struct Shard {
    id: u32,
    docs: Range<u64>,
    row: Row,
    perm: Permutation,
    /// Consecutive documents skipped by rule (empty, too short); transient.
    dead_run: u64,
}

impl Shard {
    fn size(&self) -> u64 {
        self.docs.end - self.docs.start
    }
}

fn perm_key(seed: u64, sub: u32, shard: u32, epoch: u64) -> u64 {
    derive_key(&[seed, u64::from(sub), u64::from(shard), epoch])
}

/// Heap entry ordered so that the *least* progressed shard is the maximum.
#[derive(Debug, PartialEq, Eq)]
struct Progress {
    done: u128,
    size: u128,
    idx: usize,
}

impl Ord for Progress {
    fn cmp(&self, o: &Self) -> Ordering {
        (o.done * self.size).cmp(&(self.done * o.size)).then(o.idx.cmp(&self.idx))
    }
}

impl PartialOrd for Progress {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

#[derive(Debug, Clone, Copy)]
struct Open {
    shard: usize,
    doc: u64,
    layout: DocLayout,
}

/// The owned shards of one sub-dataset, read document by document.
pub(crate) struct SubStream {
    sub: u32,
    seed: u64,
    source: Box<dyn DocSource>,
    shards: Vec<Shard>,
    heap: BinaryHeap<Progress>,
    /// Shards restored in the middle of a document, finished first (lowest shard first).
    pending: Vec<usize>,
    cur: Option<Open>,
}

impl SubStream {
    /// The shards `owned` of sub-dataset `sub`, with their rows (`rows[i]` for shard
    /// `owned.start + i`).
    pub fn new(
        sub: u32,
        cfg: &StreamConfig,
        source: Box<dyn DocSource>,
        owned: Range<u32>,
        rows: &[Row],
    ) -> Result<Self> {
        let n_docs = source.num_docs();
        let mut shards = Vec::with_capacity(rows.len());
        for (id, row) in owned.zip(rows) {
            let docs = shard_docs(n_docs, cfg.logical_shards, id);
            let size = docs.end - docs.start;
            if row.pos >= size.max(1) || (size == 0 && row.offset > 0) {
                return Err(Error::invalid(format!(
                    "sub-dataset {sub}, logical shard {id}: saved position {} (offset {}) does not fit its \
                     {size} documents; the checkpoint belongs to different data",
                    row.pos, row.offset
                )));
            }
            let perm = Permutation::new(size, perm_key(cfg.seed, sub, id, row.epoch));
            shards.push(Shard { id, docs, row: *row, perm, dead_run: 0 });
        }
        let mut s =
            SubStream { sub, seed: cfg.seed, source, shards, heap: BinaryHeap::new(), pending: vec![], cur: None };
        for i in 0..s.shards.len() {
            if s.shards[i].row.offset > 0 {
                s.pending.push(i);
            } else if s.shards[i].size() > 0 {
                s.push(i);
            }
        }
        Ok(s)
    }

    fn push(&mut self, idx: usize) {
        let s = &self.shards[idx];
        let size = u128::from(s.size());
        let done = u128::from(s.row.epoch) * size + u128::from(s.row.pos);
        self.heap.push(Progress { done, size, idx });
    }

    fn advance(&mut self, idx: usize) {
        let (seed, sub) = (self.seed, self.sub);
        let s = &mut self.shards[idx];
        s.row.pos += 1;
        if s.row.pos == s.size() {
            s.row.pos = 0;
            s.row.epoch += 1;
            s.perm = Permutation::new(s.size(), perm_key(seed, sub, s.id, s.row.epoch));
        }
    }

    /// Make sure a document is open; `false` if no owned shard has a document to emit.
    pub fn ensure_open(&mut self, cfg: &StreamConfig) -> Result<bool> {
        if self.cur.is_some() {
            return Ok(true);
        }
        loop {
            let pending = (!self.pending.is_empty()).then(|| self.pending.remove(0));
            let Some(idx) = pending.or_else(|| self.heap.pop().map(|p| p.idx)) else { return Ok(false) };
            let s = &self.shards[idx];
            let doc = s.docs.start + s.perm.get(s.row.pos);
            let layout = DocLayout::of(&mut *self.source, doc, cfg)?;
            let s = &mut self.shards[idx];
            if s.row.offset > 0 {
                if !layout.emitted(cfg) || s.row.offset >= layout.emitted_len() {
                    return Err(Error::invalid(format!(
                        "sub-dataset {}, logical shard {}: the state is at token {} of document {doc}, which \
                         has {} emitted tokens; the data changed since the checkpoint",
                        self.sub,
                        s.id,
                        s.row.offset,
                        layout.emitted_len()
                    )));
                }
            } else if !layout.emitted(cfg) {
                // Skipped by rule: the walk still moves on (an empty document must not stall it).
                s.dead_run += 1;
                let exhausted = s.dead_run >= 2 * s.size();
                self.advance(idx);
                if !exhausted {
                    self.push(idx);
                }
                continue;
            }
            s.dead_run = 0;
            self.cur = Some(Open { shard: idx, doc, layout });
            return Ok(true);
        }
    }

    /// Tokens left in the open document's current chunk (`None`: nothing to emit).
    pub fn next_chunk(&mut self, cfg: &StreamConfig) -> Result<Option<u64>> {
        if !self.ensure_open(cfg)? {
            return Ok(None);
        }
        let o = self.cur.expect("open");
        let at = self.shards[o.shard].row.offset;
        Ok(Some(chunk_end(at, o.layout.emitted_len(), cfg.chunk_size) - at))
    }

    /// Whether the stream stopped in the middle of a chunk (it must continue that chunk).
    pub fn mid_chunk(&self, chunk: u64) -> bool {
        let idx = self.cur.map(|o| o.shard).or_else(|| self.pending.first().copied());
        idx.is_some_and(|i| !self.shards[i].row.offset.is_multiple_of(chunk))
    }

    /// Emit up to `max` tokens of the open document's current chunk into `out`.
    pub fn emit(&mut self, cfg: &StreamConfig, max: u64, out: &mut Vec<u32>) -> Result<Segment> {
        if !self.ensure_open(cfg)? {
            return Err(Error::invalid(format!("sub-dataset {} has no document to emit", self.sub)));
        }
        let o = self.cur.expect("open");
        let n = o.layout.emitted_len();
        let s = &mut self.shards[o.shard];
        let start = s.row.offset;
        let end = chunk_end(start, n, cfg.chunk_size).min(start.saturating_add(max));
        o.layout.read(&mut *self.source, o.doc, start, end - start, out)?;
        let seg = Segment { sub: self.sub, shard: s.id, epoch: s.row.epoch, doc: o.doc, start, len: end - start };
        s.row.offset = end;
        s.row.tokens += end - start;
        if end == n {
            s.row.offset = 0;
            s.row.docs += 1;
            self.cur = None;
            self.advance(o.shard);
            self.push(o.shard);
        }
        Ok(seg)
    }

    /// Append the tokens a saved segment refers to (restoring a shuffle buffer).
    pub fn read_segment(&mut self, cfg: &StreamConfig, seg: &Segment, out: &mut Vec<u32>) -> Result<()> {
        if seg.doc >= self.source.num_docs() {
            return Err(Error::invalid(format!(
                "a buffered line refers to document {} of sub-dataset {}, which has {} documents",
                seg.doc,
                self.sub,
                self.source.num_docs()
            )));
        }
        let layout = DocLayout::of(&mut *self.source, seg.doc, cfg)?;
        layout.read(&mut *self.source, seg.doc, seg.start, seg.len, out)
    }

    /// Documents in the sub-dataset.
    pub fn num_docs(&self) -> u64 {
        self.source.num_docs()
    }

    /// `(shard, row)` of every owned shard, in shard order.
    pub fn rows(&self) -> impl Iterator<Item = (u32, Row)> + '_ {
        self.shards.iter().map(|s| (s.id, s.row))
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::test_config;
    use super::super::source::VecSource;
    use super::*;

    fn docs(n: usize, empty_every: usize) -> Vec<Vec<u32>> {
        (0..n).map(|d| if empty_every > 0 && d % empty_every == 0 { vec![] } else { vec![d as u32 + 1; 3] }).collect()
    }

    /// Read whole documents until every owned shard finished `epochs` epochs.
    fn walk(sub: &mut SubStream, cfg: &StreamConfig, epochs: u64) -> Vec<(u32, u64, u64)> {
        let mut seen = vec![];
        while sub.rows().any(|(_, r)| r.epoch < epochs) {
            if !sub.ensure_open(cfg).unwrap() {
                break;
            }
            let seg = loop {
                let seg = sub.emit(cfg, u64::MAX, &mut vec![]).unwrap();
                if sub.cur.is_none() {
                    break seg;
                }
            };
            seen.push((seg.shard, seg.epoch, seg.doc));
        }
        seen
    }

    #[test]
    fn each_epoch_is_a_permutation_and_epochs_differ() {
        let mut cfg = test_config(vec![1]);
        cfg.logical_shards = 3;
        cfg.chunk_size = 2;
        let n = 50;
        let mut sub =
            SubStream::new(0, &cfg, Box::new(VecSource::new(docs(n, 7))), 0..3, &[Row::default(); 3]).unwrap();
        let seen = walk(&mut sub, &cfg, 2);
        for e in 0..2 {
            let mut got: Vec<u64> = seen.iter().filter(|s| s.1 == e).map(|s| s.2).collect();
            got.sort_unstable();
            let want: Vec<u64> = (0..n as u64).filter(|d| d % 7 != 0).collect();
            assert_eq!(got, want, "epoch {e}");
        }
        let order = |e| seen.iter().filter(|s| s.1 == e).map(|s| s.2).collect::<Vec<_>>();
        assert_ne!(order(0), order(1));
    }

    #[test]
    fn a_shard_of_empty_documents_does_not_hang() {
        let cfg = test_config(vec![1]);
        let src = VecSource::new(vec![vec![]; 10]);
        let mut sub = SubStream::new(0, &cfg, Box::new(src), 0..4, &[Row::default(); 4]).unwrap();
        assert!(!sub.ensure_open(&cfg).unwrap());
    }
}
