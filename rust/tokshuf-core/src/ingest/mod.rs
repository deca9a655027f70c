//! What `preprocess` and shuffle's stage 1 share between their inputs and their documents: the
//! one reader of the input files, the policy for bad input and the one ledger of what it
//! skipped, and the buffers finished batches hand back.

mod reader;
mod skips;
mod spares;

pub(crate) use reader::{read_inputs, Event, ReadPlan, Step};
pub use skips::{ErrorPolicy, Problem, SkipRecord, SkippedFile, Skips, SKIP_EXAMPLES};
pub(crate) use spares::{Pool, Spares};

use std::path::PathBuf;

/// `n` slots: a channel that holds `n` tokens to begin with, one taken for each item put in
/// flight and given back once it is done, so that at most `n` are in flight.
pub(crate) fn slots(n: usize) -> (crossbeam_channel::Sender<()>, crossbeam_channel::Receiver<()>) {
    let (tx, rx) = crossbeam_channel::bounded(n);
    (0..n).for_each(|_| tx.send(()).expect("capacity"));
    (tx, rx)
}

/// Inputs of at least this many bytes on disk make a long job: its tokenizer's caches are
/// allocated whole before it starts ([`Tokenizer::prepare_for_long_job`]), so that its memory
/// stays the same from the first document to the last. A shorter job lets them grow with use
/// (they stop at the same size): committing them cost ~20 ms of page faults, a fifth of a 10 MB
/// job.
///
/// [`Tokenizer::prepare_for_long_job`]: crate::tokenize::Tokenizer::prepare_for_long_job
pub const LONG_JOB_BYTES: u64 = 32 << 20;

/// Whether reading `inputs`, `bytes` on disk in all, is a long job (standard input, of unknown
/// length, is).
pub(crate) fn is_long_job(inputs: &[PathBuf], bytes: u64) -> bool {
    bytes >= LONG_JOB_BYTES || inputs.iter().any(|p| crate::read::is_stdin(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_jobs_are_large_or_of_unknown_length() {
        let files = [PathBuf::from("a.jsonl"), PathBuf::from("b.jsonl.zst")];
        assert!(!is_long_job(&files, LONG_JOB_BYTES - 1));
        assert!(is_long_job(&files, LONG_JOB_BYTES));
        assert!(is_long_job(&[PathBuf::from("-")], 0), "standard input");
    }
}
