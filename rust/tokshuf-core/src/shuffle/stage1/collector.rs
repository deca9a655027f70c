//! The ordered half of stage 1: input order, context cutting, bad-input policy, checkpoints.

use std::collections::BTreeMap;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::messages::{Checkpoint, ChunkSpares, Msg, Ordered, Work};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::ingest::Spares;
use crate::preprocess::EncodedBatch;
use crate::progress::{Progress, ProgressSnapshot};
use crate::shuffle::cells::RunBuffer;
use crate::shuffle::config::ShuffleConfig;
use crate::shuffle::contexts::context_id;
use crate::shuffle::state::{run_path, Position, State};

/// Contexts per encoding job.
const CHUNK_CONTEXTS: usize = 16;

/// Tokens reserved up front for a chunk: a whole chunk for ordinary lengths, but no more than
/// 16 Mi tokens, so that a huge `seqlen` over a small input reserves only what arrives.
pub(super) fn chunk_reserve(seqlen: usize) -> usize {
    CHUNK_CONTEXTS.saturating_mul(seqlen).min(16 << 20)
}

/// What the collector exchanges with the other threads of stage 1.
pub(super) struct Links<'a> {
    pub work: Sender<Work>,
    pub results: &'a Receiver<Msg>,
    pub slots: &'a Sender<()>,
    pub checkpoints: Sender<Checkpoint>,
    /// Where the token buffers of cut batches go back to the workers.
    pub spares: &'a Spares,
    pub chunk_spares: &'a ChunkSpares,
    pub cancel: &'a Cancel,
}

pub(super) struct Collector<'a> {
    cfg: &'a ShuffleConfig,
    state: &'a mut State,
    links: Links<'a>,
    buffer: RunBuffer,
    pending: BTreeMap<u64, Ordered>,
    next_seq: u64,
    /// Contexts waiting to be sent for encoding (consecutive ids from `chunk_first_id`).
    chunk: Vec<u32>,
    chunk_first_id: u64,
    outstanding: usize,
    max_outstanding: usize,
    progress: Progress,
    /// Progress of this invocation (a resumed run counts from its checkpoint).
    snapshot: ProgressSnapshot,
    /// Documents and tokens before the checkpoint this invocation started from.
    base: (u64, u64),
}

impl<'a> Collector<'a> {
    pub fn new(
        cfg: &'a ShuffleConfig,
        state: &'a mut State,
        links: Links<'a>,
        max_outstanding: usize,
        remaining: u64,
    ) -> Self {
        let base = (state.counts.documents, state.counts.tokens);
        Self {
            cfg,
            state,
            links,
            buffer: RunBuffer::default(),
            pending: BTreeMap::new(),
            next_seq: 0,
            chunk: Vec::new(),
            chunk_first_id: 0,
            outstanding: 0,
            max_outstanding,
            progress: Progress::new(cfg.progress, "shuffle-cells", remaining),
            snapshot: ProgressSnapshot::default(),
            base,
        }
    }

    fn receive(&mut self) -> Result<()> {
        let msg = loop {
            // Wake up now and then to notice Ctrl-C while every worker is busy.
            match self.links.results.recv_timeout(Duration::from_millis(100)) {
                Ok(msg) => break msg,
                Err(RecvTimeoutError::Timeout) => self.links.cancel.check()?,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::invalid("stage 1 workers stopped unexpectedly"))
                }
            }
        };
        match msg {
            Msg::Ordered { seq, item } => {
                self.pending.insert(seq, item);
            }
            Msg::Encoded { cells, bytes } => {
                self.state.counts.cell_bytes += self.buffer.push_records(bytes, &cells) as u64;
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
        let mut next = self.links.chunk_spares.tokens.take();
        next.clear();
        next.reserve(chunk_reserve(self.cfg.seqlen));
        let tokens = std::mem::replace(&mut self.chunk, next);
        let job = Work::Encode { first_id: self.chunk_first_id, tokens };
        self.chunk_first_id += n;
        self.links.work.send(job).map_err(|_| Error::invalid("stage 1 workers stopped unexpectedly"))?;
        self.outstanding += 1;
        Ok(())
    }

    /// The id of the next context cut from `file`, if the chunk starts with it.
    fn mark_chunk_start(&mut self, file: usize) {
        if self.chunk.is_empty() {
            self.chunk_first_id = context_id(file, self.state.position.cutter.next_index);
        }
    }

    fn on_batch(&mut self, file: usize, first_line: u64, lines: u64, encoded: &EncodedBatch) -> Result<()> {
        debug_assert_eq!(file, self.state.position.file);
        let path = &self.cfg.inputs[file];
        self.state.counts.skips.rejected(self.cfg.on_error, path, first_line, &encoded.rejected)?;
        let (special, seqlen) = (self.cfg.special, self.cfg.seqlen);
        let key = &encoded.keys[0];
        let (mut tok, mut seq) = (0usize, 0usize);
        for &n_seq in &key.document_sequences {
            let len: usize = key.sequence_lengths[seq..seq + n_seq as usize].iter().map(|&l| l as usize).sum();
            let ids = &key.tokens[tok..tok + len];
            tok += len;
            seq += n_seq as usize;
            self.mark_chunk_start(file);
            self.state.position.cutter.push_document(ids, &special, seqlen, &mut self.chunk);
            let c = &mut self.state.counts;
            c.documents += 1;
            c.tokens += (len + 1 + usize::from(special.bos.is_some())) as u64;
            if self.chunk.len() >= CHUNK_CONTEXTS.saturating_mul(seqlen) {
                self.send_chunk()?;
            }
        }
        self.state.position.lines = first_line - 1 + lines;
        self.state.counts.lines += lines;
        Ok(())
    }

    fn on_file_end(&mut self, file: usize, bytes: u64, decompressed: u64) -> Result<()> {
        self.mark_chunk_start(file);
        let (special, seqlen, quirk) = (self.cfg.special, self.cfg.seqlen, self.cfg.all_pad_context);
        if let Some(pads) = self.state.position.cutter.finish(&special, seqlen, quirk, &mut self.chunk) {
            // The other tokens of that context were counted with their documents.
            self.state.counts.pad_tokens += pads;
        }
        self.send_chunk()?;
        self.state.position = Position { file: file + 1, ..Position::default() };
        let c = &mut self.state.counts;
        c.files_done += 1;
        c.input_bytes += bytes;
        c.decompressed_bytes += decompressed;
        Ok(())
    }

    /// Wait for every chunk in flight, then hand the buffer and the position to the checkpoint
    /// thread (which writes the run, then saves the state) and go on with a fresh buffer. Only
    /// one checkpoint is in flight: this waits for the previous one.
    fn checkpoint(&mut self) -> Result<()> {
        self.send_chunk()?;
        while self.outstanding > 0 {
            self.receive()?;
        }
        self.links.cancel.check()?;
        let mut run = None;
        if !self.buffer.is_empty() {
            let n = self.buffer.len() as u64;
            run = Some((std::mem::take(&mut self.buffer), run_path(&self.cfg.local_cell_dir, self.state.runs)));
            self.state.runs += 1;
            self.state.counts.contexts += n;
        }
        let job = Checkpoint { run, state: self.state.clone() };
        self.links.checkpoints.send(job).map_err(|_| Error::invalid("the stage 1 checkpoint thread stopped"))
    }

    pub fn run(&mut self) -> Result<()> {
        loop {
            while let Some(item) = self.pending.remove(&self.next_seq) {
                self.links.cancel.check()?;
                self.next_seq += 1;
                // A file's problem is counted now, its end next: a checkpoint between the two
                // would resume inside the file and count the problem again.
                let mid_file = matches!(item, Ordered::Problem { .. });
                match item {
                    Ordered::Batch { file, first_line, lines, input_pos, encoded } => {
                        self.on_batch(file, first_line, lines, &encoded)?;
                        if let Some(key) = encoded.keys.into_iter().next() {
                            self.links.spares.tokens.give(key.tokens);
                        }
                        self.snapshot.bytes = input_pos;
                        let _ = self.links.slots.send(());
                    }
                    Ordered::Problem { file, problem } => {
                        // As `preprocess` does under `skip`: what was read of a truncated file is
                        // kept, and the file listed.
                        self.state.counts.skips.problem(self.cfg.on_error, &self.cfg.inputs[file], problem)?
                    }
                    Ordered::FileEnd { file, bytes, decompressed, input_pos } => {
                        self.on_file_end(file, bytes, decompressed)?;
                        self.snapshot.bytes = input_pos;
                    }
                    Ordered::InputEnd => {
                        self.checkpoint()?;
                        self.progress.finish(self.snapshot);
                        return Ok(());
                    }
                }
                self.snapshot.documents = self.state.counts.documents - self.base.0;
                self.snapshot.tokens = self.state.counts.tokens - self.base.1;
                self.progress.update(self.snapshot);
                if !mid_file && self.buffer.bytes() >= self.cfg.buffer_bytes {
                    self.checkpoint()?;
                }
            }
            self.receive()?;
        }
    }
}
