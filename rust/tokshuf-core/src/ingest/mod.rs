//! What `preprocess` and shuffle's stage 1 share between their inputs and their documents: the
//! one reader of the input files, the policy for bad input and the one ledger of what it
//! skipped, and the buffers finished batches hand back.

mod reader;
mod skips;
mod spares;

pub(crate) use reader::{read_inputs, Event, ReadPlan};
pub use skips::{ErrorPolicy, Problem, SkipRecord, SkippedFile, Skips, SKIP_EXAMPLES};
pub(crate) use spares::{Pool, Spares};
