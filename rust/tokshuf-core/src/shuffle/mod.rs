//! `tokshuf shuffle`: JSON lines → tokens → fixed-length contexts → two-stage local-cell disk
//! shuffle → webdataset shards that open_lm / DCLM read unchanged.
//!
//! * stage 1 ([`stage1`], [`samples`] for `--shuffle-only`): contexts are cut per input file
//!   ([`contexts`]), encoded once ([`encode`]) and scattered over local cells on disk ([`cells`]);
//! * stage 2 ([`stage2`]): cells are shuffled one at a time into `shard_%08d.tar` ([`shard`],
//!   [`tar`]) and `manifest.jsonl`.
//!
//! Every random decision is a function of the seed and content positions ([`rng`]), so the output
//! is byte-identical for any thread count, and [`state`] checkpoints make a killed run resumable
//! with the same output.

pub mod cells;
mod config;
mod contexts;
mod deflate;
mod encode;
pub mod json_gz;
mod output;
mod rng;
mod samples;
mod shard;
mod stage1;
mod stage2;
mod state;
mod summary;
pub mod tar;
mod tasks;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use serde_json::{json, Value};

pub use config::{
    resolve_special, ShuffleConfig, DEFAULT_BUFFER_BYTES, DEFAULT_CONTENT_KEY, DEFAULT_GZIP_LEVEL,
    DEFAULT_NUM_LOCAL_CELLS, DEFAULT_SEED, DEFAULT_SEQLEN, DEFAULT_SPECIAL_TOKENS, DEFAULT_WDS_CHUNK_SIZE,
    SPECIAL_TOKEN_PRESETS,
};
pub use contexts::{Cutter, SpecialIds};
pub use encode::{json_list, Encoder, MemberFormat};
pub use summary::{SkipRecord, SkippedFile, Summary};
pub use tasks::{run_step, Step};

use crate::cancel::Cancel;
use crate::error::{Error, IoContext, Result};
use crate::tokenize::Tokenizer;
use shard::{shard_path, write_manifest, PayloadKind};
use state::{clean_leftovers, save, state_path, DirLock, Stage, State};

/// Bits of a context id that hold the context's index within its file.
const INDEX_BITS: u32 = 40;
/// Bits of a context id that hold the input file's index.
const FILE_BITS: u32 = 24;

/// The id of context `index` of input file `file`: the content position every random decision
/// and the order inside a cell derive from.
pub fn context_id(file: usize, index: u64) -> u64 {
    debug_assert!(index < 1 << INDEX_BITS);
    ((file as u64) << INDEX_BITS) | index
}

/// Fault injection for the resume tests: `TOKSHUF_TEST_CRASH_AT=name:n` aborts the process the
/// n-th time (1-based) the point `name` is reached. Costs one relaxed load when unset.
fn crash_point(name: &str) {
    static TARGET: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static HITS: AtomicU64 = AtomicU64::new(0);
    let target = TARGET.get_or_init(|| {
        let v = std::env::var("TOKSHUF_TEST_CRASH_AT").ok()?;
        let (n, k) = v.rsplit_once(':')?;
        Some((n.to_string(), k.parse().ok()?))
    });
    if let Some((n, k)) = target {
        if n == name && HITS.fetch_add(1, Ordering::Relaxed) + 1 == *k {
            std::process::abort();
        }
    }
}

fn input_identity(path: &Path) -> Result<Value> {
    crate::storage::identity(path)
}

/// Everything the output depends on; a local-cell dir only resumes the command it was made by.
/// (Threads and buffer sizes do not change the output; `--on-error` may change between resumes.)
fn fingerprint(cfg: &ShuffleConfig, tokenizer: Option<&dyn Tokenizer>) -> Result<Value> {
    let inputs = cfg.inputs.iter().map(|p| input_identity(p)).collect::<Result<Vec<_>>>()?;
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

/// A fresh run must not write over another dataset.
fn check_output_is_free(output: &Path) -> Result<()> {
    for entry in std::fs::read_dir(output).with_path(output)? {
        let name = entry.with_path(output)?.file_name().to_string_lossy().into_owned();
        if name == "manifest.jsonl" || (name.starts_with("shard_") && name.ends_with(".tar")) {
            return Err(Error::invalid(format!(
                "the output dir {} already holds a dataset ({name}); remove it or choose another --output",
                output.display()
            )));
        }
    }
    Ok(())
}

fn build_summary(
    cfg: &ShuffleConfig,
    tokenizer: Option<&dyn Tokenizer>,
    state: &State,
    shards: u64,
    manifest: &Path,
    warnings: Vec<String>,
) -> Summary {
    let c = &state.counts;
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
        skipped: c.skipped.clone(),
        first_skipped: c.first_skipped.clone(),
        skipped_files: c.skipped_files.clone(),
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

/// Run (or resume) a shuffle. `tokenizer` is required unless `cfg.shuffle_only`; `warnings` (from
/// [`resolve_special`]) are passed through to the summary. Progress is drawn on stderr as
/// `cfg.progress` says, one bar (or series of JSON lines) per stage.
///
/// An output in an object store is written in `{local_cell_dir}/output` (so that a resumed run
/// finds it), then its shards are uploaded, and the manifest last: a reader that finds the
/// manifest finds every shard it lists.
pub fn shuffle(
    cfg: &ShuffleConfig,
    tokenizer: Option<Arc<dyn Tokenizer>>,
    warnings: Vec<String>,
    cancel: &Cancel,
) -> Result<Summary> {
    let Some(target) = crate::storage::remote(&cfg.output)? else {
        return shuffle_local(cfg, tokenizer, warnings, cancel);
    };
    let mut local = cfg.clone();
    local.output = cfg.local_cell_dir.join(state::STAGING_DIR);
    local.summary = None;
    std::fs::create_dir_all(&local.output).with_path(&local.output)?;
    let fp = fingerprint(&local, tokenizer.as_deref())?;
    let run = output::run_id(&fp);
    let fresh = !state_path(&cfg.local_cell_dir).exists();
    if output::claim_remote(&target, &run, &fp["inputs"], fresh)? {
        // Committed there by this very command: nothing to do but report.
        let mut summary = shuffle_local(&local, tokenizer, warnings, cancel)?;
        summary.output = cfg.output.clone();
        summary.manifest = crate::storage::as_path(&target.child("manifest.jsonl"));
        return Ok(summary);
    }
    let mut summary = shuffle_local(&local, tokenizer, warnings, cancel)?;
    summary.output = cfg.output.clone();
    summary.manifest = crate::storage::as_path(&target.child("manifest.jsonl"));
    let members = local_members(&local.output)?;
    let summary_file = summary_bytes(cfg, &summary)?;
    output::publish(&target, &run, &fp["inputs"], members, summary_file, false, cancel)?;
    Ok(summary)
}

/// The members of the complete output in the local `dir`, as its committed record lists them.
fn local_members(dir: &Path) -> Result<Vec<(std::path::PathBuf, crate::fsutil::record::Sum)>> {
    let path = dir.join(output::RECORD);
    let seen = crate::fsutil::record::read_local(&path)?
        .filter(|s| s.record.state == crate::fsutil::record::State::Committed)
        .ok_or_else(|| Error::format(&path, "the local output is not committed"))?;
    let sums = seen.record.members.iter().map(|m| {
        let crc = u32::from_str_radix(&m.crc32c, 16).unwrap_or(0);
        (dir.join(&m.name), crate::fsutil::record::Sum { bytes: m.bytes, crc32c: crc })
    });
    Ok(sums.collect())
}

/// The summary file to write for `summary` (its path and bytes), if `cfg` asks for one.
fn summary_bytes(cfg: &ShuffleConfig, summary: &Summary) -> Result<Option<(std::path::PathBuf, Vec<u8>)>> {
    let Some(path) = &cfg.summary else { return Ok(None) };
    Ok(Some((path.clone(), crate::fsutil::json_file_bytes(summary)?)))
}

fn shuffle_local(
    cfg: &ShuffleConfig,
    tokenizer: Option<Arc<dyn Tokenizer>>,
    mut warnings: Vec<String>,
    cancel: &Cancel,
) -> Result<Summary> {
    cfg.check()?;
    let started = Instant::now();
    let dir = &cfg.local_cell_dir;
    std::fs::create_dir_all(&cfg.output).with_path(&cfg.output)?;
    let fp = fingerprint(cfg, tokenizer.as_deref())?;
    let run = output::run_id(&fp);
    let _lock = DirLock::acquire(dir)?;
    let (mut state, resumed) = match state::load(dir, &fp)? {
        Some(s) => (s, true),
        None => {
            check_output_is_free(&cfg.output)?;
            output::claim_local(&cfg.output, &run, &fp["inputs"], true)?;
            let s = State::fresh(fp.clone());
            save(dir, &s)?;
            (s, false)
        }
    };
    clean_leftovers(dir, &cfg.output, &state)?;
    if state.stage == Stage::Complete {
        let saved = state.summary.clone().unwrap_or(Value::Null);
        let mut summary: Summary = serde_json::from_value(saved)
            .map_err(|e| Error::format(dir, format!("unreadable summary in the shuffle state ({e})")))?;
        let missing = std::iter::once(summary.manifest.clone())
            .chain((0..summary.shards).map(|s| shard_path(&cfg.output, s)))
            .find(|p| !p.is_file());
        if let Some(missing) = missing {
            return Err(Error::invalid(format!(
                "the run in {} is complete, but its output {} is gone; delete {} to run it again",
                dir.display(),
                missing.display(),
                dir.display()
            )));
        }
        summary.already_complete = true;
        summary.resumed = true;
        summary.seconds = started.elapsed().as_secs_f64();
        return Ok(summary);
    }
    if resumed {
        output::claim_local(&cfg.output, &run, &fp["inputs"], false)?;
    }

    let t1 = Instant::now();
    if state.stage == Stage::Cells {
        match (&tokenizer, cfg.shuffle_only) {
            (_, true) => samples::run(cfg, &mut state, cancel)?,
            (Some(t), false) => stage1::run(cfg, Arc::clone(t), &mut state, cancel)?,
            (None, false) => return Err(Error::invalid("a tokenizer is needed unless shuffle_only is set")),
        }
        state.stage = Stage::Shards;
        save(dir, &state)?;
        crash_point("stage1-done");
    }
    let stage1_seconds = t1.elapsed().as_secs_f64();

    let cell_mb = state.counts.cell_bytes as f64 / f64::from(cfg.num_local_cells) / 1e6;
    if cell_mb > 256.0 {
        warnings.push(format!(
            "local cells average {cell_mb:.0} MB and stage 2 holds about threads + 1 of them in memory; \
             raise --num-local-cells for datasets this large"
        ));
    }
    let t2 = Instant::now();
    let kind = if cfg.shuffle_only { PayloadKind::Sample } else { PayloadKind::Member(cfg.member_format.extension()) };
    let (shards, sums) = stage2::run(cfg, kind, &mut state, cancel)?;
    let (manifest, manifest_sum) = write_manifest(&cfg.output, state.counts.contexts, cfg.wds_chunk_size)?;
    crash_point("manifest-written");
    let mut summary = build_summary(cfg, tokenizer.as_deref(), &state, shards, &manifest, warnings);
    summary.resumed = resumed;
    summary.stage1_seconds = stage1_seconds;
    summary.stage2_seconds = t2.elapsed().as_secs_f64();
    summary.seconds = started.elapsed().as_secs_f64();
    let summary_file = summary_bytes(cfg, &summary)?;
    let beside = summary_file.as_ref().filter(|(p, _)| p.parent() == Some(cfg.output.as_path()));
    let members = output::members(&cfg.output, shards, &sums, manifest_sum, beside.map(|(_, b)| b.as_slice()))?;
    output::commit_local(
        &cfg.output,
        &run,
        &fp["inputs"],
        &members,
        summary_file.as_ref().map(|(p, b)| (p.as_path(), b.as_slice())),
    )?;
    state.stage = Stage::Complete;
    state.summary = Some(serde_json::to_value(&summary).map_err(|e| Error::invalid(e.to_string()))?);
    save(dir, &state)?;
    clean_leftovers(dir, &cfg.output, &state)?;
    Ok(summary)
}
