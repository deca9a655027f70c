//! Micro-benchmark of reading the text fields of JSON lines (development aid):
//! `cargo run --profile profiling -p tokshuf-core --example json_bench -- FILE.jsonl [KEY...]`
//! prints MB/s of lines for the reader preprocess uses and for serde alone, and of cutting the
//! file into lines and reading them as preprocess does (`LineReader`, then the fields), best of
//! three passes. Times are the thread's CPU time, which a machine busy with other work inflates
//! far less than the wall clock.
#![allow(clippy::print_stdout)]

use std::path::Path;

use tokshuf_core::read::lines::LineSpan;
use tokshuf_core::read::{extract_fields, extract_fields_reference, FieldOptions, LineReader};

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
    let best_of_three = |f: &dyn Fn() -> usize| {
        let mut best = f64::MAX;
        let mut bytes = 0;
        for _ in 0..3 {
            let t = cpu_seconds();
            bytes = f();
            best = best.min(cpu_seconds() - t);
        }
        (mb / best, bytes)
    };
    for (name, read) in [("tokshuf", ours), ("serde", serde)] {
        let (speed, bytes) = best_of_three(&|| lines.iter().map(|l| read(l, &keys)).sum::<usize>());
        println!("{name:>8}: {speed:.0} MB/s of lines ({bytes} bytes of text)");
    }
    let cut = |read: bool| {
        let mut r = LineReader::new(Path::new(&path), &data[..], 16 << 20, 1 << 30);
        let (mut n, mut spare) = (0, Vec::new());
        while let Some(b) = r.next_batch_in(spare).expect("read") {
            for span in &b.lines {
                if let LineSpan::Text(range) = span {
                    n += if read { ours(&b.data[range.clone()], &keys) } else { range.len() };
                }
            }
            spare = b.data;
        }
        n
    };
    let (speed, _) = best_of_three(&|| cut(false));
    println!("   lines: {speed:.0} MB/s (LineReader alone)");
    let (speed, bytes) = best_of_three(&|| cut(true));
    println!("   both: {speed:.0} MB/s of lines ({bytes} bytes of text)");
}

/// The calling thread's CPU time, in seconds.
fn cpu_seconds() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}
