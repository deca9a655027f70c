//! Start-up cost of each tokenizer spec given: loading it, then its first encode (which builds
//! the process-wide tables and the encoder's caches). Run one spec per process for cold figures:
//! `cargo run --profile fast --example startup -- tiktoken:cl100k_base`.
#![allow(clippy::print_stdout)]
use std::time::Instant;

/// ASCII, accented Latin, CJK, digits and an emoji: the first encode reaches the Unicode tables.
const TEXT: &str = "Hello world, naïve café — 東京 2024 😀";

/// CPU time of this process (less sensitive than wall time to a busy machine).
fn cpu() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

fn main() {
    for spec in std::env::args().skip(1) {
        let (t, c) = (Instant::now(), cpu());
        let tok = tokshuf_core::tokenize::from_spec(&spec).expect("spec");
        let (load, load_cpu) = (t.elapsed(), cpu() - c);
        let (t, c) = (Instant::now(), cpu());
        let mut out = Vec::new();
        tok.encode(TEXT, &mut out).expect("encode");
        let (first, first_cpu) = (t.elapsed(), cpu() - c);
        println!(
            "{spec}: load {:.1} ms (cpu {load_cpu:.1}), first encode {:.1} ms (cpu {first_cpu:.1})",
            load.as_secs_f64() * 1e3,
            first.as_secs_f64() * 1e3
        );
    }
}
