//! The byte tokenizer of the Megatron fixtures: id = UTF-8 byte + 1, eod = 0, 257 ids.

use super::tokenizer::Tokenizer;

/// `ids = [b + 1 for b in text.encode("utf-8")]`, `eod = 0`, `vocab_size = 257`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ByteTokenizer;

impl Tokenizer for ByteTokenizer {
    fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        out.extend(text.bytes().map(|b| u32::from(b) + 1));
        Ok(())
    }

    fn eod_id(&self) -> Option<u32> {
        Some(0)
    }

    fn vocab_size(&self) -> u64 {
        257
    }

    fn identity(&self) -> serde_json::Value {
        serde_json::json!({"class": "ByteTokenizer", "scheme": "utf8_byte_plus_1", "eod": 0, "vocab_size": 257})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_plus_one() {
        let mut out = vec![7];
        ByteTokenizer.encode("aé", &mut out).unwrap();
        assert_eq!(out, vec![7, 98, 0xc3 + 1, 0xa9 + 1]);
    }
}
