//! The engine's errors. `tokshuf-core` turns each into its own error of the same kind, whose
//! message is the one users see.

use std::path::{Path, PathBuf};

/// Result alias of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a vocabulary could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file that is not what it should be (a rank file with a bad line, a damaged `tekken.json`).
    #[error("{}: {msg}", path.display())]
    Format {
        path: PathBuf,
        /// What is wrong with it.
        msg: String,
    },
    /// A name or value that cannot be used (an unknown encoding or pattern, a vocabulary BPE
    /// cannot encode every text with).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// A format error on `path`.
    pub fn format(path: impl AsRef<Path>, msg: impl Into<String>) -> Self {
        Error::Format { path: path.as_ref().to_path_buf(), msg: msg.into() }
    }

    /// An invalid-argument error.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::Invalid(msg.into())
    }
}
