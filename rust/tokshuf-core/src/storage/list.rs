//! Listing the objects under a prefix, or matching a glob, sorted by key so that document order
//! is defined.
//!
//! A key the store client cannot name (a control character, an empty part as in `a//b`) fails
//! the whole page of a listing that holds it; with a store that lists page by page (S3, GCS,
//! Azure) the page is narrowed down to that key, which is passed over and reported
//! ([`Listing::invalid`]), and the listing goes on after it.

use std::path::Path;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path as Key;

use super::failure::{within_budget, Failure};
use super::runtime::block_on;
use super::stores::Remote;
use crate::error::{Error, Result};

/// Objects a listing found, and keys it passed over.
#[derive(Debug, Default)]
pub struct Listing {
    /// The objects, sorted by key.
    pub objects: Vec<Remote>,
    /// Keys the store client cannot name (a control character, an empty part), as found.
    pub invalid: Vec<String>,
}

/// Every object under `prefix` (as a directory: keys below `prefix/`) whose key ends in one of
/// `exts`, sorted by key.
pub fn under(prefix: &Remote, exts: &[&str]) -> Result<Vec<Remote>> {
    let listing = all_under(prefix)?;
    Ok(listing.objects.into_iter().filter(|r| exts.iter().any(|e| r.key.as_ref().ends_with(e))).collect())
}

/// Every object under `prefix` (as a directory: keys below `prefix/`), sorted by key.
pub fn all_under(prefix: &Remote) -> Result<Listing> {
    let (keys, invalid) = keys(prefix, Some(&prefix.key))?;
    Ok(Listing { objects: keys.into_iter().map(|k| prefix.with_key(k)).collect(), invalid })
}

/// Every object whose key matches the glob in `pattern`'s key, sorted by key.
pub fn glob(pattern: &Remote) -> Result<Listing> {
    let text = pattern.key.as_ref();
    let literal = &text[..text.find(['*', '?', '[']).unwrap_or(text.len())];
    let dir = literal.rfind('/').map_or("", |i| &literal[..i]);
    let matcher = glob::Pattern::new(text)
        .map_err(|e| Error::invalid(format!("bad glob pattern {:?}: {e}", super::redact(&pattern.url))))?;
    let options = glob::MatchOptions { require_literal_separator: true, ..Default::default() };
    let prefix = (!dir.is_empty()).then(|| Key::from(dir));
    let (keys, mut invalid) = keys(pattern, prefix.as_ref())?;
    invalid.retain(|k| matcher.matches_with(k, options));
    let objects =
        keys.into_iter().filter(|k| matcher.matches_with(k.as_ref(), options)).map(|k| pattern.with_key(k)).collect();
    Ok(Listing { objects, invalid })
}

/// The keys below `prefix` (sorted), and those the client cannot name.
fn keys(at: &Remote, prefix: Option<&Key>) -> Result<(Vec<Key>, Vec<String>)> {
    let fail = |(f, elapsed): (Failure, Duration)| Error::io(Path::new(&at.url), f.into_io(at, "LIST", elapsed));
    let (mut keys, invalid) = match &at.pages {
        Some(pages) => block_on(paged(pages.as_ref(), prefix)).map_err(fail)?,
        None => {
            let keys = block_on(within_budget(|| at.store.list(prefix).map_ok(|m| m.location).try_collect()));
            (keys.map_err(fail)?, Vec::new())
        }
    };
    keys.sort_by(|a, b| a.as_ref().cmp(b.as_ref()));
    Ok((keys, invalid))
}

/// Keys per page of a listing.
const PAGE: usize = 1000;

/// A paged listing that passes over the keys the client cannot name: a page that holds one fails
/// whole, so it is asked for again with half as many keys until it is that key alone, which the
/// next page starts after.
async fn paged(
    pages: &dyn PaginatedListStore,
    prefix: Option<&Key>,
) -> Result<(Vec<Key>, Vec<String>), (Failure, Duration)> {
    // Unlike `ObjectStore::list`, a paged listing does not add the delimiter to the prefix.
    let prefix = prefix.filter(|p| !p.as_ref().is_empty()).map(|p| format!("{}/", p.as_ref()));
    let (mut keys, mut invalid) = (Vec::new(), Vec::new());
    let (mut offset, mut token, mut max) = (None::<String>, None::<String>, PAGE);
    loop {
        let options = PaginatedListOptions {
            offset: offset.clone(),
            page_token: token.clone(),
            max_keys: Some(max),
            ..PaginatedListOptions::default()
        };
        match within_budget(|| pages.list_paginated(prefix.as_deref(), options.clone())).await {
            Ok(page) => {
                keys.extend(page.result.objects.into_iter().map(|m| m.location));
                match page.page_token {
                    Some(next) => token = Some(next),
                    None => return Ok((keys, invalid)),
                }
            }
            Err((Failure::Store(object_store::Error::InvalidPath { source }), elapsed)) => {
                let key = match source {
                    object_store::path::Error::BadSegment { path, .. }
                    | object_store::path::Error::EmptySegment { path } => path,
                    other => return Err((Failure::Store(object_store::Error::InvalidPath { source: other }), elapsed)),
                };
                if max > 1 {
                    max /= 2;
                    continue;
                }
                // The page is that key alone: pass it over, and list on after it.
                invalid.push(key.clone());
                (offset, token, max) = (Some(key), None, PAGE);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Every object under `prefix` (as a directory) whose key ends in one of `exts`, with its size in
/// bytes, sorted by key: one listing, no request per object.
pub fn sized_under(prefix: &Remote, exts: &[&str]) -> Result<Vec<(Remote, u64)>> {
    let fail =
        |(f, elapsed): (Failure, Duration)| Error::io(Path::new(&prefix.url), f.into_io(prefix, "LIST", elapsed));
    let listed = block_on(within_budget(|| {
        prefix.store.list(Some(&prefix.key)).map_ok(|m| (m.location, m.size)).try_collect::<Vec<_>>()
    }));
    let mut found: Vec<(Key, u64)> = listed.map_err(fail)?;
    found.retain(|(k, _)| exts.iter().any(|e| k.as_ref().ends_with(e)));
    found.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
    Ok(found.into_iter().map(|(k, size)| (prefix.with_key(k), size)).collect())
}
