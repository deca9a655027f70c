//! All-or-nothing commit of the several files of one run (every key's `.bin/.idx`, a summary).
//!
//! Every file is first written and synced under a temporary name: a run that fails while
//! writing (a full disk, a bad input, Ctrl-C) has renamed nothing, and the old set stays whole.
//! [`Staging::commit`] then only renames, in an order that a reader can rely on should the
//! process die between two renames:
//!
//! 1. the old files a reader opens a set by (`.idx`, summary) are moved aside first, then the old
//!    data files (`.bin`);
//! 2. the new data files are moved into place, then the new index files, the summary last.
//!
//! So a crash leaves each pair either old and whole, new and whole, or without its `.idx` (which
//! no reader opens), and never an old `.idx` beside a new `.bin` or old pairs beside new ones.
//! A rename that fails (not a crash) undoes the renames made so far and puts the old files back.
//! The old files wait under `{name}.tmp-{pid}-{n}` names, which [`remove_dead_temporaries`]
//! removes once their process is gone.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{fault, TempFile};
use crate::error::{IoContext, Result};

/// What a staged file is to a reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Read only through an index (`.bin`): placed first, moved aside last.
    Data,
    /// What a reader opens (`.idx`, a summary): placed last, moved aside first.
    Index,
}

/// Files written under temporary names, to be moved into place together.
#[derive(Debug, Default)]
pub struct Staging {
    files: Vec<(TempFile, Role)>,
}

impl Staging {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a complete, synced data file (read only through an index of the same set).
    pub fn add_data(&mut self, file: TempFile) {
        self.files.push((file, Role::Data));
    }

    /// Add a complete, synced file that readers open (an index, a summary). Index files are
    /// placed in the order added, after every data file: add the summary last.
    pub fn add_index(&mut self, file: TempFile) {
        self.files.push((file, Role::Index));
    }

    /// Write `bytes` to a temporary sibling of `target`, sync it and add it as an index file.
    pub fn add_index_bytes(&mut self, target: impl Into<PathBuf>, bytes: &[u8]) -> Result<()> {
        let tmp = TempFile::new(target);
        let mut f = tmp.create()?;
        fault::point().with_path(tmp.path())?;
        f.write_all(bytes).with_path(tmp.path())?;
        f.sync_all().with_path(tmp.path())?;
        self.add_index(tmp);
        Ok(())
    }

    /// Take the files of `other` (they keep their roles and order).
    pub fn extend(&mut self, other: Staging) {
        self.files.extend(other.files);
    }

    /// Move every file into place (see the module's documentation for the order).
    pub fn commit(self) -> Result<()> {
        let mut files = self.files;
        // Stable: data files keep their order, index files theirs.
        files.sort_by_key(|(_, role)| *role == Role::Index);
        for (f, _) in &files {
            remove_dead_temporaries(f.target());
        }
        let mut log = Log { aside: Vec::new(), placed: Vec::new() };
        let result = (|| -> Result<()> {
            // Aside: index files first, so that no old index outlives its data.
            for (f, _) in files.iter().rev() {
                let target = f.target();
                if std::fs::symlink_metadata(target).is_ok() {
                    let backup = TempFile::new(target);
                    fault::point().with_path(target)?;
                    std::fs::rename(target, backup.path()).with_path(target)?;
                    log.aside.push(backup);
                }
            }
            for (f, _) in &files {
                fault::point().with_path(f.target())?;
                std::fs::rename(f.path(), f.target()).with_path(f.target())?;
                log.placed.push(f.target().to_path_buf());
            }
            Ok(())
        })();
        match result {
            Ok(()) => {
                for (f, _) in files {
                    f.placed();
                }
                let mut dirs: Vec<&Path> = log.placed.iter().filter_map(|p| p.parent()).collect();
                dirs.dedup();
                for dir in dirs {
                    sync_dir(dir);
                }
                // The old files go with `log` (their temporary names are removed on drop).
                Ok(())
            }
            Err(e) => {
                log.undo();
                Err(e)
            }
        }
    }
}

/// What [`Staging::commit`] did so far, to undo it.
struct Log {
    aside: Vec<TempFile>,
    placed: Vec<PathBuf>,
}

impl Log {
    /// Remove the new files placed so far (index files first) and put the old ones back.
    fn undo(&mut self) {
        for path in self.placed.drain(..).rev() {
            let _ = std::fs::remove_file(&path);
        }
        for backup in self.aside.drain(..).rev() {
            if std::fs::rename(backup.path(), backup.target()).is_ok() {
                std::mem::forget(backup);
            }
        }
    }
}

/// Make the renames in `dir` durable (best effort: not every filesystem syncs directories).
fn sync_dir(dir: &Path) {
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
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
        if let Some(pid) = temporary_pid(&entry.file_name(), &stem) {
            if !process_alive(pid) {
                let _ = std::fs::remove_file(entry.path());
            }
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

#[cfg(unix)]
fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks whether the process exists and may be signalled.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(not(unix))]
fn process_alive(_pid: u32) -> bool {
    true
}
