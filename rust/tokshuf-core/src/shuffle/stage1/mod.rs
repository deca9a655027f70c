//! Stage 1 ("coarse shuffle"): JSON lines → tokens → contexts → local cells.
//!
//! The threads are those of `preprocess`: a reader ([`read`]) splits files into batches of
//! lines, `threads` workers ([`work`]) tokenize them, and the [`collector`] (this thread) takes
//! the results strictly in input order and cuts contexts, so contexts and their ids never depend
//! on timing. Encoding a context (JSON + gzip) is the other costly step: the collector hands
//! contexts back to the same workers in chunks, and files the encoded records into the run
//! buffer under the cell that a hash of (seed, context id) picks. When the buffer is full the
//! collector waits for the chunks in flight and hands the buffer, with its reading position, to
//! a thread that writes the run and then saves the position (the checkpoint), while a fresh
//! buffer fills.

mod collector;
mod messages;
mod work;

use std::sync::Arc;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};

use super::config::ShuffleConfig;
use super::state::{crash_point, save, Position, State};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::ingest::{is_long_job, read_inputs, Event, Pool, ReadPlan, Spares, Step};
use crate::tokenize::Tokenizer;
use collector::{Collector, Links};
use messages::{Checkpoint, ChunkSpares, Msg, Ordered, Work};

/// Write each checkpoint's run, then save its state. The run's blocks go back to the workers as
/// soon as the file holds their bytes, so the next run fills memory already mapped instead of
/// faulting in fresh pages.
fn write_checkpoints(cfg: &ShuffleConfig, jobs: &Receiver<Checkpoint>, blocks: &Pool<u8>) -> Result<()> {
    for job in jobs.iter() {
        if let Some((mut buffer, path)) = job.run {
            buffer.write(&path, cfg.num_local_cells, |b| blocks.give(b))?;
            crash_point("run-written");
        }
        save(&cfg.local_cell_dir, &job.state)?;
        crash_point("checkpoint-saved");
    }
    Ok(())
}

/// Run stage 1 from `state.position` to the end of the input; `state` is checkpointed as it goes.
pub(super) fn run(
    cfg: &ShuffleConfig,
    tokenizer: Arc<dyn Tokenizer>,
    state: &mut State,
    cancel: &Cancel,
) -> Result<()> {
    // Input bytes (on disk) from the checkpoint on: the progress bar's total.
    let remaining: u64 =
        cfg.inputs[state.position.file..cfg.file_range().end].iter().filter_map(|p| crate::storage::size(p).ok()).sum();
    if is_long_job(&cfg.inputs[cfg.file_range()], remaining) {
        tokenizer.prepare_for_long_job();
    }
    let in_flight = 2 * cfg.threads + 2;
    let (work_tx, work_rx) = unbounded::<Work>();
    let (result_tx, result_rx) = unbounded::<Msg>();
    let (slot_tx, slot_rx) = crate::ingest::slots(in_flight);
    // Set when the collector is done (finished or failed): the other threads stop.
    let stop = Cancel::new();
    let start = state.position.clone();
    // Line buffers go back to the reader from the workers, token buffers to the workers from the
    // collector once it has cut their contexts.
    let spares = Spares::new(in_flight + cfg.threads, cfg.batch_bytes);
    let chunk_spares =
        ChunkSpares::new(in_flight + cfg.threads, collector::chunk_reserve(cfg.seqlen), cfg.buffer_bytes);
    std::thread::scope(|s| -> Result<()> {
        {
            let (work, results, slots, start, stop, spares) =
                (work_tx.clone(), result_tx.clone(), slot_rx.clone(), &start, &stop, &spares);
            s.spawn(move || read(cfg, start, work, results, slots, stop, spares));
        }
        for _ in 0..cfg.threads {
            let (work, results, stop, tokenizer) = (work_rx.clone(), result_tx.clone(), &stop, &tokenizer);
            let (spares, chunk_spares) = (&spares, &chunk_spares);
            s.spawn(move || work::worker(cfg, tokenizer.as_ref(), &work, &results, spares, chunk_spares, cancel, stop));
        }
        drop(result_tx);
        drop(work_rx);
        let (checkpoint_tx, checkpoint_rx) = bounded::<Checkpoint>(0);
        let members = &chunk_spares.members;
        let checkpointer = s.spawn(move || write_checkpoints(cfg, &checkpoint_rx, members));
        let links = Links {
            work: work_tx,
            results: &result_rx,
            slots: &slot_tx,
            checkpoints: checkpoint_tx,
            spares: &spares,
            chunk_spares: &chunk_spares,
            cancel,
        };
        let collected = Collector::new(cfg, state, links, in_flight, remaining).run();
        // Let every thread finish: the reader may wait for a slot, the workers for work.
        stop.cancel();
        drop(slot_tx);
        drop(slot_rx);
        for _ in result_rx.iter() {}
        let checkpointed =
            checkpointer.join().unwrap_or_else(|_| Err(Error::invalid("the stage 1 checkpoint thread panicked")));
        // A failed checkpoint explains a collector that could not hand one over.
        checkpointed.and(collected)
    })?;
    cancel.check()
}

/// Read every file from `start` on; returns when done, stopped or unwanted. Batches go to the
/// workers, the files' problems and ends straight to the collector, numbered in one sequence so
/// that it meets them in input order. The workers hand the line buffers back through `spares`.
fn read(
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
        let ok = !stop.is_cancelled() && results.send(Msg::Ordered { seq: *seq, item }).is_ok();
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
