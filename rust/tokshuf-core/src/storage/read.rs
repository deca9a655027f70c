//! Reading an object as a stream: ranged GETs issued ahead of the reader, a few in flight, so a
//! decompressor downstream never waits for a round trip, in bounded memory (`AHEAD` × `CHUNK`
//! per open object). A range whose body breaks off is requested again from where it broke;
//! every range names the object's ETag, so an object rewritten meanwhile is an error, not a mix
//! of two versions. Every failure is a [`super::StoreError`]: a reader never takes it for a
//! truncated file.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStoreExt as _};
use tokio::task::JoinHandle;

use super::failure::{call, Failure};
use super::runtime::{block_on, runtime};
use super::stores::Remote;

/// Bytes per ranged GET.
const CHUNK: u64 = 8 << 20;
/// Ranges in flight ahead of the reader.
const AHEAD: usize = 4;

static REQUESTS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

/// What this process has read from stores so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Ranged GETs made (retries and resumed bodies included).
    pub requests: u64,
    /// Body bytes they brought.
    pub bytes: u64,
}

/// What this process has read from stores so far (for measuring read amplification).
pub fn counters() -> Counters {
    Counters { requests: REQUESTS.load(Ordering::Relaxed), bytes: BYTES.load(Ordering::Relaxed) }
}

/// The object's size, ETag and modification time (one HEAD request, retried within the budget).
pub(crate) fn head(remote: &Remote) -> io::Result<ObjectMeta> {
    call(remote, "HEAD", || remote.store.head(&remote.key))
}

/// The version of an object its reads are pinned to, from one HEAD: every ranged read asks for
/// that version and fails ("changed while it was read") rather than mix bytes of two.
#[derive(Debug, Clone, Default)]
pub struct Version {
    /// A strong ETag (`If-Match`). A weak one (`W/"..."`, what servers give for content they
    /// compress on the fly) never matches `If-Match`, so it is not used.
    etag: Option<String>,
    /// Otherwise the modification time (`If-Unmodified-Since`; a store with neither cannot pin).
    modified: Option<DateTime<Utc>>,
}

impl Version {
    /// The version `meta` describes.
    pub fn of(meta: &ObjectMeta) -> Version {
        match &meta.e_tag {
            Some(etag) if !etag.starts_with("W/") => Version { etag: Some(etag.clone()), modified: None },
            _ => Version { etag: None, modified: Some(meta.last_modified) },
        }
    }

    /// What identifies it in a cache record: `{"etag": ...}` or `{"modified": RFC 3339}`.
    pub fn describe(&self) -> serde_json::Value {
        match (&self.etag, &self.modified) {
            (Some(etag), _) => serde_json::json!({"etag": etag}),
            (None, Some(t)) => serde_json::json!({"modified": t.to_rfc3339()}),
            (None, None) => serde_json::Value::Null,
        }
    }

    fn pin(&self, options: &mut GetOptions) {
        options.if_match = self.etag.clone();
        options.if_unmodified_since = self.modified;
    }
}

/// An object's bytes, read ahead in ranges.
pub struct RemoteReader {
    remote: Remote,
    size: u64,
    version: Version,
    next: u64,
    pending: VecDeque<JoinHandle<io::Result<Bytes>>>,
    current: Bytes,
    /// The failure that stopped the reader: every later read fails with it too (the ranges
    /// after a failed one must never be read as if they followed the bytes before it).
    failed: Option<io::Error>,
}

impl RemoteReader {
    /// Open `remote` (its size and ETag come from one HEAD request).
    pub fn open(remote: Remote) -> io::Result<RemoteReader> {
        let meta = head(&remote)?;
        Ok(RemoteReader {
            size: meta.size,
            version: Version::of(&meta),
            remote,
            next: 0,
            pending: VecDeque::new(),
            current: Bytes::new(),
            failed: None,
        })
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The version its reads are pinned to.
    pub fn version(&self) -> &Version {
        &self.version
    }

    fn fill(&mut self) {
        let rt = runtime();
        while self.pending.len() < AHEAD && self.next < self.size {
            let range = self.next..(self.next + CHUNK).min(self.size);
            self.next = range.end;
            let (remote, version) = (self.remote.clone(), self.version.clone());
            self.pending.push_back(rt.spawn(fetch(remote, version, range)));
        }
    }
}

impl Read for RemoteReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(e) = &self.failed {
            return Err(super::failure::again(e));
        }
        if self.current.is_empty() {
            self.fill();
            let Some(next) = self.pending.pop_front() else { return Ok(0) };
            let got = block_on(next).unwrap_or_else(|e| {
                Err(Failure::Other(format!("the read task failed: {e}")).into_io(&self.remote, "GET", Duration::ZERO))
            });
            match got {
                Ok(bytes) => self.current = bytes,
                Err(e) => {
                    self.failed = Some(super::failure::again(&e));
                    return Err(e);
                }
            }
            self.fill();
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}

impl Drop for RemoteReader {
    fn drop(&mut self) {
        for task in &self.pending {
            task.abort();
        }
    }
}

/// The bytes of `range`, resuming where a broken body stopped. The retry budget bounds each wait
/// for an answer or for more of the body, and starts again whenever bytes arrive: a long range
/// goes on as long as it keeps moving, and a store that stops answering fails within the budget.
pub(super) async fn fetch(remote: Remote, version: Version, range: std::ops::Range<u64>) -> io::Result<Bytes> {
    let mut got = BytesMut::with_capacity((range.end - range.start) as usize);
    let mut failures = 0;
    let budget = super::stores::retry_time();
    // Since the last bytes arrived (or the first request).
    let mut waiting = Instant::now();
    let request = |start: u64| format!("GET bytes {start}-{}", range.end.saturating_sub(1));
    loop {
        let start = range.start + got.len() as u64;
        if start == range.end {
            return Ok(got.freeze());
        }
        let deadline = tokio::time::Instant::from_std(waiting + budget);
        let mut options = GetOptions { range: Some(GetRange::Bounded(start..range.end)), ..GetOptions::default() };
        version.pin(&mut options);
        REQUESTS.fetch_add(1, Ordering::Relaxed);
        let failure = match tokio::time::timeout_at(deadline, remote.store.get_opts(&remote.key, options)).await {
            Err(_) => Failure::Stalled(waiting.elapsed()),
            Ok(Ok(result)) => {
                let mut body = result.into_stream();
                let broke = loop {
                    let deadline = tokio::time::Instant::from_std(waiting + budget);
                    match tokio::time::timeout_at(deadline, body.next()).await {
                        Err(_) => break Some(Failure::Stalled(waiting.elapsed())),
                        Ok(None) => break None,
                        Ok(Some(Ok(bytes))) => {
                            BYTES.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                            got.extend_from_slice(&bytes);
                            waiting = Instant::now();
                            failures = 0;
                        }
                        Ok(Some(Err(e))) => break Some(Failure::Store(e)),
                    }
                };
                match broke {
                    None if range.start + got.len() as u64 >= range.end => {
                        got.truncate((range.end - range.start) as usize);
                        return Ok(got.freeze());
                    }
                    None => Failure::Other(format!(
                        "the body ended at byte {} of {}",
                        range.start + got.len() as u64,
                        range.end
                    )),
                    Some(f) => f,
                }
            }
            // A rewritten object is not retried: its bytes would mix two versions.
            Ok(Err(object_store::Error::Precondition { .. })) => {
                let why = "the object changed while it was read (it no longer has the ETag or modification time \
                           it had when opened)";
                return Err(Failure::Other(why.into()).into_io(&remote, &request(start), waiting.elapsed()));
            }
            Ok(Err(e)) => Failure::Store(e),
        };
        failures += 1;
        let pause = Duration::from_millis(100 << failures.min(7));
        if !failure.transient() || Instant::now() + pause > waiting + budget {
            return Err(failure.into_io(&remote, &request(start), waiting.elapsed()));
        }
        tokio::time::sleep(pause).await;
    }
}
