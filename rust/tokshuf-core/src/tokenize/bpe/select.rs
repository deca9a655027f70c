//! Which resolved tokenizer models the fast encoder serves (called by `tokenize::build`): every
//! tiktoken-style model whose split pattern has a scanner, and every `tokenizer.json` that
//! [`FastBpe::from_hf_json`] accepts. The rest keep `tiktoken-rs` / the `tokenizers` crate.

use super::{FastBpe, Pattern};
use crate::tokenize::model::{BpeModel, HfModel};
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
    let pattern = Pattern::from_regex(m.pattern.regex())?;
    // A vocabulary the fast encoder rejects (e.g. not every byte is a token) stays with tiktoken-rs.
    let fast = FastBpe::from_ranks(m.ranks.entries.clone(), pattern, m.specials.clone(), m.spec.clone()).ok()?;
    Some(fast.with_eod(m.endoftext()).with_identity(tiktoken::identity(m)))
}

/// The fast encoder of a Hugging Face model, if the file is one it reproduces exactly. Like the
/// `tokenizers` path, special tokens written in the text are matched (Megatron's
/// HuggingFaceTokenizer behaviour) and the eos token follows `tokenizer_config.json`.
pub fn for_hf_model(m: &HfModel) -> Result<Option<FastBpe>> {
    if !enabled() {
        return Ok(None);
    }
    let Ok(fast) = FastBpe::from_hf_json(&m.json) else { return Ok(None) };
    let (eod_token, eod) = hf::eod(m, |t| fast.hf_token_id(t))?;
    let identity = hf::identity(m, super::super::Tokenizer::vocab_size(&fast), eod, eod_token.as_deref());
    Ok(Some(fast.with_special_tokens_in_text(true).with_eod(eod).with_identity(identity)))
}
