//! `cargo fuzz run json_gz_roundtrip`: any list of token ids, compressed into a `.json.gz` member
//! by tokshuf's own deflate, inflates with a standard inflater (flate2) to the same ids; one
//! encoder writes every member in turn, as a shuffle thread does.
#![no_main]

use std::cell::RefCell;
use std::io::Read;

use libfuzzer_sys::fuzz_target;
use tokshuf_core::shuffle::json_gz::JsonGz;

/// Ids from operations: an id of any size, a table-sized id, one of a few ids, or a copy of `len`
/// earlier ids from `back` ids before (long repeats at any distance, which random ids lack).
fn ids_from_ops(ops: &[(u8, u32)]) -> Vec<u32> {
    let mut ids: Vec<u32> = Vec::new();
    for &(kind, v) in ops {
        match kind % 4 {
            0 => ids.push(v),
            1 => ids.push(v % 300_000),
            2 => ids.push(v % 8),
            _ => {
                let (back, len) = ((v & 0xffff) as usize + 1, (v >> 16) as usize % 4096);
                if back <= ids.len() {
                    let from = ids.len() - back;
                    for k in 0..len {
                        ids.push(ids[from + k]);
                    }
                }
            }
        }
    }
    ids
}

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
