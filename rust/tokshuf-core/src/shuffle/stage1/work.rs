//! The workers of stage 1: tokenize batches of lines, and encode chunks of contexts.

use crossbeam_channel::{Receiver, Sender};

use super::messages::{ChunkSpares, Msg, Ordered, Work};
use crate::cancel::Cancel;
use crate::ingest::Spares;
use crate::preprocess::{encode_batch, DocumentRules};
use crate::read::FieldOptions;
use crate::shuffle::cells::{push_record, RECORD_HEADER};
use crate::shuffle::config::ShuffleConfig;
use crate::shuffle::encode::Encoder;
use crate::shuffle::rng::cell_of;
use crate::tokenize::Tokenizer;

/// Serve jobs until the queue closes. `cancel` is the caller's (Ctrl-C), `stop` the pipeline's.
#[allow(clippy::too_many_arguments)]
pub(super) fn worker(
    cfg: &ShuffleConfig,
    tokenizer: &dyn Tokenizer,
    work: &Receiver<Work>,
    results: &Sender<Msg>,
    spares: &Spares,
    chunk_spares: &ChunkSpares,
    cancel: &Cancel,
    stop: &Cancel,
) {
    let keys = [cfg.content_key.clone()];
    // Documents are built by the cutter (BOS, EOT): no end-of-document id here.
    let rules = DocumentRules { keys: &keys, eod: None, fields: FieldOptions { sentence_lists: true } };
    let mut encoder = Encoder::new(cfg.member_format);
    for item in work.iter() {
        if stop.is_cancelled() || cancel.is_cancelled() {
            continue;
        }
        let msg = match item {
            Work::Tokenize { seq, file, input_pos, batch } => {
                let encoded = encode_batch(&batch, &rules, tokenizer, cancel, spares.tokens.take());
                let (first_line, lines) = (batch.first_line, batch.len() as u64);
                spares.data.give(batch.data);
                Msg::Ordered { seq, item: Ordered::Batch { file, first_line, lines, input_pos, encoded } }
            }
            Work::Encode { first_id, tokens } => {
                let n = tokens.len() / cfg.seqlen;
                let mut bytes = chunk_spares.members.take();
                bytes.clear();
                // Enough for npy members: a block that grew would be copied into fresh pages.
                bytes.reserve(n * (RECORD_HEADER + cfg.member_format.member_bytes(cfg.seqlen)));
                let mut cells = Vec::with_capacity(n);
                for (i, ctx) in tokens.chunks_exact(cfg.seqlen).enumerate() {
                    let id = first_id + i as u64;
                    push_record(&mut bytes, id, |out| encoder.encode(ctx, out));
                    cells.push(cell_of(cfg.seed, id, cfg.num_local_cells));
                }
                chunk_spares.tokens.give(tokens);
                Msg::Encoded { cells, bytes }
            }
        };
        if results.send(msg).is_err() {
            break;
        }
    }
}
