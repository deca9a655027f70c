//! The reader of stage 1: input files → numbered items, in input order, from the checkpoint.
//!
//! As in `preprocess`, problems with whole files (empty, truncated, unreadable) travel in the same
//! numbered stream as the batches, so the collector meets them in input order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::storage;
use crossbeam_channel::{Receiver, Sender};

use super::{Msg, Ordered, TokenizeJob, Work};
use crate::cancel::Cancel;
use crate::ingest::{Problem, Spares};
use crate::read::Records;
use crate::shuffle::config::ShuffleConfig;
use crate::shuffle::state::Position;

/// Where the reader starts, and what it sends to.
pub(super) struct Reader<'a> {
    pub cfg: &'a ShuffleConfig,
    pub start: &'a Position,
    pub work: Sender<Work>,
    pub results: Sender<Msg>,
    pub slots: Receiver<()>,
    pub stop: &'a Cancel,
    /// Where the workers hand the line buffers back.
    pub spares: &'a Spares,
}

impl Reader<'_> {
    /// Read every file from the checkpoint on; returns when done, stopped or unwanted.
    pub fn run(self) {
        let mut seq = 0u64;
        let ordered = |seq: &mut u64, item: Ordered| -> bool {
            let ok = !self.stop.is_cancelled() && self.results.send(Msg::Ordered(*seq, item)).is_ok();
            *seq += 1;
            ok
        };
        // On-disk bytes of the files before the current one (progress).
        let mut before = 0u64;
        for file in self.start.file..self.cfg.file_range().end {
            let path = &self.cfg.inputs[file];
            let skip = if file == self.start.file { self.start.lines } else { 0 };
            let size = match storage::size(path) {
                Ok(size) => size,
                Err(e) => {
                    ordered(&mut seq, Ordered::Problem { file, problem: Problem::Fatal(e) });
                    return;
                }
            };
            let counter = Arc::new(AtomicU64::new(0));
            let keys = std::slice::from_ref(&self.cfg.content_key);
            let cfg = self.cfg;
            let mut reader = match Records::open(path, keys, Arc::clone(&counter), cfg.batch_bytes, cfg.max_line_bytes)
            {
                Ok(r) => r,
                Err(e) => {
                    ordered(&mut seq, Ordered::Problem { file, problem: Problem::Fatal(e) });
                    return;
                }
            };
            loop {
                let mut batch = match reader.next_batch_in(self.spares.data.take()) {
                    Ok(Some(batch)) => batch,
                    Ok(None) => break,
                    Err(e) => {
                        ordered(&mut seq, Ordered::Problem { file, problem: Problem::Fatal(e) });
                        return;
                    }
                };
                let done_before = batch.first_line - 1;
                if done_before + batch.len() as u64 <= skip {
                    continue;
                }
                if done_before < skip {
                    // Resuming inside this batch: drop the lines the checkpoint covers.
                    let k = (skip - done_before) as usize;
                    batch.lines.drain(..k);
                    batch.first_line += k as u64;
                }
                let input_pos = before + counter.load(Ordering::Relaxed).min(size);
                // One slot per batch in flight bounds memory however far the reader gets ahead.
                if self.stop.is_cancelled() || self.slots.recv().is_err() {
                    return;
                }
                if self.work.send(Work::Tokenize(TokenizeJob { seq, file, input_pos, batch })).is_err() {
                    return;
                }
                seq += 1;
            }
            before += size;
            let problem = match reader.truncation() {
                Some(t) => Some(Problem::Truncated(t.clone())),
                None if reader.offset() == 0 => Some(Problem::Empty),
                None => None,
            };
            if let Some(problem) = problem {
                if !ordered(&mut seq, Ordered::Problem { file, problem }) {
                    return;
                }
            }
            let end = Ordered::FileEnd { file, bytes: size, decompressed: reader.offset(), input_pos: before };
            if !ordered(&mut seq, end) {
                return;
            }
        }
        ordered(&mut seq, Ordered::InputEnd);
    }
}
