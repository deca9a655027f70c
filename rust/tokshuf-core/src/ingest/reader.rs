//! The one reader of `preprocess` and shuffle's stage 1: input files → batches of lines (or
//! rows), in input order, with each file's problems and its end in the same stream, so that the
//! ordered consumer meets them where they happened. The caller decides what becomes of each
//! [`Event`] (a job for the workers, a message for the collector) and stops the reader by
//! returning `false`.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{Problem, Spares};
use crate::read::lines::LineBatch;
use crate::read::{input_size, Records};

/// What to read.
pub(crate) struct ReadPlan<'a> {
    /// Every input of the run; `files` says which are read here.
    pub inputs: &'a [PathBuf],
    pub files: Range<usize>,
    /// Lines of the first file already done (a resumed run): dropped, not emitted.
    pub skip_lines: u64,
    /// The JSON keys (or columns) read.
    pub keys: &'a [String],
    pub batch_bytes: usize,
    pub max_line_bytes: usize,
}

/// One step of the input, in `file`. `input_pos`: bytes of input (on disk) consumed once it is
/// handled, counted from the first file read here; `global_line`: lines emitted before it, all files.
pub(crate) struct Event {
    pub file: usize,
    pub global_line: u64,
    pub input_pos: u64,
    pub step: Step,
}

pub(crate) enum Step {
    /// Lines (or rows) of the file.
    Batch(LineBatch),
    /// Something wrong with the whole file.
    Problem(Problem),
    /// The file was read to its end (or found empty): its size on disk and decompressed.
    FileEnd { compressed: u64, decompressed: u64 },
}

/// Read `plan`'s files, handing each step to `emit`; line buffers come from `spares.data`.
/// Returns whether every file was read (false: `emit` stopped it, or a file could not be read,
/// which was emitted as a fatal problem).
pub(crate) fn read_inputs(plan: &ReadPlan<'_>, spares: &Spares, mut emit: impl FnMut(Event) -> bool) -> bool {
    let mut global_line = 0u64;
    let mut before = 0u64; // on-disk bytes of the files already read
    for file in plan.files.clone() {
        let path = &plan.inputs[file];
        let event = |global_line, input_pos, step| Event { file, global_line, input_pos, step };
        let size = match input_size(path) {
            Ok(size) => size,
            Err(e) => {
                emit(event(global_line, before, Step::Problem(Problem::Fatal(e))));
                return false;
            }
        };
        if size == Some(0) {
            let empty = event(global_line, before, Step::Problem(Problem::Empty));
            let end = event(global_line, before, Step::FileEnd { compressed: 0, decompressed: 0 });
            if !emit(empty) || !emit(end) {
                return false;
            }
            continue;
        }
        let skip = if file == plan.files.start { plan.skip_lines } else { 0 };
        let counter = Arc::new(AtomicU64::new(0));
        let mut reader =
            match Records::open(path, plan.keys, Arc::clone(&counter), plan.batch_bytes, plan.max_line_bytes) {
                Ok(r) => r,
                Err(e) => {
                    emit(event(global_line, before, Step::Problem(Problem::Fatal(e))));
                    return false;
                }
            };
        loop {
            let mut batch = match reader.next_batch_in(spares.data.take()) {
                Ok(Some(batch)) => batch,
                Ok(None) => break,
                Err(e) => {
                    emit(event(global_line, before, Step::Problem(Problem::Fatal(e))));
                    return false;
                }
            };
            let done_before = batch.first_line - 1;
            if done_before + batch.len() as u64 <= skip {
                spares.data.give(batch.data);
                continue;
            }
            if done_before < skip {
                // Resuming inside this batch: drop the lines the checkpoint covers.
                let k = (skip - done_before) as usize;
                batch.lines.drain(..k);
                batch.first_line += k as u64;
            }
            let n = batch.len() as u64;
            let read = counter.load(Ordering::Relaxed);
            let input_pos = before + size.map_or(read, |size| read.min(size));
            if !emit(event(global_line, input_pos, Step::Batch(batch))) {
                return false;
            }
            global_line += n;
        }
        let size = size.unwrap_or_else(|| counter.load(Ordering::Relaxed));
        before += size;
        let problem = match reader.truncation() {
            Some(t) => Some(Problem::Truncated(t.clone())),
            None if reader.offset() == 0 => Some(Problem::Empty),
            None => None,
        };
        if let Some(problem) = problem {
            if !emit(event(global_line, before, Step::Problem(problem))) {
                return false;
            }
        }
        if !emit(event(global_line, before, Step::FileEnd { compressed: size, decompressed: reader.offset() })) {
            return false;
        }
    }
    true
}
