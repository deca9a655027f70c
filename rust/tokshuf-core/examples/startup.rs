#![allow(clippy::print_stdout)]
use std::time::Instant;
fn main() {
    for spec in std::env::args().skip(1) {
        let t = Instant::now();
        let tok = tokshuf_core::tokenize::from_spec(&spec).expect("spec");
        let load = t.elapsed();
        let t = Instant::now();
        let mut out = Vec::new();
        tok.encode("hello world", &mut out).unwrap();
        println!(
            "{spec}: load {:.1} ms, first encode {:.1} ms",
            load.as_secs_f64() * 1e3,
            t.elapsed().as_secs_f64() * 1e3
        );
    }
}
