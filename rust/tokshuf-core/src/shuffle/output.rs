//! A shuffle's output directory as one set: `commit.json` (see [`crate::fsutil::record`]) names the
//! run that owns the directory and, once the run is complete, lists every shard, the manifest and
//! the summary with their sizes and checksums (and ETags, in an object store).
//!
//! A run claims the directory before its first shard lands there: it writes a `writing` record
//! naming itself (a digest of its fingerprint), and every later step of the same run (a resumed
//! run, a shards task, the manifest step) accepts the directory only if the record names it.
//! A directory whose record names another run, or that holds shards or a manifest without any
//! record, belongs to someone else and is refused, locally and in a store alike. The record is
//! committed last, after the manifest and the summary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::config::ShuffleConfig;
use super::shard::{shard_path, write_manifest};
use super::state::{crash_point, Counts};
use super::summary::Summary;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::record::{self, Checksum, Member, Record, RemoteFile, State, Sum};
use crate::fsutil::{write_atomic, RecordSpec};
use crate::storage::Remote;
use crate::tokenize::Tokenizer;

/// The record's name in the output directory.
pub(super) const RECORD: &str = record::DIR_RECORD;

/// What names a run in the record: a digest of the command's fingerprint, without the task (the
/// same for every task of a run cut into tasks) and the output (the same command gives the same
/// record wherever it writes).
pub(super) fn run_id(fingerprint: &Value) -> Value {
    let mut fp = fingerprint.clone();
    if let Some(o) = fp.as_object_mut() {
        o.remove("task");
        o.remove("output");
    }
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(fp.to_string().as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    json!({"id": hex})
}

fn foreign(output: &str, what: &str) -> Error {
    Error::invalid(format!(
        "the output dir {output} already holds a dataset ({what}) that this run did not write; remove it or \
         choose another --output"
    ))
}

/// Why a record in `output` is not this run's, if it is not.
fn check_owner(output: &str, found: &Record, run: &Value) -> Result<()> {
    if found.run == *run {
        return Ok(());
    }
    let what = match found.state {
        State::Committed => format!("{RECORD} of a complete {} run", found.command),
        State::Writing => format!("{RECORD} of another {} run, not finished", found.command),
    };
    Err(foreign(output, &what))
}

fn is_dataset_file(name: &str) -> bool {
    name == "manifest.jsonl" || (name.starts_with("shard_") && name.ends_with(".tar"))
}

/// The `writing` record that claims a directory for `run`.
fn claim_record(run: &Value, inputs: &Value) -> Record {
    Record::committed("shuffle", run.clone(), inputs.clone(), Vec::new()).writing(Vec::new(), Vec::new(), None)
}

/// Claim the local output dir for `run` (see the module documentation); `fresh`: the run has not
/// written anything yet, so shards or a manifest without a record are another dataset's.
/// Returns whether the run's set is already committed there.
pub(super) fn claim_local(output: &Path, run: &Value, inputs: &Value, fresh: bool) -> Result<bool> {
    let shown = output.display().to_string();
    let path = output.join(RECORD);
    crate::fsutil::remove_dead_temporaries(&path);
    match record::read_local(&path)? {
        Some(seen) => {
            check_owner(&shown, &seen.record, run)?;
            if seen.record.state == State::Committed {
                return Ok(true);
            }
        }
        None if fresh => {
            let names = std::fs::read_dir(output).with_path(output)?.filter_map(|e| e.ok());
            if let Some(name) = names.map(|e| e.file_name().to_string_lossy().into_owned()).find(|n| is_dataset_file(n))
            {
                return Err(foreign(&shown, &name));
            }
        }
        None => {}
    }
    // (Re)written with this process as the writer, so readers know the set is being made.
    write_atomic(&path, &claim_record(run, inputs).to_bytes())?;
    Ok(false)
}

/// Claim the output prefix `target` in a store for `run`; `fresh` as for [`claim_local`].
/// Returns whether the run's set is already committed there.
pub(super) fn claim_remote(target: &Remote, run: &Value, inputs: &Value, fresh: bool) -> Result<bool> {
    let url = target.child(RECORD).url;
    match record::read_remote(&url)? {
        Some((found, _)) => {
            check_owner(&target.url, &found, run)?;
            if found.state == State::Committed {
                return Ok(true);
            }
        }
        None if fresh => {
            let listed = crate::storage::list(target, &[".tar", "manifest.jsonl"])?;
            let mut names = listed.iter().map(|r| r.key.as_ref().rsplit('/').next().unwrap_or_default());
            if let Some(name) = names.find(|n| is_dataset_file(n)) {
                return Err(foreign(&target.url, name));
            }
        }
        None => {}
    }
    crate::fsutil::fault::point().map_err(|e| Error::io(Path::new(&url), e))?;
    crate::storage::put(&target.child(RECORD), claim_record(run, inputs).to_bytes())?;
    Ok(false)
}

/// The members of a complete output in `dir`: shards `0..shards` (their sums from `sums`, else
/// read back: shards written by an earlier process), the manifest, the summary.
pub(super) fn members(
    dir: &Path,
    shards: u64,
    sums: &BTreeMap<u64, Sum>,
    manifest: Sum,
    summary: Option<&[u8]>,
) -> Result<Vec<(PathBuf, Sum)>> {
    let mut out = (0..shards)
        .map(|s| {
            let path = shard_path(dir, s);
            let sum = sums.get(&s).map_or_else(|| Checksum::of_file(&path), |sum| Ok(*sum))?;
            Ok((path, sum))
        })
        .collect::<Result<Vec<_>>>()?;
    out.push((dir.join("manifest.jsonl"), manifest));
    if let Some(bytes) = summary {
        out.push((dir.join("summary.json"), Checksum::of(bytes)));
    }
    Ok(out)
}

/// Publish a complete local output `local` (its members as [`members`] lists them) to `target`:
/// the record's `writing` state first, every shard, the manifest, the summary, then the record.
/// `uploaded`: the shards already there (uploaded by shards tasks), not uploaded again.
pub(super) fn publish(
    target: &Remote,
    run: &Value,
    inputs: &Value,
    members: Vec<(PathBuf, Sum)>,
    summary: Option<(PathBuf, Vec<u8>)>,
    uploaded: bool,
    cancel: &crate::Cancel,
) -> Result<()> {
    let mut files = Vec::new();
    let mut present = Vec::new();
    for (path, sum) in members {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name == "summary.json" {
            continue;
        }
        let to = PathBuf::from(target.child(&name).url);
        if uploaded && name.starts_with("shard_") {
            present.push((to, sum));
        } else {
            files.push(RemoteFile::upload(path, to, sum));
        }
    }
    if let Some((to, bytes)) = summary {
        let sum = Checksum::of(&bytes);
        files.push(RemoteFile::bytes(bytes, to, sum));
    }
    let spec = RecordSpec {
        path: PathBuf::from(target.child(RECORD).url),
        command: "shuffle".into(),
        run: run.clone(),
        inputs: inputs.clone(),
    };
    record::publish_remote_with(&spec, present, files, cancel)
}

/// A fresh run must not write over another dataset.
pub(super) fn check_output_is_free(output: &Path) -> Result<()> {
    for entry in std::fs::read_dir(output).with_path(output)? {
        let name = entry.with_path(output)?.file_name().to_string_lossy().into_owned();
        if is_dataset_file(&name) {
            return Err(Error::invalid(format!(
                "the output dir {} already holds a dataset ({name}); remove it or choose another --output",
                output.display()
            )));
        }
    }
    Ok(())
}

pub(super) fn build_summary(
    cfg: &ShuffleConfig,
    tokenizer: Option<&dyn Tokenizer>,
    c: &Counts,
    shards: u64,
    manifest: &Path,
    warnings: Vec<String>,
) -> Summary {
    let all = c.contexts * cfg.seqlen as u64;
    let output_bytes = (0..shards).map(|s| std::fs::metadata(shard_path(&cfg.output, s)).map_or(0, |m| m.len())).sum();
    Summary {
        files: cfg.inputs.len() as u64,
        lines: c.lines,
        documents: c.documents,
        tokens: c.tokens,
        pad_tokens: c.pad_tokens,
        contexts: c.contexts,
        seqlen: cfg.seqlen as u64,
        padding_fraction: if all == 0 || cfg.shuffle_only { 0.0 } else { c.pad_tokens as f64 / all as f64 },
        shards,
        wds_chunk_size: cfg.wds_chunk_size,
        skips: c.skips.clone(),
        scan: cfg.scan.clone(),
        input_bytes: c.input_bytes,
        decompressed_bytes: c.decompressed_bytes,
        cell_bytes: c.cell_bytes,
        output_bytes,
        tokenizer: tokenizer.map_or(Value::Null, |t| t.identity()),
        special_tokens: (!cfg.shuffle_only).then_some(cfg.special),
        member_format: if cfg.shuffle_only { "as input".into() } else { cfg.member_format.extension().into() },
        output: cfg.output.clone(),
        manifest: manifest.to_path_buf(),
        warnings,
        ..Default::default()
    }
}

/// The members of the complete output in the local `dir`, as its committed record lists them.
pub(super) fn local_members(dir: &Path) -> Result<Vec<(PathBuf, Sum)>> {
    let path = dir.join(RECORD);
    let seen = record::read_local(&path)?
        .filter(|s| s.record.state == State::Committed)
        .ok_or_else(|| Error::format(&path, "the local output is not committed"))?;
    let sums = seen.record.members.iter().map(|m| {
        let crc = u32::from_str_radix(&m.crc32c, 16).unwrap_or(0);
        (dir.join(&m.name), Sum { bytes: m.bytes, crc32c: crc })
    });
    Ok(sums.collect())
}

/// The summary file to write for `summary` (its path and bytes), if `cfg` asks for one.
pub(super) fn summary_bytes(cfg: &ShuffleConfig, summary: &Summary) -> Result<Option<(PathBuf, Vec<u8>)>> {
    let Some(path) = &cfg.summary else { return Ok(None) };
    Ok(Some((path.clone(), crate::fsutil::json_file_bytes(summary)?)))
}

/// The last step of a run, on one node or as the manifest step of a run in tasks: write
/// `manifest.jsonl` for `contexts` contexts in `shards` shards (whose sums the shard writers
/// recorded), then the summary (`summary` makes it, given the manifest's path) and its file, and
/// commit the record that lists every member. A shard whose size is not the one recorded was
/// replaced by another process since it was written, and is refused.
pub(super) fn finish(
    cfg: &ShuffleConfig,
    (run, inputs): (&Value, &Value),
    (shards, contexts): (u64, u64),
    sums: &BTreeMap<u64, Sum>,
    summary: impl FnOnce(&Path) -> Summary,
) -> Result<Summary> {
    let (manifest, manifest_sum) = write_manifest(&cfg.output, contexts, cfg.wds_chunk_size)?;
    crash_point("manifest-written");
    let summary = summary(&manifest);
    let summary_file = summary_bytes(cfg, &summary)?;
    let beside = summary_file.as_ref().filter(|(p, _)| p.parent() == Some(cfg.output.as_path()));
    let members = members(&cfg.output, shards, sums, manifest_sum, beside.map(|(_, b)| b.as_slice()))?;
    for (path, sum) in members.iter().take(shards as usize) {
        let size = std::fs::metadata(path).with_path(path)?.len();
        if size != sum.bytes {
            return Err(Error::invalid(format!(
                "{} holds {size} bytes, but the run (or shards task) that wrote it made {}: it was \
                 replaced by another process; rerun the command (or the shards tasks)",
                path.display(),
                sum.bytes
            )));
        }
    }
    if let Some((path, bytes)) = &summary_file {
        write_atomic(path, bytes)?;
    }
    let name = |p: &PathBuf| record::member_name(&cfg.output, p);
    let listed = members.iter().filter_map(|(p, sum)| name(p).map(|name| Member::new(name, *sum))).collect();
    let committed = Record::committed("shuffle", run.clone(), inputs.clone(), listed);
    write_atomic(cfg.output.join(RECORD), &committed.to_bytes())?;
    Ok(summary)
}

/// A run whose output is in an object store writes it first into `{local_cell_dir}/output`
/// (shared by the tasks, and found again by a resumed run), without a local summary file: that
/// configuration.
pub(super) fn staging(cfg: &ShuffleConfig) -> ShuffleConfig {
    let mut local = cfg.clone();
    local.output = cfg.local_cell_dir.join(super::state::STAGING_DIR);
    local.summary = None;
    local
}
