//! Opening a `.bin/.idx` pair as one committed version: through its set's commit record when
//! there is one (see [`crate::fsutil::record`]), so that a reader never pairs an `.idx` with a
//! `.bin` of another version, nor trusts a set that a run is rewriting.
//!
//! Locally, the record is read, both files are opened, and the record is read again: a record
//! that changed meanwhile (a commit ran) means the files may be of two versions, and the open is
//! tried again. The sizes must be those the record lists. In an object store, the `.idx` copy and
//! the `.bin` (its copy, or its ranged reads) are pinned to the ETags the record lists, and a
//! downloaded copy must have the listed checksum. A pair without a record (Megatron's, an older
//! tokshuf's) is opened as before; in a store, its `.idx` is checked again after the `.bin` is
//! pinned, and the open retried if the `.idx` changed meanwhile.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::format::{bin_path, idx_path};
use super::source::{Mapping, RemoteBin};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::fsutil::record::{self, Member, Record, State};
use crate::storage::{self, Expected, RandomAccess};

/// How long an open waits for a set that is being rewritten (or that keeps changing under it).
const PATIENCE: Duration = Duration::from_secs(10);

/// Sleeps between tries, growing to a limit.
struct Backoff {
    until: Instant,
    pause: Duration,
}

impl Backoff {
    fn new() -> Self {
        Self { until: Instant::now() + PATIENCE, pause: Duration::from_millis(5) }
    }

    /// Wait before the next try; `false` once the patience is spent.
    fn wait(&mut self) -> bool {
        if Instant::now() + self.pause > self.until {
            return false;
        }
        std::thread::sleep(self.pause);
        self.pause = (self.pause * 2).min(Duration::from_millis(250));
        true
    }

    /// For a `writing` record (at `path`): `true` to try again once its live writer had time to
    /// finish, or the error that the set is not committed; `false` for a committed record.
    fn wait_for_writer(&mut self, record: &Record, path: &Path) -> Result<bool> {
        if record.state != State::Writing {
            return Ok(false);
        }
        if record.writer_alive() && self.wait() {
            return Ok(true);
        }
        Err(record.not_committed(path))
    }
}

fn file_name(prefix: &str) -> &str {
    prefix.rsplit('/').next().unwrap_or(prefix)
}

/// The member `{name}.{ext}` of `record`, or an error naming both files.
fn member<'r>(record_path: &Path, record: &'r Record, file: &Path) -> Result<&'r Member> {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    record.member(name).ok_or_else(|| record::mismatch(record_path, file, "the record does not list it"))
}

/// Map the local pair `prefix` as one committed version (see the module documentation).
pub fn open_local_pair(prefix: &Path) -> Result<(Mapping, Mapping)> {
    let (idx_path, bin_path) = (idx_path(prefix), bin_path(prefix));
    let mut backoff = Backoff::new();
    loop {
        let found = record::find_pair_record(prefix)?;
        let (path, seen) = match found {
            // The index first: it is small, and a missing one fails before a large .bin is touched.
            None => return Ok((Mapping::open(&idx_path)?, Mapping::open(&bin_path)?)),
            Some(found) => found,
        };
        if backoff.wait_for_writer(&seen.record, &path)? {
            continue;
        }
        let opened = Mapping::open(&idx_path).and_then(|idx| Ok((idx, Mapping::open(&bin_path)?)));
        if !record::unchanged(&path, &seen)? {
            // A commit ran while the files were opened: they may be of two versions.
            if backoff.wait() {
                continue;
            }
            return Err(Error::format(
                &path,
                "the set kept changing while it was opened; try again once it is written",
            ));
        }
        let (idx, bin) = opened?;
        for (file, len) in [(&idx_path, idx.bytes().len()), (&bin_path, bin.bytes().len())] {
            record::check_size(&path, member(&path, &seen.record, file)?, file, len as u64)?;
        }
        return Ok((idx, bin));
    }
}

/// Where a pinned remote `.bin` is read from.
pub enum PinnedBin {
    /// Its local copy.
    Local(PathBuf),
    /// Ranged reads pinned to its committed version.
    Ranged(RandomAccess),
}

/// A remote pair pinned to one version: the `.idx`'s local copy, and the `.bin`.
pub struct PinnedPair {
    /// The local copy of the `.idx`.
    pub idx: PathBuf,
    /// The `.bin`.
    pub bin: PinnedBin,
}

/// The record (URL, contents, ETag) that lists the remote pair `prefix`, if any.
fn find_remote_record(prefix: &str) -> Result<Option<(String, Record, Option<String>)>> {
    let name = file_name(prefix);
    for candidate in record::pair_candidates(prefix) {
        if let Some((record, etag)) = record::read_remote(&candidate)?.filter(|(r, _)| record::lists_pair(r, name)) {
            return Ok(Some((candidate, record, etag)));
        }
    }
    Ok(None)
}

fn expected(m: &Member) -> Expected {
    Expected { etag: m.etag.clone(), bytes: Some(m.bytes), crc32c: u32::from_str_radix(&m.crc32c, 16).ok() }
}

/// Pin the remote pair `prefix` to one version (see the module documentation); `.bin` as `mode`
/// says.
pub fn pin_remote_pair(prefix: &str, mode: RemoteBin) -> Result<PinnedPair> {
    let (idx_url, bin_url) = (format!("{prefix}.idx"), format!("{prefix}.bin"));
    let cancel = Cancel::new();
    let mut backoff = Backoff::new();
    loop {
        let found = find_remote_record(prefix)?;
        let attempt = match &found {
            None => pin_unrecorded(&idx_url, &bin_url, mode, &cancel),
            Some((url, record, _)) => {
                if backoff.wait_for_writer(record, Path::new(url))? {
                    continue;
                }
                pin_committed(url, record, &idx_url, &bin_url, mode, &cancel)
            }
        };
        match attempt {
            Ok(Some(pinned)) => return Ok(pinned),
            // The `.idx` changed while the pair was pinned (no record to go by): try again.
            Ok(None) if backoff.wait() => continue,
            Ok(None) => {
                return Err(Error::format(
                    Path::new(&idx_url),
                    "the pair kept changing while it was opened; try again once it is written",
                ))
            }
            Err(e) => {
                // A member that disagrees with its record is an error, unless the record itself
                // changed meanwhile (a commit ran): then the whole open is tried again.
                let moved = match (&found, find_remote_record(prefix)?) {
                    (Some((_, _, a)), Some((_, _, b))) => a != &b,
                    (None, None) => false,
                    _ => true,
                };
                if moved && backoff.wait() {
                    continue;
                }
                return Err(e);
            }
        }
    }
}

fn pin_committed(
    record_url: &str,
    record: &Record,
    idx_url: &str,
    bin_url: &str,
    mode: RemoteBin,
    cancel: &Cancel,
) -> Result<Option<PinnedPair>> {
    let record_path = Path::new(record_url);
    let m_idx = member(record_path, record, Path::new(idx_url))?;
    let m_bin = member(record_path, record, Path::new(bin_url))?;
    let idx = storage::local_copy_verified(idx_url, &expected(m_idx), cancel)?.path;
    let bin = match mode {
        RemoteBin::Copy => PinnedBin::Local(storage::local_copy_verified(bin_url, &expected(m_bin), cancel)?.path),
        RemoteBin::Ranges => {
            let ra = RandomAccess::open(Path::new(bin_url))?;
            let etag = match &ra {
                RandomAccess::Remote { version, .. } => record::etag_of(&version.describe()),
                RandomAccess::Local(..) => None,
            };
            if ra.size() != m_bin.bytes || (m_bin.etag.is_some() && etag != m_bin.etag) {
                return Err(record::mismatch(
                    record_path,
                    Path::new(bin_url),
                    &format!(
                        "{} bytes, ETag {etag:?}; the record lists {} bytes, ETag {:?}",
                        ra.size(),
                        m_bin.bytes,
                        m_bin.etag
                    ),
                ));
            }
            PinnedBin::Ranged(ra)
        }
    };
    Ok(Some(PinnedPair { idx, bin }))
}

/// A pair without a record: pin the `.idx`, then the `.bin`, then check that the `.idx` is
/// still the version copied (`None` when it is not).
fn pin_unrecorded(idx_url: &str, bin_url: &str, mode: RemoteBin, cancel: &Cancel) -> Result<Option<PinnedPair>> {
    let idx = storage::local_copy_verified(idx_url, &Expected::default(), cancel)?;
    let bin = match mode {
        RemoteBin::Copy => PinnedBin::Local(storage::local_copy_verified(bin_url, &Expected::default(), cancel)?.path),
        RemoteBin::Ranges => PinnedBin::Ranged(RandomAccess::open(Path::new(bin_url))?),
    };
    let now = storage::identity(Path::new(idx_url))?;
    if now.get("version") != Some(&idx.version) {
        return Ok(None);
    }
    Ok(Some(PinnedPair { idx: idx.path, bin }))
}

/// The local prefix of copies of the remote pair `prefix`, pinned to one version (both files
/// downloaded if needed, and checked against the set's record).
pub fn local_pair(prefix: &str) -> Result<PathBuf> {
    let pinned = pin_remote_pair(prefix, RemoteBin::Copy)?;
    let idx = pinned.idx.to_string_lossy().into_owned();
    Ok(PathBuf::from(idx.strip_suffix(".idx").unwrap_or(&idx)))
}

/// Map the token file `path` (an OLMo `.npy`, local or in a store) as its set's record, when it
/// has one (`{path}.commit.json`, written by `tokshuf olmo-convert`), lists it: a set being
/// rewritten is refused, a file whose size (or, downloaded, checksum) differs is an error.
pub fn open_token_file(path: &Path) -> Result<Mapping> {
    let record_path = record::record_path(path);
    let mut backoff = Backoff::new();
    if let Some(url) = path.to_str().filter(|s| storage::is_remote(s)) {
        loop {
            let Some((found, _)) = record::read_remote(&record_path.to_string_lossy())? else {
                return Mapping::open(path);
            };
            if backoff.wait_for_writer(&found, &record_path)? {
                continue;
            }
            let m = member(&record_path, &found, path)?;
            let local = storage::local_copy_verified(url, &expected(m), &Cancel::new())?;
            return Mapping::open(&local.path);
        }
    }
    loop {
        let Some(seen) = record::read_local(&record_path)? else { return Mapping::open(path) };
        if backoff.wait_for_writer(&seen.record, &record_path)? {
            continue;
        }
        let opened = Mapping::open(path);
        if !record::unchanged(&record_path, &seen)? && backoff.wait() {
            continue;
        }
        let map = opened?;
        record::check_size(&record_path, member(&record_path, &seen.record, path)?, path, map.bytes().len() as u64)?;
        return Ok(map);
    }
}
