//! Stage 1 ("coarse shuffle"): JSON lines → tokens → contexts → local cells.
//!
//! The threads are those of `preprocess`: a reader splits files into batches of lines, `threads`
//! workers tokenize them, and this thread (the collector) takes the results strictly in input
//! order and cuts contexts, so contexts and their ids never depend on timing. Encoding a context
//! (JSON + gzip) is the other costly step: the collector hands contexts back to the same workers
//! in chunks, and files the encoded records into the run buffer under the cell that a hash of
//! (seed, context id) picks. When the buffer is full the collector waits for the chunks in
//! flight and hands the buffer, with its reading position, to a thread that writes the run and
//! then saves the position (the checkpoint), while a fresh buffer fills.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use std::time::Duration;

use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};

use super::cells::RunBuffer;
use super::config::ShuffleConfig;
use super::contexts::Cutter;
use super::encode::Encoder;
use super::input::open_counted;
use super::progress::Progress;
use super::rng::cell_of;
use super::state::{run_path, save, State};
use super::summary::SkipRecord;
use super::{context_id, crash_point};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::preprocess::{encode_batch, EncodedBatch, ErrorPolicy};
use crate::read::lines::{LineBatch, LineReader};
use crate::tokenize::Tokenizer;

/// Skipped lines listed individually in the summary.
const SKIP_EXAMPLES: usize = 20;
/// Contexts per encoding job.
const CHUNK_CONTEXTS: usize = 16;

struct TokenizeJob {
    seq: u64,
    file: usize,
    batch: LineBatch,
}

struct EncodeJob {
    first_id: u64,
    tokens: Vec<u32>,
}

enum Work {
    Tokenize(TokenizeJob),
    Encode(EncodeJob),
}

/// Encoded contexts with consecutive ids.
struct EncodedChunk {
    first_id: u64,
    cells: Vec<u32>,
    lens: Vec<u32>,
    bytes: Vec<u8>,
}

/// Items the collector consumes in input order.
enum Ordered {
    Batch { file: usize, first_line: u64, lines: u64, encoded: EncodedBatch },
    FileEnd { file: usize, bytes: u64, decompressed: u64 },
    InputEnd,
}

enum Msg {
    Ordered(u64, Ordered),
    Encoded(EncodedChunk),
    /// The reader failed or was cancelled: stop waiting for input.
    ReaderStopped,
}

fn read_inputs(
    cfg: &ShuffleConfig,
    state: &State,
    work: &Sender<Work>,
    results: &Sender<Msg>,
    slots: &Receiver<()>,
    progress: &Progress,
    stop: &Cancel,
) -> Result<()> {
    let mut seq = 0u64;
    let start = &state.position;
    for file in start.file..cfg.inputs.len() {
        let path = &cfg.inputs[file];
        let skip = if file == start.file { start.lines } else { 0 };
        let mut reader = LineReader::new(path, open_counted(path, progress)?, cfg.batch_bytes, cfg.max_line_bytes);
        while let Some(mut batch) = reader.next_batch()? {
            stop.check()?;
            let before = batch.first_line - 1;
            if before + batch.len() as u64 <= skip {
                continue;
            }
            if before < skip {
                // Resuming inside this batch: drop the lines the checkpoint already covers.
                let k = (skip - before) as usize;
                batch.lines.drain(..k);
                batch.first_line += k as u64;
            }
            if slots.recv().is_err() || work.send(Work::Tokenize(TokenizeJob { seq, file, batch })).is_err() {
                return Ok(());
            }
            seq += 1;
        }
        let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let end = Ordered::FileEnd { file, bytes, decompressed: reader.offset() };
        if results.send(Msg::Ordered(seq, end)).is_err() {
            return Ok(());
        }
        seq += 1;
    }
    let _ = results.send(Msg::Ordered(seq, Ordered::InputEnd));
    Ok(())
}

fn worker(cfg: &ShuffleConfig, tokenizer: &dyn Tokenizer, work: &Receiver<Work>, results: &Sender<Msg>, stop: &Cancel) {
    let keys = [cfg.content_key.clone()];
    let mut encoder = Encoder::new(cfg.member_format);
    for item in work.iter() {
        if stop.is_cancelled() {
            continue;
        }
        let msg = match item {
            Work::Tokenize(job) => {
                let encoded = encode_batch(&job.batch, &keys, tokenizer, None);
                let ordered = Ordered::Batch {
                    file: job.file,
                    first_line: job.batch.first_line,
                    lines: job.batch.len() as u64,
                    encoded,
                };
                Msg::Ordered(job.seq, ordered)
            }
            Work::Encode(job) => {
                let n = job.tokens.len() / cfg.seqlen;
                let mut chunk = EncodedChunk {
                    first_id: job.first_id,
                    cells: Vec::with_capacity(n),
                    lens: Vec::with_capacity(n),
                    bytes: Vec::new(),
                };
                for (i, ctx) in job.tokens.chunks_exact(cfg.seqlen).enumerate() {
                    let before = chunk.bytes.len();
                    encoder.encode(ctx, &mut chunk.bytes);
                    chunk.lens.push((chunk.bytes.len() - before) as u32);
                    chunk.cells.push(cell_of(cfg.seed, job.first_id + i as u64, cfg.num_local_cells));
                }
                Msg::Encoded(chunk)
            }
        };
        if results.send(msg).is_err() {
            break;
        }
    }
}

/// The ordered half of stage 1: owns the state, the run buffer and the reorder buffer.
struct Collector<'a> {
    cfg: &'a ShuffleConfig,
    state: &'a mut State,
    progress: &'a Progress,
    work: Sender<Work>,
    results: &'a Receiver<Msg>,
    slots: &'a Sender<()>,
    buffer: RunBuffer,
    pending: BTreeMap<u64, Ordered>,
    next_seq: u64,
    chunk: Vec<u32>,
    chunk_first_id: u64,
    outstanding: usize,
    max_outstanding: usize,
    cancel: &'a Cancel,
    checkpoints: Sender<Checkpoint>,
}

/// A run to write and the state to save once it is durable.
struct Checkpoint {
    run: Option<(RunBuffer, PathBuf)>,
    state: Option<State>,
}

fn write_checkpoints(cfg: &ShuffleConfig, jobs: &Receiver<Checkpoint>) -> Result<()> {
    for job in jobs.iter() {
        if let Some((mut buffer, path)) = job.run {
            buffer.write(&path, cfg.num_local_cells)?;
            crash_point("run-written");
        }
        if let Some(state) = job.state {
            save(&cfg.local_cell_dir, &state)?;
            crash_point("checkpoint-saved");
        }
    }
    Ok(())
}

impl Collector<'_> {
    fn receive(&mut self) -> Result<()> {
        let msg = loop {
            match self.results.recv_timeout(Duration::from_millis(100)) {
                Ok(msg) => break msg,
                Err(RecvTimeoutError::Timeout) => self.cancel.check()?,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::invalid("stage 1 workers stopped unexpectedly"))
                }
            }
        };
        match msg {
            Msg::ReaderStopped => return Err(Error::Cancelled),
            Msg::Ordered(seq, item) => {
                self.pending.insert(seq, item);
            }
            Msg::Encoded(chunk) => {
                let mut offset = 0usize;
                for (i, (&cell, &len)) in chunk.cells.iter().zip(&chunk.lens).enumerate() {
                    let payload = &chunk.bytes[offset..offset + len as usize];
                    self.buffer.push(cell, chunk.first_id + i as u64, payload);
                    offset += len as usize;
                }
                self.state.counts.cell_bytes += chunk.bytes.len() as u64;
                self.outstanding -= 1;
            }
        }
        Ok(())
    }

    fn send_chunk(&mut self) -> Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        while self.outstanding >= self.max_outstanding {
            self.receive()?;
        }
        let n = (self.chunk.len() / self.cfg.seqlen) as u64;
        let tokens = std::mem::replace(&mut self.chunk, Vec::with_capacity(CHUNK_CONTEXTS * self.cfg.seqlen));
        let job = EncodeJob { first_id: self.chunk_first_id, tokens };
        self.chunk_first_id += n;
        self.work.send(Work::Encode(job)).map_err(|_| Error::invalid("stage 1 workers stopped unexpectedly"))?;
        self.outstanding += 1;
        Ok(())
    }

    /// Contexts were appended to the chunk; send it when full.
    fn after_contexts(&mut self) -> Result<()> {
        if self.chunk.len() >= CHUNK_CONTEXTS * self.cfg.seqlen {
            self.send_chunk()?;
        }
        Ok(())
    }

    fn skip_lines(&mut self, file: usize, first_line: u64, encoded: &EncodedBatch) -> Result<()> {
        let path = &self.cfg.inputs[file];
        if let (Some((i, reason, msg)), ErrorPolicy::Fail) = (encoded.rejected.first(), self.cfg.on_error) {
            return Err(Error::BadInput {
                path: path.clone(),
                line: first_line + u64::from(*i),
                reason: *reason,
                msg: msg.clone(),
            });
        }
        let counts = &mut self.state.counts;
        for (i, reason, msg) in &encoded.rejected {
            *counts.skipped.entry(reason.as_str().to_string()).or_default() += 1;
            if counts.first_skipped.len() < SKIP_EXAMPLES {
                counts.first_skipped.push(SkipRecord {
                    path: path.clone(),
                    line: first_line + u64::from(*i),
                    reason: reason.as_str().to_string(),
                    message: msg.clone(),
                });
            }
        }
        Ok(())
    }

    fn on_batch(&mut self, file: usize, first_line: u64, lines: u64, encoded: &EncodedBatch) -> Result<()> {
        debug_assert_eq!(file, self.state.position.file);
        self.skip_lines(file, first_line, encoded)?;
        let special = self.cfg.special;
        let seqlen = self.cfg.seqlen;
        let key = &encoded.keys[0];
        let (mut tok, mut seq) = (0usize, 0usize);
        for &n_seq in &key.document_sequences {
            let len: usize = key.sequence_lengths[seq..seq + n_seq as usize].iter().map(|&l| l as usize).sum();
            let ids = &key.tokens[tok..tok + len];
            tok += len;
            seq += n_seq as usize;
            if self.chunk.is_empty() {
                self.chunk_first_id = context_id(file, self.state.position.cutter.next_index);
            }
            self.state.position.cutter.push_document(ids, &special, seqlen, &mut self.chunk);
            let c = &mut self.state.counts;
            c.documents += 1;
            c.tokens += (len + 1 + usize::from(special.bos.is_some())) as u64;
            self.after_contexts()?;
        }
        self.state.position.lines = first_line - 1 + lines;
        self.state.counts.lines += lines;
        self.sync_progress();
        Ok(())
    }

    fn on_file_end(&mut self, file: usize, bytes: u64, decompressed: u64) -> Result<()> {
        if self.chunk.is_empty() {
            self.chunk_first_id = context_id(file, self.state.position.cutter.next_index);
        }
        let cutter = &mut self.state.position.cutter;
        if let Some(pads) = cutter.finish(&self.cfg.special, self.cfg.seqlen, self.cfg.all_pad_context, &mut self.chunk)
        {
            // The other tokens of that context were counted with their documents.
            self.state.counts.pad_tokens += pads;
        }
        self.send_chunk()?;
        let pos = &mut self.state.position;
        pos.file = file + 1;
        pos.lines = 0;
        pos.cutter = Cutter::default();
        let c = &mut self.state.counts;
        c.files_done += 1;
        c.input_bytes += bytes;
        c.decompressed_bytes += decompressed;
        self.progress.files_done(c.files_done);
        self.sync_progress();
        Ok(())
    }

    fn sync_progress(&self) {
        let c = &self.state.counts;
        self.progress.tokens(c.tokens);
        self.progress.contexts(self.contexts_emitted());
    }

    fn contexts_emitted(&self) -> u64 {
        self.state.counts.contexts + (self.buffer.len() as u64)
    }

    /// Wait for every chunk in flight, then hand the buffer and the position to the checkpoint
    /// thread (which writes the run, then saves the state) and go on with a fresh buffer. Only
    /// one checkpoint is in flight: this waits for the previous one.
    fn checkpoint(&mut self) -> Result<()> {
        self.send_chunk()?;
        while self.outstanding > 0 {
            self.receive()?;
        }
        self.cancel.check()?;
        let mut job = Checkpoint { run: None, state: None };
        if !self.buffer.is_empty() {
            let n = self.buffer.len() as u64;
            let full = std::mem::replace(&mut self.buffer, RunBuffer::with_capacity(self.cfg.buffer_bytes + (1 << 20)));
            job.run = Some((full, run_path(&self.cfg.local_cell_dir, self.state.runs)));
            self.state.runs += 1;
            self.state.counts.contexts += n;
        }
        self.progress.contexts(self.state.counts.contexts);
        job.state = Some(self.state.clone());
        self.checkpoints.send(job).map_err(|_| Error::invalid("the stage 1 checkpoint thread stopped"))
    }

    fn run(&mut self) -> Result<()> {
        loop {
            while let Some(item) = self.pending.remove(&self.next_seq) {
                self.cancel.check()?;
                self.next_seq += 1;
                match item {
                    Ordered::Batch { file, first_line, lines, encoded } => {
                        self.on_batch(file, first_line, lines, &encoded)?;
                        let _ = self.slots.send(());
                    }
                    Ordered::FileEnd { file, bytes, decompressed } => self.on_file_end(file, bytes, decompressed)?,
                    Ordered::InputEnd => return self.checkpoint(),
                }
                if self.buffer.bytes() >= self.cfg.buffer_bytes {
                    self.checkpoint()?;
                }
            }
            self.receive()?;
        }
    }
}

/// Run stage 1 from `state.position` to the end of the input; `state` is checkpointed as it goes.
pub(super) fn run(
    cfg: &ShuffleConfig,
    tokenizer: Arc<dyn Tokenizer>,
    state: &mut State,
    progress: &Progress,
    cancel: &Cancel,
) -> Result<()> {
    let in_flight = 2 * cfg.threads + 2;
    let (work_tx, work_rx) = unbounded::<Work>();
    let (result_tx, result_rx) = unbounded::<Msg>();
    let (slot_tx, slot_rx) = bounded::<()>(in_flight);
    for _ in 0..in_flight {
        slot_tx.send(()).expect("capacity");
    }
    let stop = cancel.clone();
    let snapshot = state.clone();
    std::thread::scope(|s| -> Result<()> {
        let reader = {
            let (work, results, slots, stop, snapshot) =
                (work_tx.clone(), result_tx.clone(), slot_rx.clone(), stop.clone(), &snapshot);
            s.spawn(move || {
                let r = read_inputs(cfg, snapshot, &work, &results, &slots, progress, &stop);
                if r.is_err() {
                    stop.cancel();
                    let _ = results.send(Msg::ReaderStopped);
                }
                r
            })
        };
        for _ in 0..cfg.threads {
            let (work, results, stop, tokenizer) = (work_rx.clone(), result_tx.clone(), stop.clone(), &tokenizer);
            s.spawn(move || worker(cfg, tokenizer.as_ref(), &work, &results, &stop));
        }
        drop(result_tx);
        drop(work_rx);
        let (checkpoint_tx, checkpoint_rx) = bounded::<Checkpoint>(0);
        let checkpointer = s.spawn(move || write_checkpoints(cfg, &checkpoint_rx));
        let mut collector = Collector {
            cfg,
            buffer: RunBuffer::with_capacity(cfg.buffer_bytes + (1 << 20)),
            state: &mut *state,
            progress,
            work: work_tx,
            results: &result_rx,
            slots: &slot_tx,
            pending: BTreeMap::new(),
            next_seq: 0,
            chunk: Vec::new(),
            chunk_first_id: 0,
            outstanding: 0,
            max_outstanding: in_flight,
            cancel: &stop,
            checkpoints: checkpoint_tx,
        };
        let collected = collector.run();
        if collected.is_err() {
            stop.cancel();
        }
        // Let every thread finish: close the work queue and the slots, drain the results.
        drop(collector);
        drop(slot_tx);
        drop(slot_rx);
        for _ in result_rx.iter() {}
        let read = reader.join().unwrap_or_else(|_| Err(Error::invalid("the stage 1 reader panicked")));
        let checkpointed =
            checkpointer.join().unwrap_or_else(|_| Err(Error::invalid("the stage 1 checkpoint thread panicked")));
        match (collected, read) {
            (_, _) if checkpointed.is_err() => checkpointed,
            (Err(e), _) if !matches!(e, Error::Cancelled) => Err(e),
            (_, Err(e)) if !matches!(e, Error::Cancelled) => Err(e),
            (Err(e), _) | (_, Err(e)) => Err(e),
            (Ok(()), Ok(())) => cancel.check(),
        }
    })
}
