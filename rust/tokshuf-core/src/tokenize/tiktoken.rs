//! tiktoken-compatible encoding through `tiktoken-rs` (the same Rust core and regex engine as
//! the `tiktoken` Python package, so ids are identical to its `encode_ordinary`).

use std::panic::{catch_unwind, AssertUnwindSafe};

use rustc_hash::FxHashMap;
use tiktoken_rs::CoreBPE;

use super::library::{Library, LibraryEncoder};
use super::model::BpeModel;
use crate::error::{Error, Result};

/// A tiktoken encoding. Special tokens in the text are ordinary text (`encode_ordinary`): a
/// document that quotes `<|endoftext|>` must not end early.
pub type TiktokenTokenizer = Library<CoreBPE>;

impl TiktokenTokenizer {
    /// Build the encoder of `model`.
    pub fn new(model: &BpeModel) -> Result<Self> {
        let encoder: FxHashMap<Vec<u8>, u32> = model.ranks.tokens.iter().map(|(t, r)| (t.to_vec(), r)).collect();
        if encoder.len() != model.ranks.tokens.len() {
            return Err(Error::invalid(format!("tokenizer {:?}: the rank file repeats a token", model.spec)));
        }
        let specials: FxHashMap<String, u32> = model.specials.iter().cloned().collect();
        let bpe = CoreBPE::new(encoder, specials, model.pattern.regex())
            .map_err(|e| Error::invalid(format!("tokenizer {:?}: {e}", model.spec)))?;
        let mut identity = identity(model);
        identity["encoder"] = "tiktoken-rs".into();
        Ok(Self { encoder: bpe, eod: model.endoftext(), vocab_size: model.vocab_size(), identity })
    }
}

/// The identity of a tiktoken model, whichever encoder serves it.
pub(crate) fn identity(model: &BpeModel) -> serde_json::Value {
    serde_json::json!({
        "kind": "tiktoken",
        "spec": model.spec,
        "name": model.name,
        "pattern": model.pattern.name(),
        "ranks_sha256": model.ranks.sha256,
        "vocab_size": model.vocab_size(),
        "eod": model.endoftext(),
    })
}

impl LibraryEncoder for CoreBPE {
    fn encode_into(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        // tiktoken-rs unwraps regex errors (fancy-regex's backtrack limit); keep a pathological
        // document from taking the whole run down.
        let ids = catch_unwind(AssertUnwindSafe(|| self.encode_ordinary(text)))
            .map_err(|_| "the tiktoken encoder failed on this text (regex backtrack limit)".to_string())?;
        out.extend_from_slice(&ids);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::from_spec;

    #[test]
    fn endoftext_in_text_is_ordinary_text() {
        let t = from_spec("tiktoken:cl100k_base").unwrap();
        let mut ids = Vec::new();
        t.encode("hello world<|endoftext|>", &mut ids).unwrap();
        assert!(!ids.contains(&100257), "{ids:?}");
        assert_eq!(&ids[..2], &[15339, 1917]); // "hello", " world" in cl100k_base
        assert_eq!(t.eod_id(), Some(100257));
        assert_eq!(t.vocab_size(), 100277);
    }
}
