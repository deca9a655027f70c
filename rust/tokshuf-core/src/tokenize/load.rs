//! From a spec or a resolved model to an encoder: [`build`] alone decides which encoder serves
//! a model.

use std::sync::Arc;

use super::byte::ByteTokenizer;
use super::fast_bpe;
use super::hf::HfTokenizer;
use super::model::{resolve, TokenizerModel};
use super::spec::TokenizerSpec;
use super::tiktoken::TiktokenTokenizer;
use super::tokenizer::Tokenizer;
use crate::error::{Error, Result};

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
        assert_eq!((tok.eod_id(), tok.vocab_size()), (Some(300), 301));
        let e = with_special_tokens(model.clone(), vec![("<x>".into(), 7)]).err().unwrap().to_string();
        assert!(e.contains("is a rank"), "{e}");
        let e = with_special_tokens(model, vec![("<x>".into(), 300), ("<y>".into(), 300)]).err().unwrap().to_string();
        assert!(e.contains("both have id 300"), "{e}");
        let e = with_special_tokens(TokenizerModel::Byte, vec![("<x>".into(), 300)]).err().unwrap().to_string();
        assert!(e.contains("rank files only"), "{e}");
    }
}
