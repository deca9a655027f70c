//! Tokenizers behind one trait, so the pipeline does not care which one it runs.

mod byte;

pub use byte::ByteTokenizer;

/// Text → token ids. Implementations are shared by every worker thread.
pub trait Tokenizer: Send + Sync {
    /// Append the ids of `text` to `out` (no special tokens added).
    fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String>;

    /// The end-of-document id appended by `--append-eod`, if the tokenizer has one.
    fn eod_id(&self) -> Option<u32>;

    /// Number of ids (used to pick the smallest output dtype).
    fn vocab_size(&self) -> u64;

    /// A JSON object identifying the tokenizer (recorded in summaries and cache keys).
    fn identity(&self) -> serde_json::Value;
}

/// Resolve a tokenizer spec (`byte`, ...) into a shared tokenizer.
pub fn from_spec(spec: &str) -> crate::Result<std::sync::Arc<dyn Tokenizer>> {
    match spec {
        "byte" => Ok(std::sync::Arc::new(ByteTokenizer)),
        _ => Err(crate::Error::invalid(format!("unknown tokenizer {spec:?} (expected one of: byte)"))),
    }
}
