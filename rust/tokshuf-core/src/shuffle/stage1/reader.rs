//! The reader of stage 1: the ingest reader from the checkpoint on, its steps numbered in input
//! order for the collector.

use crossbeam_channel::{Receiver, Sender};

use super::messages::{Msg, Ordered, TokenizeJob, Work};
use crate::cancel::Cancel;
use crate::ingest::{read_inputs, Event, ReadPlan, Spares};
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
    /// Read every file from the checkpoint on; returns when done, stopped or unwanted. Batches
    /// go to the workers, the files' problems and ends straight to the collector, numbered in
    /// one sequence so that it meets them in input order.
    pub fn run(self) {
        let mut seq = 0u64;
        let ordered = |seq: &mut u64, item: Ordered| -> bool {
            let ok = !self.stop.is_cancelled() && self.results.send(Msg::Ordered(*seq, item)).is_ok();
            *seq += 1;
            ok
        };
        let cfg = self.cfg;
        let plan = ReadPlan {
            inputs: &cfg.inputs,
            files: self.start.file..cfg.file_range().end,
            skip_lines: self.start.lines,
            keys: std::slice::from_ref(&cfg.content_key),
            batch_bytes: cfg.batch_bytes,
            max_line_bytes: cfg.max_line_bytes,
        };
        let read = read_inputs(&plan, self.spares, |event| match event {
            Event::Batch { file, input_pos, batch, .. } => {
                // One slot per batch in flight bounds memory however far the reader gets ahead.
                if self.stop.is_cancelled() || self.slots.recv().is_err() {
                    return false;
                }
                if self.work.send(Work::Tokenize(TokenizeJob { seq, file, input_pos, batch })).is_err() {
                    return false;
                }
                seq += 1;
                true
            }
            Event::Problem { file, problem, .. } => ordered(&mut seq, Ordered::Problem { file, problem }),
            Event::FileEnd { file, input_pos, compressed, decompressed, .. } => {
                ordered(&mut seq, Ordered::FileEnd { file, bytes: compressed, decompressed, input_pos })
            }
        });
        if read {
            ordered(&mut seq, Ordered::InputEnd);
        }
    }
}
