//! The fast encoder ([`tokshuf_bpe`]) behind the [`Tokenizer`] trait, and which resolved models it
//! serves (called by [`build`](super::build)): every tiktoken-style model, every `tokenizer.json`
//! that [`FastBpe::from_hf_json`] accepts, and SentencePiece models. The rest keep `tiktoken-rs` /
//! the `tokenizers` crate, and say why.

use std::path::PathBuf;

use tokshuf_bpe::FastBpe;

use super::model::{BpeModel, HfModel, SentencePieceModel};
use super::tokenizer::Tokenizer;
use super::{hf, tiktoken};
use crate::Result;

/// Set to `0` to use the reference encoders (`tiktoken-rs`, `tokenizers`) for every model.
pub const FAST_BPE_ENV: &str = "TOKSHUF_FAST_BPE";

/// Where prepared vocabularies are kept (see `tokshuf_bpe`'s `stored`).
fn store_dir() -> PathBuf {
    crate::storage::cache_root().join("tokenizers")
}

/// The caches sized for the thread count jobs use (`TOKSHUF_NUM_THREADS`): the engine alone
/// sizes them for the machine's cores, which `encode_batch(num_threads=N)` may exceed.
pub fn with_caches(fast: FastBpe) -> FastBpe {
    fast.with_cache(tokshuf_bpe::CacheConfig::for_threads(crate::parallel::default_threads()))
}

/// The fast encoder of a tiktoken model (`encode_ordinary` semantics), if it has one.
pub fn for_tiktoken_model(m: &BpeModel) -> Option<FastBpe> {
    if !crate::env_on(FAST_BPE_ENV) {
        return None;
    }
    // A vocabulary the fast encoder rejects (e.g. not every byte is a token) stays with tiktoken-rs.
    let fast = FastBpe::from_ranks(m.ranks.tokens.clone(), m.pattern, m.specials.clone(), m.spec.clone()).ok()?;
    Some(with_caches(fast).with_eod(m.endoftext()).with_identity(tiktoken::identity(m)))
}

/// The fast encoder of a Hugging Face model if the file is one it reproduces exactly, else why
/// not (the first component of the file it does not implement). Like the `tokenizers` path,
/// added tokens written in the text are matched (Megatron's HuggingFaceTokenizer behaviour) and
/// the eos token follows `tokenizer_config.json`.
pub fn for_hf_model(m: &HfModel) -> Result<Result<FastBpe, String>> {
    if !crate::env_on(FAST_BPE_ENV) {
        return Ok(Err(format!("{FAST_BPE_ENV}=0")));
    }
    let fast = match FastBpe::from_hf_json_stored(|| m.json.get(), &m.sha256, &store_dir())? {
        Ok(fast) => with_caches(fast),
        Err(why) => return Ok(Err(why.0)),
    };
    let (eod_token, eod) = hf::eod(m, |t| fast.hf_token_id(t))?;
    let identity = hf::identity(m, fast.vocab_size(), eod, eod_token.as_deref());
    Ok(Ok(fast.with_special_tokens_in_text(true).with_eod(eod).with_identity(identity)))
}

/// The encoder of a SentencePiece model (no other reads it; what this one does not is an error
/// naming the reason).
pub fn for_sentencepiece_model(m: &SentencePieceModel) -> Result<FastBpe> {
    let fast = FastBpe::from_sentencepiece_stored(&m.bytes, m.spec.clone(), &m.sha256, &store_dir())
        .map_err(|e| crate::Error::invalid(format!("tokenizer {:?}: {}", m.spec, e.0)))?;
    let fast = with_caches(fast);
    let identity = serde_json::json!({
        "kind": "sentencepiece",
        "spec": m.spec,
        "sha256": m.sha256,
        "vocab_size": fast.vocab_size(),
        "eod": fast.eod_id(),
    });
    Ok(fast.with_identity(identity))
}

impl Tokenizer for FastBpe {
    fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        self.encode_into(text, out);
        Ok(())
    }

    fn encode_each(&self, texts: &[&str], out: &mut Vec<u32>, ends: &mut Vec<u64>) -> Result<(), (usize, String)> {
        FastBpe::encode_each(self, texts, out, ends);
        Ok(())
    }

    fn eod_id(&self) -> Option<u32> {
        FastBpe::eod_id(self)
    }

    fn vocab_size(&self) -> u64 {
        FastBpe::vocab_size(self)
    }

    fn prepare_for_long_job(&self) {
        self.commit_caches();
    }

    fn identity(&self) -> serde_json::Value {
        FastBpe::identity(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::{encode_many, from_spec, output_identity, resolve, TiktokenTokenizer};
    use crate::tokenize::{TokenizerModel, TokenizerSpec};
    use tokshuf_bpe::CacheConfig;

    /// Texts of every kind of piece: words, digits, whitespace runs, CJK, emoji, long runs.
    fn texts() -> Vec<String> {
        let kinds = [
            "Hello, World! It's a test: don't, I'LL, we'Ve",
            "  leading and trailing  \n\n\t x\r\n",
            "1234567890 12 123 ²³ ⅷ 𝟙𝟚𝟛",
            "中文文本，没有空格。日本語のテキスト。한국어 텍스트",
            "emoji 👩‍👩‍👧‍👦 🏳️‍🌈 ✌🏽 family <|endoftext|>",
            "HTMLParser XMLHttpRequest McDonald's Ünïcödé ΑΒΓ Привет мир",
        ];
        let mut v: Vec<String> = kinds.iter().map(|s| s.to_string()).collect();
        v.push("ab".repeat(3_000) + "\n\n  x");
        v.push(" ".repeat(2_000) + "7".repeat(2_000).as_str());
        v
    }

    #[test]
    fn batch_is_the_same_for_any_thread_count() {
        let enc = FastBpe::from_tiktoken("cl100k_base").unwrap();
        let owned: Vec<String> = (0..400).flat_map(|i| texts().into_iter().map(move |t| format!("{i} {t}"))).collect();
        let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
        assert!(owned.iter().map(String::len).sum::<usize>() > 3 << 20, "several chunks of work");
        let cancel = crate::Cancel::new();
        let batch = |e: &FastBpe, threads, cancel| encode_many(e, &texts, Some(threads), cancel);
        let one = batch(&enc, 1, &cancel).unwrap();
        // Cold encoders whose threads learn at once: one with room for everything, and one whose
        // shared arena is full at once, so that the threads' own tables learn too.
        let cold = FastBpe::from_tiktoken("cl100k_base").unwrap();
        let tiny = CacheConfig {
            short_slots: 16,
            short_arena_ids: 16,
            thread_slots: 64,
            long_bytes: 4096,
            long_max_piece: 64,
        };
        let small = FastBpe::from_tiktoken("cl100k_base").unwrap().with_cache(tiny);
        for e in [&cold, &small, &enc] {
            assert_eq!(one, batch(e, 2, &cancel).unwrap());
        }
        assert_eq!(one.offsets.len(), texts.len() + 1);
        let reference = tiktoken_rs::cl100k_base_singleton();
        for (i, t) in texts.iter().enumerate().step_by(97) {
            let (a, b) = (one.offsets[i] as usize, one.offsets[i + 1] as usize);
            assert_eq!(one.ids[a..b], reference.encode_ordinary(t)[..]);
        }
        let cancelled = crate::Cancel::new();
        cancelled.cancel();
        assert!(batch(&enc, 2, &cancelled).is_err());
    }

    #[test]
    fn specs_take_the_fast_path_with_the_reference_results() {
        let spec = "tiktoken:o200k_base";
        let fast = from_spec(spec).unwrap();
        let TokenizerModel::Bpe(model) = resolve(&TokenizerSpec::parse(spec).unwrap()).unwrap() else {
            panic!("a tiktoken spec resolves to a BPE model")
        };
        let reference = TiktokenTokenizer::new(&model).unwrap();
        assert_eq!(fast.identity()["encoder"], "fast_bpe");
        assert_eq!(reference.identity()["encoder"], "tiktoken-rs");
        assert_eq!(output_identity(fast.as_ref()), output_identity(&reference));
        assert_eq!((fast.eod_id(), fast.vocab_size()), (reference.eod_id(), reference.vocab_size()));
        for text in texts() {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            fast.encode(&text, &mut a).unwrap();
            reference.encode(&text, &mut b).unwrap();
            assert_eq!(a, b);
        }
    }
}
