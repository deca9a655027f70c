//! What a preprocessing run did, for the CLI, the Python API and the JSON file beside the outputs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::indexed::WriteSummary;
use crate::read::ScanReport;

/// A skipped line (the first few are kept for the report).
#[derive(Debug, Clone, Serialize)]
pub struct SkipRecord {
    /// Input file.
    pub path: PathBuf,
    /// 1-based line number.
    pub line: u64,
    /// Reason name.
    pub reason: String,
    /// Details.
    pub message: String,
}

/// A whole file that was skipped, or only partly read, under `on_error = skip`.
#[derive(Debug, Clone, Serialize)]
pub struct SkippedFile {
    /// Input file.
    pub path: PathBuf,
    /// `empty_file` or `truncated_file`.
    pub reason: String,
    /// For a truncated file: the first line lost (the one the failure cut).
    pub first_lost_line: Option<u64>,
    /// For a truncated file: decompressed bytes read before the failure.
    pub decompressed_bytes_read: Option<u64>,
    /// Details.
    pub message: String,
}

/// One output dataset.
#[derive(Debug, Clone, Serialize)]
pub struct OutputSummary {
    /// JSON key.
    pub key: String,
    /// Dataset prefix.
    pub prefix: PathBuf,
    /// Documents written.
    pub documents: u64,
    /// Sequences written.
    pub sequences: u64,
    /// Tokens written.
    pub tokens: u64,
    /// Bytes of `.bin`.
    pub bin_bytes: u64,
    /// Bytes of `.idx`.
    pub idx_bytes: u64,
}

impl OutputSummary {
    pub(crate) fn new(key: &str, prefix: PathBuf, w: WriteSummary) -> Self {
        Self {
            key: key.to_string(),
            prefix,
            documents: w.documents,
            sequences: w.sequences,
            tokens: w.tokens,
            bin_bytes: w.bin_bytes,
            idx_bytes: w.idx_bytes,
        }
    }
}

/// The result of a run (also written as JSON beside the outputs).
#[derive(Debug, Clone, Serialize, Default)]
pub struct Summary {
    /// tokshuf version that wrote the outputs.
    pub tokshuf_version: String,
    /// Input files, in processing order.
    pub inputs: Vec<PathBuf>,
    /// Input files read.
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
    /// Bytes after decompression.
    pub decompressed_bytes: u64,
    /// Skipped lines by reason (a line cut by a truncated file counts as `truncated_file`).
    pub skipped: BTreeMap<String, u64>,
    /// The first skipped lines.
    pub first_skipped: Vec<SkipRecord>,
    /// Files skipped whole (empty) or cut short (truncated): what was lost.
    pub skipped_files: Vec<SkippedFile>,
    /// What the scans of input directories passed over (`scan_skipped`, `first_scan_skipped`).
    #[serde(flatten)]
    pub scan: ScanReport,
    /// Output dtype.
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

impl Summary {
    /// Total skipped lines.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.values().sum()
    }
}
