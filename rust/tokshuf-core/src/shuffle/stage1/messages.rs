//! What stage 1's threads send one another: the reader's and the collector's jobs for the
//! workers, the results the collector takes in input order, the buffers that go back, and the
//! checkpoints it hands to the writer of runs.

use std::path::PathBuf;

use crate::ingest::{Pool, Problem};
use crate::preprocess::EncodedBatch;
use crate::read::lines::LineBatch;
use crate::shuffle::cells::RunBuffer;
use crate::shuffle::state::State;

pub(super) enum Work {
    /// Item `seq` of the input, a batch of `file`; `input_pos`: input bytes (on disk, from the
    /// first file read) consumed once it is done.
    Tokenize { seq: u64, file: usize, input_pos: u64, batch: LineBatch },
    /// Contexts to encode, `seqlen` tokens each, with consecutive ids from `first_id`.
    Encode { first_id: u64, tokens: Vec<u32> },
}

/// The buffers of context chunks, handed back for the next chunk: the tokens of a chunk (the
/// collector cuts, a worker encodes) and its encoded records (a worker encodes, the run buffer
/// holds them until its run is written). Fresh ones, each a little over glibc's mmap threshold,
/// were mapped and faulted in chunk after chunk.
pub(super) struct ChunkSpares {
    pub tokens: Pool<u32>,
    pub members: Pool<u8>,
}

impl ChunkSpares {
    /// `count` token buffers for chunks of about `chunk_tokens` tokens, and as many record
    /// buffers plus those of a run of `run_bytes` (at a byte a token at least).
    pub fn new(count: usize, chunk_tokens: usize, run_bytes: usize) -> ChunkSpares {
        let tokens = chunk_tokens.saturating_mul(2);
        let per_run = (run_bytes / chunk_tokens.max(1)).min(4096);
        ChunkSpares {
            tokens: Pool::new(count, tokens.saturating_mul(4)),
            // A json.gz member may exceed its tokens' bytes a little; an npy one adds a header.
            members: Pool::new(count + per_run, tokens.saturating_mul(8)),
        }
    }
}

/// Items the collector consumes in input order.
pub(super) enum Ordered {
    Batch { file: usize, first_line: u64, lines: u64, input_pos: u64, encoded: EncodedBatch },
    Problem { file: usize, problem: Problem },
    FileEnd { file: usize, bytes: u64, decompressed: u64, input_pos: u64 },
    InputEnd,
}

pub(super) enum Msg {
    /// Item `seq` of the input, in order.
    Ordered { seq: u64, item: Ordered },
    /// Encoded contexts: records as the run file holds them
    /// ([`crate::shuffle::cells::push_record`]), the i-th for cell `cells[i]`.
    Encoded { cells: Vec<u32>, bytes: Vec<u8> },
}

/// A run to write and the state to save once it is durable.
pub(super) struct Checkpoint {
    pub run: Option<(RunBuffer, PathBuf)>,
    pub state: State,
}
