//! The trait every encoder implements, and what is defined on it alone: the identity of a run's
//! outputs, an end-of-document id set by the user.

use std::sync::Arc;

use crate::error::{Error, Result};

/// Room for the ids of `bytes` of text: half an id per byte, more than a BPE vocabulary writes
/// for English (GPT-2: 0.37), so a buffer given this room is rarely grown; the pages past what is
/// written are never touched.
pub(crate) fn ids_room(bytes: usize) -> usize {
    bytes / 2 + 16
}

/// Text → token ids. Implementations are shared by every worker thread.
pub trait Tokenizer: Send + Sync {
    /// Append the ids of `text` to `out` (no special tokens added).
    fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String>;

    /// The end-of-document id appended by `--append-eod`, if the tokenizer has one.
    fn eod_id(&self) -> Option<u32>;

    /// Number of ids (used to pick the smallest output dtype).
    fn vocab_size(&self) -> u64;

    /// Append the ids of each of `texts` to `out` and, after each, `out.len()` to `ends`. On the
    /// first text the tokenizer rejects: its index in `texts` and why (what was appended for the
    /// texts before it stays). Encoders with per-call state override it to set up once per call.
    fn encode_each(&self, texts: &[&str], out: &mut Vec<u32>, ends: &mut Vec<u64>) -> Result<(), (usize, String)> {
        for (i, text) in texts.iter().enumerate() {
            self.encode(text, out).map_err(|msg| (i, msg))?;
            ends.push(out.len() as u64);
        }
        Ok(())
    }

    /// A JSON object identifying the tokenizer (recorded in summaries and cache keys).
    fn identity(&self) -> serde_json::Value;

    /// Called by long jobs (preprocess, shuffle) before they start: a tokenizer with caches
    /// allocates them whole now, so that the job's memory is the same from its first document to
    /// its last. One-off calls keep small caches that grow with use.
    fn prepare_for_long_job(&self) {}
}

/// A tokenizer's identity without the fields that say how it runs (which encoder, and why not
/// the fast one): what the ids, and so a run's outputs, depend on.
pub fn output_identity(tokenizer: &dyn Tokenizer) -> serde_json::Value {
    let mut id = tokenizer.identity();
    if let Some(obj) = id.as_object_mut() {
        obj.remove("encoder");
        obj.remove("fast_bpe_unsupported");
    }
    id
}

/// `tokenizer` with its end-of-document id replaced by `eod` (`--eod-id`).
pub fn with_eod(tokenizer: Arc<dyn Tokenizer>, eod: u32) -> Result<Arc<dyn Tokenizer>> {
    if u64::from(eod) >= tokenizer.vocab_size() {
        return Err(Error::invalid(format!(
            "eod id {eod} is outside the tokenizer's vocabulary (ids 0..{})",
            tokenizer.vocab_size()
        )));
    }
    Ok(Arc::new(EodOverride { inner: tokenizer, eod }))
}

struct EodOverride {
    inner: Arc<dyn Tokenizer>,
    eod: u32,
}

impl Tokenizer for EodOverride {
    fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        self.inner.encode(text, out)
    }

    fn encode_each(&self, texts: &[&str], out: &mut Vec<u32>, ends: &mut Vec<u64>) -> Result<(), (usize, String)> {
        self.inner.encode_each(texts, out, ends)
    }

    fn eod_id(&self) -> Option<u32> {
        Some(self.eod)
    }

    fn vocab_size(&self) -> u64 {
        self.inner.vocab_size()
    }

    fn prepare_for_long_job(&self) {
        self.inner.prepare_for_long_job();
    }

    fn identity(&self) -> serde_json::Value {
        let mut id = self.inner.identity();
        if let Some(obj) = id.as_object_mut() {
            obj.insert("eod".into(), self.eod.into());
            obj.insert("eod_overridden".into(), true.into());
        }
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::from_spec;

    #[test]
    fn eod_override_is_checked_and_recorded() {
        let t = with_eod(from_spec("byte").unwrap(), 7).unwrap();
        assert_eq!(t.eod_id(), Some(7));
        assert_eq!(t.identity()["eod"], 7);
        let e = with_eod(from_spec("byte").unwrap(), 257).err().unwrap().to_string();
        assert!(e.contains("0..257"), "{e}");
    }
}
