//! The commit record of an output set: the file, written last, that makes a set of outputs (every
//! key's `.bin/.idx` and the summary of a preprocess run, a merge, a token file and its metadata,
//! a shuffle's shards and manifest) one thing that readers either trust whole or not at all.
//!
//! A record lists every member with its size and CRC32C (computed while the member was written,
//! see [`Checksum`]), and for a set in an object store the ETag each member got; it also names the
//! tool, the command and the identity of the input listing the set was made from. Its name is
//! the output's name plus `.commit.json` (`{prefix}.commit.json` beside the pairs of a preprocess
//! or merge, `part-0.npy.commit.json` beside a token file), or `commit.json` inside a shuffle's
//! output directory.
//!
//! A record is in one of two states. `committed`: the members are in place and whole. `writing`:
//! a run is replacing the set (it retracted the old record first), so the files under the final
//! names may belong to either version and no reader may trust them. A `writing` record also says
//! which process wrote it and where the new members and the moved-aside old ones wait, so the
//! next run can finish the interrupted commit ([`recover_dir`]) instead of losing both sets.
//!
//! Readers find the record of a `.bin/.idx` pair `{dir}/{name}` at `{name}.commit.json`, else
//! (Megatron's `{prefix}_{key}_document` names) at `{prefix}.commit.json` for each `_` that may
//! end the prefix ([`pair_candidates`]); a record that does not list the pair is another set's.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::RecordSpec;
use crate::error::{Error, IoContext, Result};

/// What a set's record is named: `{output}` + this.
pub const SUFFIX: &str = ".commit.json";
/// The record inside an output directory (a shuffle's).
pub const DIR_RECORD: &str = "commit.json";
/// The layout of a record.
pub const FORMAT: &str = "tokshuf-commit-1";

/// The CRC32C of bytes as they are written, and how many there were.
#[derive(Debug, Clone, Copy)]
pub struct Checksum {
    digest: crc_fast::Digest,
    bytes: u64,
}

impl Default for Checksum {
    fn default() -> Self {
        Self::new()
    }
}

impl Checksum {
    /// Nothing summed yet.
    pub fn new() -> Self {
        Self { digest: crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi), bytes: 0 }
    }

    /// Add `data`.
    #[inline]
    pub fn update(&mut self, data: &[u8]) {
        self.digest.update(data);
        self.bytes += data.len() as u64;
    }

    /// What was summed so far.
    pub fn sum(&self) -> Sum {
        Sum { bytes: self.bytes, crc32c: self.digest.finalize() as u32 }
    }

    /// The sum of `data`.
    pub fn of(data: &[u8]) -> Sum {
        let mut c = Self::new();
        c.update(data);
        c.sum()
    }

    /// The sum of the file at `path`, read through.
    pub fn of_file(path: &Path) -> Result<Sum> {
        let file = std::fs::File::open(path).with_path(path)?;
        let mut summing = Summing::new(io::sink());
        io::copy(&mut io::BufReader::with_capacity(4 << 20, file), &mut summing).with_path(path)?;
        Ok(summing.into_parts().1)
    }
}

/// The size and CRC32C of a member's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sum {
    pub bytes: u64,
    /// CRC32C (Castagnoli) of the bytes.
    pub crc32c: u32,
}

impl Sum {
    /// The record's spelling of the CRC: 8 lowercase hex digits.
    pub fn hex(&self) -> String {
        format!("{:08x}", self.crc32c)
    }
}

/// A writer that sums what goes through it.
#[derive(Debug)]
pub struct Summing<W> {
    inner: W,
    sum: Checksum,
}

impl<W: Write> Summing<W> {
    /// Sum what is written to `inner`.
    pub fn new(inner: W) -> Self {
        Self { inner, sum: Checksum::new() }
    }

    /// The writer, and the sum of what was written.
    pub fn into_parts(self) -> (W, Sum) {
        let sum = self.sum.sum();
        (self.inner, sum)
    }
}

impl<W: Write> Write for Summing<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(data)?;
        self.sum.update(&data[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// One file of a set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// File name, relative to the record's directory.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// CRC32C of its bytes, 8 hex digits.
    pub crc32c: String,
    /// In an object store: the ETag the uploaded object got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
}

impl Member {
    /// The member `name` with the bytes `sum` describes.
    pub fn new(name: impl Into<String>, sum: Sum) -> Self {
        Self { name: name.into(), bytes: sum.bytes, crc32c: sum.hex(), etag: None }
    }
}

/// Whether a set can be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Every member is in place and whole.
    Committed,
    /// A run is replacing the set: the files under the final names are not to be trusted.
    Writing,
}

/// A file moved during a commit: the member's final name and where its bytes wait.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    /// The member's file name.
    pub name: String,
    /// The name its bytes have until the move.
    pub temporary: String,
}

/// Who is replacing a set, and what a run that finds the replacement interrupted needs to
/// finish it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Writer {
    pub pid: u32,
    /// Host name (a process id means nothing on another host).
    pub host: String,
    /// New members still under their temporary names (complete and synced).
    #[serde(default)]
    pub staged: Vec<Move>,
    /// Old members moved aside.
    #[serde(default)]
    pub aside: Vec<Move>,
    /// The record of the set being replaced, if there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<Box<Record>>,
}

/// A commit record (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// [`FORMAT`].
    pub format: String,
    /// Whether the set can be read.
    pub state: State,
    /// `tokshuf X.Y.Z`.
    pub tool: String,
    /// The command that wrote the set (`preprocess`, `merge`, `olmo-convert`, `shuffle`, ...).
    pub command: String,
    /// What identifies the run beyond its inputs (a shuffle's fingerprint digest, a task), if
    /// anything.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub run: Value,
    /// The identity of the input listing (paths, sizes, modification times or ETags).
    #[serde(default)]
    pub inputs: Value,
    /// The files of the set, data before indexes.
    pub members: Vec<Member>,
    /// While `writing`: who, and how to finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<Writer>,
}

impl Record {
    /// A committed record of `members`.
    pub fn committed(command: &str, run: Value, inputs: Value, members: Vec<Member>) -> Record {
        Record {
            format: FORMAT.into(),
            state: State::Committed,
            tool: format!("tokshuf {}", env!("CARGO_PKG_VERSION")),
            command: command.into(),
            run,
            inputs,
            members,
            writer: None,
        }
    }

    /// The `writing` record this process puts in place while it replaces the set with `self`.
    pub fn writing(&self, staged: Vec<Move>, aside: Vec<Move>, old: Option<Record>) -> Record {
        let mut r = self.clone();
        r.state = State::Writing;
        // Only the last committed set matters: not the history of interrupted ones.
        let old = old.map(|mut o| match o.writer.take() {
            Some(w) => w.old.map_or(o, |b| *b),
            None => o,
        });
        r.writer = Some(Writer { pid: std::process::id(), host: host_name(), staged, aside, old: old.map(Box::new) });
        r
    }

    /// The member named `name`.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.name == name)
    }

    /// The record as the file holds it.
    pub fn to_bytes(&self) -> Vec<u8> {
        // The run's options and the input listing may name URLs: no credential in the file.
        super::json_file_bytes(self).expect("a record serializes")
    }

    /// Parse the file `path` (named in errors).
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Record> {
        let record: Record = serde_json::from_slice(bytes)
            .map_err(|e| Error::format(path, format!("unreadable commit record ({e})")))?;
        if record.format != FORMAT {
            return Err(Error::format(
                path,
                format!("commit record of an unknown layout {:?} (this tokshuf reads {FORMAT:?})", record.format),
            ));
        }
        Ok(record)
    }

    /// Whether the writer of a `writing` record is a process on this host that is still running
    /// (`false` for a committed record, or one of a process that is gone).
    pub fn writer_alive(&self) -> bool {
        self.writer.as_ref().is_some_and(|w| w.host != host_name() || super::os::process_alive(w.pid))
    }

    /// Why a reader cannot use this `writing` record's set.
    pub fn not_committed(&self, path: &Path) -> Error {
        let who = self.writer.as_ref().map_or_else(String::new, |w| format!(" by process {} on {}", w.pid, w.host));
        let what = if self.writer_alive() {
            format!("is being rewritten{who} ({} {}); open it once that run is done", self.tool, self.command)
        } else {
            format!(
                "was being rewritten{who}, which stopped before it finished: no complete version of the set \
                 is committed; rerun `{}` (it restores or redoes the set)",
                self.command
            )
        };
        Error::format(path, format!("the set this record describes {what}"))
    }
}

/// This host's name (empty if it cannot be read).
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or truncates.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The record of the set written under the output name `output` (`{output}.commit.json`).
pub fn record_path(output: &Path) -> PathBuf {
    super::with_suffix(output, SUFFIX)
}

/// The record names a reader tries, in order, for the `.bin/.idx` pair `prefix`: its own
/// (`{prefix}.commit.json`, a merge's), then for a name `{p}_{key}_document` the record of each
/// `{p}` that may have written it (a preprocess's, or a task part's), longest first.
pub fn pair_candidates(prefix: &str) -> Vec<String> {
    let mut out = vec![format!("{prefix}{SUFFIX}")];
    let (dir, name) = match prefix.rfind('/') {
        Some(i) => (&prefix[..=i], &prefix[i + 1..]),
        None => ("", prefix),
    };
    if let Some(stem) = name.strip_suffix("_document") {
        let prefixes = stem.rmatch_indices('_').filter(|&(i, _)| i > 0);
        out.extend(prefixes.map(|(i, _)| format!("{dir}{}{SUFFIX}", &stem[..i])));
    }
    out
}

/// A record file as read: the parsed record and the bytes and file identity it was read from
/// (what a reader compares after opening the members, to know the record did not change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub record: Record,
    bytes: Vec<u8>,
    stamp: Option<(u64, u64, i64, i64)>,
}

fn stamp(meta: &std::fs::Metadata) -> Option<(u64, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt as _;
    Some((meta.dev(), meta.ino(), meta.mtime(), meta.mtime_nsec()))
}

/// The local record at `path`, if there is one.
pub fn read_local(path: &Path) -> Result<Option<Seen>> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, e)),
    };
    let meta = file.metadata().with_path(path)?;
    if meta.is_dir() {
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes).with_path(path)?;
    let record = Record::parse(&bytes, path)?;
    Ok(Some(Seen { record, bytes, stamp: stamp(&meta) }))
}

/// Whether the record at `path` is still the one `seen` read (same file, same bytes).
pub fn unchanged(path: &Path, seen: &Seen) -> Result<bool> {
    Ok(read_local(path)?.is_some_and(|now| now.stamp == seen.stamp && now.bytes == seen.bytes))
}

/// The record that describes the local pair `prefix` (listing its `.idx` or `.bin`), if any.
pub fn find_pair_record(prefix: &Path) -> Result<Option<(PathBuf, Seen)>> {
    let (Some(s), Some(name)) = (prefix.to_str(), prefix.file_name().and_then(|n| n.to_str())) else {
        return Ok(None);
    };
    for candidate in pair_candidates(s) {
        let path = PathBuf::from(candidate);
        if let Some(seen) = read_local(&path)?.filter(|seen| lists_pair(&seen.record, name)) {
            return Ok(Some((path, seen)));
        }
    }
    Ok(None)
}

/// Whether `record` lists the `.idx` or `.bin` of the pair named `name`.
pub fn lists_pair(record: &Record, name: &str) -> bool {
    let (idx, bin) = (format!("{name}.idx"), format!("{name}.bin"));
    record.members.iter().any(|m| m.name == idx || m.name == bin)
        || record.writer.as_ref().is_some_and(|w| w.staged.iter().any(|m| m.name == idx || m.name == bin))
}

/// Check the file `path` against the record's member of the same name: an error naming both
/// files when its size differs (the checksum is checked where the bytes are read anyway).
pub fn check_size(record_path: &Path, member: &Member, path: &Path, actual: u64) -> Result<()> {
    if actual != member.bytes {
        return Err(mismatch(record_path, path, &format!("{actual} bytes, the record lists {}", member.bytes)));
    }
    Ok(())
}

/// A member that disagrees with its record: an error naming both.
pub fn mismatch(record_path: &Path, member: &Path, what: &str) -> Error {
    Error::format(
        member,
        format!(
            "does not match the commit record {} ({what}): the file was changed or replaced after the set was \
             committed; rerun the command that wrote the set",
            record_path.display()
        ),
    )
}

/// The member's name of `target` relative to `dir`, if it lies directly in it.
pub fn member_name(dir: &Path, target: &Path) -> Option<String> {
    let parent = target.parent().map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p });
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    if parent != Some(dir) {
        return None;
    }
    target.file_name()?.to_str().map(str::to_string)
}

/// The record files in `dir`, sorted.
pub fn records_in(dir: &Path) -> Vec<PathBuf> {
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let is_record = |n: &str| (n.ends_with(SUFFIX) || n == DIR_RECORD) && !n.contains(".tmp-");
    let mut records: Vec<PathBuf> =
        entries.flatten().filter(|e| e.file_name().to_str().is_some_and(is_record)).map(|e| e.path()).collect();
    records.sort();
    records
}

/// Finish the commits in `dir` that a process on this host began and did not end (killed):
/// each such `writing` record lists complete new members, so they are moved into place and the
/// record committed; where a new member is missing the old set is moved back instead. Records of
/// live processes, and those without moves (a shuffle's, which its own resume finishes), are left.
pub fn recover_dir(dir: &Path) -> Result<()> {
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    for path in records_in(dir) {
        // A record's temporary is never needed once its writer is gone.
        super::remove_dead_temporaries(&path);
        let Ok(Some(seen)) = read_local(&path) else { continue };
        let record = seen.record;
        let Some(writer) = &record.writer else { continue };
        if record.state != State::Writing || record.writer_alive() || writer.staged.is_empty() {
            continue;
        }
        recover(dir, &path, &record)?;
    }
    Ok(())
}

fn size_of(path: &Path) -> Option<u64> {
    std::fs::symlink_metadata(path).ok().filter(|m| m.is_file()).map(|m| m.len())
}

/// Finish (or undo) the interrupted commit that `record` (at `path`, in `dir`) describes.
fn recover(dir: &Path, path: &Path, record: &Record) -> Result<()> {
    let writer = record.writer.as_ref().expect("a writing record");
    let staged: BTreeMap<&str, &str> = writer.staged.iter().map(|m| (m.name.as_str(), m.temporary.as_str())).collect();
    let aside: BTreeMap<&str, &str> = writer.aside.iter().map(|m| (m.name.as_str(), m.temporary.as_str())).collect();
    // A member is whole at its temporary name in `moves`, or (once moved back) at its final one.
    let whole = |moves: &BTreeMap<&str, &str>, m: &Member| {
        let at = moves.get(m.name.as_str()).map(|t| dir.join(t)).filter(|t| size_of(t).is_some());
        size_of(&at.unwrap_or_else(|| dir.join(&m.name))) == Some(m.bytes)
    };
    // Move the file waiting at `temporary` (if it still does) to `name`.
    let place = |name: &str, temporary: &str| -> Result<()> {
        let tmp = dir.join(temporary);
        if size_of(&tmp).is_some() {
            std::fs::rename(&tmp, dir.join(name)).with_path(dir.join(name))?;
        }
        Ok(())
    };
    if record.members.iter().all(|m| whole(&staged, m)) {
        for m in &record.members {
            if let Some(t) = staged.get(m.name.as_str()) {
                place(&m.name, t)?;
            }
        }
        for t in aside.values() {
            let _ = std::fs::remove_file(dir.join(t));
        }
        let mut done = record.clone();
        done.state = State::Committed;
        done.writer = None;
        super::os::sync_dir(dir);
        return super::write_atomic(path, &done.to_bytes());
    }
    // A new member is gone: put the old set back, if it is whole.
    let Some(old) = writer.old.as_deref() else { return Ok(()) };
    if !old.members.iter().all(|m| whole(&aside, m)) {
        return Ok(());
    }
    // New members that were already moved into place, where the old set had none, go.
    for m in &record.members {
        let moved = staged.get(m.name.as_str()).is_none_or(|t| size_of(&dir.join(t)).is_none());
        if old.member(&m.name).is_none() && moved {
            let _ = std::fs::remove_file(dir.join(&m.name));
        }
    }
    for (name, t) in &aside {
        place(name, t)?;
    }
    for t in staged.values() {
        let _ = std::fs::remove_file(dir.join(t));
    }
    super::os::sync_dir(dir);
    super::write_atomic(path, &old.to_bytes())
}

/// The identity of an input listing, as records keep it: per input, its canonical path (an
/// object's URL), size, and modification time (an object's ETag). Objects are asked in parallel.
pub fn listing_identity(paths: &[PathBuf]) -> Result<Value> {
    use rayon::prelude::*;
    let ids: Vec<Value> = paths
        .par_iter()
        .map(|p| {
            if crate::read::is_stdin(p) {
                return Ok(serde_json::json!({"path": "-"}));
            }
            crate::storage::identity(p)
        })
        .collect::<Result<_>>()?;
    Ok(Value::Array(ids))
}

/// A directory for a run's local copy of outputs bound for an object store:
/// `{TOKSHUF_STAGING_DIR or the temporary directory}/{prefix}-{pid}-XXXX`, removed when dropped.
/// Those a killed run left (its process is gone) are removed first.
pub fn staging_dir(prefix: &str) -> Result<tempfile::TempDir> {
    let root = std::env::var_os("TOKSHUF_STAGING_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    remove_dead_staging_dirs(&root, prefix);
    tempfile::Builder::new().prefix(&format!("{prefix}-{}-", std::process::id())).tempdir_in(&root).with_path(&root)
}

/// Remove `{prefix}-{pid}-*` directories of `root` whose process is gone.
pub fn remove_dead_staging_dirs(root: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    let stem = format!("{prefix}-");
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&stem)) else { continue };
        let Some(pid) = rest.split_once('-').and_then(|(pid, _)| pid.parse::<u32>().ok()) else { continue };
        if !super::os::process_alive(pid) && entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// One member of a set bound for an object store.
#[derive(Debug)]
pub struct RemoteFile {
    source: Source,
    /// The object's URL.
    pub target: PathBuf,
    /// Size and checksum of its bytes.
    pub sum: Sum,
}

#[derive(Debug)]
enum Source {
    File(PathBuf),
    Bytes(Vec<u8>),
}

impl RemoteFile {
    /// The local file `from`, to be uploaded to `to`.
    pub fn upload(from: PathBuf, to: PathBuf, sum: Sum) -> Self {
        Self { source: Source::File(from), target: to, sum }
    }

    /// `bytes`, to be stored as `to`.
    pub fn bytes(bytes: Vec<u8>, to: PathBuf, sum: Sum) -> Self {
        Self { source: Source::Bytes(bytes), target: to, sum }
    }
}

fn remote_of(path: &Path) -> Result<crate::storage::Remote> {
    crate::storage::remote(path)?.ok_or_else(|| Error::invalid(format!("{} is not a storage URL", path.display())))
}

/// The record at `url` in an object store, if there is one, and the ETag it was read at.
pub fn read_remote(url: &str) -> Result<Option<(Record, Option<String>)>> {
    let path = Path::new(url);
    let remote = remote_of(path)?;
    let mut attempt = 0;
    loop {
        let mut reader = match crate::storage::RemoteReader::open(remote.clone()) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path, e)),
        };
        let etag = etag_of(&reader.version().describe());
        let mut bytes = Vec::new();
        match reader.read_to_end(&mut bytes) {
            Ok(_) => return Ok(Some((Record::parse(&bytes, path)?, etag))),
            // Replaced between the HEAD and the GET (a commit ran): read the new one.
            Err(e) if attempt < 5 && e.to_string().contains("changed while it was read") => attempt += 1,
            Err(e) => return Err(Error::io(path, e)),
        }
    }
}

/// The ETag in a version's description (`{"etag": ...}`), if it has one.
pub fn etag_of(version: &Value) -> Option<String> {
    version.get("etag").and_then(Value::as_str).map(str::to_string)
}

/// Publish `files` as the set `spec` describes, in an object store: the record is retracted
/// first (a `writing` record replaces it, so no reader trusts the old members once the first new
/// one is uploaded), then every file is uploaded in the given order (data before indexes), then
/// the record is committed with the ETag each member got. A run killed between two steps leaves
/// the `writing` record: readers refuse the set until a run completes it. Tools that read no
/// record (Megatron) would still pair an old index with new data, so before the first upload
/// the old objects the uploads will replace are deleted, but for data (`.bin`): the old set's
/// members and any index (a `.idx` written by a tool that keeps no record). Killed at any point,
/// the store then holds no old index beside new data. Old data is left to its upload to replace
/// whole: without its index it pairs with nothing, and a reader holding it open is told that it
/// changed rather than that it is gone.
pub fn publish_remote(spec: &RecordSpec, files: Vec<RemoteFile>, cancel: &crate::Cancel) -> Result<()> {
    publish_remote_with(spec, Vec::new(), files, cancel)
}

/// [`publish_remote`], where the objects `present` (URL, size and checksum) are members already
/// in place (uploaded by other tasks of the run) and only `files` are uploaded.
pub fn publish_remote_with(
    spec: &RecordSpec,
    present: Vec<(PathBuf, Sum)>,
    files: Vec<RemoteFile>,
    cancel: &crate::Cancel,
) -> Result<()> {
    let url = spec.path.to_string_lossy().into_owned();
    // Up to and with its last `/`.
    let dir = url.rfind('/').map_or("", |i| &url[..=i]).to_string();
    let member_name = |target: &Path| -> Option<String> {
        let t = target.to_str()?;
        let name = t.strip_prefix(dir.as_str())?;
        (!name.contains('/')).then(|| name.to_string())
    };
    let listed = present.iter().map(|(t, s)| (t, *s)).chain(files.iter().map(|f| (&f.target, f.sum)));
    let mut members: Vec<Member> = listed.filter_map(|(t, sum)| member_name(t).map(|n| Member::new(n, sum))).collect();
    let old = read_remote(&url)?.map(|(r, _)| r);
    let old_names: Vec<String> = old.iter().flat_map(|r| r.members.iter().map(|m| m.name.clone())).collect();
    let record = remote_of(&spec.path)?;
    let committed = Record::committed(&spec.command, spec.run.clone(), spec.inputs.clone(), members.clone());
    let writing = committed.writing(Vec::new(), Vec::new(), old);
    super::fault::point().with_path(&spec.path)?;
    crate::storage::put(&record, writing.to_bytes())?;
    for f in &files {
        let ext = f.target.extension().and_then(|e| e.to_str());
        let old_member = member_name(&f.target).is_some_and(|n| old_names.contains(&n));
        if ext != Some("bin") && (old_member || ext == Some("idx")) {
            cancel.check()?;
            super::fault::point().with_path(&f.target)?;
            crate::storage::delete(&remote_of(&f.target)?)?;
        }
    }
    for f in &files {
        cancel.check()?;
        super::fault::point().with_path(&f.target)?;
        let to = remote_of(&f.target)?;
        match &f.source {
            Source::File(from) => crate::storage::upload_file(from, &to)?,
            Source::Bytes(bytes) => crate::storage::put(&to, bytes.clone())?,
        }
    }
    for m in &mut members {
        let at = PathBuf::from(format!("{dir}{}", m.name));
        let id = crate::storage::identity(&at)?;
        let bytes = id.get("bytes").and_then(Value::as_u64);
        if bytes != Some(m.bytes) {
            return Err(Error::invalid(format!(
                "{} holds {} bytes after its upload of {}: another process wrote it meanwhile",
                at.display(),
                bytes.unwrap_or(0),
                m.bytes
            )));
        }
        m.etag = id.get("etag").and_then(Value::as_str).map(str::to_string);
    }
    let committed = Record::committed(&spec.command, spec.run.clone(), spec.inputs.clone(), members);
    super::fault::point().with_path(&spec.path)?;
    crate::storage::put(&record, committed.to_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // The check value of CRC-32C (Castagnoli) for "123456789".
        assert_eq!(Checksum::of(b"123456789").crc32c, 0xe306_9283);
        let mut c = Checksum::new();
        c.update(b"1234");
        c.update(b"56789");
        assert_eq!(c.sum(), Sum { bytes: 9, crc32c: 0xe306_9283 });
    }

    #[test]
    fn pair_candidates_try_the_pair_then_each_preprocess_prefix() {
        assert_eq!(
            pair_candidates("d/my_c_raw_text_document"),
            [
                "d/my_c_raw_text_document.commit.json",
                "d/my_c_raw.commit.json",
                "d/my_c.commit.json",
                "d/my.commit.json"
            ]
        );
        assert_eq!(pair_candidates("m"), ["m.commit.json"]);
        assert_eq!(pair_candidates("s3://b/_x_document"), ["s3://b/_x_document.commit.json"]);
    }

    /// A directory left by a commit killed after it moved the old `x.bin` aside: the new `x.bin`
    /// and `x.idx` wait under their temporary names (`idx_staged`: whether the `.idx` does).
    /// Gives the directory, the new record and the old one.
    fn interrupted(idx_staged: bool) -> (tempfile::TempDir, Record, Record) {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = Record::committed("test", Value::Null, Value::Null, vec![Member::new("x.bin", Checksum::of(b"old"))]);
        let new = Record::committed(
            "test",
            Value::Null,
            Value::Null,
            vec![Member::new("x.bin", Checksum::of(b"new!")), Member::new("x.idx", Checksum::of(b"index"))],
        );
        let mv = |name: &str, temporary: &str| Move { name: name.into(), temporary: temporary.into() };
        let mut writing = new.writing(
            vec![mv("x.bin", "x.bin.tmp-1-0"), mv("x.idx", "x.idx.tmp-1-1")],
            vec![mv("x.bin", "x.bin.tmp-1-2")],
            Some(old.clone()),
        );
        writing.writer.as_mut().unwrap().pid = u32::MAX - 1; // no such process
        std::fs::write(d.join("x.bin.tmp-1-0"), b"new!").unwrap();
        if idx_staged {
            std::fs::write(d.join("x.idx.tmp-1-1"), b"index").unwrap();
        }
        std::fs::write(d.join("x.bin.tmp-1-2"), b"old").unwrap();
        std::fs::write(d.join("x.commit.json"), writing.to_bytes()).unwrap();
        (dir, new, old)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        v.sort();
        v
    }

    #[test]
    fn an_interrupted_commit_is_finished_when_its_new_set_is_whole_and_undone_when_not() {
        for idx_staged in [true, false] {
            let (dir, new, old) = interrupted(idx_staged);
            recover_dir(dir.path()).unwrap();
            let (files, bin, record) = match idx_staged {
                true => (&["x.bin", "x.commit.json", "x.idx"][..], &b"new!"[..], new),
                false => (&["x.bin", "x.commit.json"][..], &b"old"[..], old),
            };
            assert_eq!(names(dir.path()), files);
            assert_eq!(std::fs::read(dir.path().join("x.bin")).unwrap(), bin);
            assert_eq!(read_local(&dir.path().join("x.commit.json")).unwrap().unwrap().record, record);
        }
    }

    #[test]
    fn a_record_round_trips_and_refuses_other_layouts() {
        let r = Record::committed("merge", Value::Null, Value::Null, vec![Member::new("m.bin", Checksum::of(b"x"))]);
        let p = Path::new("m.commit.json");
        assert_eq!(Record::parse(&r.to_bytes(), p).unwrap(), r);
        let mut other = r.clone();
        other.format = "tokshuf-commit-9".into();
        assert!(Record::parse(&other.to_bytes(), p).unwrap_err().to_string().contains("unknown layout"));
    }
}
