//! What `preprocess` and shuffle's stage 1 share between reading their inputs and using the
//! documents: the policy for bad input and the one ledger of what it skipped, and the buffers
//! finished batches hand back.

mod skips;
mod spares;

pub use skips::{ErrorPolicy, Problem, SkipRecord, SkippedFile, Skips, SKIP_EXAMPLES};
pub(crate) use spares::{Pool, Spares};
