//! Which resolved tokenizer models the fast encoder serves (called by `tokenize::build`): every
//! tiktoken-style model, every `tokenizer.json` that [`FastBpe::from_hf_json`] accepts, and
//! SentencePiece models. The rest keep `tiktoken-rs` / the `tokenizers` crate, and say why.

use super::stored::Store;
use super::{hf as hf_json, sentencepiece, FastBpe};
use crate::tokenize::model::{BpeModel, HfModel, SentencePieceModel};
use crate::tokenize::{hf, tiktoken};
use crate::Result;

/// Set to `0` to use the reference encoders (`tiktoken-rs`, `tokenizers`) for every model.
pub const FAST_BPE_ENV: &str = "TOKSHUF_FAST_BPE";

fn enabled() -> bool {
    std::env::var(FAST_BPE_ENV).map_or(true, |v| v.trim() != "0")
}

/// The fast encoder of a tiktoken model (`encode_ordinary` semantics), if it has one.
pub fn for_tiktoken_model(m: &BpeModel) -> Option<FastBpe> {
    if !enabled() {
        return None;
    }
    // A vocabulary the fast encoder rejects (e.g. not every byte is a token) stays with tiktoken-rs.
    let fast = FastBpe::from_ranks(m.ranks.tokens.clone(), m.pattern, m.specials.clone(), m.spec.clone()).ok()?;
    Some(fast.with_eod(m.endoftext()).with_identity(tiktoken::identity(m)))
}

/// The fast encoder of a Hugging Face model if the file is one it reproduces exactly, else why
/// not (the first component of the file it does not implement). Like the `tokenizers` path,
/// added tokens written in the text are matched (Megatron's HuggingFaceTokenizer behaviour) and
/// the eos token follows `tokenizer_config.json`.
pub fn for_hf_model(m: &HfModel) -> Result<std::result::Result<FastBpe, String>> {
    if !enabled() {
        return Ok(Err(format!("{FAST_BPE_ENV}=0")));
    }
    let store = Store::for_source(&m.sha256, "hf-json");
    let fast = match hf_json::load(|| m.json.get(), store)? {
        Ok(prepared) => FastBpe::from_hf(prepared),
        Err(why) => return Ok(Err(why.0)),
    };
    let (eod_token, eod) = hf::eod(m, |t| fast.hf_token_id(t))?;
    let identity = hf::identity(m, super::super::Tokenizer::vocab_size(&fast), eod, eod_token.as_deref());
    Ok(Ok(fast.with_special_tokens_in_text(true).with_eod(eod).with_identity(identity)))
}

/// The encoder of a SentencePiece model (no other reads it; what this one does not is an error
/// naming the reason).
pub fn for_sentencepiece_model(m: &SentencePieceModel) -> Result<FastBpe> {
    let store = Store::for_source(&m.sha256, "sp-model");
    let prepared = sentencepiece::load(&m.bytes, store)
        .map_err(|e| crate::Error::invalid(format!("tokenizer {:?}: {}", m.spec, e.0)))?;
    let fast = FastBpe::from_sp(prepared, m.spec.clone());
    let identity = serde_json::json!({
        "kind": "sentencepiece",
        "spec": m.spec,
        "sha256": m.sha256,
        "vocab_size": super::super::Tokenizer::vocab_size(&fast),
        "eod": super::super::Tokenizer::eod_id(&fast),
    });
    Ok(fast.with_identity(identity))
}
