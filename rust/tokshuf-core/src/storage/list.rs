//! Listing the objects under a prefix, or matching a glob, sorted by key so that document order
//! is defined.

use futures::TryStreamExt;
use object_store::path::Path as Key;

use super::read::to_io;
use super::runtime::block_on;
use super::stores::Remote;
use crate::error::{Error, Result};

/// Every object under `prefix` (as a directory: keys below `prefix/`) whose key ends in one of
/// `exts`, sorted by key.
pub fn under(prefix: &Remote, exts: &[&str]) -> Result<Vec<Remote>> {
    Ok(all_under(prefix)?.into_iter().filter(|r| exts.iter().any(|e| r.key.as_ref().ends_with(e))).collect())
}

/// Every object under `prefix` (as a directory: keys below `prefix/`), sorted by key.
pub fn all_under(prefix: &Remote) -> Result<Vec<Remote>> {
    Ok(keys(prefix, Some(&prefix.key))?.into_iter().map(|k| prefix.with_key(k)).collect())
}

/// Every object whose key matches the glob in `pattern`'s key, sorted by key.
pub fn glob(pattern: &Remote) -> Result<Vec<Remote>> {
    let text = pattern.key.as_ref();
    let literal = &text[..text.find(['*', '?', '[']).unwrap_or(text.len())];
    let dir = literal.rfind('/').map_or("", |i| &literal[..i]);
    let matcher =
        glob::Pattern::new(text).map_err(|e| Error::invalid(format!("bad glob pattern {:?}: {e}", pattern.url)))?;
    let options = glob::MatchOptions { require_literal_separator: true, ..Default::default() };
    let prefix = (!dir.is_empty()).then(|| Key::from(dir));
    let keys = keys(pattern, prefix.as_ref())?;
    Ok(keys.into_iter().filter(|k| matcher.matches_with(k.as_ref(), options)).map(|k| pattern.with_key(k)).collect())
}

fn keys(at: &Remote, prefix: Option<&Key>) -> Result<Vec<Key>> {
    let mut keys: Vec<Key> = block_on(at.store.list(prefix).map_ok(|m| m.location).try_collect())
        .map_err(|e| Error::io(std::path::Path::new(&at.url), to_io(at, e)))?;
    keys.sort_by(|a, b| a.as_ref().cmp(b.as_ref()));
    Ok(keys)
}

/// Every object under `prefix` (as a directory) whose key ends in one of `exts`, with its size in
/// bytes, sorted by key: one listing, no request per object.
pub fn sized_under(prefix: &Remote, exts: &[&str]) -> Result<Vec<(Remote, u64)>> {
    let mut found: Vec<(Key, u64)> =
        block_on(prefix.store.list(Some(&prefix.key)).map_ok(|m| (m.location, m.size)).try_collect())
            .map_err(|e| Error::io(std::path::Path::new(&prefix.url), to_io(prefix, e)))?;
    found.retain(|(k, _)| exts.iter().any(|e| k.as_ref().ends_with(e)));
    found.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
    Ok(found.into_iter().map(|(k, size)| (prefix.with_key(k), size)).collect())
}
