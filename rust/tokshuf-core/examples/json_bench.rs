//! Micro-benchmark of reading the text fields of JSON lines (development aid):
//! `cargo run --profile profiling -p tokshuf-core --example json_bench -- FILE.jsonl [KEY...]`
//! prints MB/s of lines for the reader preprocess uses and for serde alone, best of three passes.
#![allow(clippy::print_stdout)]

use std::time::Instant;

use tokshuf_core::read::{extract_fields, extract_fields_reference, FieldOptions};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: json_bench FILE.jsonl [KEY...]");
    let mut keys: Vec<String> = args.collect();
    if keys.is_empty() {
        keys = vec!["text".into()];
    }
    let data = std::fs::read(&path).expect("read");
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    let mb = data.len() as f64 / 1e6;
    type Reader = fn(&[u8], &[String]) -> usize;
    let ours: Reader = |l, k| extract_fields(l, k).map_or(0, |f| f[0].sentences[0].len());
    let serde: Reader =
        |l, k| extract_fields_reference(l, k, FieldOptions::default()).map_or(0, |f| f[0].sentences[0].len());
    for (name, read) in [("tokshuf", ours), ("serde", serde)] {
        let mut best = f64::MAX;
        let mut bytes = 0;
        for _ in 0..3 {
            let t = Instant::now();
            bytes = lines.iter().map(|l| read(l, &keys)).sum::<usize>();
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("{name:>8}: {:.0} MB/s of lines ({bytes} bytes of text)", mb / best);
    }
}
