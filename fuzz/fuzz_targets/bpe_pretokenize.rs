//! The fast pre-tokenizers against fancy-regex running the patterns they replace, and the
//! encoder's ids against tiktoken-rs.
#![no_main]

use std::sync::OnceLock;

use fancy_regex::Regex;
use libfuzzer_sys::fuzz_target;
use tokshuf_core::tokenize::bpe::{FastBpe, Pattern};

struct Fixtures {
    regexes: Vec<Regex>,
    ours: FastBpe,
    theirs: tiktoken_rs::CoreBPE,
}

fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| Fixtures {
        regexes: Pattern::ALL.iter().map(|p| Regex::new(p.regex()).unwrap()).collect(),
        ours: FastBpe::from_tiktoken("o200k_base").unwrap(),
        theirs: tiktoken_rs::o200k_base().unwrap(),
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let f = fixtures();
    for (p, re) in Pattern::ALL.iter().zip(&f.regexes) {
        let expected: Vec<&str> = re.find_iter(text).map(|m| m.unwrap().as_str()).collect();
        assert_eq!(p.split(text), expected, "{p}");
    }
    assert_eq!(f.ours.encode(text), f.theirs.encode_ordinary(text));
});
