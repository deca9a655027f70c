//! A failed request to a store, told apart from a corrupt file's error, so the readers never take
//! an unreachable store for bad data (`--on-error skip` skips bad data, never a failing store).

use std::io;

/// A request to a store that failed: what was asked of which object, and why it failed.
#[derive(Debug, Clone)]
pub struct StoreError {
    /// The object's URL, redacted.
    pub url: String,
    /// The request: `HEAD`, `GET bytes 0-8388607`, `LIST`, `PUT`, `create multipart upload`, ...
    pub request: String,
    /// Why it failed, redacted.
    pub cause: String,
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {} failed: {}", self.request, self.url, self.cause)
    }
}

impl std::error::Error for StoreError {}

/// Whether `e` (or an error it wraps) is a failed request to a store rather than a problem with
/// the data read.
pub fn is_store_error(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(e);
    while let Some(e) = current {
        if e.is::<StoreError>() {
            return true;
        }
        // An io::Error's `source` skips its own inner error: look at that first.
        current = match e.downcast_ref::<io::Error>().and_then(|io| io.get_ref()) {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    false
}
