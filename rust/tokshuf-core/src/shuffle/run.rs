//! The one-node run: stage 1 and stage 2 in this process, resumable from the local-cell
//! directory's state, into a local output or (staged locally, then uploaded) an object store.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::config::ShuffleConfig;
use super::output::{self, build_summary, check_output_is_free, local_members, summary_bytes};
use super::shard::{shard_path, PayloadKind};
use super::state::{self, clean_leftovers, crash_point, fingerprint, save, state_path, DirLock, Stage, State};
use super::summary::Summary;
use super::{samples, stage1, stage2};
use crate::cancel::Cancel;
use crate::error::{Error, IoContext, Result};
use crate::tokenize::Tokenizer;

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
    let (local, fp) = output::staging(cfg, tokenizer.as_deref())?;
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
    let stage2_seconds = t2.elapsed().as_secs_f64();
    let totals = (shards, state.counts.contexts);
    let summary = output::finish(cfg, (&run, &fp["inputs"]), totals, &sums, |manifest| {
        let mut summary = build_summary(cfg, tokenizer.as_deref(), &state, shards, manifest, warnings);
        summary.resumed = resumed;
        summary.stage1_seconds = stage1_seconds;
        summary.stage2_seconds = stage2_seconds;
        summary.seconds = started.elapsed().as_secs_f64();
        summary
    })?;
    state.stage = Stage::Complete;
    state.summary = Some(serde_json::to_value(&summary).map_err(|e| Error::invalid(e.to_string()))?);
    save(dir, &state)?;
    clean_leftovers(dir, &cfg.output, &state)?;
    Ok(summary)
}
