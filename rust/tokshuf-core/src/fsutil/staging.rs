//! All-or-nothing commit of the several files of one run (every key's `.bin/.idx`, a summary),
//! published by its commit record (see [`super::record`]).
//!
//! Every file is first written and synced under a temporary name: a run that fails while
//! writing (a full disk, a bad input, Ctrl-C) has renamed nothing, and the old set stays whole.
//! [`Staging::commit`] then:
//!
//! 1. retracts the old set: the record becomes `writing`, naming the new members with their
//!    sizes and checksums, where each waits, and where each old file will be moved aside (from
//!    here on no reader trusts the files under the final names);
//! 2. moves the old files a reader opens a set by (`.idx`, summary) aside first, then the old
//!    data files (`.bin`); then moves the new data files into place, the index files after;
//! 3. publishes the set: the record becomes `committed`, listing the new members.
//!
//! A failure (not a crash) undoes the moves and puts the old record back. A crash leaves the
//! `writing` record, which readers refuse and which the next commit into the directory (every
//! writing command starts with one, [`super::record::recover_dir`]) finishes: the new members
//! were complete before step 1, so they are moved into place and the record committed. Without a
//! record (a set of files no reader opens through one), the order alone protects readers: a crash
//! leaves each pair old and whole, new and whole, or without its `.idx`.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::os::{process_alive, sync_dir};
use super::record::{self, Member, Move, Record, State, Sum};
use super::{fault, TempFile};
use crate::error::{Error, IoContext, Result};

/// What a staged file is to a reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Read only through an index (`.bin`): placed first, moved aside last.
    Data,
    /// What a reader opens (`.idx`, a summary): placed last, moved aside first.
    Index,
}

#[derive(Debug)]
struct Staged {
    file: TempFile,
    role: Role,
    sum: Sum,
}

/// The record a set is published by: where, and what it says besides its members.
#[derive(Debug, Clone)]
pub struct RecordSpec {
    /// The record's path ([`record::record_path`] of the output name).
    pub path: PathBuf,
    /// The command that writes the set.
    pub command: String,
    /// What identifies the run beyond its inputs, if anything.
    pub run: Value,
    /// The identity of the input listing.
    pub inputs: Value,
}

/// Files written under temporary names, to be moved into place together.
#[derive(Debug, Default)]
pub struct Staging {
    files: Vec<Staged>,
    record: Option<RecordSpec>,
}

impl Staging {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Publish the set by a commit record (see the module's documentation).
    pub fn set_record(&mut self, spec: RecordSpec) {
        self.record = Some(spec);
    }

    /// Add a complete, synced data file (read only through an index of the same set), whose
    /// bytes `sum` describes.
    pub fn add_data(&mut self, file: TempFile, sum: Sum) {
        self.files.push(Staged { file, role: Role::Data, sum });
    }

    /// Add a complete, synced file that readers open (an index, a summary). Index files are
    /// placed in the order added, after every data file: add the summary last.
    pub fn add_index(&mut self, file: TempFile, sum: Sum) {
        self.files.push(Staged { file, role: Role::Index, sum });
    }

    /// Write `bytes` to a temporary sibling of `target`, sync it and add it as an index file.
    pub fn add_index_bytes(&mut self, target: impl Into<PathBuf>, bytes: &[u8]) -> Result<()> {
        self.add_index(super::write_synced(target, bytes)?, record::Checksum::of(bytes));
        Ok(())
    }

    /// Take the files of `other` (they keep their roles and order).
    pub fn extend(&mut self, other: Staging) {
        self.files.extend(other.files);
    }

    /// The final path and the size and checksum of every file, in the order they are placed.
    pub fn sums(&self) -> Vec<(PathBuf, Sum)> {
        let mut files: Vec<&Staged> = self.files.iter().collect();
        files.sort_by_key(|f| f.role == Role::Index);
        files.into_iter().map(|f| (f.file.target().to_path_buf(), f.sum)).collect()
    }

    /// Move every file into place (see the module's documentation for the order).
    pub fn commit(self) -> Result<()> {
        let Staging { mut files, record } = self;
        // Stable: data files keep their order, index files theirs.
        files.sort_by_key(|f| f.role == Role::Index);
        let record_dir = record.as_ref().and_then(|spec| spec.path.parent());
        let mut dirs: Vec<PathBuf> =
            files.iter().filter_map(|f| f.file.target().parent()).chain(record_dir).map(Path::to_path_buf).collect();
        dirs.sort();
        dirs.dedup();
        for dir in &dirs {
            record::recover_dir(dir)?;
        }
        for f in &files {
            remove_dead_temporaries(f.file.target());
        }
        let mut log = Log::default();
        // Where each old file goes while the new one moves in.
        let mut backups: Vec<Option<TempFile>> = files
            .iter()
            .map(|f| std::fs::symlink_metadata(f.file.target()).is_ok().then(|| TempFile::new(f.file.target())))
            .collect();
        let published = match &record {
            Some(spec) => Publish::prepare(spec, &files, &backups)?,
            None => Publish::default(),
        };
        let result = (|| -> Result<()> {
            published.retract(&mut log)?;
            // Aside: index files first, so that no old index outlives its data.
            for (f, backup) in files.iter().zip(backups.iter_mut()).rev() {
                let Some(backup) = backup.take() else { continue };
                let target = f.file.target();
                fault::point().with_path(target)?;
                std::fs::rename(target, backup.path()).with_path(target)?;
                log.aside.push(backup);
            }
            for f in &files {
                fault::point().with_path(f.file.target())?;
                std::fs::rename(f.file.path(), f.file.target()).with_path(f.file.target())?;
                log.placed.push(f.file.target().to_path_buf());
            }
            published.publish()
        })();
        if let Err(e) = result {
            log.undo();
            return Err(e);
        }
        for f in files {
            f.file.placed();
        }
        for dir in dirs {
            sync_dir(&dir);
        }
        // The old files go with `log` (their temporary names are removed on drop).
        Ok(())
    }
}

/// The record side of a commit: what to retract, the `writing` and the `committed` record.
#[derive(Default)]
struct Publish {
    path: Option<PathBuf>,
    /// The record file as it was (restored on failure).
    old_bytes: Option<Vec<u8>>,
    /// Other sets' records that list a member of this one (they would describe files that are
    /// about to change): removed before anything moves.
    foreign: Vec<(PathBuf, Vec<u8>)>,
    writing: Vec<u8>,
    committed: Vec<u8>,
}

impl Publish {
    fn prepare(spec: &RecordSpec, files: &[Staged], backups: &[Option<TempFile>]) -> Result<Publish> {
        let dir = spec.path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        remove_dead_temporaries(&spec.path);
        let old = record::read_local(&spec.path)?;
        if let Some(old) = &old {
            let w = old.record.writer.as_ref();
            if old.record.state == State::Writing
                && old.record.writer_alive()
                && w.is_some_and(|w| w.host == record::host_name())
            {
                let pid = w.map_or(0, |w| w.pid);
                return Err(Error::invalid(format!(
                    "another tokshuf process (pid {pid}) is writing this set ({}); wait for it or stop it",
                    spec.path.display()
                )));
            }
        }
        let (mut members, mut staged, mut aside) = (Vec::new(), Vec::new(), Vec::new());
        let tmp_name = |p: &Path| p.file_name().and_then(OsStr::to_str).unwrap_or_default().to_string();
        for (f, backup) in files.iter().zip(backups) {
            let Some(name) = record::member_name(&dir, f.file.target()) else { continue };
            members.push(Member::new(name.clone(), f.sum));
            staged.push(Move { name: name.clone(), temporary: tmp_name(f.file.path()) });
            if let Some(b) = backup {
                aside.push(Move { name, temporary: tmp_name(b.path()) });
            }
        }
        // Other sets' records that claim a file this set replaces no longer describe it.
        let mut foreign = Vec::new();
        for candidate in record::records_in(&dir) {
            if candidate.file_name() == spec.path.file_name() {
                continue;
            }
            if let Ok(Some(seen)) = record::read_local(&candidate) {
                let claims = |n: &str| {
                    seen.record.member(n).is_some()
                        || seen.record.writer.as_ref().is_some_and(|w| w.staged.iter().any(|m| m.name == n))
                };
                if members.iter().any(|m| claims(&m.name)) {
                    let bytes = std::fs::read(&candidate).with_path(&candidate)?;
                    foreign.push((candidate, bytes));
                }
            }
        }
        let committed = Record::committed(&spec.command, spec.run.clone(), spec.inputs.clone(), members);
        let old_record = old.as_ref().map(|s| s.record.clone());
        let writing = committed.writing(staged, aside, old_record);
        Ok(Publish {
            path: Some(spec.path.clone()),
            old_bytes: old.map(|_| std::fs::read(&spec.path)).transpose().with_path(&spec.path)?,
            foreign,
            writing: writing.to_bytes(),
            committed: committed.to_bytes(),
        })
    }

    /// Make the old set (and any other set's record of these files) no longer committed.
    fn retract(&self, log: &mut Log) -> Result<()> {
        let Some(path) = &self.path else { return Ok(()) };
        for (p, bytes) in &self.foreign {
            fault::point().with_path(p)?;
            std::fs::remove_file(p).with_path(p)?;
            log.records.push((p.clone(), Some(bytes.clone())));
        }
        log.records.push((path.clone(), self.old_bytes.clone()));
        super::write_atomic(path, &self.writing)
    }

    fn publish(&self) -> Result<()> {
        match &self.path {
            Some(path) => super::write_atomic(path, &self.committed),
            None => Ok(()),
        }
    }
}

/// What [`Staging::commit`] did so far, to undo it.
#[derive(Default)]
struct Log {
    aside: Vec<TempFile>,
    placed: Vec<PathBuf>,
    /// Records to put back as they were (`None`: there was none).
    records: Vec<(PathBuf, Option<Vec<u8>>)>,
}

impl Log {
    /// Remove the new files placed so far (index files first), put the old ones back, then
    /// their records.
    fn undo(&mut self) {
        for path in self.placed.drain(..).rev() {
            let _ = std::fs::remove_file(&path);
        }
        for backup in self.aside.drain(..).rev() {
            if std::fs::rename(backup.path(), backup.target()).is_ok() {
                std::mem::forget(backup);
            }
        }
        for (path, bytes) in self.records.drain(..).rev() {
            // Not through the fault points: this runs after one failed.
            let _ = match bytes {
                Some(bytes) => write_unchecked(&path, &bytes),
                None => std::fs::remove_file(&path),
            };
        }
    }
}

fn write_unchecked(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = TempFile::new(path);
    let mut f = std::fs::File::create(tmp.path())?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(tmp.path(), path)?;
    tmp.placed();
    Ok(())
}

/// Remove the temporaries `{name}.tmp-{pid}-{n}` of `target` left by processes that are gone
/// (killed runs). Those of live processes, this one included, are kept. The check is by process
/// id on this host, so on a filesystem shared by several hosts a live writer elsewhere whose id
/// is free here loses its temporary and fails; such setups should give each host its own output.
pub fn remove_dead_temporaries(target: &Path) {
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else { return };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut stem = name.to_os_string();
    stem.push(".tmp-");
    for entry in entries.flatten() {
        if temporary_pid(&entry.file_name(), &stem).is_some_and(|pid| !process_alive(pid)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Remove every `{name}.tmp-{pid}-{n}` in `dir` whose process is gone (what killed runs left).
pub fn remove_dead_temporaries_in(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(s) = name.to_str() else { continue };
        let Some(at) = s.rfind(".tmp-") else { continue };
        let stem = OsStr::new(&s[..at + 5]);
        let dead = temporary_pid(&name, stem).is_some_and(|pid| !process_alive(pid));
        if dead && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The process id in `{stem}{pid}-{n}`.
fn temporary_pid(name: &OsStr, stem: &OsStr) -> Option<u32> {
    let rest = name.as_encoded_bytes().strip_prefix(stem.as_encoded_bytes())?;
    let rest = std::str::from_utf8(rest).ok()?;
    let (pid, n) = rest.split_once('-')?;
    n.bytes().all(|b| b.is_ascii_digit()).then_some(())?;
    pid.parse().ok()
}
