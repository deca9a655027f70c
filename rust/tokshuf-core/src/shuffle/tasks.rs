//! A shuffle cut into tasks for a scheduler, with the output of the one-process run, byte for
//! byte, for any numbers of tasks:
//!
//! 1. `cells` task `i` of `N` runs stage 1 over its slice of the inputs ([`Task::slice`]) into
//!    its own directory `{local_cell_dir}/tasks/cells-part-IIIII-of-NNNNN` (with its own resume
//!    state). A context keeps the id of its file's place in the whole listing, so the cell it
//!    goes to and its place in the cell do not depend on the slicing.
//! 2. `shards` task `j` of `M` reads the cells of every `cells` task and writes its share of the
//!    shards, `j*S/M .. (j+1)*S/M` of `S`; shard positions follow from the cells' counts alone.
//!    A rerun writes the same shards again (each appears complete or not at all).
//! 3. `manifest` checks that every shard is there and writes `manifest.jsonl` and the summary.
//!
//! `{local_cell_dir}` must be shared by the tasks (a shared filesystem); the output may also be
//! in an object store (each shards task uploads its shards, the manifest step the manifest).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use super::cells::Run;
use super::config::ShuffleConfig;
use super::output::{self, build_summary, local_members, summary_bytes};
use super::shard::{shard_path, PayloadKind};
use super::state::fingerprint;
use super::state::{self, clean_leftovers, run_path, save, DirLock, Stage, State};
use super::summary::Summary;
use super::{stage1, stage2};
use crate::cancel::Cancel;
use crate::error::{Error, IoContext, Result};
use crate::tasks::Task;
use crate::tokenize::Tokenizer;

/// One step of a shuffle cut into tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Stage 1 over a slice of the inputs.
    Cells(Task),
    /// A share of the shards.
    Shards(Task),
    /// The manifest, once every shard is written.
    Manifest,
}

impl Step {
    /// `stage` is `cells` (or `1`), `shards` (or `2`) or `manifest`; `task` is `i/N` or `auto`
    /// (needed by the first two).
    pub fn parse(stage: &str, task: Option<&str>) -> Result<Step> {
        let task = || -> Result<Task> {
            task.ok_or_else(|| Error::invalid(format!("the {stage} stage runs as tasks: give the task (i/N or auto)")))?
                .parse()
        };
        match stage {
            "cells" | "1" => Ok(Step::Cells(task()?)),
            "shards" | "2" => Ok(Step::Shards(task()?)),
            "manifest" => Ok(Step::Manifest),
            _ => Err(Error::invalid(format!("unknown stage {stage:?}: cells (1), shards (2) or manifest"))),
        }
    }
}

impl FromStr for Step {
    type Err = Error;
    fn from_str(s: &str) -> Result<Step> {
        Step::parse(s, None)
    }
}

const TASKS_DIR: &str = "tasks";

fn cells_dir(cfg: &ShuffleConfig, task: Task) -> PathBuf {
    cfg.local_cell_dir.join(TASKS_DIR).join(format!("cells-{}", task.part_name()))
}

/// What a `cells` task's directory belongs to: the command, and which task of how many.
fn cells_fingerprint(cfg: &ShuffleConfig, tokenizer: Option<&dyn Tokenizer>, task: Task) -> Result<Value> {
    let mut fp = fingerprint(cfg, tokenizer)?;
    fp["task"] = json!({"step": "cells", "index": task.index, "count": task.count});
    Ok(fp)
}

/// Run one step; returns its summary (the whole run's for `manifest`).
pub fn run_step(
    cfg: &ShuffleConfig,
    tokenizer: Option<Arc<dyn Tokenizer>>,
    step: Step,
    warnings: Vec<String>,
    cancel: &Cancel,
) -> Result<Summary> {
    cfg.check()?;
    if cfg.shuffle_only {
        return Err(Error::invalid("a shuffle of tars (shuffle_only) cannot be cut into tasks yet"));
    }
    // An output in an object store: the tasks write into `{local_cell_dir}/output` (shared, as
    // the cells are), each shards task uploads its shards, and the manifest step uploads the
    // manifest last, once every shard is there.
    if let Some(target) = crate::storage::remote(&cfg.output)? {
        let (local, fp) = output::staging(cfg, tokenizer.as_deref())?;
        let owner = (output::run_id(&fp), fp["inputs"].clone());
        let mut summary = run_local_step(&local, tokenizer, step, warnings, cancel)?;
        if !matches!(step, Step::Cells(_)) {
            output::claim_remote(&target, &owner.0, &owner.1, true)?;
        }
        summary.output = cfg.output.clone();
        upload_step(cfg, &local, &target, &owner, &mut summary, step, cancel)?;
        return Ok(summary);
    }
    run_local_step(cfg, tokenizer, step, warnings, cancel)
}

/// The uploads of a step whose output is in an object store.
fn upload_step(
    cfg: &ShuffleConfig,
    local: &ShuffleConfig,
    target: &crate::storage::Remote,
    (run, inputs): &(Value, Value),
    summary: &mut Summary,
    step: Step,
    cancel: &Cancel,
) -> Result<()> {
    let name = |s: u64| format!("shard_{s:08}.tar");
    match step {
        Step::Cells(_) => Ok(()),
        Step::Shards(task) => {
            let (start, end) = share(summary.shards, task);
            for s in start..end {
                cancel.check()?;
                let to = target.child(&name(s));
                crate::fsutil::fault::point().map_err(|e| Error::io(std::path::Path::new(&to.url), e))?;
                crate::storage::upload_file(&shard_path(&local.output, s), &to)?;
            }
            Ok(())
        }
        Step::Manifest => {
            let there: std::collections::HashSet<String> = crate::storage::list(target, &[".tar"])?
                .into_iter()
                .map(|r| r.key.as_ref().rsplit('/').next().unwrap_or_default().to_string())
                .collect();
            if let Some(missing) = (0..summary.shards).find(|&s| !there.contains(&name(s))) {
                return Err(Error::invalid(format!(
                    "shard {missing} is not in {} yet; run every shards task first",
                    target.url
                )));
            }
            summary.manifest = crate::storage::as_path(&target.child("manifest.jsonl"));
            let members = local_members(&local.output)?;
            let summary_file = summary_bytes(cfg, summary)?;
            output::publish(target, run, inputs, members, summary_file, true, cancel)
        }
    }
}

fn run_local_step(
    cfg: &ShuffleConfig,
    tokenizer: Option<Arc<dyn Tokenizer>>,
    step: Step,
    warnings: Vec<String>,
    cancel: &Cancel,
) -> Result<Summary> {
    let started = Instant::now();
    std::fs::create_dir_all(&cfg.output).with_path(&cfg.output)?;
    let tokenizer = tokenizer.ok_or_else(|| Error::invalid("a tokenizer is needed to shuffle JSON lines"))?;
    let tok = Some(tokenizer.as_ref());
    let fp = fingerprint(cfg, tok)?;
    let run = output::run_id(&fp);
    // Before a step writes into the output: the output must be this run's (checked after the
    // cells, whose refusals name what differs).
    let claim = || -> Result<()> {
        // Temporaries of killed shards tasks (only theirs: other tasks may be writing now).
        crate::fsutil::remove_dead_temporaries_in(&cfg.output);
        output::claim_local(&cfg.output, &run, &fp["inputs"], true).map(drop)
    };
    let mut summary = match step {
        Step::Cells(task) => {
            let state = cells(cfg, Arc::clone(&tokenizer), task, cancel)?;
            let mut s = build_summary(cfg, tok, &state, 0, Path::new(""), warnings);
            s.files = task.slice(&sizes(cfg)?).len() as u64;
            s.task = Some(json!({"step": "cells", "index": task.index, "count": task.count}));
            s
        }
        Step::Shards(task) => {
            let (merged, runs) = all_cells(cfg, tok)?;
            claim()?;
            let total = merged.counts.contexts;
            let shards = total.div_ceil(cfg.wds_chunk_size);
            let (start, end) = share(shards, task);
            let mut state = merged.clone();
            state.shards_done = start;
            let kind = PayloadKind::Member(cfg.member_format.extension());
            let (_, sums) = stage2::write_shards(cfg, kind, &runs, &mut state, Some(end), cancel)?;
            save_sums(cfg, task, &run, &sums)?;
            let mut s = build_summary(cfg, tok, &merged, shards, Path::new(""), warnings);
            s.task = Some(json!({"step": "shards", "index": task.index, "count": task.count, "shards": [start, end]}));
            s
        }
        Step::Manifest => {
            let (merged, _) = all_cells(cfg, tok)?;
            claim()?;
            let total = merged.counts.contexts;
            let shards = total.div_ceil(cfg.wds_chunk_size);
            let missing: Vec<u64> = (0..shards).filter(|&s| !shard_path(&cfg.output, s).is_file()).collect();
            if !missing.is_empty() {
                return Err(Error::invalid(format!(
                    "{} of {shards} shards are not written yet (e.g. shard {}); run every shards task first",
                    missing.len(),
                    missing[0]
                )));
            }
            let sums = load_sums(cfg, &run)?;
            output::finish(cfg, (&run, &fp["inputs"]), (shards, total), &sums, |manifest| {
                let mut s = build_summary(cfg, tok, &merged, shards, manifest, warnings);
                s.task = Some(json!({"step": "manifest"}));
                s.seconds = started.elapsed().as_secs_f64();
                s
            })?
        }
    };
    if !matches!(step, Step::Manifest) {
        // (The manifest step's summary was written with its time.)
        summary.seconds = started.elapsed().as_secs_f64();
    }
    Ok(summary)
}

/// Where a shards task records the sums of the shards it wrote (for the manifest step's record).
fn sums_path(cfg: &ShuffleConfig, task: Task) -> PathBuf {
    cfg.local_cell_dir.join(TASKS_DIR).join(format!("shards-{}.json", task.part_name()))
}

fn save_sums(cfg: &ShuffleConfig, task: Task, run: &Value, sums: &super::stage2::ShardSums) -> Result<()> {
    let shards: serde_json::Map<String, Value> =
        sums.iter().map(|(s, sum)| (s.to_string(), json!([sum.bytes, sum.crc32c]))).collect();
    let bytes =
        serde_json::to_vec(&json!({"run": run, "shards": shards})).map_err(|e| Error::invalid(e.to_string()))?;
    std::fs::create_dir_all(cfg.local_cell_dir.join(TASKS_DIR)).with_path(&cfg.local_cell_dir)?;
    crate::fsutil::write_atomic(sums_path(cfg, task), &bytes)
}

/// The sums the shards tasks of `run` recorded (shards missing there are read back later).
fn load_sums(cfg: &ShuffleConfig, run: &Value) -> Result<super::stage2::ShardSums> {
    let root = cfg.local_cell_dir.join(TASKS_DIR);
    let mut sums = super::stage2::ShardSums::new();
    for entry in std::fs::read_dir(&root).with_path(&root)? {
        let path = entry.with_path(&root)?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !(name.starts_with("shards-part-") && name.ends_with(".json")) {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&std::fs::read(&path).with_path(&path)?) else { continue };
        if v.get("run") != Some(run) {
            continue;
        }
        for (s, pair) in v["shards"].as_object().into_iter().flatten() {
            if let (Ok(s), Some(b), Some(c)) = (s.parse::<u64>(), pair[0].as_u64(), pair[1].as_u64()) {
                sums.insert(s, crate::fsutil::record::Sum { bytes: b, crc32c: c as u32 });
            }
        }
    }
    Ok(sums)
}

fn sizes(cfg: &ShuffleConfig) -> Result<Vec<u64>> {
    cfg.inputs.iter().map(|p| crate::storage::size(p)).collect()
}

/// Shards `start..end` of `shards` for `task`.
fn share(shards: u64, task: Task) -> (u64, u64) {
    let at = |i: usize| (u128::from(shards) * i as u128 / task.count as u128) as u64;
    (at(task.index), at(task.index + 1))
}

/// Stage 1 of one task, resumed if it was interrupted; its final state.
fn cells(cfg: &ShuffleConfig, tokenizer: Arc<dyn Tokenizer>, task: Task, cancel: &Cancel) -> Result<State> {
    let range = task.slice(&sizes(cfg)?);
    let dir = cells_dir(cfg, task);
    let mut sub = cfg.clone();
    sub.local_cell_dir = dir.clone();
    sub.files = Some(range.clone());
    let fp = cells_fingerprint(cfg, Some(tokenizer.as_ref()), task)?;
    let _lock = DirLock::acquire(&dir)?;
    let mut state = match state::load(&dir, &fp)? {
        Some(s) => s,
        None => {
            let mut s = State::fresh(fp);
            s.position.file = range.start;
            save(&dir, &s)?;
            s
        }
    };
    // The output is shared with other tasks: only this task's directory is cleaned.
    clean_leftovers(&dir, &dir, &state)?;
    if state.stage == Stage::Cells {
        stage1::run(&sub, tokenizer, &mut state, cancel)?;
        state.stage = Stage::Shards;
        save(&dir, &state)?;
    }
    Ok(state)
}

/// The cells of every `cells` task: their counts summed into one state, and their runs in
/// task order. Refuses a missing or unfinished task, and one made by another command.
fn all_cells(cfg: &ShuffleConfig, tokenizer: Option<&dyn Tokenizer>) -> Result<(State, Vec<Run>)> {
    let root = cfg.local_cell_dir.join(TASKS_DIR);
    let mut counts = Vec::new();
    for entry in std::fs::read_dir(&root).with_path(&root)? {
        let name = entry.with_path(&root)?.file_name().to_string_lossy().into_owned();
        if let Some(n) =
            name.strip_prefix("cells-part-").and_then(|r| r.split_once("-of-")).and_then(|(_, n)| n.parse().ok())
        {
            counts.push(n);
        }
    }
    counts.sort_unstable();
    counts.dedup();
    let count: usize = match counts[..] {
        [n] => n,
        [] => return Err(Error::invalid(format!("no cells tasks have run in {}", cfg.local_cell_dir.display()))),
        _ => {
            return Err(Error::invalid(format!(
                "{} holds cells tasks of runs cut into different numbers of tasks ({counts:?}); keep one",
                root.display()
            )))
        }
    };
    let mut merged = State::fresh(Value::Null);
    merged.stage = Stage::Shards;
    let mut runs = Vec::new();
    for index in 0..count {
        let task = Task::new(index, count)?;
        let dir = cells_dir(cfg, task);
        let fp = cells_fingerprint(cfg, tokenizer, task)?;
        let state = if dir.is_dir() { state::load(&dir, &fp)? } else { None };
        let Some(state) = state.filter(|s| s.stage != Stage::Cells) else {
            return Err(Error::invalid(format!(
                "cells task {index}/{count} has not finished (in {}); run it first",
                dir.display()
            )));
        };
        for r in 0..state.runs {
            runs.push(Run::open(&run_path(&dir, r), cfg.num_local_cells)?);
        }
        let (c, m) = (&state.counts, &mut merged.counts);
        m.files_done += c.files_done;
        m.lines += c.lines;
        m.documents += c.documents;
        m.tokens += c.tokens;
        m.pad_tokens += c.pad_tokens;
        m.contexts += c.contexts;
        m.cell_bytes += c.cell_bytes;
        m.input_bytes += c.input_bytes;
        m.decompressed_bytes += c.decompressed_bytes;
        m.skips.absorb(&c.skips);
        merged.runs += state.runs;
    }
    Ok((merged, runs))
}
