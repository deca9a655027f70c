//! Object storage for the Python readers: local copies of objects, and what a path names.

use pyo3::prelude::*;
use tokshuf_core::{storage, Error};

use crate::long_call::run_detached;

/// The local copy of the object `url` in the cache directory, downloaded (GIL released) if it is
/// missing or the object changed.
#[pyfunction]
pub(crate) fn local_copy(py: Python<'_>, url: String) -> PyResult<String> {
    run_detached(py, move |cancel| {
        storage::local_copy_cancellable(&url, cancel).map(|p| p.to_string_lossy().into_owned())
    })
}

/// Whether `path` is a storage URL (`s3://`, `gs://`, `az://`, `https://`, ...).
#[pyfunction]
pub(crate) fn is_remote(path: &str) -> bool {
    storage::is_remote(path)
}

/// Whether the object `url` exists (one HEAD request). Only "not found" is `False`: a denied
/// or failed request is an error, not a missing object.
#[pyfunction]
pub(crate) fn remote_exists(py: Python<'_>, url: String) -> PyResult<bool> {
    run_detached(py, move |_| match storage::size(std::path::Path::new(&url)) {
        Ok(_) => Ok(true),
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    })
}

/// The URLs of the objects under the prefix `url` whose keys end in one of `suffixes`, sorted.
#[pyfunction]
pub(crate) fn list_objects(py: Python<'_>, url: String, suffixes: Vec<String>) -> PyResult<Vec<String>> {
    run_detached(py, move |_| {
        let prefix = storage::resolve(&url)?;
        let suffixes: Vec<&str> = suffixes.iter().map(String::as_str).collect();
        Ok(storage::list(&prefix, &suffixes)?.into_iter().map(|r| r.url).collect())
    })
}

/// `(url, bytes)` of the objects under the prefix `url` whose keys end in one of `suffixes`,
/// sorted (one listing: the sizes come with it).
#[pyfunction]
pub(crate) fn list_object_sizes(py: Python<'_>, url: String, suffixes: Vec<String>) -> PyResult<Vec<(String, u64)>> {
    run_detached(py, move |_| {
        let prefix = storage::resolve(&url)?;
        let suffixes: Vec<&str> = suffixes.iter().map(String::as_str).collect();
        Ok(storage::list_sized(&prefix, &suffixes)?.into_iter().map(|(r, size)| (r.url, size)).collect())
    })
}

/// Upload the local file `path` to the object `url` (multipart; the object appears complete).
#[pyfunction]
pub(crate) fn upload(py: Python<'_>, path: std::path::PathBuf, url: String) -> PyResult<()> {
    run_detached(py, move |_| storage::upload_file(&path, &storage::resolve(&url)?))
}

/// What identifies an input's contents, as JSON: a local file's canonical path, size and
/// modification time; an object's URL, size and ETag (one HEAD request).
#[pyfunction]
pub(crate) fn identity(py: Python<'_>, path: std::path::PathBuf) -> PyResult<String> {
    run_detached(py, move |_| Ok(storage::identity(&path)?.to_string()))
}

/// The ranged GETs this process has made and the body bytes they brought.
#[pyfunction]
pub(crate) fn storage_counters() -> (u64, u64) {
    let c = storage::counters();
    (c.requests, c.bytes)
}

/// `text` with credentials masked (a URL's `user:password@`, signed URLs' and headers' secrets,
/// the values of the environment's credential variables): the one redaction of the package.
#[pyfunction]
pub(crate) fn redact(text: &str) -> String {
    storage::redact(text).into_owned()
}
