//! The resume state kept in the local-cell directory, and the directory's ownership rules.
//!
//! The top of a local-cell dir holds `tasks/` (see `tasks.rs`), the staging dir `output/` and the
//! lock. Each `cells` task's directory has its `state.json`, rewritten atomically at every
//! checkpoint (after a run is renamed into place). It names the command that owns the directory
//! (the fingerprint), so a rerun of the same command resumes and any other command is refused
//! rather than mixed in. Everything a rerun needs to continue is here or derivable from content
//! positions; anything on disk that the state does not account for (a temporary file, a run
//! renamed just before a kill) is removed on resume.

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::config::ShuffleConfig;
use super::contexts::Cutter;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::write_atomic;
use crate::ingest::Skips;
use crate::tokenize::Tokenizer;

/// Fault injection for the resume tests: `TOKSHUF_TEST_CRASH_AT=name:n` aborts the process the
/// n-th time (1-based) the point `name` is reached. Costs one relaxed load when unset.
pub(super) fn crash_point(name: &str) {
    static TARGET: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static HITS: AtomicU64 = AtomicU64::new(0);
    let target = TARGET.get_or_init(|| {
        let v = std::env::var("TOKSHUF_TEST_CRASH_AT").ok()?;
        let (n, k) = v.rsplit_once(':')?;
        Some((n.to_string(), k.parse().ok()?))
    });
    if target.as_ref().is_some_and(|(n, k)| n == name && HITS.fetch_add(1, Ordering::Relaxed) + 1 == *k) {
        std::process::abort();
    }
}

/// Everything the output depends on; a local-cell dir only resumes the command it was made by.
/// (Threads and buffer sizes do not change the output; `--on-error` may change between resumes.)
pub(super) fn fingerprint(cfg: &ShuffleConfig, tokenizer: Option<&dyn Tokenizer>) -> Result<Value> {
    let inputs = cfg.inputs.iter().map(|p| crate::storage::identity(p)).collect::<Result<Vec<_>>>()?;
    let fingerprint = json!({
        "command": "tokshuf shuffle",
        "inputs": inputs,
        "output": cfg.output.canonicalize().with_path(&cfg.output)?,
        "tokenizer": tokenizer.map(crate::tokenize::output_identity),
        "seqlen": cfg.seqlen,
        "wds_chunk_size": cfg.wds_chunk_size,
        "num_local_cells": cfg.num_local_cells,
        "seed": cfg.seed,
        "content_key": cfg.content_key,
        "special_tokens": cfg.special,
        "member_format": cfg.member_format,
        "shuffle_only": cfg.shuffle_only,
        "all_pad_context": cfg.all_pad_context,
        "max_line_bytes": cfg.max_line_bytes,
    });
    // As the state file holds it (redacted), so that a rerun compares like with like.
    let text = crate::storage::redact(&fingerprint.to_string()).into_owned();
    serde_json::from_str(&text).map_err(|e| Error::invalid(e.to_string()))
}

/// Version of the state layout (and of the run format it points to).
pub const STATE_VERSION: u32 = 1;
const STATE_FILE: &str = "state.json";
const LOCK_FILE: &str = ".lock";

/// Where a run stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Stage 1: reading, tokenizing, scattering contexts into cells.
    #[default]
    Cells,
    /// The cells are complete: stage 2 may read them.
    Shards,
}

/// Counters of stage 1, saved with every checkpoint.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counts {
    /// Input files fully read.
    pub files_done: u64,
    /// Lines read (accepted and skipped).
    pub lines: u64,
    /// Documents (or samples, with `--shuffle-only`) turned into contexts.
    pub documents: u64,
    /// Tokens in contexts other than PAD (document ids, BOS, EOT).
    pub tokens: u64,
    pub pad_tokens: u64,
    /// Contexts (samples) written to cells.
    pub contexts: u64,
    /// Bytes of encoded contexts written to cells.
    pub cell_bytes: u64,
    /// Bytes of input files fully read (on disk).
    pub input_bytes: u64,
    /// Decompressed bytes of input files fully read.
    pub decompressed_bytes: u64,
    /// What was skipped (`skipped`, `first_skipped`, `skipped_files`).
    #[serde(flatten)]
    pub skips: Skips,
}

/// The reading position of stage 1: everything before it is in the runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Position {
    /// Index of the input file being read (files before it are done).
    pub file: usize,
    /// Lines of that file already consumed.
    pub lines: u64,
    /// Its context cutter (pending tokens, next context index).
    pub cutter: Cutter,
}

/// The whole resume state.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct State {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// The command that owns the directory.
    pub fingerprint: Value,
    pub stage: Stage,
    /// Runs written: `run_00000000.cells` ... (in order).
    pub runs: u32,
    /// Stage-1 position.
    pub position: Position,
    /// Stage-1 counters.
    pub counts: Counts,
}

impl State {
    /// The state of a run that has not started.
    pub fn fresh(fingerprint: Value) -> Self {
        Self { version: STATE_VERSION, fingerprint, ..Self::default() }
    }
}

/// The path of run `i` in `dir`.
pub fn run_path(dir: &Path, i: u32) -> PathBuf {
    dir.join(format!("run_{i:08}.cells"))
}

fn run_number(name: &str) -> Option<u32> {
    name.strip_prefix("run_")?.strip_suffix(".cells")?.parse().ok()
}

/// An exclusive lock on the local-cell directory, held for the whole run.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Create `dir` if needed and lock it, failing at once if another process holds it.
    pub fn acquire(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_path(dir)?;
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new().create(true).truncate(false).write(true).open(&path).with_path(&path)?;
        // SAFETY: flock on a valid, owned descriptor; no memory is involved.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            return Err(Error::invalid(format!(
                "the local-cell dir {} is in use by another tokshuf shuffle process",
                dir.display()
            )));
        }
        Ok(Self { _file: file })
    }
}

/// The directory in a local-cell dir where a run whose output is in an object store writes it
/// before the upload.
pub const STAGING_DIR: &str = "output";
/// The directory in a local-cell dir that holds the steps' directories and records.
pub const TASKS_DIR: &str = "tasks";

/// Refuse a local-cell dir whose top holds anything but the steps' directory, the staging dir
/// and the lock: another program's files, or a one-node run of an earlier tokshuf, which kept its
/// cells and `state.json` there.
pub fn check_top(dir: &Path) -> Result<()> {
    if dir.join(STATE_FILE).exists() {
        return Err(Error::invalid(format!(
            "the local-cell dir {d} was written by an earlier tokshuf, which kept a one-node run's cells and \
             state at its top (they are now in {d}/{TASKS_DIR}); it cannot be resumed: delete {d} and run the \
             command again (if that run had completed, its output is complete as it is)",
            d = dir.display()
        )));
    }
    if dir.is_dir() {
        load(dir, &Value::Null)?;
    }
    Ok(())
}

/// The state the directory holds for `fingerprint`: `None` for an empty (or new) directory,
/// the saved state for the same command, an error for anything else.
pub fn load(dir: &Path, fingerprint: &Value) -> Result<Option<State>> {
    let path = dir.join(STATE_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => {
            let state: State = serde_json::from_slice(&bytes).map_err(|e| {
                Error::format(&path, format!("unreadable shuffle state ({e}); delete the directory to start over"))
            })?;
            if state.version != STATE_VERSION {
                return Err(Error::invalid(format!(
                    "the local-cell dir {} was written by another version of tokshuf (state version {}, this one \
                     {STATE_VERSION}); delete it or use another --local-cell-dir",
                    dir.display(),
                    state.version
                )));
            }
            if state.fingerprint != *fingerprint {
                return Err(Error::invalid(format!(
                    "the local-cell dir {} belongs to a different tokshuf shuffle command ({}); rerun that command \
                     to resume it, or delete the directory / use another --local-cell-dir",
                    dir.display(),
                    describe_difference(&state.fingerprint, fingerprint)
                )));
            }
            Ok(Some(state))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A run killed before its first state was saved left only temporaries: not foreign.
            crate::fsutil::remove_dead_temporaries_in(dir);
            let foreign: Vec<String> = std::fs::read_dir(dir)
                .with_path(dir)?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| ![LOCK_FILE, STAGING_DIR, TASKS_DIR].contains(&n.as_str()))
                .collect();
            if !foreign.is_empty() {
                return Err(Error::invalid(format!(
                    "the local-cell dir {} is not empty and holds no tokshuf shuffle state (found {:?}); use an \
                     empty or new directory",
                    dir.display(),
                    &foreign[..foreign.len().min(3)]
                )));
            }
            Ok(None)
        }
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// Write the state atomically.
pub fn save(dir: &Path, state: &State) -> Result<()> {
    write_atomic(dir.join(STATE_FILE), &crate::fsutil::json_file_bytes(state)?)
}

/// Remove from the locked `dir` what a killed run may have left that its state does not account
/// for: temporary files, and runs numbered `runs` or later (all of them once the run is complete).
pub fn clean_leftovers(dir: &Path, runs: u32) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_path(dir)? {
        let entry = entry.with_path(dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.contains(".tmp-") || run_number(&name).is_some_and(|i| i >= runs) {
            std::fs::remove_file(entry.path()).with_path(entry.path())?;
        }
    }
    Ok(())
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 80 {
        format!("{}...", s.chars().take(77).collect::<String>())
    } else {
        s
    }
}

/// "seed: 1234 -> 42; seqlen: ..." for the keys that differ.
fn describe_difference(old: &Value, new: &Value) -> String {
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else { return "different settings".into() };
    let keys: std::collections::BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    let diffs: Vec<String> = keys
        .into_iter()
        .filter(|k| o.get(*k) != n.get(*k))
        .map(|k| {
            let (a, b) = (o.get(k).unwrap_or(&Value::Null), n.get(k).unwrap_or(&Value::Null));
            if k == "inputs" {
                "the input files differ (paths, sizes or modification times)".to_string()
            } else {
                format!("{k}: {} there, {} now", short(a), short(b))
            }
        })
        .collect();
    if diffs.is_empty() {
        "different settings".into()
    } else {
        diffs.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ownership_rules() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("cells");
        let _lock = DirLock::acquire(&d).unwrap();
        let fp = json!({"seed": 1, "seqlen": 5});
        assert!(load(&d, &fp).unwrap().is_none());
        save(&d, &State::fresh(fp.clone())).unwrap();
        // Same command: the saved state comes back.
        let s = load(&d, &fp).unwrap().unwrap();
        assert_eq!((s.stage, s.fingerprint), (Stage::Cells, fp.clone()));
        // Different command: refused, naming the difference.
        let e = load(&d, &json!({"seed": 2, "seqlen": 5})).unwrap_err().to_string();
        assert!(e.contains("seed: 1 there, 2 now"), "{e}");
        // A directory with foreign files: refused.
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("x.tar"), b"").unwrap();
        let e = load(&other, &fp).unwrap_err().to_string();
        assert!(e.contains("not empty"), "{e}");
    }

    #[test]
    fn leftovers_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("c");
        std::fs::create_dir_all(&d).unwrap();
        for f in ["run_00000000.cells", "run_00000001.cells", "run_00000002.cells", "run_00000003.cells.tmp-1-0"] {
            std::fs::write(d.join(f), b"").unwrap();
        }
        clean_leftovers(&d, 2).unwrap();
        let mut left: Vec<String> =
            std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["run_00000000.cells", "run_00000001.cells"]);
    }

    #[test]
    fn a_second_process_cannot_lock() {
        // flock locks are per open file description: a second open in the same process conflicts.
        let dir = tempfile::tempdir().unwrap();
        let _a = DirLock::acquire(dir.path()).unwrap();
        assert!(DirLock::acquire(dir.path()).is_err());
    }
}
