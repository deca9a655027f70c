//! A tokenizer run by its defining library's own encoder (what the fast one does not implement):
//! the library's call, and what the model file says about the tokenizer.

use super::tokenizer::Tokenizer;

/// A defining library's encoder.
pub trait LibraryEncoder: Send + Sync {
    /// Append the ids of `text` to `out`, as the library's Python package gives them.
    fn encode_into(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String>;
}

/// A tokenizer served by `E`, a defining library's encoder.
pub struct Library<E> {
    pub(crate) encoder: E,
    pub(crate) eod: Option<u32>,
    pub(crate) vocab_size: u64,
    pub(crate) identity: serde_json::Value,
}

impl<E: LibraryEncoder> Tokenizer for Library<E> {
    fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        self.encoder.encode_into(text, out)
    }

    fn eod_id(&self) -> Option<u32> {
        self.eod
    }

    fn vocab_size(&self) -> u64 {
        self.vocab_size
    }

    fn identity(&self) -> serde_json::Value {
        self.identity.clone()
    }
}
