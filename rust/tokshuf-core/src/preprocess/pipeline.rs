//! The threads of a run: one reader, `workers` tokenizers, and the ordered writer (the caller).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{bounded, Receiver, Sender};

use super::document::{encode_batch, EncodedBatch};
use super::summary::{OutputSummary, SkipRecord, Summary};
use super::{ErrorPolicy, PreprocessConfig};
use crate::cancel::Cancel;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::fsutil::with_suffix;
use crate::indexed::{IndexedDataset, IndexedDatasetWriter, Validate};
use crate::read::lines::{LineBatch, LineReader};
use crate::read::open_decompressed;
use crate::tokenize::Tokenizer;

/// How many skipped lines are listed individually in the summary.
const SKIP_EXAMPLES: usize = 20;

struct Job {
    seq: u64,
    file: usize,
    /// Global number (0-based, across files) of the batch's first line.
    global_line: u64,
    batch: LineBatch,
}

struct Done {
    seq: u64,
    file: usize,
    global_line: u64,
    first_line: u64,
    encoded: EncodedBatch,
}

enum ReaderMsg {
    /// A file was fully read: its compressed and decompressed sizes.
    FileDone(u64, u64),
}

fn read_all(
    inputs: &[PathBuf],
    cfg: &PreprocessConfig,
    jobs: &Sender<Job>,
    slots: &Receiver<()>,
    events: &Sender<ReaderMsg>,
    cancel: &Cancel,
) -> Result<()> {
    let mut seq = 0u64;
    let mut global_line = 0u64;
    for (file, path) in inputs.iter().enumerate() {
        let compressed = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let mut reader = LineReader::new(path, open_decompressed(path)?, cfg.batch_bytes, cfg.max_line_bytes);
        while let Some(batch) = reader.next_batch()? {
            cancel.check()?;
            // One slot per batch in flight bounds memory however far the reader gets ahead.
            if slots.recv().is_err() {
                return Ok(());
            }
            let n = batch.len() as u64;
            if jobs.send(Job { seq, file, global_line, batch }).is_err() {
                return Ok(());
            }
            seq += 1;
            global_line += n;
        }
        if events.send(ReaderMsg::FileDone(compressed, reader.offset())).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

struct Outputs {
    /// writers[key][partition]
    writers: Vec<Vec<IndexedDatasetWriter>>,
    partitions: usize,
}

impl Outputs {
    fn create(cfg: &PreprocessConfig, dtype: DType) -> Result<Self> {
        let writers = cfg
            .json_keys
            .iter()
            .map(|key| {
                let prefix = cfg.key_prefix(key);
                (0..cfg.partitions)
                    .map(|p| {
                        let target =
                            if p == 0 { prefix.clone() } else { with_suffix(&prefix, &format!(".partition{p}")) };
                        IndexedDatasetWriter::create(target, dtype, false)
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { writers, partitions: cfg.partitions })
    }

    fn write(&mut self, done: &Done) -> Result<()> {
        let enc = &done.encoded;
        for (key, writers) in enc.keys.iter().zip(&mut self.writers) {
            let mut tok = 0usize;
            let mut seq = 0usize;
            for (doc, &n_seq) in key.document_sequences.iter().enumerate() {
                let line = done.global_line + u64::from(enc.document_lines[doc]);
                let w = &mut writers[(line % self.partitions as u64) as usize];
                for &len in &key.sequence_lengths[seq..seq + n_seq as usize] {
                    w.add_sequence(&key.tokens[tok..tok + len as usize])?;
                    tok += len as usize;
                }
                seq += n_seq as usize;
                w.end_document();
            }
        }
        Ok(())
    }

    /// Finish every partition, append partitions 1.. to partition 0 (Megatron's merge order).
    fn finish(self, cfg: &PreprocessConfig) -> Result<Vec<OutputSummary>> {
        let mut out = Vec::new();
        for (key, writers) in cfg.json_keys.iter().zip(self.writers) {
            let mut writers = writers.into_iter();
            let mut first = writers.next().expect("one partition");
            for w in writers {
                let prefix = w.prefix().to_path_buf();
                w.finish()?;
                let part = IndexedDataset::open(&prefix, Some(false), Validate::Header)?;
                let appended = first.append(&part);
                drop(part);
                let _ = std::fs::remove_file(crate::indexed::bin_path(&prefix));
                let _ = std::fs::remove_file(crate::indexed::idx_path(&prefix));
                appended?;
            }
            let prefix = first.prefix().to_path_buf();
            out.push(OutputSummary::new(key, prefix, first.finish()?));
        }
        Ok(out)
    }
}

pub(super) fn run(cfg: &PreprocessConfig, tokenizer: Arc<dyn Tokenizer>, cancel: &Cancel) -> Result<Summary> {
    let start = Instant::now();
    let dtype = cfg.dtype.unwrap_or_else(|| DType::optimal(Some(tokenizer.vocab_size())));
    let eod = if cfg.append_eod { tokenizer.eod_id() } else { None };
    let in_flight = 2 * cfg.workers + 2;
    let (job_tx, job_rx) = bounded::<Job>(in_flight);
    let (done_tx, done_rx) = bounded::<Done>(in_flight);
    let (slot_tx, slot_rx) = bounded::<()>(in_flight);
    let (event_tx, event_rx) = crossbeam_channel::unbounded::<ReaderMsg>();
    for _ in 0..in_flight {
        slot_tx.send(()).expect("capacity");
    }
    let mut outputs = Outputs::create(cfg, dtype)?;
    let mut summary = Summary {
        dtype: dtype.name().to_string(),
        tokenizer: tokenizer.identity(),
        files: cfg.inputs.len() as u64,
        ..Default::default()
    };
    let stop = cancel.clone();

    let result = std::thread::scope(|s| -> Result<()> {
        let reader = {
            let (slot_rx, job_tx, stop) = (slot_rx.clone(), job_tx, stop.clone());
            s.spawn(move || {
                let r = read_all(&cfg.inputs, cfg, &job_tx, &slot_rx, &event_tx, &stop);
                if r.is_err() {
                    stop.cancel();
                }
                r
            })
        };
        for _ in 0..cfg.workers {
            let (job_rx, done_tx, tokenizer, stop) =
                (job_rx.clone(), done_tx.clone(), Arc::clone(&tokenizer), stop.clone());
            s.spawn(move || {
                for job in job_rx.iter() {
                    if stop.is_cancelled() {
                        break;
                    }
                    let encoded = encode_batch(&job.batch, &cfg.json_keys, tokenizer.as_ref(), eod);
                    let done = Done {
                        seq: job.seq,
                        file: job.file,
                        global_line: job.global_line,
                        first_line: job.batch.first_line,
                        encoded,
                    };
                    if done_tx.send(done).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        drop(job_rx);

        let written = write_in_order(cfg, &done_rx, &slot_tx, &mut outputs, &mut summary, &stop);
        if written.is_err() {
            stop.cancel();
        }
        // Unblock and drain so every thread can exit: a reader waiting for a slot sees the
        // channel close, workers see their results channel drained.
        drop(slot_tx);
        drop(slot_rx);
        for _ in done_rx.iter() {}
        let read = reader.join().unwrap_or_else(|_| Err(Error::invalid("the reader thread panicked")));
        for ReaderMsg::FileDone(compressed, decompressed) in event_rx.try_iter() {
            summary.input_bytes += compressed;
            summary.decompressed_bytes += decompressed;
        }
        // The writer's error comes first: it is the earliest in input order. A reader error
        // (truncated file) follows; a bare cancellation only if nothing else went wrong.
        match (written, read) {
            (Err(e), _) if !matches!(e, Error::Cancelled) => Err(e),
            (_, Err(e)) if !matches!(e, Error::Cancelled) => Err(e),
            (Err(e), _) | (_, Err(e)) => Err(e),
            (Ok(()), Ok(())) => cancel.check(),
        }
    });
    result?;
    summary.outputs = outputs.finish(cfg)?;
    summary.documents = summary.outputs.first().map_or(0, |o| o.documents);
    summary.seconds = start.elapsed().as_secs_f64();
    Ok(summary)
}

fn write_in_order(
    cfg: &PreprocessConfig,
    done_rx: &Receiver<Done>,
    slot_tx: &Sender<()>,
    outputs: &mut Outputs,
    summary: &mut Summary,
    cancel: &Cancel,
) -> Result<()> {
    let mut pending: BTreeMap<u64, Done> = BTreeMap::new();
    let mut next = 0u64;
    for done in done_rx.iter() {
        pending.insert(done.seq, done);
        while let Some(done) = pending.remove(&next) {
            cancel.check()?;
            if let Some((i, reason, msg)) = done.encoded.rejected.first() {
                let path = &cfg.inputs[done.file];
                let line = done.first_line + u64::from(*i);
                if cfg.on_error == ErrorPolicy::Fail {
                    return Err(Error::BadInput { path: path.clone(), line, reason: *reason, msg: msg.clone() });
                }
                for (i, reason, msg) in &done.encoded.rejected {
                    *summary.skipped.entry(reason.as_str().to_string()).or_default() += 1;
                    if summary.first_skipped.len() < SKIP_EXAMPLES {
                        summary.first_skipped.push(SkipRecord {
                            path: path.clone(),
                            line: done.first_line + u64::from(*i),
                            reason: reason.as_str().to_string(),
                            message: msg.clone(),
                        });
                    }
                }
            }
            outputs.write(&done)?;
            summary.lines += done.encoded.lines as u64;
            next += 1;
            let _ = slot_tx.send(());
        }
    }
    Ok(())
}
