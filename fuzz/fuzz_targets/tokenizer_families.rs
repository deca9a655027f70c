//! The fast encoder on the real `tokenizer.json` files of today's families (GPT-NeoX-20B, OLMo-2
//! dolma2, Qwen2, Mistral Tekken, a converted SentencePiece model) against the `tokenizers` crate
//! on the same files.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tokshuf_core::tokenize::bpe::FastBpe;

const FAMILIES: [&str; 5] = [
    "gpt-neox-20b_tokenizer.json",
    "olmo2-dolma2_tokenizer.json",
    "qwen2_tokenizer.json",
    "mistral-tekken_tokenizer.json",
    "mistral-v1-sentencepiece_tokenizer.json",
];

fn families() -> &'static [(FastBpe, tokenizers::Tokenizer)] {
    static ALL: OnceLock<Vec<(FastBpe, tokenizers::Tokenizer)>> = OnceLock::new();
    ALL.get_or_init(|| {
        FAMILIES
            .iter()
            .map(|name| {
                let path = format!("{}/../tests/fixtures/tokenizers/{name}.zst", env!("CARGO_MANIFEST_DIR"));
                let json = String::from_utf8(zstd::decode_all(std::fs::File::open(&path).unwrap()).unwrap()).unwrap();
                let ours = FastBpe::from_hf_json(&json).unwrap().with_special_tokens_in_text(true);
                (ours, json.parse().unwrap())
            })
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for (i, (ours, theirs)) in families().iter().enumerate() {
        let expected = theirs.encode_fast(text, false).unwrap();
        assert_eq!(ours.encode(text), expected.get_ids(), "{}", FAMILIES[i]);
    }
});
