//! Stage 2 ("fine shuffle"): local cells → shuffled shards.
//!
//! The output is `shuffle(cell 0) ++ shuffle(cell 1) ++ ...`, cut into shards of W. Because every
//! context went to a cell independently and uniformly, and each cell is shuffled uniformly, this
//! sequence is a uniform random permutation of all contexts (the process is invariant under
//! relabelling contexts). Leftovers of a cell simply continue into the next cell's first shard,
//! so there is no overflow cascade: every byte is written once, and only the last shard is
//! partial. Cell `c`'s order is a function of (seed, c) and the ids in it, so the position of
//! every context, hence shard numbers and member names, is known from the cell counts alone;
//! a resume at shard `k` recomputes the cell holding position `k*W` and carries on.
//!
//! `threads` loaders read and shuffle cells ahead (memory: about `threads + 1` cells), and this
//! thread writes them in cell order.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver};

use super::cells::{parse_records, RecordRef, Run};
use super::config::ShuffleConfig;
use super::rng::{Rng, TAG_ORDER};
use super::shard::{shard_len, sync_dir, FinishedShard, PayloadKind, ShardWriter};
use super::state::{crash_point, Counts};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::fsutil::record::Sum;
use crate::progress::{Progress, ProgressSnapshot};

/// A cell read into memory, in its shuffled order.
struct Loaded {
    bytes: Vec<u8>,
    order: Vec<RecordRef>,
}

fn load_cell(cfg: &ShuffleConfig, runs: &[Run], cell: u32) -> Result<Loaded> {
    let size: u64 = runs.iter().map(|r| r.segments[cell as usize].bytes).sum();
    let mut bytes = Vec::with_capacity(size as usize);
    let expected = runs.iter().map(|run| run.read_cell(cell, &mut bytes)).sum::<Result<u64>>()?;
    let mut order = parse_records(&bytes, expected, &cfg.local_cell_dir)?;
    order.sort_unstable_by_key(|r| r.id);
    if let Some(w) = order.windows(2).find(|w| w[0].id == w[1].id) {
        return Err(Error::format(
            &cfg.local_cell_dir,
            format!("cell {cell} holds the context id {:#x} twice", w[0].id),
        ));
    }
    Rng::from_words(&[cfg.seed, TAG_ORDER, u64::from(cell)]).shuffle(&mut order);
    Ok(Loaded { bytes, order })
}

/// The size and checksum of each shard written, by number.
pub(super) type ShardSums = BTreeMap<u64, Sum>;

/// Records `(n, sums)`: shards before `n` are complete, `sums` holds those this call wrote.
pub(super) type SaveProgress<'a> = &'a (dyn Fn(u64, &ShardSums) -> Result<()> + Sync);

/// Write shards `range` from the cells of `runs` (which hold `counts`' contexts); returns the
/// sums of the shards written. `save` records progress as they are committed; with `release`
/// (the runs are this call's alone), cells whose every context is in a saved shard are freed.
pub(super) fn write_shards(
    cfg: &ShuffleConfig,
    runs: &[Run],
    counts: &Counts,
    range: std::ops::Range<u64>,
    save: SaveProgress<'_>,
    release: bool,
    cancel: &Cancel,
) -> Result<ShardSums> {
    let (contexts, cell_bytes) = (counts.contexts, counts.cell_bytes);
    // Records per cell, summed over the runs.
    let counts: Vec<u64> =
        (0..cfg.num_local_cells as usize).map(|c| runs.iter().map(|r| r.segments[c].count).sum()).collect();
    let total: u64 = counts.iter().sum();
    if total != contexts {
        return Err(Error::format(
            &cfg.local_cell_dir,
            format!("the local cells hold {total} contexts, the saved state says {contexts}"),
        ));
    }
    let w = cfg.wds_chunk_size;

    let mut pos = range.start * w;
    let end_pos = (range.end * w).min(total);
    // The position just past each cell's last context, and that of its first.
    let cell_end: Vec<u64> = counts.iter().scan(0, |end, &n| Some(std::mem::replace(end, *end + n) + n)).collect();
    let start = |c: usize| cell_end[c] - counts[c];
    // The cells holding positions still to write, and how far into the first of them `pos` is.
    let todo: Vec<u32> = (0..counts.len())
        .filter(|&c| cell_end[c] > pos && counts[c] > 0 && start(c) < end_pos)
        .map(|c| c as u32)
        .collect();
    let skip = todo.first().map_or(0, |&c| pos - start(c as usize));

    let (slot_tx, slot_rx) = crate::ingest::slots(cfg.threads + 1);
    let (done_tx, done_rx) = unbounded::<(usize, Result<Loaded>)>();
    // One shard may wait while the previous one is being fsynced: writing overlaps flushing.
    let (commit_tx, commit_rx) = bounded::<FinishedShard>(1);
    let next = AtomicUsize::new(0);
    // Set when the writer fails: the loaders stop.
    let stop = Cancel::new();
    let mut writer = ShardWriter::new(&cfg.output, PayloadKind::of(cfg));

    let sums = std::thread::scope(|s| -> Result<ShardSums> {
        for _ in 0..cfg.threads {
            let (slot_rx, done_tx, next, todo, runs, stop) =
                (slot_rx.clone(), done_tx.clone(), &next, &todo, &runs, &stop);
            s.spawn(move || {
                while slot_rx.recv().is_ok() && !stop.is_cancelled() && !cancel.is_cancelled() {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&cell) = todo.get(i) else { break };
                    if done_tx.send((i, load_cell(cfg, runs, cell))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        drop(slot_rx);
        let committer = {
            // `reclaim` frees the disk space of cells whose every context is in a shard the saved
            // state counts as done (a resume never reads them again), so disk use stays near one
            // copy of the data. (Without `release`, no runs to release cells of.)
            let runs = if release { runs } else { &[] };
            let mut freed = 0;
            let reclaim = move |shards_done: u64| {
                let first = freed;
                while freed < cell_end.len() && cell_end[freed] <= shards_done * w {
                    freed += 1;
                }
                runs.iter().for_each(|run| run.release(first as u32..freed as u32));
            };
            // Bytes of the shards still to write, roughly: payload plus tar headers and padding.
            let left = end_pos.saturating_sub(range.start * w);
            let estimate = cell_bytes * left / total.max(1) + left * 768;
            let progress = Progress::new(cfg.progress, "shuffle-shards", estimate);
            let (first, commit_rx) = (range.start, &commit_rx);
            s.spawn(move || commit_shards(cfg, commit_rx, (first, total), save, progress, reclaim))
        };
        let written = (|| -> Result<()> {
            let mut pending = BTreeMap::new();
            for i in 0..todo.len() {
                let loaded = loop {
                    if let Some(l) = pending.remove(&i) {
                        break l;
                    }
                    let stopped = || Error::invalid("stage 2 loaders stopped unexpectedly");
                    let (j, l) = done_rx.recv().map_err(|_| cancel.check().err().unwrap_or_else(stopped))?;
                    pending.insert(j, l);
                };
                let loaded: Loaded = loaded?;
                cancel.check()?;
                let first = if i == 0 { skip as usize } else { 0 };
                for r in &loaded.order[first..] {
                    if pos == end_pos {
                        break;
                    }
                    let (shard, index) = (pos / w, pos % w);
                    writer.add(shard, index, &loaded.bytes[r.start..r.start + r.len as usize])?;
                    pos += 1;
                    if index + 1 == shard_len(shard, total, w) {
                        let finished = writer.finish()?.expect("a shard was open");
                        if commit_tx.send(finished).is_err() {
                            return Err(Error::invalid("the stage 2 committer stopped"));
                        }
                    }
                }
                let _ = slot_tx.send(());
            }
            Ok(())
        })();
        if written.is_err() {
            stop.cancel();
        }
        drop(commit_tx);
        drop(slot_tx);
        for _ in done_rx.iter() {}
        let committed = committer.join().unwrap_or_else(|_| Err(Error::invalid("the stage 2 committer panicked")));
        // The committer's error first: it explains a writer that could not hand a shard over.
        committed.and_then(|done| written.map(|()| done))
    })?;
    debug_assert_eq!(pos, end_pos);
    sync_dir(&cfg.output)?;
    Ok(sums)
}

/// Saving the state after a shard is optional (a resume recomputes identical shards from an
/// older position), so it is throttled: its fsync would otherwise cost as much as a small shard.
/// (`TOKSHUF_TEST_SAVE_EVERY_MS` overrides it for the resume tests.)
fn save_every() -> Duration {
    static EVERY: OnceLock<Duration> = OnceLock::new();
    *EVERY.get_or_init(|| {
        let ms = std::env::var("TOKSHUF_TEST_SAVE_EVERY_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(500);
        Duration::from_millis(ms)
    })
}

/// fsync and rename finished shards in order (from shard `first` of a run of `contexts`),
/// recording progress with `save` and freeing the cells of the shards saved with `reclaim`.
fn commit_shards(
    cfg: &ShuffleConfig,
    shards: &Receiver<FinishedShard>,
    (first, contexts): (u64, u64),
    save: SaveProgress<'_>,
    mut progress: Progress,
    mut reclaim: impl FnMut(u64),
) -> Result<ShardSums> {
    let mut sums = ShardSums::new();
    let mut last_save = Instant::now();
    let mut snap = ProgressSnapshot::default();
    for finished in shards.iter() {
        let (shard, sum) = finished.commit()?;
        sums.insert(shard, sum);
        crash_point("shard-renamed");
        let done = shard + 1;
        // Documents here are contexts written; tokens, their tokens (PAD included).
        snap.bytes += sum.bytes;
        snap.documents = (done * cfg.wds_chunk_size).min(contexts) - first * cfg.wds_chunk_size;
        snap.tokens = snap.documents * cfg.seqlen as u64;
        progress.update(snap);
        if last_save.elapsed() >= save_every() {
            // The shard was fsynced before its rename, so the progress never claims a shard
            // that a power loss could take back.
            save(done, &sums)?;
            last_save = Instant::now();
            crash_point("shard-saved");
            reclaim(done);
        }
    }
    progress.finish(snap);
    Ok(sums)
}
