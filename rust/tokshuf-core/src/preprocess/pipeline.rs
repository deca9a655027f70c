//! The threads of a run: one reader, `workers` tokenizers, and the ordered writer (the caller).
//!
//! Everything the reader finds — batches of lines, and problems with whole files (empty,
//! truncated, unreadable) — travels through the same sequence-numbered stream, so the writer
//! meets it in input order: the error reported under `fail` is always the first one in the
//! input, whatever the thread timing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{bounded, Receiver, Sender, TryRecvError};

use super::config::PreprocessConfig;
use super::document::{encode_batch, encode_batch_parsed, parse_batch, DocumentRules, EncodedBatch, ParsedLines};
use super::summary::{OutputSummary, Summary};
use crate::cancel::Cancel;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::fsutil::record::Sum;
use crate::fsutil::{RecordSpec, Staging};
use crate::indexed::{IndexedDataset, IndexedDatasetWriter, Validate};
use crate::ingest::{is_long_job, read_inputs, Event, ReadPlan, Spares, Step};
use crate::progress::{Progress, ProgressSnapshot};
use crate::read::FieldOptions;
use crate::storage;
use crate::tokenize::Tokenizer;

enum Item {
    /// What the reader found: lines for the worker to parse (a batch), a problem, a file's end.
    Read(Step),
    /// Lines the reader had the time to parse.
    Parsed(ParsedLines),
    /// A batch the worker tokenized.
    Encoded { first_line: u64, encoded: EncodedBatch },
}

/// An item on its way from the reader through a worker to the writer, numbered in input order.
struct Job {
    seq: u64,
    file: usize,
    /// Global number (0-based, across files) of the batch's first line.
    global_line: u64,
    /// Input bytes (on disk, all files) consumed once this item is written.
    input_pos: u64,
    item: Item,
}

/// The reader: files → items, in order. Returns only when done, stopped or unwanted.
fn read_all(
    cfg: &PreprocessConfig,
    rules: &DocumentRules<'_>,
    jobs: &Sender<Job>,
    slots: &Receiver<()>,
    stop: &Stop,
    spares: &Spares,
) {
    let plan = ReadPlan {
        inputs: &cfg.inputs,
        files: 0..cfg.inputs.len(),
        skip_lines: 0,
        keys: &cfg.json_keys,
        batch_bytes: cfg.batch_bytes,
        max_line_bytes: cfg.max_line_bytes,
    };
    let mut seq = 0u64;
    read_inputs(&plan, spares, |Event { file, global_line, input_pos, step }| {
        if stop.is_set() {
            return false;
        }
        let mut item = Item::Read(step);
        // The workers are behind when every one of them has a batch waiting (or no slot is
        // free): then the reader parses the lines, and the workers only tokenize them. When they
        // keep up (many of them, a slow disk) they parse, in parallel. Rows have no JSON to parse.
        // One slot per item in flight bounds memory however far the reader gets ahead.
        let mut slot = slots.try_recv();
        if jobs.len() >= cfg.workers || matches!(slot, Err(TryRecvError::Empty)) {
            item = match item {
                Item::Read(Step::Batch(batch)) if batch.rows.is_none() => Item::Parsed(parse_batch(batch, rules)),
                other => other,
            };
        }
        if let Err(TryRecvError::Empty) = slot {
            slot = slots.recv().map_err(|_| TryRecvError::Disconnected);
        }
        if slot.is_err() || stop.is_set() {
            return false;
        }
        let ok = jobs.send(Job { seq, file, global_line, input_pos, item }).is_ok();
        seq += 1;
        ok
    });
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
                let partition = |p| IndexedDatasetWriter::create(cfg.partition_prefix(key, p), dtype, false);
                (0..cfg.partitions).map(partition).collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { writers, partitions: cfg.partitions })
    }

    fn write(&mut self, global_line: u64, enc: &EncodedBatch) -> Result<()> {
        for (key, writers) in enc.keys.iter().zip(&mut self.writers) {
            let mut tok = 0usize;
            let mut seq = 0usize;
            for (doc, &n_seq) in key.document_sequences.iter().enumerate() {
                let line = global_line + u64::from(enc.document_lines[doc]);
                let w = &mut writers[(line % self.partitions as u64) as usize];
                for &len in &key.sequence_lengths[seq..seq + n_seq as usize] {
                    w.add_sequence(&key.tokens[tok..tok + len as usize])?;
                    tok += len as usize;
                }
                seq += n_seq as usize;
                w.end_document()?;
            }
        }
        Ok(())
    }

    /// Finish every partition, append partitions 1.. to partition 0 (Megatron's merge order).
    /// The outputs stay staged, to be committed with the summary.
    fn finish(self, cfg: &PreprocessConfig) -> Result<(Vec<OutputSummary>, Staging)> {
        let mut out = Vec::new();
        let mut staged = Staging::new();
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
            let (written, files) = first.finish_staged()?;
            staged.extend(files);
            out.push(OutputSummary { key: key.to_string(), prefix, written });
        }
        Ok((out, staged))
    }
}

/// Run the pipeline and commit its outputs (with the summary, if any) as one set, published by
/// `record`.
pub(super) fn run(
    cfg: &PreprocessConfig,
    tokenizer: Arc<dyn Tokenizer>,
    record: RecordSpec,
    cancel: &Cancel,
) -> Result<Summary> {
    let (summary, mut staged) = write(cfg, tokenizer, cancel)?;
    // Every key's pair and the summary appear together or not at all.
    if let Some(path) = &cfg.summary_path {
        staged.add_index_bytes(path, &crate::fsutil::json_file_bytes(&summary)?)?;
    }
    staged.set_record(record);
    staged.commit()?;
    Ok(summary)
}

/// Run the pipeline and move its outputs into place without a record (they are to be uploaded);
/// the size and checksum of each.
pub(super) fn run_staged(
    cfg: &PreprocessConfig,
    tokenizer: Arc<dyn Tokenizer>,
    cancel: &Cancel,
) -> Result<(Summary, Vec<(std::path::PathBuf, Sum)>)> {
    let (summary, staged) = write(cfg, tokenizer, cancel)?;
    let sums = staged.sums();
    staged.commit()?;
    Ok((summary, sums))
}

fn write(cfg: &PreprocessConfig, tokenizer: Arc<dyn Tokenizer>, cancel: &Cancel) -> Result<(Summary, Staging)> {
    let start = Instant::now();
    let dtype = cfg.dtype.unwrap_or_else(|| DType::optimal(Some(tokenizer.vocab_size())));
    let rules = DocumentRules {
        keys: &cfg.json_keys,
        eod: if cfg.append_eod { tokenizer.eod_id() } else { None },
        fields: FieldOptions { sentence_lists: cfg.sentence_lists },
    };
    let in_flight = 2 * cfg.workers + 2;
    let (job_tx, job_rx) = bounded::<Job>(in_flight);
    let (done_tx, done_rx) = bounded::<Job>(in_flight);
    let (slot_tx, slot_rx) = crate::ingest::slots(in_flight);
    let spares = Spares::new(in_flight + cfg.workers, cfg.batch_bytes);
    let mut outputs = Outputs::create(cfg, dtype)?;
    let total_bytes = cfg.inputs.iter().filter_map(|p| storage::size(p).ok()).sum();
    let mut writer = Writer {
        cfg,
        summary: Summary {
            tokshuf_version: env!("CARGO_PKG_VERSION").to_string(),
            inputs: cfg.inputs.clone(),
            files: cfg.inputs.len() as u64,
            scan: cfg.scan.clone(),
            dtype: dtype.name().to_string(),
            tokenizer: tokenizer.identity(),
            config: serde_json::json!({
                "json_keys": cfg.json_keys,
                "append_eod": cfg.append_eod,
                "eod": rules.eod,
                "dtype": dtype.name(),
                "on_error": cfg.on_error.name(),
                "partitions": cfg.partitions,
                "sentence_lists": cfg.sentence_lists,
                "max_line_bytes": cfg.max_line_bytes,
            }),
            workers: cfg.workers,
            task: cfg.task.map(|t| serde_json::json!({"index": t.index, "count": t.count})),
            ..Default::default()
        },
        progress: Progress::new(cfg.progress, "preprocess", total_bytes),
        snapshot: ProgressSnapshot::default(),
    };
    let stop = Stop { user: cancel.clone(), done: Cancel::new() };

    std::thread::scope(|s| -> Result<()> {
        {
            let (slot_rx, stop, spares) = (slot_rx.clone(), &stop, &spares);
            let rules = &rules;
            s.spawn(move || read_all(cfg, rules, &job_tx, &slot_rx, stop, spares));
        }
        // The reader fills the first batches meanwhile (tens of milliseconds for a large
        // vocabulary's tables).
        if is_long_job(&cfg.inputs, total_bytes) {
            tokenizer.prepare_for_long_job();
        }
        for _ in 0..cfg.workers {
            let (job_rx, done_tx, tokenizer, stop) = (job_rx.clone(), done_tx.clone(), tokenizer.as_ref(), &stop);
            let (rules, spares) = (&rules, &spares);
            s.spawn(move || {
                for mut job in job_rx.iter() {
                    if stop.is_set() {
                        break;
                    }
                    job.item = match job.item {
                        Item::Read(Step::Batch(batch)) => {
                            let encoded = encode_batch(&batch, rules, tokenizer, cancel, spares.tokens.take());
                            spares.data.give(batch.data);
                            Item::Encoded { first_line: batch.first_line, encoded }
                        }
                        Item::Parsed(parsed) => {
                            let encoded = encode_batch_parsed(&parsed, rules, tokenizer, cancel, spares.tokens.take());
                            let batch = parsed.into_batch();
                            spares.data.give(batch.data);
                            Item::Encoded { first_line: batch.first_line, encoded }
                        }
                        other => other,
                    };
                    if done_tx.send(job).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        drop(job_rx);

        let written = writer.write_in_order(&done_rx, &slot_tx, &mut outputs, &spares, cancel);
        // Stop the other threads whatever happened: the reader may be blocked on a slot, the
        // workers on a full results channel.
        stop.done.cancel();
        drop(slot_tx);
        drop(slot_rx);
        for _ in done_rx.iter() {}
        written
    })?;
    cancel.check()?;

    let mut summary = writer.summary;
    let staged;
    (summary.outputs, staged) = outputs.finish(cfg)?;
    summary.documents = summary.outputs.first().map_or(0, |o| o.written.documents);
    summary.sequences = summary.outputs.iter().map(|o| o.written.sequences).sum();
    summary.tokens = summary.outputs.iter().map(|o| o.written.tokens).sum();
    summary.seconds = start.elapsed().as_secs_f64();
    writer.progress.finish(ProgressSnapshot {
        bytes: total_bytes,
        documents: summary.documents,
        tokens: summary.tokens,
    });
    Ok((summary, staged))
}

/// Why the reader and workers should stop: Ctrl-C, or the writer is done (finished or failed).
struct Stop {
    user: Cancel,
    done: Cancel,
}

impl Stop {
    fn is_set(&self) -> bool {
        self.user.is_cancelled() || self.done.is_cancelled()
    }
}

/// The ordered writer's state.
struct Writer<'c> {
    cfg: &'c PreprocessConfig,
    summary: Summary,
    progress: Progress,
    snapshot: ProgressSnapshot,
}

impl Writer<'_> {
    fn write_in_order(
        &mut self,
        done_rx: &Receiver<Job>,
        slot_tx: &Sender<()>,
        outputs: &mut Outputs,
        spares: &Spares,
        cancel: &Cancel,
    ) -> Result<()> {
        let mut pending: BTreeMap<u64, Job> = BTreeMap::new();
        let mut next = 0u64;
        loop {
            // Wake up now and then to notice Ctrl-C while a worker is busy with a long batch.
            let done = match done_rx.recv_timeout(std::time::Duration::from_millis(100)) {
                Ok(done) => done,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    cancel.check()?;
                    continue;
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            };
            pending.insert(done.seq, done);
            while let Some(done) = pending.remove(&next) {
                cancel.check()?;
                let path = &self.cfg.inputs[done.file];
                match done.item {
                    Item::Encoded { first_line, encoded } => {
                        self.summary.skips.rejected(self.cfg.on_error, path, first_line, &encoded.rejected)?;
                        outputs.write(done.global_line, &encoded)?;
                        self.summary.lines += encoded.lines as u64;
                        self.snapshot.documents += encoded.document_lines.len() as u64;
                        self.snapshot.tokens += encoded.keys.iter().map(|k| k.tokens.len() as u64).sum::<u64>();
                        if let Some(key) = encoded.keys.into_iter().next() {
                            spares.tokens.give(key.tokens);
                        }
                    }
                    Item::Read(Step::Problem(problem)) => {
                        self.summary.skips.problem(self.cfg.on_error, path, problem)?
                    }
                    Item::Read(Step::FileEnd { compressed, decompressed }) => {
                        self.summary.input_bytes += compressed;
                        self.summary.decompressed_bytes += decompressed;
                    }
                    Item::Read(Step::Batch(_)) | Item::Parsed(_) => unreachable!("workers encode every batch"),
                }
                self.snapshot.bytes = done.input_pos;
                self.progress.update(self.snapshot);
                next += 1;
                let _ = slot_tx.send(());
            }
        }
        if !pending.is_empty() {
            // A worker died with a batch: never write around the hole.
            return Err(Error::invalid(format!("internal error: batch {next} of the input was lost")));
        }
        Ok(())
    }
}
