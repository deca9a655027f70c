//! The options of a preprocessing run, their defaults and the output names they give.

use std::path::{Path, PathBuf};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::fsutil::with_suffix;
use crate::ingest::ErrorPolicy;
use crate::progress::ProgressStyle;
use crate::read::ScanReport;
use crate::tasks::Task;

/// Default JSON keys to tokenize.
pub const DEFAULT_JSON_KEYS: &[&str] = &["text"];

/// Options of one preprocessing run.
#[derive(Debug, Clone)]
pub struct PreprocessConfig {
    /// Input files, in the order their documents are written.
    pub inputs: Vec<PathBuf>,
    /// Outputs are `{output_prefix}_{key}_document.bin/.idx`.
    pub output_prefix: PathBuf,
    /// JSON keys to tokenize, one output each.
    pub json_keys: Vec<String>,
    /// Append the tokenizer's end-of-document id to every non-empty document.
    pub append_eod: bool,
    /// Output dtype; `None` picks uint16 below 65500 ids, else int32 (Megatron's rule).
    pub dtype: Option<DType>,
    /// Tokenizer threads (at least 1).
    pub workers: usize,
    pub on_error: ErrorPolicy,
    /// `1`: input order. `P > 1`: Megatron's `--partitions P` order (line k goes to partition
    /// k mod P; partitions are concatenated in order).
    pub partitions: usize,
    /// Approximate bytes of input per batch handed to a worker.
    pub batch_bytes: usize,
    /// Longest accepted line; longer lines are bad input (`line_too_long`).
    pub max_line_bytes: usize,
    /// Accept a list of strings as a list of sentences (Megatron); else a list is `not_string`.
    pub sentence_lists: bool,
    /// Progress on stderr.
    pub progress: ProgressStyle,
    /// Where to write the run summary as JSON (default `{output_prefix}_summary.json`).
    pub summary_path: Option<PathBuf>,
    /// The task this run is of a job cut into tasks ([`PreprocessConfig::for_task`]).
    pub task: Option<Task>,
    /// What the scans that listed `inputs` passed over, for the summary.
    pub scan: ScanReport,
    /// The whole input listing a task's `inputs` were cut from (empty: `inputs` is the listing).
    /// Its identity goes into the commit record, so that parts of different listings are never
    /// merged.
    pub listing: Vec<PathBuf>,
}

impl PreprocessConfig {
    /// Defaults for everything but the inputs, output and keys.
    pub fn new(inputs: Vec<PathBuf>, output_prefix: impl Into<PathBuf>, json_keys: Vec<String>) -> Self {
        let output_prefix = output_prefix.into();
        Self {
            inputs,
            summary_path: Some(summary_path_for(&output_prefix)),
            output_prefix,
            json_keys,
            append_eod: false,
            dtype: None,
            workers: 1,
            on_error: ErrorPolicy::Fail,
            partitions: 1,
            batch_bytes: 1 << 20,
            max_line_bytes: 1 << 30,
            sentence_lists: true,
            progress: ProgressStyle::Off,
            task: None,
            scan: ScanReport::default(),
            listing: Vec::new(),
        }
    }

    /// The whole input listing (a task's too).
    pub fn listing(&self) -> &[PathBuf] {
        if self.listing.is_empty() {
            &self.inputs
        } else {
            &self.listing
        }
    }

    /// Every file a run writes: each key's `.bin/.idx` (and Megatron's partition files), the
    /// summary and the commit record.
    pub fn output_paths(&self) -> Vec<PathBuf> {
        let parts =
            self.json_keys.iter().flat_map(|key| (0..self.partitions.max(1)).map(|p| self.partition_prefix(key, p)));
        let mut out: Vec<PathBuf> =
            parts.flat_map(|t| [crate::indexed::bin_path(&t), crate::indexed::idx_path(&t)]).collect();
        out.extend(self.summary_path.clone());
        out.push(crate::fsutil::record::record_path(&self.output_prefix));
        out
    }

    /// Task `task` of this run: the inputs of its slice of the listing ([`Task::slice`]), and
    /// outputs under `{output_prefix}-part-IIIII-of-NNNNN`. `tokshuf merge --parts` puts the
    /// parts together into the outputs this run would write.
    pub fn for_task(&self, task: Task) -> Result<PreprocessConfig> {
        let sizes = self
            .inputs
            .iter()
            .map(|p| crate::read::input_size(p).map(|s| s.unwrap_or(0)))
            .collect::<Result<Vec<_>>>()?;
        if self.inputs.iter().any(|p| crate::read::is_stdin(p)) {
            return Err(Error::invalid("standard input (`-`) cannot be cut into tasks"));
        }
        let mut part = self.clone();
        part.listing = self.listing().to_vec();
        part.inputs = self.inputs[task.slice(&sizes)].to_vec();
        part.output_prefix = part_prefix(&self.output_prefix, task);
        if self.summary_path.is_some() {
            part.summary_path = Some(summary_path_for(&part.output_prefix));
        }
        part.task = Some(task);
        Ok(part)
    }

    /// The output prefix of `key`: `{output_prefix}_{key}_document`.
    pub fn key_prefix(&self, key: &str) -> PathBuf {
        output_prefix_for(&self.output_prefix, key)
    }

    /// Where Megatron's partition `p` of `key` is written: the key's prefix for the first, which
    /// the others are appended to, `{prefix}.partition{p}` for the others.
    pub(super) fn partition_prefix(&self, key: &str, p: usize) -> PathBuf {
        let prefix = self.key_prefix(key);
        if p == 0 {
            prefix
        } else {
            with_suffix(&prefix, &format!(".partition{p}"))
        }
    }

    pub(super) fn check(&self) -> Result<()> {
        if self.output_prefix.as_os_str().is_empty() {
            return Err(Error::invalid("the output prefix (--output-prefix) must not be empty"));
        }
        // A task's slice may be empty (more tasks than inputs): it writes empty parts.
        if self.inputs.is_empty() && self.task.is_none() {
            return Err(Error::invalid("no input files"));
        }
        if self.json_keys.is_empty() {
            return Err(Error::invalid("at least one JSON key is needed (e.g. text)"));
        }
        if let Some(dup) = self.json_keys.iter().enumerate().find(|(i, k)| self.json_keys[..*i].contains(k)) {
            return Err(Error::invalid(format!("the JSON key {:?} is given twice", dup.1)));
        }
        if self.workers == 0 || self.workers > 1024 {
            return Err(Error::invalid(format!("workers must be between 1 and 1024, not {}", self.workers)));
        }
        if self.partitions == 0 {
            return Err(Error::invalid("partitions must be at least 1"));
        }
        if self.partitions > 1 && self.task.is_some() {
            // Megatron's partitions deal lines round-robin over the whole input: not a slice of it.
            return Err(Error::invalid("--partitions cannot be combined with tasks (--shard)"));
        }
        Ok(())
    }
}

/// `{prefix}_{key}_document`, Megatron's output naming.
pub fn output_prefix_for(prefix: &Path, key: &str) -> PathBuf {
    crate::fsutil::with_suffix(prefix, &format!("_{key}_document"))
}

/// `{prefix}-part-IIIII-of-NNNNN`, the output prefix of a task's part.
pub fn part_prefix(prefix: &Path, task: Task) -> PathBuf {
    crate::fsutil::with_suffix(prefix, &format!("-{}", task.part_name()))
}

/// `{prefix}_summary.json`, where a run's summary is written by default.
pub fn summary_path_for(prefix: &Path) -> PathBuf {
    crate::fsutil::with_suffix(prefix, "_summary.json")
}
