//! tokshuf-core: the pure-Rust half of tokshuf (no Python here).
//!
//! The modules follow the pipeline: `storage` (local files and object stores) → `read` (inputs,
//! decompression, JSON lines) →
//! `tokenize` → `indexed` (Megatron's MMIDIDX `.bin/.idx`, written and read) →
//! `preprocess` (the parallel pipeline that ties them together) → `megatron` (GPTDataset /
//! BlendedDataset indices and sample reads) and `shuffle` (contexts, local cells and webdataset
//! shards for open_lm / DCLM).

pub mod alloc;
pub mod cancel;
pub mod dtype;
pub mod error;
pub mod fsutil;
pub mod indexed;
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
