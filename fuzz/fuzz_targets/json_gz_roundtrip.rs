//! `cargo fuzz run json_gz_roundtrip`: any list of token ids, compressed into a `.json.gz` member
//! by tokshuf's own deflate, inflates with a standard inflater (flate2) to the same ids; one
//! encoder writes every member in turn, as a shuffle thread does.
#![no_main]

use std::cell::RefCell;
use std::io::Read;

use libfuzzer_sys::fuzz_target;
use tokshuf_core::shuffle::json_gz::JsonGz;

// The same operations as the proptest in tokshuf-core's tests.
#[path = "../../rust/tokshuf-core/tests/support/json_gz_ops.rs"]
mod json_gz_ops;
use json_gz_ops::ids_from_ops;

thread_local! {
    // Kept across runs: a fresh encoder builds its table of 65536 ids' codes first.
    static ENCODER: RefCell<JsonGz> = RefCell::new(JsonGz::default());
}

fuzz_target!(|members: Vec<Vec<(u8, u32)>>| {
    for ops in members.iter().take(8) {
        let ids = ids_from_ops(ops);
        let mut member = Vec::new();
        ENCODER.with_borrow_mut(|gz| gz.compress(&ids, &mut member));
        let mut d = flate2::read::GzDecoder::new(&member[..]);
        let mut text = Vec::new();
        d.read_to_end(&mut text).expect("a valid gzip member");
        assert!(d.into_inner().is_empty(), "trailing bytes after the member");
        let back: Vec<u32> = serde_json::from_slice(&text).expect("a JSON list of ids");
        assert_eq!(back, ids);
        assert!(!text.contains(&b' '), "compact JSON");
    }
});
