//! tokshuf-core: the pure-Rust half of tokshuf (no Python here; `tokshuf-py` binds it).
//!
//! # Map of the crate, in pipeline order
//!
//! Read → tokenize → write → index → serve:
//!
//! - **read**
//!   - [`storage`]: where bytes live: local files and `s3://`, `gs://`, `az://`, `https://` objects
//!     behind one interface (ranged read-ahead, retries, uploads).
//!   - [`read`]: which inputs (listing, globs), decompression, JSON lines and their text fields,
//!     Parquet/Arrow rows.
//! - **tokenize**
//!   - [`tokenize`]: tokenizer specs → one `Tokenizer` trait (byte-level BPE, tiktoken,
//!     SentencePiece, the `tokenizers` fallback), batch encoding. The fast encoder and the
//!     vocabulary formats it reads are their own crate, `tokshuf-bpe` ([`tokenize::bpe`]).
//! - **write**
//!   - [`ingest`]: what preprocess and shuffle's stage 1 share: the bad-input policy and the skip
//!     ledger, the buffers batches hand back.
//!   - [`preprocess`]: `tokshuf preprocess`: the reader thread, worker pool and in-order writer,
//!     JSON lines → Megatron `.bin/.idx` per key, and its summary.
//!   - [`shuffle`]: `tokshuf shuffle`: contexts per input file → local cells (stage 1) →
//!     webdataset shards + manifest (stage 2), one node or in tasks.
//!   - [`tasks`]: a job cut into tasks (Slurm arrays, Ray) whose outputs, in task order, are the
//!     one-node run's.
//!   - [`fsutil`]: files that appear complete or not at all; commit records of output sets.
//! - **index**
//!   - [`indexed`]: Megatron's `MMIDIDX` `.bin/.idx`, written and read; merging.
//!   - [`tokens`]: flat token arrays: OLMo's `.npy` token files, documents found by EOS or metadata.
//!   - [`megatron`]: GPTDataset / BlendedDataset indices, array for array.
//!   - [`instances`]: OLMo-style instance strategies (fsl, padded, packed, interleaved, vsl).
//! - **serve**
//!   - [`stream`]: the stateful, rescalable streaming loader (sources, mixing, checkpoints).
//!
//! Shared by all: [`error`] (one error type), [`dtype`] (token dtypes and Megatron's codes),
//! [`rng`] (SplitMix64 and numpy's generators), [`parallel`] (thread pools), [`progress`]
//! (progress reports), [`cancel`] (cooperative cancellation), [`alloc`] (the allocator for large
//! buffers).

pub mod alloc;
pub mod cancel;
pub mod dtype;
pub mod error;
pub mod fsutil;
pub mod indexed;
pub mod ingest;
pub mod instances;
pub mod megatron;
pub mod parallel;
pub mod preprocess;
pub mod progress;
pub mod read;
pub mod rng;
pub mod shuffle;
pub mod storage;
pub mod stream;
pub mod tasks;
pub mod tokenize;
pub mod tokens;

pub use cancel::Cancel;
pub use dtype::DType;
pub use error::{Error, Result};

/// Whether the switch `name` is on: unset, or set to anything but `0`.
pub(crate) fn env_on(name: &str) -> bool {
    std::env::var(name).map_or(true, |v| v.trim() != "0")
}
