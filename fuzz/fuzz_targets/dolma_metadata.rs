//! `cargo fuzz run dolma_metadata`: any decompressed `.csv.gz` content yields spans within the
//! token file or a format error, never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use tokshuf_core::tokens::parse_metadata;

fuzz_target!(|data: &[u8]| {
    if let Ok(spans) = parse_metadata(data, Path::new("fuzz.csv.gz"), 1 << 20) {
        assert!(spans.iter().all(|[s, e]| s <= e && *e <= 1 << 20));
    }
});
