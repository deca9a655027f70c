//! `cargo fuzz run json_fields`: any line yields fields or a classified rejection, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokshuf_core::read::extract_fields;

fuzz_target!(|line: &[u8]| {
    let keys = ["text".to_string(), "sents".to_string()];
    let _ = extract_fields(line, &keys);
});
