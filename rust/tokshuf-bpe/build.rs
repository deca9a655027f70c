//! The fingerprint of the tokenizer code (`TOKSHUF_TOKENIZE_FINGERPRINT`): prepared vocabularies
//! stored on disk (`src/stored.rs`) are used only by the build of the code that
//! prepared them, so a change to how a vocabulary is read can never be masked by an old entry.

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest);
    let dir = root.join("src");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut paths = Vec::new();
    files(&dir, &mut paths);
    paths.sort();
    // FNV-1a over each file's path (relative) and contents.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(std::env::var("CARGO_PKG_VERSION").unwrap_or_default().as_bytes());
    for path in &paths {
        let rel = path.strip_prefix(root).unwrap_or(path);
        eat(rel.to_string_lossy().as_bytes());
        eat(&[0]);
        eat(&std::fs::read(path).unwrap_or_default());
        eat(&[0]);
    }
    println!("cargo:rustc-env=TOKSHUF_TOKENIZE_FINGERPRINT={h:016x}");
}
