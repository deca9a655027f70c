//! Live counters of a shuffle run, read by whoever draws the progress (the binding's reporter).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters updated by the pipeline; read them with [`Progress::snapshot`].
#[derive(Debug, Default)]
pub struct Progress {
    stage: AtomicU64,
    files_total: AtomicU64,
    files_done: AtomicU64,
    input_bytes_total: AtomicU64,
    input_bytes_read: AtomicU64,
    tokens: AtomicU64,
    contexts: AtomicU64,
    cells_total: AtomicU64,
    cells_done: AtomicU64,
    shards_total: AtomicU64,
    shards_done: AtomicU64,
    bytes_written: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Snapshot {
    /// 0: starting, 1: stage 1 (cells), 2: stage 2 (shards), 3: done.
    pub stage: u64,
    /// Input files.
    pub files_total: u64,
    /// Input files fully read.
    pub files_done: u64,
    /// Bytes of all input files.
    pub input_bytes_total: u64,
    /// Bytes of input read so far (on disk, compressed).
    pub input_bytes_read: u64,
    /// Non-PAD tokens in contexts so far.
    pub tokens: u64,
    /// Contexts so far.
    pub contexts: u64,
    /// Local cells.
    pub cells_total: u64,
    /// Cells shuffled into shards.
    pub cells_done: u64,
    /// Shards to write.
    pub shards_total: u64,
    /// Shards written.
    pub shards_done: u64,
    /// Bytes of shards written.
    pub bytes_written: u64,
}

macro_rules! setters {
    ($($field:ident),*) => {
        impl Progress {
            $(
                #[doc = concat!("Set `", stringify!($field), "`.")]
                pub fn $field(&self, v: u64) {
                    self.$field.store(v, Ordering::Relaxed);
                }
            )*

            /// The current values.
            pub fn snapshot(&self) -> Snapshot {
                Snapshot { $($field: self.$field.load(Ordering::Relaxed)),* }
            }
        }
    };
}

setters!(
    stage,
    files_total,
    files_done,
    input_bytes_total,
    input_bytes_read,
    tokens,
    contexts,
    cells_total,
    cells_done,
    shards_total,
    shards_done,
    bytes_written
);

impl Progress {
    /// Add `n` bytes to `input_bytes_read`.
    pub fn add_input_bytes(&self, n: u64) {
        self.input_bytes_read.fetch_add(n, Ordering::Relaxed);
    }

    /// Add `n` bytes to `bytes_written`.
    pub fn add_bytes_written(&self, n: u64) {
        self.bytes_written.fetch_add(n, Ordering::Relaxed);
    }
}
