//! The encoder against `tiktoken-rs` (tiktoken's own Rust core, regex and all) on edge cases.
//! The Python suite compares with the `tiktoken` and `tokenizers` packages on generated text.

use std::sync::OnceLock;

use super::*;

/// One shared encoder for each of [`NAMES`].
fn encoder(name: &str) -> &'static FastBpe {
    static ALL: [OnceLock<FastBpe>; NAMES.len()] = [const { OnceLock::new() }; NAMES.len()];
    ALL[NAMES.iter().position(|&n| n == name).expect("one of NAMES")]
        .get_or_init(|| FastBpe::from_tiktoken(name).unwrap())
}

fn reference(name: &str) -> &'static tiktoken_rs::CoreBPE {
    match name {
        "r50k_base" => tiktoken_rs::r50k_base_singleton(),
        "p50k_base" => tiktoken_rs::p50k_base_singleton(),
        "cl100k_base" => tiktoken_rs::cl100k_base_singleton(),
        _ => tiktoken_rs::o200k_base_singleton(),
    }
}

const NAMES: [&str; 4] = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"];

fn edge_cases() -> Vec<String> {
    let mut v: Vec<String> = [
        "",
        "hello world",
        "Hello, World! It's a test: don't, won't, I'LL, we'Ve, they'RE, she'D, I'M, it'S, 'ſ ſ'ſx",
        "  leading and trailing  ",
        "x\n ",
        "x\n  \t",
        "a\r\n\r\n  b\n\n\n",
        "\n\t\t'magic'\t't_op'\t(struct\t-I",
        "tabs\tand\nnew\nlines\n'd'\n'",
        "1234567890 12 123 1234 ²³ ⅷ 𝟙𝟚𝟛",
        "中文文本，没有空格。日本語のテキスト。한국어 텍스트",
        "combining: e\u{301}\u{302} A\u{301}B \u{301}\u{301}x \u{301}",
        "emoji 👩‍👩‍👧‍👦 🏳️‍🌈 ✌🏽 family",
        "HTMLParser XMLHttpRequest iPhone McDonald's CamelCase ABC'S DŽungla ǅx",
        "<|endoftext|> is ordinary text here <|fim_prefix|>",
        "path/to/file.txt\n//comment\n/*x*/\r\n",
        "\u{3000}\u{3000}word \u{a0}x \u{85}y \u{2028}z",
        "\u{0}\u{1}\u{7f} controls \u{feff}bom",
        "'''s ''s' 's'",
        "Ünïcödé ΑΒΓ αβγ Привет мир",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("a".repeat(20_000));
    v.push(" ".repeat(20_000));
    v.push("\n".repeat(20_000));
    v.push("7".repeat(20_000));
    v.push("中".repeat(5_000));
    v.push("ab".repeat(5_000) + "\n\n  x");
    v.push("_".repeat(3_000) + "word");
    v
}

#[test]
fn edge_cases_match_tiktoken_rs() {
    for name in NAMES {
        let (ours, theirs) = (encoder(name), reference(name));
        for text in edge_cases() {
            let expected: Vec<u32> = theirs.encode_ordinary(&text);
            let preview: String = text.chars().take(40).collect();
            assert_eq!(ours.encode(&text), expected, "{name} on {preview:?}");
            // Again, now from the cache.
            assert_eq!(ours.encode(&text), expected, "{name} (cached) on {preview:?}");
        }
    }
}

#[test]
fn one_megabyte_word_is_not_quadratic() {
    let text = "ab".repeat(500_000);
    for name in NAMES {
        let t = std::time::Instant::now();
        let ids = encoder(name).encode(&text);
        assert!(t.elapsed().as_secs_f64() < 20.0, "{name}: {:?}", t.elapsed());
        let decoded: Vec<u8> = ids.iter().flat_map(|&i| encoder(name).vocab.token(i).to_vec()).collect();
        assert_eq!(decoded, text.as_bytes());
    }
}

#[test]
fn specials_are_text_unless_asked() {
    let enc = FastBpe::from_tiktoken("cl100k_base").unwrap();
    let text = "a<|endoftext|>b<|fim_prefix|>";
    assert!(!enc.encode(text).contains(&100257));
    let enc = enc.with_special_tokens_in_text(true);
    let expected = reference("cl100k_base").encode_with_special_tokens(text);
    assert_eq!(enc.encode(text), expected);
    assert!(expected.contains(&100257) && expected.contains(&100258));
}

#[test]
fn vocab_sizes_and_eod_match_tiktoken() {
    for (name, size, eod) in [
        ("gpt2", 50257, 50256),
        ("r50k_base", 50257, 50256),
        ("p50k_base", 50281, 50256),
        ("p50k_edit", 50284, 50256),
        ("cl100k_base", 100277, 100257),
        ("o200k_base", 200019, 199999),
        ("o200k_harmony", 201088, 199999),
    ] {
        let enc = FastBpe::from_tiktoken(name).unwrap();
        assert_eq!((enc.vocab_size(), enc.eod_id()), (size, Some(eod)), "{name}");
    }
}

/// The loop compiled for any x86-64 (or other CPU) gives the ids the one dispatched for this CPU
/// (x86-64-v3 where it has it) gives: each against tiktoken-rs, on fresh encoders (so both
/// merge every piece themselves), cold and then cached.
#[test]
fn portable_loop_matches_tiktoken_rs() {
    for name in NAMES {
        let (enc, theirs) = (FastBpe::from_tiktoken(name).unwrap(), reference(name));
        let mut state = enc.take_state();
        for _ in 0..2 {
            for text in edge_cases() {
                let mut ids = Vec::new();
                enc.encode_ordinary_any(&text, &mut ids, &mut state);
                let preview: String = text.chars().take(40).collect();
                assert_eq!(ids, theirs.encode_ordinary(&text), "{name} on {preview:?}");
            }
        }
        enc.give_state(state);
    }
}

#[test]
fn tiny_cache_gives_the_same_ids() {
    let tiny =
        CacheConfig { short_slots: 16, short_arena_ids: 8, thread_slots: 16, long_bytes: 256, long_max_piece: 64 };
    let enc = FastBpe::from_tiktoken("cl100k_base").unwrap().with_cache(tiny);
    let text: String = edge_cases().concat();
    let expected = reference("cl100k_base").encode_ordinary(&text);
    for _ in 0..3 {
        assert_eq!(enc.encode(&text), expected);
    }
    assert!(enc.cache_stats().wipes > 0, "{:?}", enc.cache_stats());
}

#[test]
fn identity_names_the_encoding() {
    let id = encoder("r50k_base").identity();
    assert_eq!(id["source"], "tiktoken:r50k_base");
    assert_eq!(id["pattern"], "gpt2");
    assert_eq!(id["vocab_size"], 50257);
    assert_ne!(encoder("cl100k_base").identity()["vocab_digest"], id["vocab_digest"]);
}

#[test]
fn a_thread_gets_back_the_cache_it_used_last() {
    // Its own encoder: no other test may take from the pool meanwhile.
    let enc = FastBpe::from_tiktoken("r50k_base").unwrap();
    let mine = enc.take_state();
    let mine_id = mine.own.slots_ptr();
    let theirs = std::thread::scope(|s| s.spawn(|| enc.take_state()).join().unwrap());
    assert_ne!(theirs.own.slots_ptr(), mine_id);
    // The other thread's cache is returned last, on top of the pool.
    enc.give_state(mine);
    enc.give_state(theirs);
    assert_eq!(enc.take_state().own.slots_ptr(), mine_id);
}
