//! Hugging Face `tokenizer.json` through the `tokenizers` crate.
//!
//! Ids are those of `tokenizers.Tokenizer.encode(text, add_special_tokens=False)`, which is also
//! what Megatron-LM's `preprocess_data.py` writes with `--tokenizer-type HuggingFaceTokenizer`
//! (megatron-core 0.16: `text_to_ids` = `convert_tokens_to_ids(tokenize(text))` unless
//! `--tokenizer-hf-include-special-tokens`): no BOS/EOS from the post-processor, but added tokens
//! that appear literally in the text (e.g. `<|endoftext|>`) are recognised, as in `transformers`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::library::{Library, LibraryEncoder};
use super::model::HfModel;
use crate::error::{panic_message, Error, Result};

/// End-of-document tokens tried when no `tokenizer_config.json` names the eos token.
const EOD_CANDIDATES: &[&str] = &["<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>"];

/// A Hugging Face tokenizer.
pub type HfTokenizer = Library<tokenizers::Tokenizer>;

impl HfTokenizer {
    pub fn new(model: &HfModel) -> Result<Self> {
        let json = model.json.get()?;
        let unusable = |e: &dyn std::fmt::Display| {
            Error::invalid(format!("tokenizer {:?} is not a usable tokenizer.json: {e}", model.spec))
        };
        // Its regexes as Oniguruma (the Python package's engine) reads them, for fancy-regex.
        let rewritten = tokshuf_bpe::for_fancy_regex(json).map_err(|why| {
            Error::invalid(format!(
                "tokenizer {:?}: {why}; the `tokenizers` crate tokshuf runs this file on matches with \
                 fancy-regex, which would give other ids than the Python package (Oniguruma)",
                model.spec
            ))
        })?;
        let json = rewritten.as_deref().unwrap_or(json);
        // The library panics on some malformed components (a `Precompiled` normalizer's charsmap).
        let parsed = catch_unwind(AssertUnwindSafe(|| json.parse::<tokenizers::Tokenizer>()))
            .map_err(|panic| unusable(&panic_message(panic.as_ref(), "the tokenizers library panicked reading it")))?;
        let inner = parsed.map_err(|e| unusable(&e))?;
        let vocab = inner.get_vocab(true);
        let max_id = vocab.values().copied().max().map_or(0, |m| u64::from(m) + 1);
        let vocab_size = (inner.get_vocab_size(true) as u64).max(max_id);
        let (eod_token, eod) = eod(model, |t| inner.token_to_id(t))?;
        let identity = identity(model, vocab_size, eod, eod_token.as_deref());
        Ok(Self { encoder: inner, eod, vocab_size, identity })
    }

    /// Record in the identity that this encoder runs, and why the fast one does not (the first
    /// component of the file it does not implement).
    pub fn with_fallback_reason(mut self, why: String) -> Self {
        self.identity["encoder"] = "tokenizers".into();
        self.identity["fast_bpe_unsupported"] = why.into();
        self
    }
}

/// The end-of-document token: the one `tokenizer_config.json` names, else the first known
/// candidate in the vocabulary. `token_to_id` looks a token up by its `tokenizer.json` string.
pub(crate) fn eod(model: &HfModel, token_to_id: impl Fn(&str) -> Option<u32>) -> Result<(Option<String>, Option<u32>)> {
    Ok(match &model.config_eos {
        Some(tok) => {
            let id = token_to_id(tok).ok_or_else(|| {
                Error::invalid(format!(
                    "tokenizer {:?}: tokenizer_config.json names the eos token {tok:?}, which is not in the \
                     vocabulary",
                    model.spec
                ))
            })?;
            (Some(tok.clone()), Some(id))
        }
        None => EOD_CANDIDATES
            .iter()
            .find_map(|t| token_to_id(t).map(|id| (Some(t.to_string()), Some(id))))
            .unwrap_or((None, None)),
    })
}

/// The identity of a Hugging Face model, whichever encoder serves it.
pub(crate) fn identity(
    model: &HfModel,
    vocab_size: u64,
    eod: Option<u32>,
    eod_token: Option<&str>,
) -> serde_json::Value {
    serde_json::json!({
        "kind": "huggingface",
        "spec": model.spec,
        "sha256": model.sha256,
        "vocab_size": vocab_size,
        "eod": eod,
        "eod_token": eod_token,
    })
}

impl LibraryEncoder for tokenizers::Tokenizer {
    fn encode_into(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        // A panic inside the library on one document becomes that document's error.
        let encoded = catch_unwind(AssertUnwindSafe(|| self.encode_fast(text, false)))
            .map_err(|_| "the tokenizers library panicked on this text".to_string())?;
        out.extend_from_slice(encoded.map_err(|e| e.to_string())?.get_ids());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::JsonText;

    #[test]
    fn a_file_the_library_panics_on_is_an_error_naming_it() {
        let json = r#"{"version": "1.0", "normalizer": {"type": "Precompiled", "precompiled_charsmap": ""},
            "pre_tokenizer": null, "added_tokens": [], "post_processor": null, "decoder": null,
            "truncation": null, "padding": null,
            "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}"#;
        let model = HfModel {
            json: JsonText::new(json.into()),
            spec: "bad.json".into(),
            sha256: String::new(),
            config_eos: None,
        };
        let e = HfTokenizer::new(&model).err().expect("an error").to_string();
        assert!(e.contains("\"bad.json\" is not a usable tokenizer.json") && e.contains("precompiled"), "{e}");
    }
}
