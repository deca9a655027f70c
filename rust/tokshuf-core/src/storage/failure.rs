//! How a store's failures become errors, and errors text: every request runs within the retry
//! budget (`TOKSHUF_STORAGE_RETRY_SECONDS`), and what a failed one says names the object, the
//! request and the cause (a status with S3's `<Code>` and `<Message>`, or the transport failure),
//! never a response body or a request's headers; its text passes through [`redact`].
//!
//! A failed request is an [`io::Error`] whose inner error is a [`StoreError`]:
//! [`super::is_store_error`] tells it apart from a corrupt file's error.

use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

use super::redact::redact;
use super::store_error::StoreError;
use super::stores::{retry_time, Remote};

/// The same error again (for a reader that keeps failing once a request failed).
pub(crate) fn again(e: &io::Error) -> io::Error {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<StoreError>()) {
        Some(store) => io::Error::new(e.kind(), store.clone()),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// Why a request gave up.
pub(crate) enum Failure {
    /// The store answered with an error (after the client's own retries).
    Store(object_store::Error),
    /// No answer, or no progress, within the retry budget.
    Stalled(Duration),
    /// Something else went wrong on the way (the body ended early, ...).
    Other(String),
}

impl From<object_store::Error> for Failure {
    fn from(e: object_store::Error) -> Self {
        Failure::Store(e)
    }
}

/// How object_store words a key that a multi-object delete refused.
const KEY_REFUSED: &str = "DeleteObjects request failed for key";

impl Failure {
    /// Whether trying again may help: a 5xx, a dropped connection, a cut answer; never a
    /// missing object, a refusal, a precondition or an unsupported request.
    pub(crate) fn transient(&self) -> bool {
        match self {
            // A server that ignores Range answers every retry the same way.
            Failure::Store(e) if e.to_string().contains("non-partial response") => false,
            // A multi-object delete that refuses a key answers 200 with the key's error code:
            // worth a retry only when the code is the store's own trouble, not a refusal.
            Failure::Store(e) if e.to_string().contains(KEY_REFUSED) => {
                let text = e.to_string();
                let code = text.rsplit_once("(code: ").map_or("", |(_, code)| code.trim_end_matches(')'));
                matches!(code, "InternalError" | "SlowDown" | "ServiceUnavailable")
            }
            Failure::Store(e) => {
                matches!(e, object_store::Error::Generic { .. } | object_store::Error::JoinError { .. })
            }
            Failure::Stalled(_) => false,
            Failure::Other(_) => true,
        }
    }

    /// The error of `request` on `remote`, which gave up after `elapsed`.
    pub(crate) fn into_io(self, remote: &Remote, request: &str, elapsed: Duration) -> io::Error {
        let budget = retry_time();
        let (kind, cause) = match &self {
            Failure::Store(e) => {
                let kind = match e {
                    object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
                    object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
                        io::ErrorKind::PermissionDenied
                    }
                    object_store::Error::NotSupported { .. } | object_store::Error::NotImplemented { .. } => {
                        io::ErrorKind::Unsupported
                    }
                    _ => io::ErrorKind::Other,
                };
                let mut cause = describe(e);
                if self.transient() && elapsed >= Duration::from_millis(500) {
                    cause.push_str(&format!(
                        " (retried for {:.1} s; TOKSHUF_STORAGE_RETRY_SECONDS={})",
                        elapsed.as_secs_f64(),
                        budget.as_secs_f64()
                    ));
                }
                (kind, cause)
            }
            Failure::Stalled(waited) => (
                io::ErrorKind::TimedOut,
                format!(
                    "the store did not answer (or stopped sending) for {:.1} s, the retry budget \
                     (TOKSHUF_STORAGE_RETRY_SECONDS={})",
                    waited.as_secs_f64(),
                    budget.as_secs_f64()
                ),
            ),
            Failure::Other(why) => (io::ErrorKind::Other, redact(why).into_owned()),
        };
        let url = redact(&remote.url).into_owned();
        io::Error::new(kind, StoreError { url, request: request.to_string(), cause })
    }
}

/// What object_store's retry error says went wrong, without the request it names (the URI may
/// hold a password): "Error performing GET <uri> in 1s, after 2 retries, ... - <what>".
fn request_failure(text: &str) -> &str {
    match text.find("Error performing ") {
        Some(at) => text[at..].split_once(" - ").map_or("the request failed", |(_, what)| what),
        None => text,
    }
}

/// The cause of a store's error in words fit to print: the status and S3's `<Code>` and
/// `<Message>` of an error answer (its body is never printed: it may echo the signed request,
/// a session token included), else the failure's own words, redacted.
fn describe(e: &object_store::Error) -> String {
    let text = e.to_string();
    let inner = request_failure(&text);
    const STATUS: &str = "Server returned non-2xx status code: ";
    const ANSWER: &str = "Server returned error response: ";
    let (status, body) = if let Some(at) = inner.find(STATUS) {
        let rest = &inner[at + STATUS.len()..];
        match rest.split_once(": ") {
            Some((status, body)) => (Some(status), body),
            None => (Some(rest.trim_end_matches(':')), ""),
        }
    } else if let Some(at) = inner.find(ANSWER) {
        (Some("an error in a 200 answer"), &inner[at + ANSWER.len()..])
    } else {
        let mut short = match e {
            object_store::Error::NotFound { .. } => return "not found".into(),
            object_store::Error::Precondition { .. } => {
                return "the object changed (its ETag or modification time no longer match)".into()
            }
            _ => inner.to_string(),
        };
        // The transport's own words below it ("too many redirects", "connection refused"); never
        // an answer's body.
        let mut source = std::error::Error::source(e);
        while let Some(cause) = source {
            let text = cause.to_string();
            let words = request_failure(&text);
            if words.contains("Server returned") {
                break;
            }
            if !short.contains(words) {
                short = format!("{short}: {words}");
            }
            source = cause.source();
        }
        return redact(&short).into_owned();
    };
    let mut out = format!("the store answered {}", status.unwrap_or("an error"));
    let field = |tag: &str| -> Option<String> {
        let open = format!("<{tag}>");
        let start = body.find(&open)? + open.len();
        let end = body[start..].find("</")? + start;
        let value: String = body[start..end].chars().take(200).collect();
        Some(redact(&value).into_owned())
    };
    match (field("Code"), field("Message")) {
        (Some(code), Some(message)) => out.push_str(&format!(" ({code}: {message})")),
        (Some(code), None) => out.push_str(&format!(" ({code})")),
        _ => {}
    }
    out
}

/// Run `attempt` until it succeeds, fails for good, or the retry budget is spent: the client
/// retries what it knows to retry (5xx, dropped connections); this also retries answers whose
/// body broke off (a cut CreateMultipartUpload answer) and requests that are not idempotent in
/// HTTP's terms but are in effect (uploads of the same bytes to the same key or part). The
/// budget bounds the whole wait, the client's per-request timeouts included. On failure, how
/// long it tried.
pub(crate) async fn within_budget<T, F, Fut>(attempt: F) -> std::result::Result<T, (Failure, Duration)>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = object_store::Result<T>>,
{
    within_budget_sending(0, attempt).await
}

/// [`within_budget`] for a request that sends `bytes`: sending is progress the client does not
/// show, so an attempt may take a second per MiB beyond the budget (no attempt starts after it).
pub(crate) async fn within_budget_sending<T, F, Fut>(
    bytes: usize,
    mut attempt: F,
) -> std::result::Result<T, (Failure, Duration)>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = object_store::Result<T>>,
{
    let start = Instant::now();
    let deadline = start + retry_time();
    let sending = Duration::from_secs_f64(bytes as f64 / f64::from(1u32 << 20));
    let mut pause = Duration::from_millis(100);
    let mut last = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now()) + sending;
        let failure = match tokio::time::timeout(left, attempt()).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) => Failure::Store(e),
            // The budget ran out during an attempt: the failure that made it retry says more
            // than the cut attempt (unless the store never answered at all).
            Err(_) => return Err((last.unwrap_or(Failure::Stalled(start.elapsed())), start.elapsed())),
        };
        if !failure.transient() || Instant::now() + pause > deadline {
            return Err((failure, start.elapsed()));
        }
        last = Some(failure);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(15));
    }
}

/// [`within_budget`], failing with the error of `request` on `remote`.
pub(crate) async fn retried<T, F, Fut>(remote: &Remote, request: &str, attempt: F) -> io::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = object_store::Result<T>>,
{
    retried_sending(remote, request, 0, attempt).await
}

/// [`within_budget_sending`], failing with the error of `request` on `remote`.
pub(crate) async fn retried_sending<T, F, Fut>(
    remote: &Remote,
    request: &str,
    bytes: usize,
    attempt: F,
) -> io::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = object_store::Result<T>>,
{
    within_budget_sending(bytes, attempt).await.map_err(|(failure, elapsed)| failure.into_io(remote, request, elapsed))
}

/// Blocking [`retried`] for a caller outside the runtime.
pub(crate) fn call<T, F, Fut>(remote: &Remote, request: &str, attempt: F) -> io::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = object_store::Result<T>>,
{
    super::runtime::block_on(retried(remote, request, attempt))
}
