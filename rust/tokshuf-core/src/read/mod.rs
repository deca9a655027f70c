//! Reading inputs: which files (`inputs`), their bytes (`decompress`), their lines (`lines`)
//! and the text fields of each JSON line (`json`).

pub mod decompress;
mod fast_json;
pub mod inputs;
pub mod json;
pub mod lines;

pub use decompress::{decompress, open_decompressed, Compression, CountingReader};
pub use inputs::{expand_inputs, JSONL_EXTENSIONS};
pub use json::{extract_fields, extract_fields_reference, extract_fields_with, Field, FieldOptions, Rejection};
pub use lines::{LineBatch, LineReader, Truncation};
