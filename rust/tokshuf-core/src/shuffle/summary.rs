//! What a shuffle run did, for the CLI, the Python API and the resume state.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::contexts::SpecialIds;
use crate::ingest::Skips;
use crate::read::ScanReport;

/// The result of a run (counts cover the whole run, across resumes).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    pub files: u64,
    /// Lines read (accepted and skipped).
    pub lines: u64,
    /// Documents turned into contexts (samples, with `--shuffle-only`).
    pub documents: u64,
    /// Non-PAD tokens in contexts (document ids, BOS, EOT).
    pub tokens: u64,
    pub pad_tokens: u64,
    /// Contexts written (samples, with `--shuffle-only`).
    pub contexts: u64,
    /// Tokens per context.
    pub seqlen: u64,
    /// PAD tokens / all tokens in contexts.
    pub padding_fraction: f64,
    pub shards: u64,
    /// Contexts per full shard.
    pub wds_chunk_size: u64,
    /// What was skipped (`skipped`, `first_skipped`, `skipped_files`).
    #[serde(flatten)]
    pub skips: Skips,
    /// What the scans of input directories passed over (`scan_skipped`, `first_scan_skipped`).
    #[serde(flatten)]
    pub scan: ScanReport,
    /// Bytes of input files (on disk).
    pub input_bytes: u64,
    /// Decompressed bytes of input.
    pub decompressed_bytes: u64,
    /// Bytes of encoded contexts (tar payload).
    pub cell_bytes: u64,
    /// Bytes of the shards.
    pub output_bytes: u64,
    /// The tokenizer's identity (null with `--shuffle-only`).
    pub tokenizer: serde_json::Value,
    /// Special ids (null with `--shuffle-only`).
    pub special_tokens: Option<SpecialIds>,
    /// Member extension.
    pub member_format: String,
    /// Output directory.
    pub output: PathBuf,
    /// `manifest.jsonl`.
    pub manifest: PathBuf,
    /// This invocation continued an interrupted run.
    pub resumed: bool,
    /// The run was already complete; nothing was done.
    pub already_complete: bool,
    /// Seconds of stage 1 in this invocation.
    pub stage1_seconds: f64,
    /// Seconds of stage 2 in this invocation.
    pub stage2_seconds: f64,
    /// Seconds of this invocation.
    pub seconds: f64,
    /// Things the user should know (special ids outside the vocabulary, ...).
    pub warnings: Vec<String>,
    /// For one step of a shuffle cut into tasks: the step, the task and what it covered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<serde_json::Value>,
}
