//! How a store's failures become errors, and errors text: every request runs within the retry
//! budget (`TOKSHUF_STORAGE_RETRY_SECONDS`), and what a failed one says names the object, the
//! request and the cause (a status with S3's `<Code>` and `<Message>`, or the transport failure),
//! never a response body or a request's headers. [`redact`] masks credentials in any text that
//! may hold a URL or a store's words; every message of this crate and of the Python package
//! passes through it.
//!
//! A failed request is an [`io::Error`] whose inner error is a [`StoreError`]:
//! [`is_store_error`] tells it apart from a corrupt file's error, so the readers never take an
//! unreachable store for bad data (`--on-error skip` skips bad data, never a failing store).

use std::borrow::Cow;
use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

use super::stores::{retry_time, Remote};

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

impl Failure {
    /// Whether trying again may help: a 5xx, a dropped connection, a cut answer; never a
    /// missing object, a refusal, a precondition or an unsupported request.
    pub(crate) fn transient(&self) -> bool {
        match self {
            // A server that ignores Range answers every retry the same way.
            Failure::Store(e) if e.to_string().contains("non-partial response") => false,
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

/// `text` with credentials masked as `***`: the `user:password@` of URLs; the values of signed
/// URLs' and headers' secrets (`X-Amz-Signature=`, `X-Amz-Credential=`, `X-Amz-Security-Token=`,
/// `Signature=`, `Credential=`, `sig=`, `x-amz-security-token:`, `Authorization:`, ...); and the
/// values of the credential variables of the environment (`AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `AZURE_STORAGE_ACCOUNT_KEY`, ...) wherever they appear.
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    if out.contains("://") {
        out = Cow::Owned(userinfo(&out));
    }
    if let Some(masked) = parameters(&out) {
        out = Cow::Owned(masked);
    }
    for secret in secret_values() {
        if out.contains(secret.as_str()) {
            out = Cow::Owned(out.replace(secret.as_str(), MASK));
        }
    }
    out
}

const MASK: &str = "***";

/// Ends a URL's authority, or a secret's value.
fn ends_value(c: char) -> bool {
    c.is_whitespace() || matches!(c, '&' | ',' | ';' | '"' | '\'' | '<' | '>' | '\\' | ')' | '`')
}

/// Every `scheme://user:password@host` as `scheme://***@host` (but Hadoop's Azure URLs,
/// `abfss://container@account...`, whose `container@` is no credential).
fn userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = at + 3;
        out.push_str(&rest[..start]);
        let scheme_start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let container = matches!(&rest[scheme_start..at], "abfs" | "abfss" | "wasb" | "wasbs");
        let tail = &rest[start..];
        let end = tail.find(|c: char| ends_value(c) || matches!(c, '/' | '?' | '#')).unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@').filter(|_| !container) {
            Some(user_end) => {
                out.push_str(MASK);
                out.push_str(&authority[user_end..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Names whose `name=value` value is a secret (query parameters of signed URLs, SAS tokens,
/// configuration), compared case-insensitively.
const SECRET_PARAMETERS: [&str; 14] = [
    "x-amz-security-token",
    "x-amz-signature",
    "x-amz-credential",
    "x-goog-signature",
    "x-goog-credential",
    "signature",
    "credential",
    "sig",
    "password",
    "secret",
    "token",
    "aws_secret_access_key",
    "aws_session_token",
    "authorization",
];
/// Names whose `name: value` header value is a secret.
const SECRET_HEADERS: [&str; 6] = [
    "x-amz-security-token",
    "x-amz-signature",
    "x-amz-credential",
    "x-goog-signature",
    "x-goog-credential",
    "authorization",
];

/// `text` with the values of secret parameters and headers masked, if it has any.
fn parameters(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    // (start, end) of each value to mask, in the text's byte offsets (ASCII lowercasing keeps them).
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    for name in SECRET_PARAMETERS.iter().chain(&SECRET_HEADERS) {
        let header = SECRET_HEADERS.contains(name);
        let mut from = 0;
        while let Some(found) = lower[from..].find(name) {
            let at = from + found;
            from = at + name.len();
            if at > 0 && word(lower.as_bytes()[at - 1]) {
                continue;
            }
            let after = &text[from..];
            let separator = after.trim_start_matches(' ');
            let skip = after.len() - separator.len();
            let value_start = match separator.chars().next() {
                Some('=') => from + skip + 1,
                Some(':') if header => from + skip + 1,
                _ => continue,
            };
            let value = &text[value_start..];
            let lead = value.len() - value.trim_start_matches(' ').len();
            let value_start = value_start + lead;
            // An Authorization header's value is the rest of the line ("Basic dXNlcjpwYXNz").
            let end = if *name == "authorization" {
                text[value_start..].find(['\n', '\r', '"', '<']).map_or(text.len(), |e| value_start + e)
            } else {
                text[value_start..].find(ends_value).map_or(text.len(), |e| value_start + e)
            };
            if end > value_start && &text[value_start..end] != MASK {
                spans.push((value_start, end));
            }
        }
    }
    if spans.is_empty() {
        return None;
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in spans {
        if start < at {
            // Inside a span already masked (an Authorization line holding Signature=...).
            at = at.max(end);
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(MASK);
        at = end;
    }
    out.push_str(&text[at..]);
    Some(out)
}

/// The values of the environment's credential variables (of AWS, Google Cloud and Azure: names
/// that hold KEY, SECRET, TOKEN, PASSWORD, SAS or CREDENTIAL), at least 8 characters long.
fn secret_values() -> Vec<String> {
    const PROVIDERS: [&str; 6] = ["AWS_", "GOOGLE_", "GCS_", "GCP_", "AZURE_", "AZURITE_"];
    const SECRET: [&str; 6] = ["KEY", "SECRET", "TOKEN", "PASSWORD", "SAS", "CREDENTIAL"];
    let mut values: Vec<String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, v)| {
            let k = k.to_ascii_uppercase();
            v.len() >= 8 && PROVIDERS.iter().any(|p| k.starts_with(p)) && SECRET.iter().any(|s| k.contains(s))
        })
        .map(|(_, v)| v)
        .collect();
    // Longest first: a value that holds another is masked whole.
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_user_and_password() {
        assert_eq!(redact("http://u:pw@host:8080/a/b.jsonl"), "http://***@host:8080/a/b.jsonl");
        assert_eq!(
            redact("see 'https://tok@h/x' and s3://bucket/key@v.jsonl"),
            "see 'https://***@h/x' and s3://bucket/key@v.jsonl"
        );
        assert_eq!(redact("plain text, no URL"), "plain text, no URL");
        assert!(matches!(redact("/local/path.jsonl"), Cow::Borrowed(_)));
        let azure = "abfss://fs@acct.dfs.core.windows.net/d/x.bin";
        assert_eq!(redact(azure), azure);
    }

    #[test]
    fn signed_urls_and_headers_lose_their_secrets() {
        let url = "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F2024&\
                   X-Amz-Signature=abc123&X-Amz-Security-Token=FQoG&x-id=GetObject";
        assert_eq!(
            redact(url),
            "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***&\
             X-Amz-Signature=***&X-Amz-Security-Token=***&x-id=GetObject"
        );
        let canonical = "GET /k\nhost:h\nx-amz-security-token:FQoGZXIvYXdz\nx-amz-date:2024";
        assert_eq!(redact(canonical), "GET /k\nhost:h\nx-amz-security-token:***\nx-amz-date:2024");
        let auth = "Authorization: AWS4-HMAC-SHA256 Credential=AKID/x, SignedHeaders=host, Signature=ff\nnext";
        assert_eq!(redact(auth), "Authorization: ***\nnext");
        assert_eq!(redact("sv=2022&sig=a%2Bb&se=2030"), "sv=2022&sig=***&se=2030");
        // Words that merely contain a name are left alone.
        let code = "<Code>SignatureDoesNotMatch</Code> continuation-token=x design=y";
        assert_eq!(redact(code), code);
    }
}
