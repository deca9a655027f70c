//! `cargo fuzz run tar_reader`: any bytes read as a tar (`tokshuf shuffle --shuffle-only`) give
//! members or an error, never a panic or an allocation larger than the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokshuf_core::shuffle::tar::TarReader;

fuzz_target!(|data: &[u8]| {
    let mut reader = TarReader::new(data);
    while let Ok(Some(_)) = reader.next_member() {}
});
