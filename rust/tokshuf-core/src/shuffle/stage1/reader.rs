//! The reader of stage 1: the ingest reader from the checkpoint on, its steps numbered in input
//! order for the collector.

use crossbeam_channel::{Receiver, Sender};

use super::messages::{Msg, Ordered, Work};
use crate::cancel::Cancel;
use crate::ingest::{read_inputs, Event, ReadPlan, Spares, Step};
use crate::shuffle::config::ShuffleConfig;
use crate::shuffle::state::Position;

/// Read every file from `start` on; returns when done, stopped or unwanted. Batches go to the
/// workers, the files' problems and ends straight to the collector, numbered in one sequence so
/// that it meets them in input order. The workers hand the line buffers back through `spares`.
pub(super) fn read(
    cfg: &ShuffleConfig,
    start: &Position,
    work: Sender<Work>,
    results: Sender<Msg>,
    slots: Receiver<()>,
    stop: &Cancel,
    spares: &Spares,
) {
    let mut seq = 0u64;
    let ordered = |seq: &mut u64, item: Ordered| -> bool {
        let ok = !stop.is_cancelled() && results.send(Msg::Ordered(*seq, item)).is_ok();
        *seq += 1;
        ok
    };
    let plan = ReadPlan {
        inputs: &cfg.inputs,
        files: start.file..cfg.file_range().end,
        skip_lines: start.lines,
        keys: std::slice::from_ref(&cfg.content_key),
        batch_bytes: cfg.batch_bytes,
        max_line_bytes: cfg.max_line_bytes,
    };
    let read = read_inputs(&plan, spares, |Event { file, input_pos, step, .. }| match step {
        Step::Batch(batch) => {
            // One slot per batch in flight bounds memory however far the reader gets ahead.
            if stop.is_cancelled() || slots.recv().is_err() {
                return false;
            }
            if work.send(Work::Tokenize { seq, file, input_pos, batch }).is_err() {
                return false;
            }
            seq += 1;
            true
        }
        Step::Problem(problem) => ordered(&mut seq, Ordered::Problem { file, problem }),
        Step::FileEnd { compressed, decompressed } => {
            ordered(&mut seq, Ordered::FileEnd { file, bytes: compressed, decompressed, input_pos })
        }
    });
    if read {
        ordered(&mut seq, Ordered::InputEnd);
    }
}
