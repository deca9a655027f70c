//! `cargo fuzz run cell_runs`: any file read as a run of local cells (a damaged scratch directory)
//! is rejected with an error or read record by record, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokshuf_core::shuffle::cells::{parse_records, Run};

fuzz_target!(|input: (u8, &[u8])| {
    let (cells, bytes) = input;
    let cells = u32::from(cells % 4) + 1;
    let dir = std::env::temp_dir().join(format!("tokshuf-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("run.cells");
    if std::fs::write(&path, bytes).is_err() {
        return;
    }
    if let Ok(run) = Run::open(&path, cells) {
        for cell in 0..cells {
            let mut buf = Vec::new();
            if let Ok(n) = run.read_cell(cell, &mut buf) {
                let _ = parse_records(&buf, n, &path);
            }
        }
    }
});
