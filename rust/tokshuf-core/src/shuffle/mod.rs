//! `tokshuf shuffle`: JSON lines → tokens → fixed-length contexts → two-stage local-cell disk
//! shuffle → webdataset shards that open_lm / DCLM read unchanged.
//!
//! * stage 1 ([`stage1`], [`samples`] for `--shuffle-only`): contexts are cut per input file
//!   ([`contexts`]), encoded once ([`encode`]) and scattered over local cells on disk ([`cells`]);
//! * stage 2 ([`stage2`]): cells are shuffled one at a time into `shard_%08d.tar` ([`shard`],
//!   [`tar`]) and `manifest.jsonl`.
//!
//! [`tasks`] runs them, as steps: one process runs every step as one task, a scheduler runs them
//! as many (same bytes); the manifest step ends in `output::finish` (manifest, summary, commit
//! record). This module only declares the others and re-exports their public items: nothing
//! imports back from it.
//!
//! Every random decision is a function of the seed and content positions ([`rng`]), so the output
//! is byte-identical for any thread count, and [`state`] checkpoints make a killed run resumable
//! with the same output.

pub mod cells;
mod config;
mod contexts;
mod deflate;
mod encode;
pub mod json_gz;
mod output;
mod rng;
mod samples;
mod shard;
mod stage1;
mod stage2;
mod state;
mod summary;
pub mod tar;
mod tasks;

pub use config::{
    resolve_special, ShuffleConfig, DEFAULT_BUFFER_BYTES, DEFAULT_CONTENT_KEY, DEFAULT_GZIP_LEVEL,
    DEFAULT_NUM_LOCAL_CELLS, DEFAULT_SEED, DEFAULT_SEQLEN, DEFAULT_SPECIAL_TOKENS, DEFAULT_WDS_CHUNK_SIZE,
    SPECIAL_TOKEN_PRESETS,
};
pub use contexts::{context_id, Cutter, SpecialIds};
pub use encode::{Encoder, MemberFormat};
pub use summary::Summary;
pub use tasks::{shuffle, Step};
