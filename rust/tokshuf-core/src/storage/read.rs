//! Reading an object as a stream: ranged GETs issued ahead of the reader, a few in flight, so a
//! decompressor downstream never waits for a round trip, in bounded memory (`AHEAD` × `CHUNK`
//! per open object). A range whose body breaks off is requested again from where it broke;
//! every range names the object's ETag, so an object rewritten meanwhile is an error, not a mix
//! of two versions.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStoreExt as _};
use tokio::task::JoinHandle;

use super::runtime::{block_on, runtime};
use super::stores::Remote;

/// Bytes per ranged GET.
const CHUNK: u64 = 8 << 20;
/// Ranges in flight ahead of the reader.
const AHEAD: usize = 4;
/// Attempts at a range whose body breaks off (request errors are retried by the store itself),
/// within the retry time (`TOKSHUF_STORAGE_RETRY_SECONDS`).
const ATTEMPTS: u32 = 10;

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
}

impl RemoteReader {
    /// Open `remote` (its size and ETag come from one HEAD request).
    pub fn open(remote: Remote) -> io::Result<RemoteReader> {
        let meta = block_on(remote.store.head(&remote.key)).map_err(|e| to_io(&remote, e))?;
        Ok(RemoteReader {
            size: meta.size,
            version: Version::of(&meta),
            remote,
            next: 0,
            pending: VecDeque::new(),
            current: Bytes::new(),
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
        if self.current.is_empty() {
            self.fill();
            let Some(next) = self.pending.pop_front() else { return Ok(0) };
            self.current = block_on(next).map_err(|e| io::Error::other(format!("{}: {e}", self.remote.url)))??;
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

/// The bytes of `range`, resuming where a broken body stopped.
pub(super) async fn fetch(remote: Remote, version: Version, range: std::ops::Range<u64>) -> io::Result<Bytes> {
    let mut got = BytesMut::with_capacity((range.end - range.start) as usize);
    let mut failures = 0;
    let mut deadline = std::time::Instant::now() + super::stores::retry_time();
    loop {
        let start = range.start + got.len() as u64;
        if start == range.end {
            return Ok(got.freeze());
        }
        let mut options = GetOptions { range: Some(GetRange::Bounded(start..range.end)), ..GetOptions::default() };
        version.pin(&mut options);
        REQUESTS.fetch_add(1, Ordering::Relaxed);
        let error = match remote.store.get_opts(&remote.key, options).await {
            Ok(result) => {
                let mut body = result.into_stream();
                let mut broke = None;
                while let Some(part) = body.next().await {
                    match part {
                        Ok(bytes) => {
                            BYTES.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                            got.extend_from_slice(&bytes)
                        }
                        Err(e) => {
                            broke = Some(e);
                            break;
                        }
                    }
                }
                match broke {
                    None if range.start + got.len() as u64 >= range.end => {
                        got.truncate((range.end - range.start) as usize);
                        return Ok(got.freeze());
                    }
                    None => object_store::Error::Generic {
                        store: "storage",
                        source: format!("the body ended at byte {} of {}", range.start + got.len() as u64, range.end)
                            .into(),
                    },
                    Some(e) => e,
                }
            }
            // A rewritten object is not retried: its bytes would mix two versions.
            Err(e @ object_store::Error::Precondition { .. }) => {
                return Err(io::Error::other(format!("{} changed while it was read: {e}", remote.url)))
            }
            Err(e) => return Err(to_io(&remote, e)),
        };
        // A body that broke after bringing bytes made progress: a long range (whose request
        // may outlive the client's timeout) is resumed as often as it keeps moving.
        if range.start + got.len() as u64 > start {
            failures = 0;
            deadline = std::time::Instant::now() + super::stores::retry_time();
        }
        failures += 1;
        let pause = Duration::from_millis(100 << failures.min(7));
        if failures >= ATTEMPTS || std::time::Instant::now() + pause > deadline {
            return Err(to_io(&remote, error));
        }
        tokio::time::sleep(pause).await;
    }
}

pub(crate) fn to_io(remote: &Remote, e: object_store::Error) -> io::Error {
    let kind = match e {
        object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
            io::ErrorKind::PermissionDenied
        }
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, format!("{}: {e}", remote.url))
}
