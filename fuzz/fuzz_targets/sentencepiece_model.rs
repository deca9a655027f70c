//! The SentencePiece `.model` reader on any bytes: it reads a model or refuses it with a reason,
//! never panics, and a model it reads encodes text. Seed the corpus with a real model (e.g.
//! `zstd -d ../tests/fixtures/tokenizers/mistral-v1-sentencepiece_tokenizer.model.zst -o
//! corpus/sentencepiece_model/mistral-v1.model`) so that mutations reach past the first fields.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokshuf_core::tokenize::bpe::FastBpe;

fuzz_target!(|data: &[u8]| {
    if let Ok(bpe) = FastBpe::from_sentencepiece(data, "fuzz.model") {
        bpe.encode("Hello wörld, ▁ 12345 \u{0}");
    }
});
