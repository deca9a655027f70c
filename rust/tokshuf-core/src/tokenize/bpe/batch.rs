//! Many texts at once, on a thread pool, into one flat id buffer plus offsets.

use rayon::prelude::*;

use super::FastBpe;
use crate::{Cancel, Result};

/// The ids of a batch: document `i` is `ids[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EncodedBatch {
    pub ids: Vec<u32>,
    /// `texts.len() + 1` offsets, starting at 0.
    pub offsets: Vec<u64>,
}

/// Texts per unit of parallel work: about this many bytes.
const CHUNK_BYTES: usize = 1 << 20;

impl FastBpe {
    /// Encode `texts` with `threads` threads (`None`: the default pool size). The output is the
    /// same for every thread count.
    pub fn encode_batch(&self, texts: &[&str], threads: Option<usize>, cancel: &Cancel) -> Result<EncodedBatch> {
        // Chunks of consecutive texts of about CHUNK_BYTES each.
        let mut bounds = vec![0];
        let mut acc = 0;
        for (i, t) in texts.iter().enumerate() {
            acc += t.len();
            if acc >= CHUNK_BYTES {
                bounds.push(i + 1);
                acc = 0;
            }
        }
        if *bounds.last().unwrap_or(&0) != texts.len() {
            bounds.push(texts.len());
        }
        let encode_chunk = |w: &[usize]| -> Result<(Vec<u32>, Vec<u64>)> {
            cancel.check()?;
            let chunk = &texts[w[0]..w[1]];
            let mut ids = Vec::with_capacity(chunk.iter().map(|t| t.len() / 3).sum());
            let mut lens = Vec::with_capacity(chunk.len());
            for t in chunk {
                let before = ids.len();
                self.encode_into(t, &mut ids);
                lens.push((ids.len() - before) as u64);
            }
            Ok((ids, lens))
        };
        let threads = threads.unwrap_or_else(crate::parallel::default_threads).max(1);
        let parts: Vec<(Vec<u32>, Vec<u64>)> = if threads == 1 || bounds.len() <= 2 {
            bounds.windows(2).map(encode_chunk).collect::<Result<_>>()?
        } else {
            crate::parallel::pool(Some(threads))
                .install(|| bounds.par_windows(2).map(encode_chunk).collect::<Result<_>>())?
        };
        let total = parts.iter().map(|p| p.0.len()).sum();
        let mut out = EncodedBatch { ids: Vec::with_capacity(total), offsets: Vec::with_capacity(texts.len() + 1) };
        out.offsets.push(0);
        for (ids, lens) in parts {
            out.ids.extend_from_slice(&ids);
            for l in lens {
                let last = *out.offsets.last().expect("non-empty");
                out.offsets.push(last + l);
            }
        }
        Ok(out)
    }
}
