//! `cargo fuzz run idx_parser`: arbitrary `.idx`/`.bin` bytes must give a dataset whose every
//! sequence reads, or a `Format` error; never a panic or an out-of-bounds read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokshuf_core::indexed::{IndexedDataset, Mapping, Validate};

fuzz_target!(|data: &[u8]| {
    let Some((&bin_len, idx)) = data.split_first() else { return };
    for validate in [Validate::Header, Validate::Full] {
        let ds = IndexedDataset::from_mappings(
            "fuzz",
            Mapping::from_bytes(idx.to_vec()),
            Mapping::from_bytes(vec![0u8; bin_len as usize]),
            None,
            validate,
        );
        if let (Ok(ds), Validate::Full) = (ds, validate) {
            for i in 0..ds.len() {
                ds.sequence_bytes(i, 0, None).expect("validated sequences are readable");
            }
        }
    }
});
