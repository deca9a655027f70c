//! The fast encoder on the real `tokenizer.json` files of today's families (GPT-NeoX-20B, OLMo-2
//! dolma2, Qwen2, Mistral Tekken, a converted SentencePiece model) against the `tokenizers` crate
//! on the same files, on adversarial text. (The Python suite compares with the `tokenizers`,
//! `sentencepiece` and `tiktoken` packages on corpora.)

use std::sync::OnceLock;

use proptest::prelude::*;
use tokshuf_bpe::FastBpe;

const FAMILIES: [&str; 5] = [
    "gpt-neox-20b_tokenizer.json",
    "olmo2-dolma2_tokenizer.json",
    "qwen2_tokenizer.json",
    "mistral-tekken_tokenizer.json",
    "mistral-v1-sentencepiece_tokenizer.json",
];

struct Family {
    name: &'static str,
    ours: FastBpe,
    theirs: tokenizers::Tokenizer,
}

fn families() -> &'static [Family] {
    static ALL: OnceLock<Vec<Family>> = OnceLock::new();
    ALL.get_or_init(|| {
        FAMILIES
            .iter()
            .map(|name| {
                let path = format!("{}/../../tests/fixtures/tokenizers/{name}.zst", env!("CARGO_MANIFEST_DIR"));
                let json = String::from_utf8(zstd::decode_all(std::fs::File::open(&path).unwrap()).unwrap()).unwrap();
                let ours = FastBpe::from_hf_json(&json).unwrap_or_else(|e| panic!("{name}: {e}"));
                Family { name, ours: ours.with_special_tokens_in_text(true), theirs: json.parse().unwrap() }
            })
            .collect()
    })
}

fn check(text: &str) -> Result<(), TestCaseError> {
    for f in families() {
        let theirs = f.theirs.encode_fast(text, false).unwrap();
        prop_assert_eq!(&f.ours.encode(text), theirs.get_ids(), "{} on {:?}", f.name, text);
    }
    Ok(())
}

/// Pieces where the families' rules meet: NFC-changing sequences, whitespace runs (NeoX's added
/// tokens), added and special tokens' text, digits, contractions, scripts without spaces, byte
/// fallback characters, the SentencePiece mark itself.
const TRICKY: &[&str] = &[
    "a",
    "Z",
    "é",
    "e\u{301}",
    "A\u{30a}",
    "\u{2126}",
    "\u{1100}\u{1161}",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\r\n",
    "'s",
    "'LL",
    "1",
    "123",
    "²",
    "中",
    "日本語",
    "ا",
    "न",
    "\u{94d}",
    "👩\u{200d}",
    "\u{1f1eb}",
    "\u{0}",
    "\u{e000}",
    "▁",
    "▁▁",
    "<s>",
    "</s>",
    "<unk>",
    "<|endoftext|>",
    "[INST]",
    "<|extra_id_1|>",
    "|||EMAIL_ADDRESS|||",
    "Σ",
    "ſ",
    "-",
    "//",
    ".",
    "İ",
    "\u{3000}",
    "\u{a0}",
    "ß",
    "<0x41>",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn same_ids_as_the_tokenizers_crate(parts in proptest::collection::vec(proptest::sample::select(TRICKY), 0..30)) {
        check(&parts.concat())?;
    }

    #[test]
    fn any_unicode(text in "\\PC{0,40}") {
        check(&text)?;
    }
}

#[test]
fn long_and_empty_texts() {
    for text in ["", " ", &"a".repeat(20_000), &" ".repeat(3_000), &"中".repeat(3_000), &"e\u{301}".repeat(2_000)] {
        check(text).unwrap();
    }
}
