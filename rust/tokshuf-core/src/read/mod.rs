//! Reading inputs: which files (`inputs`), their bytes (`decompress`), their lines (`lines`)
//! and the text fields of each JSON line (`json`).

pub mod decompress;
pub mod inputs;
pub mod json;
pub mod lines;

pub use decompress::{open_decompressed, Compression};
pub use inputs::{expand_inputs, JSONL_EXTENSIONS};
pub use json::{extract_fields, Field};
pub use lines::{LineBatch, LineReader};
