//! The SentencePiece `.model` reader on damaged files: a real model (Mistral v1) truncated,
//! with bytes changed or inserted, and arbitrary bytes. Whatever it is given, it reads the model
//! or refuses it with a reason; it never panics, and a model it reads encodes text. (The fuzz
//! target `sentencepiece_model` runs the same property for longer.)

use std::sync::OnceLock;

use proptest::prelude::*;
use tokshuf_bpe::FastBpe;

fn model() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let path = format!(
            "{}/../../tests/fixtures/tokenizers/mistral-v1-sentencepiece_tokenizer.model.zst",
            env!("CARGO_MANIFEST_DIR")
        );
        zstd::decode_all(std::fs::File::open(&path).unwrap()).unwrap()
    })
}

/// Read `bytes`; if they are a model, encode a little text with it.
fn read_and_use(bytes: &[u8]) {
    if let Ok(bpe) = FastBpe::from_sentencepiece(bytes, "damaged.model") {
        bpe.encode("Hello wörld, ▁ 12345 \u{0}");
    }
}

#[derive(Debug, Clone)]
enum Damage {
    Truncate(usize),
    Change(usize, u8),
    Insert(usize, Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    // Positions as fractions of the length, so that every part of the file is reached.
    let at = 0..1_000_000usize;
    prop_oneof![
        at.clone().prop_map(Damage::Truncate),
        (at.clone(), any::<u8>()).prop_map(|(p, b)| Damage::Change(p, b)),
        (at, proptest::collection::vec(any::<u8>(), 1..12)).prop_map(|(p, v)| Damage::Insert(p, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, d: &Damage) {
    let at = |p: usize, len: usize| p * len / 1_000_000;
    match d {
        Damage::Truncate(p) => bytes.truncate(at(*p, bytes.len())),
        Damage::Change(p, b) => {
            if !bytes.is_empty() {
                let i = at(*p, bytes.len());
                bytes[i] ^= b | 1;
            }
        }
        Damage::Insert(p, v) => {
            let i = at(*p, bytes.len() + 1);
            bytes.splice(i..i, v.iter().copied());
        }
    }
}

/// The caches are keyed by pieces as written (` the`), the tokens by their normalized text
/// (`▁the`): the written forms are seeded too, so a word that is one token never misses.
#[test]
fn words_that_are_tokens_hit_as_written() {
    let bpe = FastBpe::from_sentencepiece(model(), "mistral-v1").expect("the real model reads");
    let words: Vec<(u32, &str)> = bpe
        .tokens()
        .filter_map(|(id, t)| {
            let word = std::str::from_utf8(t).ok()?.strip_prefix('▁')?;
            (word.len() >= 2 && word.bytes().all(|b| b.is_ascii_lowercase())).then_some((id, word))
        })
        .take(500)
        .collect();
    assert_eq!(words.len(), 500);
    let text = words.iter().map(|w| w.1).collect::<Vec<_>>().join(" ");
    assert_eq!(bpe.encode(&text), words.iter().map(|w| w.0).collect::<Vec<_>>());
    assert_eq!(bpe.cache_stats().misses, 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_damaged_model_is_read_or_refused(damages in proptest::collection::vec(damage(), 1..4)) {
        let mut bytes = model().to_vec();
        for d in &damages {
            apply(&mut bytes, d);
        }
        read_and_use(&bytes);
    }

    #[test]
    fn arbitrary_bytes_are_read_or_refused(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        read_and_use(&bytes);
        // As a model's start: a first field that claims to be a piece.
        let mut framed = vec![0x0a];
        framed.extend_from_slice(&bytes);
        read_and_use(&framed);
    }
}
