//! The one orchestrator of `tokshuf shuffle`: a shuffle runs as steps, and the one-node run is
//! the staged run with one task (`cells 0/1`, `shards 0/1`, `manifest`) in one process. The
//! output is the same, byte for byte, for any numbers of tasks:
//!
//! 1. `cells` task `i` of `N` runs stage 1 ([`stage1`], or [`samples`] with `--shuffle-only`)
//!    over its slice of the inputs ([`Task::slice`]) into its own directory
//!    `{local_cell_dir}/tasks/cells-part-IIIII-of-NNNNN`, with its own resume state. A context
//!    keeps the id of its file's place in the whole listing, so the cell it goes to and its place
//!    in the cell do not depend on the slicing.
//! 2. `shards` task `j` of `M` reads the cells of every `cells` task and writes its share of the
//!    shards, `j*S/M .. (j+1)*S/M` of `S` (positions follow from the cells' counts alone), and
//!    records them in `tasks/shards-part-JJJJJ-of-MMMMM.json`: a rerun goes on from there.
//! 3. `manifest` checks that every shard is there, writes `manifest.jsonl`, the summary and the
//!    output's record, records the run as complete (`tasks/manifest.json`) and removes the cells.
//!    Any step of a complete run answers with its summary (`already_complete`).
//!
//! `{local_cell_dir}` must be shared by the tasks. An output in an object store is written in
//! `{local_cell_dir}/output` first, then uploaded: each shards task its shards and the manifest
//! step the manifest, last; the one-node run the whole set once it is complete.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use super::cells::Run;
use super::config::ShuffleConfig;
use super::output::{self, build_summary, local_members, summary_bytes};
use super::shard::shard_path;
use super::stage2::{self, ShardSums};
use super::state::{self, clean_leftovers, crash_point, run_path, save, Counts, DirLock, Stage, State, TASKS_DIR};
use super::summary::Summary;
use super::{samples, stage1};
use crate::cancel::Cancel;
use crate::error::{Error, IoContext, Result};
use crate::storage::Remote;
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
    /// `stage` is `cells` (or `1`), `shards` (or `2`), `manifest` or none (the whole run); `task`
    /// is `i/N` or `auto` (needed by the first two, refused without a stage).
    pub fn parse(stage: Option<&str>, task: Option<&str>) -> Result<Option<Step>> {
        let needed = |stage: &str| -> Result<Task> {
            task.ok_or_else(|| Error::invalid(format!("the {stage} stage runs as tasks: give the task (i/N or auto)")))?
                .parse()
        };
        match stage {
            None if task.is_some() => Err(Error::invalid("a task needs its stage (cells, shards or manifest)")),
            None => Ok(None),
            Some(s @ ("cells" | "1")) => Ok(Some(Step::Cells(needed(s)?))),
            Some(s @ ("shards" | "2")) => Ok(Some(Step::Shards(needed(s)?))),
            Some("manifest") => Ok(Some(Step::Manifest)),
            Some(s) => Err(Error::invalid(format!("unknown stage {s:?}: cells (1), shards (2) or manifest"))),
        }
    }
}

/// The record of a complete run in `tasks/`: its fingerprint and its summary.
const DONE: &str = "manifest.json";

/// Run (or resume) one step of a shuffle cut into tasks, or, without `step`, the whole shuffle
/// in this process: the steps `cells 0/1`, `shards 0/1` and `manifest`. Returns the step's
/// summary (the whole run's for `manifest`, the one-node run and any step of a complete run).
/// `tokenizer` is required unless `cfg.shuffle_only`; `warnings` (from
/// [`resolve_special`](super::resolve_special)) are passed through to the summary. Progress is
/// drawn on stderr as `cfg.progress` says, one bar (or series of JSON lines) per stage.
///
/// An output in an object store is written in `{local_cell_dir}/output` (so that a resumed run
/// finds it), then its shards are uploaded, and the manifest last: a reader that finds the
/// manifest finds every shard it lists.
pub fn shuffle(
    cfg: &ShuffleConfig,
    tokenizer: Option<Arc<dyn Tokenizer>>,
    step: Option<Step>,
    warnings: Vec<String>,
    cancel: &Cancel,
) -> Result<Summary> {
    let started = Instant::now();
    let run = Shuffle::new(cfg, tokenizer, warnings, cancel)?;
    match step {
        Some(step) => run.step(step, started),
        None => run.one_node(started),
    }
}

/// What a step covered, for its summary.
fn describe(step: Step, shards: u64) -> Value {
    match step {
        Step::Cells(t) => json!({"step": "cells", "index": t.index, "count": t.count}),
        Step::Shards(t) => {
            let (start, end) = share(shards, t);
            json!({"step": "shards", "index": t.index, "count": t.count, "shards": [start, end]})
        }
        Step::Manifest => json!({"step": "manifest"}),
    }
}

/// Shards `start..end` of `shards` for `task`.
fn share(shards: u64, task: Task) -> (u64, u64) {
    let at = |i: usize| (u128::from(shards) * i as u128 / task.count as u128) as u64;
    (at(task.index), at(task.index + 1))
}

/// One shuffle command, as every step sees it: `local` is `cfg` with the output where it is
/// written (the staging dir of an output in a store, `target`); `fp` is what the local-cell dir
/// belongs to and `id` the run that the output's record names.
struct Shuffle<'a> {
    cfg: &'a ShuffleConfig,
    local: ShuffleConfig,
    target: Option<Remote>,
    tokenizer: Option<Arc<dyn Tokenizer>>,
    fp: Value,
    id: Value,
    warnings: Vec<String>,
    cancel: &'a Cancel,
}

impl<'a> Shuffle<'a> {
    fn new(
        cfg: &'a ShuffleConfig,
        tokenizer: Option<Arc<dyn Tokenizer>>,
        warnings: Vec<String>,
        cancel: &'a Cancel,
    ) -> Result<Self> {
        cfg.check()?;
        if tokenizer.is_none() && !cfg.shuffle_only {
            return Err(Error::invalid("a tokenizer is needed unless shuffle_only is set"));
        }
        state::check_top(&cfg.local_cell_dir)?;
        let target = crate::storage::remote(&cfg.output)?;
        let local = if target.is_some() { output::staging(cfg) } else { cfg.clone() };
        std::fs::create_dir_all(&local.output).with_path(&local.output)?;
        let fp = state::fingerprint(&local, tokenizer.as_deref())?;
        let id = output::run_id(&fp);
        Ok(Self { cfg, local, target, tokenizer, fp, id, warnings, cancel })
    }

    /// The whole run in this process, each step as one task.
    fn one_node(&self, started: Instant) -> Result<Summary> {
        let _lock = DirLock::acquire(&self.cfg.local_cell_dir)?;
        let one = Task::new(0, 1)?;
        // (A directory of another command is refused here, naming what differs.)
        let cells = self.cells_dir(one);
        let resumed = cells.is_dir() && state::load(&cells, &self.cells_fingerprint(one))?.is_some();
        let (id, inputs) = (&self.id, &self.fp["inputs"]);
        let committed =
            self.target.as_ref().map_or(Ok(false), |target| output::claim_remote(target, id, inputs, !resumed))?;
        let mut summary = match self.complete(started)? {
            Some(done) => done,
            None => {
                if !resumed {
                    output::check_output_is_free(&self.local.output)?;
                }
                output::claim_local(&self.local.output, id, inputs, !resumed)?;
                let t1 = Instant::now();
                self.cells(one)?;
                let stage1_seconds = t1.elapsed().as_secs_f64();
                let t2 = Instant::now();
                self.shards(one)?;
                let stage2_seconds = t2.elapsed().as_secs_f64();
                self.manifest(|s| {
                    s.resumed = resumed;
                    s.stage1_seconds = stage1_seconds;
                    s.stage2_seconds = stage2_seconds;
                    s.seconds = started.elapsed().as_secs_f64();
                })?
            }
        };
        if let Some(target) = &self.target {
            summary.output = self.cfg.output.clone();
            summary.manifest = crate::storage::as_path(&target.child("manifest.jsonl"));
            if !committed {
                let members = local_members(&self.local.output)?;
                let file = summary_bytes(self.cfg, &summary)?;
                output::publish(target, id, inputs, members, file, false, self.cancel)?;
            }
        }
        Ok(summary)
    }

    /// One step, for a scheduler.
    fn step(&self, step: Step, started: Instant) -> Result<Summary> {
        let mut summary = match (self.complete(started)?, step) {
            (Some(done), _) => done,
            (None, Step::Cells(task)) => {
                let (state, files) = self.cells(task)?;
                let mut s = self.summary(&state.counts, 0, Path::new(""), false);
                s.files = files as u64;
                s
            }
            (None, Step::Shards(task)) => {
                let counts = self.shards(task)?;
                self.summary(&counts, self.shard_count(&counts), Path::new(""), true)
            }
            (None, Step::Manifest) => self.manifest(|s| {
                s.task = Some(describe(step, s.shards));
                s.seconds = started.elapsed().as_secs_f64();
            })?,
        };
        summary.task = Some(describe(step, summary.shards));
        if !matches!(step, Step::Manifest) {
            // (The manifest step's summary was written with its time.)
            summary.seconds = started.elapsed().as_secs_f64();
        }
        if let Some(target) = &self.target {
            if !matches!(step, Step::Cells(_)) {
                output::claim_remote(target, &self.id, &self.fp["inputs"], true)?;
            }
            summary.output = self.cfg.output.clone();
            self.upload(target, &mut summary, step)?;
        }
        Ok(summary)
    }

    fn tasks_dir(&self) -> PathBuf {
        self.local.local_cell_dir.join(TASKS_DIR)
    }

    fn cells_dir(&self, task: Task) -> PathBuf {
        self.tasks_dir().join(format!("cells-{}", task.part_name()))
    }

    /// What a `cells` task's directory belongs to: the command, and which task of how many.
    fn cells_fingerprint(&self, task: Task) -> Value {
        let mut fp = self.fp.clone();
        fp["task"] = json!({"step": "cells", "index": task.index, "count": task.count});
        fp
    }

    fn shard_count(&self, counts: &Counts) -> u64 {
        counts.contexts.div_ceil(self.local.wds_chunk_size)
    }

    /// The summary of `counts`; `cells_known`: they are the whole run's, so a warning says when
    /// its cells are large.
    fn summary(&self, counts: &Counts, shards: u64, manifest: &Path, cells_known: bool) -> Summary {
        let mut warnings = self.warnings.clone();
        let cell_mb = counts.cell_bytes as f64 / f64::from(self.local.num_local_cells) / 1e6;
        if cells_known && cell_mb > 256.0 {
            warnings.push(format!(
                "local cells average {cell_mb:.0} MB and stage 2 holds about threads + 1 of them in memory; \
                 raise --num-local-cells for datasets this large"
            ));
        }
        build_summary(&self.local, self.tokenizer.as_deref(), counts, shards, manifest, warnings)
    }

    /// The summary of the run if the `manifest` step has completed it, once its output is checked
    /// to be there (and any cells a killed cleanup left are removed).
    fn complete(&self, started: Instant) -> Result<Option<Summary>> {
        let done = std::fs::read(self.tasks_dir().join(DONE)).ok().and_then(|b| serde_json::from_slice(&b).ok());
        let Some(mut done) = done.filter(|d: &Value| d["fingerprint"] == self.fp) else { return Ok(None) };
        let Ok(mut summary) = serde_json::from_value::<Summary>(done["summary"].take()) else { return Ok(None) };
        let out = &self.local.output;
        let missing = std::iter::once(out.join("manifest.jsonl"))
            .chain((0..summary.shards).map(|s| shard_path(out, s)))
            .find(|p| !p.is_file());
        if let Some(missing) = missing {
            let dir = self.local.local_cell_dir.display();
            return Err(Error::invalid(format!(
                "the run in {dir} is complete, but its output {} is gone; delete {dir} to run it again",
                missing.display(),
            )));
        }
        self.remove_cells()?;
        summary.already_complete = true;
        summary.resumed = true;
        summary.seconds = started.elapsed().as_secs_f64();
        Ok(Some(summary))
    }

    /// Stage 1 of one `cells` task, resumed if it was interrupted: its final state, and how many
    /// input files the task has.
    fn cells(&self, task: Task) -> Result<(State, usize)> {
        let range = task.slice(&self.local.inputs.iter().map(|p| crate::storage::size(p)).collect::<Result<Vec<_>>>()?);
        let dir = self.cells_dir(task);
        let mut sub = self.local.clone();
        sub.local_cell_dir = dir.clone();
        sub.files = Some(range.clone());
        let fp = self.cells_fingerprint(task);
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
        // The output may be shared with other tasks: only this task's directory is cleaned.
        clean_leftovers(&dir, state.runs)?;
        if state.stage == Stage::Cells {
            // (`new` saw to it that there is a tokenizer unless the inputs are tars.)
            match self.tokenizer.as_ref().filter(|_| !sub.shuffle_only) {
                Some(t) => stage1::run(&sub, Arc::clone(t), &mut state, self.cancel)?,
                None => samples::run(&sub, &mut state, self.cancel)?,
            }
            state.stage = Stage::Shards;
            save(&dir, &state)?;
            crash_point("stage1-done");
        }
        Ok((state, range.len()))
    }

    /// Stage 2 of one `shards` task, from the first shard of its share not recorded as written;
    /// the run's counts.
    fn shards(&self, task: Task) -> Result<Counts> {
        let (counts, runs) = self.all_cells()?;
        self.claim()?;
        let (start, end) = share(self.shard_count(&counts), task);
        let record = self.tasks_dir().join(format!("shards-{}.json", task.part_name()));
        let mut sums = read_sums(&record, &self.id)?;
        // Shards recorded, in order from the first, with the sizes they were written with.
        let size = |s: u64| std::fs::metadata(shard_path(&self.local.output, s)).map_or(u64::MAX, |m| m.len());
        let next = (start..end).find(|s| sums.get(s).is_none_or(|sum| sum.bytes != size(*s))).unwrap_or(end);
        sums.retain(|&s, _| (start..next).contains(&s));
        if next < end {
            let save = |_: u64, new: &ShardSums| {
                let mut all = sums.clone();
                all.extend(new);
                save_sums(&record, &self.id, &all)
            };
            // The runs are read by this task alone when it is the only one: it frees their cells
            // as its shards are saved.
            let new =
                stage2::write_shards(&self.local, &runs, &counts, next..end, &save, task.count == 1, self.cancel)?;
            sums.extend(new);
        }
        save_sums(&record, &self.id, &sums)?;
        Ok(counts)
    }

    /// The `manifest` step: check that every shard is written, then write the manifest, the
    /// summary (`shape` finishes it) and the output's record; record the run as complete and
    /// remove its cells.
    fn manifest(&self, shape: impl FnOnce(&mut Summary)) -> Result<Summary> {
        let (counts, _) = self.all_cells()?;
        self.claim()?;
        let shards = self.shard_count(&counts);
        let missing: Vec<u64> = (0..shards).filter(|&s| !shard_path(&self.local.output, s).is_file()).collect();
        if !missing.is_empty() {
            return Err(Error::invalid(format!(
                "{} of {shards} shards are not written yet (e.g. shard {}); run every shards task first",
                missing.len(),
                missing[0]
            )));
        }
        let root = self.tasks_dir();
        let mut sums = ShardSums::new();
        for name in self.listed("shards-part-")? {
            sums.extend(read_sums(&root.join(name), &self.id)?);
        }
        let owner = (&self.id, &self.fp["inputs"]);
        let summary = output::finish(&self.local, owner, (shards, counts.contexts), &sums, |manifest| {
            let mut s = self.summary(&counts, shards, manifest, true);
            shape(&mut s);
            s
        })?;
        let done = json!({"fingerprint": self.fp, "summary": summary});
        crate::fsutil::write_atomic(root.join(DONE), &crate::fsutil::json_file_bytes(&done)?)?;
        self.remove_cells()?;
        Ok(summary)
    }

    /// Before a step writes into the output: the output must be this run's (checked after the
    /// cells, whose refusals name what differs).
    fn claim(&self) -> Result<()> {
        // Temporaries of killed shards tasks (only theirs: other tasks may be writing now).
        crate::fsutil::remove_dead_temporaries_in(&self.local.output);
        output::claim_local(&self.local.output, &self.id, &self.fp["inputs"], true).map(drop)
    }

    /// The names in `tasks/` that start with `prefix`.
    fn listed(&self, prefix: &str) -> Result<Vec<String>> {
        let root = self.tasks_dir();
        let names = std::fs::read_dir(&root).with_path(&root)?.filter_map(|e| e.ok());
        Ok(names.map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with(prefix)).collect())
    }

    /// The cells of a complete run are no longer needed.
    fn remove_cells(&self) -> Result<()> {
        self.listed("cells-part-")?.iter().try_for_each(|name| clean_leftovers(&self.tasks_dir().join(name), 0))
    }

    /// The cells of every `cells` task: their counts summed, and their runs in task order.
    /// Refuses a missing or unfinished task, and one made by another command.
    fn all_cells(&self) -> Result<(Counts, Vec<Run>)> {
        let mut counts: Vec<usize> =
            (self.listed("cells-part-")?.iter()).filter_map(|name| name.split_once("-of-")?.1.parse().ok()).collect();
        counts.sort_unstable();
        counts.dedup();
        let count: usize = match counts[..] {
            [n] => n,
            [] => {
                let dir = self.local.local_cell_dir.display();
                return Err(Error::invalid(format!("no cells tasks have run in {dir}")));
            }
            _ => {
                return Err(Error::invalid(format!(
                    "{} holds cells tasks of runs cut into different numbers of tasks ({counts:?}); keep one",
                    self.tasks_dir().display()
                )))
            }
        };
        let mut m = Counts::default();
        let mut runs = Vec::new();
        for index in 0..count {
            let task = Task::new(index, count)?;
            let dir = self.cells_dir(task);
            let state = if dir.is_dir() { state::load(&dir, &self.cells_fingerprint(task))? } else { None };
            let Some(state) = state.filter(|s| s.stage != Stage::Cells) else {
                return Err(Error::invalid(format!(
                    "cells task {index}/{count} has not finished (in {}); run it first",
                    dir.display()
                )));
            };
            for r in 0..state.runs {
                runs.push(Run::open(&run_path(&dir, r), self.local.num_local_cells)?);
            }
            let c = &state.counts;
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
        }
        Ok((m, runs))
    }

    /// The uploads of a step whose output is in an object store.
    fn upload(&self, target: &Remote, summary: &mut Summary, step: Step) -> Result<()> {
        let name = |s: u64| format!("shard_{s:08}.tar");
        match step {
            Step::Cells(_) => Ok(()),
            Step::Shards(task) => {
                let (start, end) = share(summary.shards, task);
                for s in start..end {
                    self.cancel.check()?;
                    let to = target.child(&name(s));
                    crate::fsutil::fault::point().map_err(|e| Error::io(Path::new(&to.url), e))?;
                    crate::storage::upload_file(&shard_path(&self.local.output, s), &to)?;
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
                let members = local_members(&self.local.output)?;
                let summary_file = summary_bytes(self.cfg, summary)?;
                output::publish(target, &self.id, &self.fp["inputs"], members, summary_file, true, self.cancel)
            }
        }
    }
}

/// The sums of the shards that a shards task's record at `path` lists for the run `id` (none
/// for another run's, or an unreadable record: those shards are written again).
fn read_sums(path: &Path, id: &Value) -> Result<ShardSums> {
    let mut sums = ShardSums::new();
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(sums),
        Err(e) => return Err(Error::io(path, e)),
    };
    let Ok(v) = serde_json::from_slice::<Value>(&bytes) else { return Ok(sums) };
    if v.get("run") == Some(id) {
        for (s, pair) in v["shards"].as_object().into_iter().flatten() {
            if let (Ok(s), Some(b), Some(c)) = (s.parse::<u64>(), pair[0].as_u64(), pair[1].as_u64()) {
                sums.insert(s, crate::fsutil::record::Sum { bytes: b, crc32c: c as u32 });
            }
        }
    }
    Ok(sums)
}

fn save_sums(path: &Path, id: &Value, sums: &ShardSums) -> Result<()> {
    let shards: serde_json::Map<String, Value> =
        sums.iter().map(|(s, sum)| (s.to_string(), json!([sum.bytes, sum.crc32c]))).collect();
    let bytes = serde_json::to_vec(&json!({"run": id, "shards": shards})).map_err(|e| Error::invalid(e.to_string()))?;
    crate::fsutil::write_atomic(path, &bytes)
}
