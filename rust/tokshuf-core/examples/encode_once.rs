//! Encode every text of a JSON-lines file once with a fresh tokenizer (for profilers: run under
//! `valgrind --tool=callgrind --toggle-collect='*encode_all*'` to count the encoding alone;
//! `WARM=1` adds a second pass, `encode_warm`, to count the encoding with warm caches).
#![allow(clippy::print_stdout)]
use std::io::BufRead;

#[inline(never)]
fn encode_all(tok: &dyn tokshuf_core::tokenize::Tokenizer, texts: &[String]) -> usize {
    let mut out = Vec::new();
    let mut n = 0;
    for t in texts {
        out.clear();
        tok.encode(t, &mut out).expect("encode");
        n += out.len();
    }
    n
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("FILE.jsonl SPEC");
    let spec = args.next().expect("SPEC");
    let texts: Vec<String> = std::io::BufReader::new(std::fs::File::open(path).expect("open"))
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .filter_map(|v| v.get("text").and_then(|t| t.as_str()).map(str::to_string))
        .collect();
    if std::env::var_os("SPLIT").is_some() {
        let enc = tokshuf_core::tokenize::bpe::FastBpe::from_tiktoken(&spec).expect("an encoding name");
        let pattern = enc.pattern().expect("a scanner");
        pattern.split("é");
        println!("{} pieces", split_all(pattern, &texts));
        return;
    }
    let tok = tokshuf_core::tokenize::from_spec(&spec).expect("spec");
    let mut warm = Vec::new();
    tok.encode("warm up the process-wide tables", &mut warm).expect("encode");
    println!("{} tokens", encode_all(tok.as_ref(), &texts));
    if std::env::var_os("WARM").is_some() {
        println!("{} tokens (warm)", encode_warm(tok.as_ref(), &texts));
    }
}

/// A second pass over the same texts, with the caches filled by the first.
#[inline(never)]
fn encode_warm(tok: &dyn tokshuf_core::tokenize::Tokenizer, texts: &[String]) -> usize {
    encode_all(tok, texts)
}

/// The pieces of every text (`SPLIT=1`: the pre-tokenizer alone).
#[inline(never)]
#[allow(dead_code)]
fn split_all(pattern: tokshuf_core::tokenize::bpe::Pattern, texts: &[String]) -> usize {
    texts.iter().map(|t| pattern.split(t).len()).sum()
}
