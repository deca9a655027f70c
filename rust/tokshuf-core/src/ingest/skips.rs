//! The skip ledger: what a run did with input it could not use, under its [`ErrorPolicy`].
//! Lines a worker rejected and whole-file problems arrive in input order; under `fail` the first
//! is the run's error, under `skip` each is counted by reason, the first few lines listed, and
//! every empty or truncated file listed with what was lost.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{BadInputReason, Error, Result};
use crate::read::lines::Truncation;

/// Skipped lines listed individually.
pub const SKIP_EXAMPLES: usize = 20;

/// What to do with an input line that cannot be turned into a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorPolicy {
    /// Stop at the first bad line with an error naming the file, line and reason.
    #[default]
    Fail,
    /// Skip the line, count it by reason and report the first few.
    Skip,
}

impl ErrorPolicy {
    /// The policy's name, as [`str::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fail => "fail",
            Self::Skip => "skip",
        }
    }
}

impl std::str::FromStr for ErrorPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let unknown = || Error::invalid(format!("unknown error policy {s:?} (expected one of: fail, skip)"));
        [Self::Fail, Self::Skip].into_iter().find(|p| p.name() == s).ok_or_else(unknown)
    }
}

/// Something wrong with a whole input file, met in input order like its batches.
pub enum Problem {
    /// No bytes at all, or nothing after decompression.
    Empty,
    /// Decompression failed part-way: the lines before the failure were read.
    Truncated(Truncation),
    /// The file cannot be read (stops the run under any policy).
    Fatal(Error),
}

/// A skipped line (the first few are kept for the report).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkipRecord {
    pub path: PathBuf,
    /// 1-based line number.
    pub line: u64,
    pub reason: String,
    pub message: String,
}

/// A whole file that was skipped, or only partly read, under `on_error = skip`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedFile {
    pub path: PathBuf,
    /// `empty_file` or `truncated_file`.
    pub reason: String,
    /// For a truncated file: the first line lost (the one the failure cut).
    pub first_lost_line: Option<u64>,
    /// For a truncated file: decompressed bytes read before the failure.
    pub decompressed_bytes_read: Option<u64>,
    pub message: String,
}

/// What a run skipped (a summary's `skipped`, `first_skipped` and `skipped_files`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skips {
    /// Skipped lines by reason (a line cut by a truncated file counts as `truncated_file`).
    pub skipped: BTreeMap<String, u64>,
    /// The first skipped lines.
    pub first_skipped: Vec<SkipRecord>,
    /// Files skipped whole (empty) or read only in part (truncated): what was lost.
    #[serde(default)]
    pub skipped_files: Vec<SkippedFile>,
}

impl Skips {
    /// Count a skipped line.
    fn count(&mut self, path: &Path, line: u64, reason: BadInputReason, msg: &str) {
        *self.skipped.entry(reason.as_str().to_string()).or_default() += 1;
        if self.first_skipped.len() < SKIP_EXAMPLES {
            self.first_skipped.push(SkipRecord {
                path: path.to_path_buf(),
                line,
                reason: reason.as_str().to_string(),
                message: msg.to_string(),
            });
        }
    }

    /// The lines of a batch of `path` starting at line `first_line` that a worker rejected
    /// (index in the batch, reason, message): the first is the error under `fail`.
    pub fn rejected(
        &mut self,
        policy: ErrorPolicy,
        path: &Path,
        first_line: u64,
        rejected: &[(u32, BadInputReason, String)],
    ) -> Result<()> {
        for (i, reason, msg) in rejected {
            let line = first_line + u64::from(*i);
            if policy == ErrorPolicy::Fail {
                return Err(Error::BadInput { path: path.to_path_buf(), line, reason: *reason, msg: msg.clone() });
            }
            self.count(path, line, *reason, msg);
        }
        Ok(())
    }

    /// A whole-file problem of `path`: an error under `fail` (a fatal one under any policy);
    /// under `skip` the file is listed, and the partial line a truncation cut counted.
    pub fn problem(&mut self, policy: ErrorPolicy, path: &Path, problem: Problem) -> Result<()> {
        let (reason, line, first_lost_line, decompressed_bytes_read, message) = match problem {
            Problem::Fatal(e) => return Err(e),
            Problem::Empty => (BadInputReason::EmptyFile, 0, None, None, "the file is empty".to_string()),
            Problem::Truncated(t) => {
                let message = t.describe();
                if t.fragment_bytes > 0 && policy == ErrorPolicy::Skip {
                    self.count(path, t.line, BadInputReason::TruncatedFile, &message);
                }
                (BadInputReason::TruncatedFile, t.line, Some(t.line), Some(t.offset), message)
            }
        };
        let path = path.to_path_buf();
        if policy == ErrorPolicy::Fail {
            return Err(Error::BadInput { path, line, reason, msg: message });
        }
        let reason = reason.as_str().into();
        self.skipped_files.push(SkippedFile { path, reason, first_lost_line, decompressed_bytes_read, message });
        Ok(())
    }

    /// Add what another part of the same run skipped (the parts in input order): counts add up,
    /// the examples stay the first [`SKIP_EXAMPLES`].
    pub fn absorb(&mut self, other: &Skips) {
        for (reason, n) in &other.skipped {
            *self.skipped.entry(reason.clone()).or_default() += n;
        }
        let room = SKIP_EXAMPLES.saturating_sub(self.first_skipped.len());
        self.first_skipped.extend(other.first_skipped.iter().take(room).cloned());
        self.skipped_files.extend(other.skipped_files.iter().cloned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(n: u32) -> Vec<(u32, BadInputReason, String)> {
        (0..n).map(|i| (i, BadInputReason::InvalidJson, format!("bad {i}"))).collect()
    }

    #[test]
    fn under_fail_the_first_rejected_line_is_the_error() {
        let mut skips = Skips::default();
        let err = skips.rejected(ErrorPolicy::Fail, Path::new("a.jsonl"), 7, &rejected(3)).unwrap_err();
        assert!(matches!(err, Error::BadInput { line: 7, .. }), "{err}");
        assert_eq!(skips, Skips::default());
    }

    #[test]
    fn under_skip_lines_are_counted_and_the_first_listed() {
        let mut skips = Skips::default();
        skips.rejected(ErrorPolicy::Skip, Path::new("a.jsonl"), 1, &rejected(15)).unwrap();
        skips.rejected(ErrorPolicy::Skip, Path::new("b.jsonl"), 100, &rejected(15)).unwrap();
        assert_eq!(skips.skipped.values().sum::<u64>(), 30);
        assert_eq!(skips.first_skipped.len(), SKIP_EXAMPLES);
        assert_eq!((skips.first_skipped[15].path.as_path(), skips.first_skipped[15].line), (Path::new("b.jsonl"), 100));
    }

    #[test]
    fn parts_absorbed_in_order_keep_the_first_examples() {
        let (mut a, mut b) = (Skips::default(), Skips::default());
        a.rejected(ErrorPolicy::Skip, Path::new("a"), 1, &rejected(12)).unwrap();
        b.rejected(ErrorPolicy::Skip, Path::new("b"), 1, &rejected(12)).unwrap();
        b.problem(ErrorPolicy::Skip, Path::new("c"), Problem::Empty).unwrap();
        let mut whole = Skips::default();
        whole.absorb(&a);
        whole.absorb(&b);
        let mut direct = a.clone();
        direct.rejected(ErrorPolicy::Skip, Path::new("b"), 1, &rejected(12)).unwrap();
        direct.problem(ErrorPolicy::Skip, Path::new("c"), Problem::Empty).unwrap();
        assert_eq!(whole, direct);
    }

    #[test]
    fn an_empty_file_is_an_error_under_fail_and_listed_under_skip() {
        let mut skips = Skips::default();
        assert!(skips.problem(ErrorPolicy::Fail, Path::new("e"), Problem::Empty).is_err());
        skips.problem(ErrorPolicy::Skip, Path::new("e"), Problem::Empty).unwrap();
        assert_eq!(skips.skipped_files.len(), 1);
        assert_eq!(skips.skipped_files[0].reason, "empty_file");
        assert_eq!(skips.skipped.values().sum::<u64>(), 0);
    }
}
