//! What a preprocessing run did, for the CLI, the Python API and the JSON file beside the outputs.

use std::path::PathBuf;

use serde::Serialize;

use crate::indexed::WriteSummary;
use crate::ingest::Skips;
use crate::read::ScanReport;

/// One output dataset.
#[derive(Debug, Clone, Serialize)]
pub struct OutputSummary {
    /// JSON key.
    pub key: String,
    /// Dataset prefix.
    pub prefix: PathBuf,
    /// What was written (its fields appear beside `key` and `prefix`).
    #[serde(flatten)]
    pub written: WriteSummary,
}

/// The result of a run (also written as JSON beside the outputs).
#[derive(Debug, Clone, Serialize, Default)]
pub struct Summary {
    /// tokshuf version that wrote the outputs.
    pub tokshuf_version: String,
    /// Input files, in processing order.
    pub inputs: Vec<PathBuf>,
    pub files: u64,
    /// Lines read (accepted and skipped).
    pub lines: u64,
    /// Documents written (per key, the same number).
    pub documents: u64,
    /// Sequences written, over all keys.
    pub sequences: u64,
    /// Tokens written, over all keys.
    pub tokens: u64,
    /// Bytes of input read from disk (compressed size).
    pub input_bytes: u64,
    pub decompressed_bytes: u64,
    /// What was skipped (`skipped`, `first_skipped`, `skipped_files`).
    #[serde(flatten)]
    pub skips: Skips,
    /// What the scans of input directories passed over (`scan_skipped`, `first_scan_skipped`).
    #[serde(flatten)]
    pub scan: ScanReport,
    pub dtype: String,
    /// The tokenizer's identity.
    pub tokenizer: serde_json::Value,
    /// The options that shape the output.
    pub config: serde_json::Value,
    /// One entry per key.
    pub outputs: Vec<OutputSummary>,
    /// Tokenizer threads used.
    pub workers: usize,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// For a task's part: `{"index": i, "count": n}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<serde_json::Value>,
}
