//! One error type for the whole core; the binding maps each variant to a Python exception.

use std::fmt;
use std::path::{Path, PathBuf};

// Messages pass through the storage layer's redaction: a path may be a URL with a password, a
// message may quote a store's words.
use crate::storage::redact::redact;

/// Result alias used throughout the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why an input line could not be turned into a document.
///
/// The names are the categories users see in skip counts and error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BadInputReason {
    /// The line is not valid JSON (syntax error).
    InvalidJson,
    /// The line ends before the JSON value does (a cut-off line).
    TruncatedJson,
    /// The line is valid JSON but not an object.
    NotObject,
    /// A requested key is absent.
    MissingKey,
    /// A requested key holds something other than a string or a list of strings.
    NotString,
    /// The line's bytes are not valid UTF-8.
    InvalidUtf8,
    /// A `\uD800`-style escape with no partner: valid JSON grammar, not valid Unicode.
    LoneSurrogate,
    /// An empty or whitespace-only line.
    BlankLine,
    /// A UTF-8 byte-order mark before the JSON value.
    Bom,
    /// The line is longer than the configured maximum.
    LineTooLong,
    /// The tokenizer rejected the text, or an id does not fit the output dtype.
    Tokenizer,
    /// A compressed file ends early (or is corrupt): the line it cuts, and everything after it,
    /// is lost.
    TruncatedFile,
    /// A file with no bytes (after decompression).
    EmptyFile,
}

impl BadInputReason {
    /// Every reason, in reporting order.
    pub const ALL: [BadInputReason; 13] = [
        Self::InvalidJson,
        Self::TruncatedJson,
        Self::NotObject,
        Self::MissingKey,
        Self::NotString,
        Self::InvalidUtf8,
        Self::LoneSurrogate,
        Self::BlankLine,
        Self::Bom,
        Self::LineTooLong,
        Self::Tokenizer,
        Self::TruncatedFile,
        Self::EmptyFile,
    ];

    /// The stable snake_case name used in summaries and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid_json",
            Self::TruncatedJson => "truncated_json",
            Self::NotObject => "not_object",
            Self::MissingKey => "missing_key",
            Self::NotString => "not_string",
            Self::InvalidUtf8 => "invalid_utf8",
            Self::LoneSurrogate => "lone_surrogate",
            Self::BlankLine => "blank_line",
            Self::Bom => "bom",
            Self::LineTooLong => "line_too_long",
            Self::Tokenizer => "tokenizer",
            Self::TruncatedFile => "truncated_file",
            Self::EmptyFile => "empty_file",
        }
    }
}

impl fmt::Display for BadInputReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Errors of the core.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O failure on a named file (a failed request to a store names its object itself).
    #[error("{}", io_message(path, source))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file that exists but is not what it should be (corrupt or foreign `.idx/.bin`, torn archive).
    #[error("{}: {}", shown(path), redact(msg))]
    Format {
        path: PathBuf,
        /// What is wrong with it.
        msg: String,
    },
    /// A bad input record under the `fail` policy.
    #[error("{}{}: {reason}: {}", shown(path), if *line > 0 { format!(":{line}") } else { String::new() }, redact(msg))]
    BadInput {
        path: PathBuf,
        /// 1-based line number in the decompressed file; 0 for a problem with the whole file.
        line: u64,
        reason: BadInputReason,
        msg: String,
    },
    /// An argument or configuration value that cannot be used.
    #[error("{}", redact(.0))]
    InvalidArgument(String),
    /// The work was stopped by the caller (Ctrl-C).
    #[error("cancelled")]
    Cancelled,
}

fn shown(path: &Path) -> String {
    redact(&path.display().to_string()).into_owned()
}

fn io_message(path: &Path, source: &std::io::Error) -> String {
    if crate::storage::store_error::is_store_error(source) {
        redact(&source.to_string()).into_owned()
    } else {
        format!("{}: {}", shown(path), redact(&source.to_string()))
    }
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io { path: path.as_ref().to_path_buf(), source }
    }

    /// A format error on `path`.
    pub fn format(path: impl AsRef<Path>, msg: impl Into<String>) -> Self {
        Error::Format { path: path.as_ref().to_path_buf(), msg: msg.into() }
    }

    /// An invalid-argument error.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }
}

/// What a caught panic said (its `&str` or `String` payload), else `default`.
pub fn panic_message(panic: &(dyn std::any::Any + Send), default: &str) -> String {
    let text = panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str));
    text.unwrap_or(default).to_string()
}

/// Attach a path to `std::io::Result`s.
pub trait IoContext<T> {
    /// Map an `io::Error` into [`Error::Io`] naming `path`.
    fn with_path(self, path: impl AsRef<Path>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn with_path(self, path: impl AsRef<Path>) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}

/// The fast encoder's errors (`tokshuf-bpe`), as the core's of the same kind: their messages are
/// the core's.
impl From<tokshuf_bpe::Error> for Error {
    fn from(e: tokshuf_bpe::Error) -> Self {
        match e {
            tokshuf_bpe::Error::Format { path, msg } => Error::Format { path, msg },
            tokshuf_bpe::Error::Invalid(msg) => Error::InvalidArgument(msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_docs_list_every_skip_reason() {
        let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/preprocess.md")).unwrap();
        for reason in BadInputReason::ALL {
            assert!(page.contains(&format!("`{reason}`")), "docs/preprocess.md does not list `{reason}`");
        }
    }
}
