//! Tokenizers behind one trait, so the pipeline does not care which one it runs.
//!
//! A spec string is parsed ([`TokenizerSpec`]), resolved into a loaded description
//! ([`TokenizerModel`]: vocabulary, split pattern, special tokens) and built into an encoder
//! ([`build`]). Callers use [`from_spec`] (or [`build`] on a model they resolved themselves);
//! which encoder serves a model is decided in [`build`] alone.
//!
//! The fast encoder and the vocabulary formats it reads (tiktoken's encodings table, rank files,
//! `tokenizer.json`, SentencePiece and Tekken files, split patterns) are the `tokshuf-bpe`
//! crate, here as [`bpe`]; this module adds specs, models and the trait around it.

mod batch;
mod byte;
mod fast_bpe;
mod hf;
mod model;
mod spec;
mod tiktoken;

pub use tokshuf_bpe as bpe;

use std::sync::Arc;

pub use batch::{encode_many, EncodedTexts};
pub use bpe::FastBpe;
pub use byte::ByteTokenizer;
pub use hf::HfTokenizer;
pub use model::{resolve, BpeModel, HfModel, JsonText, SentencePieceModel, TokenizerModel};
pub use spec::TokenizerSpec;
pub use tiktoken::TiktokenTokenizer;

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

/// Build the encoder of a resolved model.
pub fn build(model: &TokenizerModel) -> Result<Arc<dyn Tokenizer>> {
    Ok(match model {
        TokenizerModel::Byte => Arc::new(ByteTokenizer),
        // The byte-level BPE families take the fast exact encoder when it supports the model.
        TokenizerModel::Bpe(m) => match fast_bpe::for_tiktoken_model(m) {
            Some(fast) => Arc::new(fast),
            None => Arc::new(TiktokenTokenizer::new(m)?),
        },
        TokenizerModel::Hf(m) => match fast_bpe::for_hf_model(m)? {
            Ok(fast) => Arc::new(fast),
            Err(why) => Arc::new(HfTokenizer::new(m)?.with_fallback_reason(why)),
        },
        // No other encoder reads these; what the fast one does not read is an error.
        TokenizerModel::SentencePiece(m) => Arc::new(fast_bpe::for_sentencepiece_model(m)?),
    })
}

/// `model` with `specials` declared as its special tokens (a tiktoken rank file has none of its
/// own, so that, e.g., the real end-of-document id can be appended). Each id must be free: above
/// every rank, and given once.
pub fn with_special_tokens(model: TokenizerModel, specials: Vec<(String, u32)>) -> Result<TokenizerModel> {
    let TokenizerModel::Bpe(mut m) = model else {
        return Err(Error::invalid(
            "special tokens can be declared for tiktoken rank files only (a tokenizer.json, a SentencePiece \
             model and the built-in encodings carry their own)",
        ));
    };
    let ranks = m.ranks.n_vocab();
    for (text, id) in &specials {
        if text.is_empty() {
            return Err(Error::invalid("a declared special token is the empty string"));
        }
        if u64::from(*id) < ranks {
            return Err(Error::invalid(format!(
                "the special token {text:?} has id {id}, which is a rank of the vocabulary (ranks are 0..{ranks})"
            )));
        }
        if let Some((other, _)) = m.specials.iter().chain(&specials).find(|(t, i)| i == id && t != text) {
            return Err(Error::invalid(format!("the special tokens {other:?} and {text:?} both have id {id}")));
        }
    }
    m.specials.retain(|(t, _)| !specials.iter().any(|(s, _)| s == t));
    m.specials.extend(specials);
    Ok(TokenizerModel::Bpe(m))
}

/// Resolve a tokenizer spec (see [`TokenizerSpec::parse`]) into a shared tokenizer.
pub fn from_spec(spec: &str) -> Result<Arc<dyn Tokenizer>> {
    build(&resolve(&TokenizerSpec::parse(spec)?)?)
}

/// [`from_spec`], with special tokens declared for a rank file (see [`with_special_tokens`]).
pub fn from_spec_with_specials(spec: &str, specials: Option<Vec<(String, u32)>>) -> Result<Arc<dyn Tokenizer>> {
    let model = resolve(&TokenizerSpec::parse(spec)?)?;
    match specials {
        Some(s) => build(&with_special_tokens(model, s)?),
        None => build(&model),
    }
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

    #[test]
    fn special_tokens_are_declared_for_rank_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.tiktoken");
        let ranks: String = (0..=255u8)
            .map(|b| format!("{} {b}\n", base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [b])))
            .collect();
        std::fs::write(&path, ranks).unwrap();
        let model = resolve(&TokenizerSpec::parse(&format!("{}@cl100k", path.display())).unwrap()).unwrap();
        let declared = with_special_tokens(model.clone(), vec![("<|end_of_text|>".into(), 300)]).unwrap();
        let tok = build(&declared).unwrap();
        assert_eq!(tok.eod_id(), Some(300));
        assert_eq!(tok.vocab_size(), 301);
        let e = with_special_tokens(model.clone(), vec![("<x>".into(), 7)]).err().unwrap().to_string();
        assert!(e.contains("is a rank"), "{e}");
        let e = with_special_tokens(model, vec![("<x>".into(), 300), ("<y>".into(), 300)]).err().unwrap().to_string();
        assert!(e.contains("both have id 300"), "{e}");
        let e = with_special_tokens(TokenizerModel::Byte, vec![("<x>".into(), 300)]).err().unwrap().to_string();
        assert!(e.contains("rank files only"), "{e}");
    }

    #[test]
    fn eod_override_is_checked_and_recorded() {
        let t = with_eod(from_spec("byte").unwrap(), 7).unwrap();
        assert_eq!(t.eod_id(), Some(7));
        assert_eq!(t.identity()["eod"], 7);
        let e = with_eod(from_spec("byte").unwrap(), 257).err().unwrap().to_string();
        assert!(e.contains("0..257"), "{e}");
    }
}
