//! Where data lives: local files and objects in stores (`s3://`, `gs://`, `az://`, `https://`),
//! behind one interface. Inputs are paths; a path that is a storage URL names an object.
//!
//! - [`open`] streams an input (an object is read ahead in ranges; see [`read`]) and [`size`]
//!   gives its size; [`identity`] what a resumed job checks it is still the same input.
//! - [`list`], [`list_all`] and [`glob`] expand a prefix or a pattern into objects sorted by key.
//! - [`RandomAccess`] reads an input at offsets (Parquet; the `.bin` of a remote indexed
//!   dataset), many ranges at once in few requests.
//! - [`counters`] tells how many GETs were made and how many bytes they brought.
//! - [`local_copy`] gives the readers that map their data (`.idx/.bin`, `.npy`) a local copy.
//! - [`upload_file`] and [`put`] write objects, which appear under their keys only complete.
//! - Every request runs within the retry budget; a failed one is a [`StoreError`] naming the
//!   object, the request and the cause, and [`redact`] masks credentials in any text.

mod cache;
mod coalesce;
mod failure;
mod list;
mod ranges;
mod read;
pub(crate) mod redact;
mod runtime;
pub(crate) mod store_error;
mod stores;
mod write;

use std::io::Read;
use std::path::{Path, PathBuf};

pub use cache::{cache_root, local_copy, local_copy_cancellable, local_copy_verified, local_path, Expected, LocalCopy};
pub(crate) use failure::again as same_error;
pub use list::{all_under as list_all, glob, sized_under as list_sized, under as list};
pub use ranges::{Pending, RandomAccess};
pub use read::{counters, Counters, RemoteReader};
pub use redact::redact;
pub use store_error::{is_store_error, StoreError};
pub use stores::{is_remote, resolve, Remote, SCHEMES};
pub use write::{delete, put, upload_file};

use crate::error::{IoContext, Result};

/// The object a path names, if it is a storage URL.
pub fn remote(path: &Path) -> Result<Option<Remote>> {
    match path.to_str() {
        Some(s) if is_remote(s) => resolve(s).map(Some),
        _ => Ok(None),
    }
}

/// The path that stands for an object in input lists.
pub fn as_path(remote: &Remote) -> PathBuf {
    PathBuf::from(&remote.url)
}

/// Open an input for reading.
pub fn open(path: &Path) -> Result<Box<dyn Read + Send>> {
    match remote(path)? {
        Some(r) => Ok(Box::new(RemoteReader::open(r).with_path(path)?)),
        None => Ok(Box::new(std::fs::File::open(path).with_path(path)?)),
    }
}

/// The size of an input in bytes.
pub fn size(path: &Path) -> Result<u64> {
    match remote(path)? {
        Some(r) => Ok(read::head(&r).with_path(path)?.size),
        None => Ok(std::fs::metadata(path).with_path(path)?.len()),
    }
}

/// What identifies an input's contents for a resumed job: its canonical path, size and
/// modification time, or for an object its URL, size, ETag and the version reads pin to (the
/// ETag, or the modification time where a store gives no strong ETag).
pub fn identity(path: &Path) -> Result<serde_json::Value> {
    if let Some(r) = remote(path)? {
        let meta = read::head(&r).with_path(path)?;
        let version = read::Version::of(&meta).describe();
        let url = redact(&r.url);
        return Ok(serde_json::json!({"url": url, "bytes": meta.size, "etag": meta.e_tag, "version": version}));
    }
    let meta = std::fs::metadata(path).with_path(path)?;
    let since_epoch = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    let mtime = since_epoch.map_or(0, |d| d.as_nanos() as u64);
    let canonical = path.canonicalize().with_path(path)?;
    Ok(serde_json::json!({"path": canonical, "bytes": meta.len(), "mtime_ns": mtime}))
}
