//! `cargo fuzz run json_fields`: any line yields fields or a classified rejection, never a panic,
//! and the same answer as serde alone (the fast reader only reads what serde would).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokshuf_core::read::{extract_fields, extract_fields_reference, FieldOptions};

fuzz_target!(|line: &[u8]| {
    let keys = ["text".to_string(), "sents".to_string()];
    let ours = extract_fields(line, &keys);
    assert_eq!(ours, extract_fields_reference(line, &keys, FieldOptions::default()));
});
