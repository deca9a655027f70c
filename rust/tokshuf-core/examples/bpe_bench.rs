//! Micro-benchmark of the fast BPE encoder (development aid; the comparisons with
//! other libraries are in `benches/bench_peers.py`).
//!
//! `cargo run --profile profiling -p tokshuf-core --example bpe_bench -- FILE.jsonl [ENCODING | tokenizer.json | .model ...]`
//! prints MB/s of text per encoding for a cold cache (first pass) and a warm one (last pass),
//! and for splitting alone, per CPU-second of the thread (and per wall-clock second).
//! `THREADS=N`: N threads share one encoder, each encoding its part once (as preprocess's
//! workers do); `MODE=miss|split`, `CACHE_MIB`, `PASSES` as below (`MODE=miss`: the cost of a
//! cache miss, overall and by piece length).
#![allow(clippy::print_stdout)]

use std::io::BufRead;
use std::time::Instant;

use tokshuf_core::tokenize::bpe::{CacheConfig, FastBpe};

/// This thread's CPU time in seconds, so figures taken on a busy machine still compare. (The
/// scheduler's own counters, `/proc/thread-self/schedstat`, advance by whole ticks of 4 ms on
/// some kernels: too coarse for the cost of a cache miss.)
fn cpu_time() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// A tiktoken encoding by name, or a `tokenizer.json` or SentencePiece `.model` by path.
fn open(name: &str) -> FastBpe {
    if name.ends_with(".json") {
        FastBpe::from_hf_json(&std::fs::read_to_string(name).expect("read"))
            .expect("a fast tokenizer.json")
            .with_special_tokens_in_text(true) // as preprocess runs it
    } else if name.ends_with(".model") {
        FastBpe::from_sentencepiece(&std::fs::read(name).expect("read"), name).expect("a fast .model")
    } else {
        FastBpe::from_tiktoken(name).expect("encoding")
    }
}

/// Encode every text (a separate function, so profilers can isolate it).
#[inline(never)]
fn encode_all(enc: &FastBpe, texts: &[String], out: &mut Vec<u32>) -> usize {
    let mut tokens = 0;
    for text in texts {
        out.clear();
        enc.encode_into(text, out);
        tokens += out.len();
    }
    tokens
}

/// Encode each piece on its own with a fresh encoder, then again with the same one: (CPU seconds
/// of the first pass, of the second, cache misses of the first). The second pass's pieces are all
/// known, so the difference is the cost of the misses beyond the call and the lookup.
fn encode_each(name: &str, pieces: &[&str]) -> (f64, f64, u64) {
    let fresh = open(name);
    let mut out = Vec::new();
    let mut pass = || {
        let c = cpu_time();
        for p in pieces {
            out.clear();
            fresh.encode_into(p, &mut out);
        }
        cpu_time() - c
    };
    let (cold, warm) = (pass(), pass());
    (cold, warm, fresh.cache_stats().misses)
}

/// Split every text (a separate function, so profilers can isolate it).
#[inline(never)]
fn split_all(enc: &FastBpe, texts: &[String]) -> usize {
    // Vocabularies without a split regex (SentencePiece) have no split step of their own.
    enc.pattern().map_or(0, |pattern| texts.iter().map(|t| pattern.split(t).len()).sum())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: bpe_bench FILE.jsonl [ENCODING...]");
    let mut names: Vec<String> = args.collect();
    if names.is_empty() {
        names = vec!["r50k_base".into(), "cl100k_base".into(), "o200k_base".into()];
    }
    let file = std::io::BufReader::new(std::fs::File::open(&path).expect("open"));
    let texts: Vec<String> = file
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .filter_map(|v| v.get("text").and_then(|t| t.as_str()).map(str::to_string))
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    let mb = bytes as f64 / 1e6;
    println!("{path}: {} documents, {mb:.1} MB of text", texts.len());
    for name in names {
        let t = Instant::now();
        let mut enc = open(&name);
        if let Some(mib) = std::env::var("CACHE_MIB").ok().and_then(|v| v.parse::<usize>().ok()) {
            enc = enc.with_cache(CacheConfig::with_budget(mib << 20));
        }
        // `SHORT_SLOTS=N`: the shared table's slots, the rest as by default.
        if let Some(slots) = std::env::var("SHORT_SLOTS").ok().and_then(|v| v.parse::<usize>().ok()) {
            enc = enc.with_cache(CacheConfig { short_slots: slots, ..CacheConfig::default() });
        }
        let load = t.elapsed().as_secs_f64();
        split_all(&enc, &["é".to_string()]); // build the Unicode table outside the measurement
        let c = cpu_time();
        let pieces = split_all(&enc, &texts);
        let split = cpu_time() - c;
        if std::env::var("MODE").as_deref() == Ok("miss") {
            // Every distinct piece once, on a fresh encoder: the cost of a cache miss.
            let mut seen = std::collections::HashSet::new();
            let pattern = enc.pattern().expect("an encoding with a split pattern");
            let distinct: Vec<&str> = texts.iter().flat_map(|t| pattern.split(t)).filter(|p| seen.insert(*p)).collect();
            let (secs, _, misses) = encode_each(&name, &distinct);
            println!(
                "{name:>12}: {} distinct pieces, {misses} misses: {:.0} ns per piece, {:.0} ns per miss (upper bound)",
                distinct.len(),
                secs * 1e9 / distinct.len() as f64,
                secs * 1e9 / misses as f64
            );
            // By piece length: up to 15 bytes (one key), 32 (merged on the stack), then the heap.
            for (lo, hi) in [(1, 15), (16, 32), (33, 64), (65, usize::MAX)] {
                let group: Vec<&str> = distinct.iter().copied().filter(|p| (lo..=hi).contains(&p.len())).collect();
                let (secs, known, misses) = encode_each(&name, &group);
                let range = if hi == usize::MAX { format!("{lo}..") } else { format!("{lo}..={hi}") };
                println!(
                    "{:>12}  {range} bytes: {} pieces, {misses} misses, {:.0} ms, {:.0} ns per miss, {:.0} beyond a hit",
                    "",
                    group.len(),
                    secs * 1e3,
                    secs * 1e9 / misses.max(1) as f64,
                    (secs - known) * 1e9 / misses.max(1) as f64
                );
            }
            continue;
        }
        if let Some(threads) = std::env::var("THREADS").ok().and_then(|v| v.parse::<usize>().ok()) {
            // Each thread encodes its share of the documents once, on a fresh encoder, as the
            // preprocess workers do: MB per CPU-second of all threads together, and per second.
            let fresh = open(&name);
            let shares: Vec<&[String]> = texts.chunks(texts.len().div_ceil(threads)).collect();
            let t = Instant::now();
            let cpu: f64 = std::thread::scope(|sc| {
                let handles: Vec<_> = shares
                    .iter()
                    .map(|share| {
                        let fresh = &fresh;
                        sc.spawn(move || {
                            let c = cpu_time();
                            encode_all(fresh, share, &mut Vec::new());
                            cpu_time() - c
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().expect("thread")).sum()
            });
            let s = fresh.cache_stats();
            println!(
                "{name:>12}: {threads} threads, cold: {:.1} MB per CPU-second, {:.1} MB/s wall  misses {}",
                mb / cpu,
                mb / t.elapsed().as_secs_f64(),
                s.misses
            );
            continue;
        }
        if std::env::var("MODE").as_deref() == Ok("split") {
            println!("{name:>12}: split {:.0} MB/s ({pieces} pieces)", mb / split);
            continue;
        }
        let mut out = Vec::new();
        let mut passes = Vec::new();
        let mut tokens = 0;
        let n_passes: usize = std::env::var("PASSES").ok().and_then(|p| p.parse().ok()).unwrap_or(2).max(2);
        for _ in 0..n_passes {
            let (t, c) = (Instant::now(), cpu_time());
            tokens = encode_all(&enc, &texts, &mut out);
            passes.push((mb / (cpu_time() - c), mb / t.elapsed().as_secs_f64()));
        }
        let s = enc.cache_stats();
        let huge = std::fs::read_to_string("/proc/self/smaps_rollup")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("AnonHugePages"))
                    .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_string())
            })
            .unwrap_or_default();
        println!(
            "{name:>12}: load {load:.2}s  split {:.0} MB/s ({pieces} pieces)  encode cold {:.1} MB/s, warm {:.1} MB/s \
             (per CPU-second; wall {:.1} / {:.1})  {tokens} tokens  cache hits {} misses {} wipes {}  THP {huge} kB",
            mb / split,
            passes[0].0,
            passes[passes.len() - 1].0,
            passes[0].1,
            passes[passes.len() - 1].1,
            s.hits,
            s.misses,
            s.wipes
        );
    }
    // Peak RSS (Linux).
    for (file, key) in [("/proc/self/status", "VmHWM")] {
        if let Some(line) =
            std::fs::read_to_string(file).ok().and_then(|s| s.lines().find(|l| l.starts_with(key)).map(str::to_string))
        {
            println!("{line}");
        }
    }
}
