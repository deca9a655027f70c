//! Reading inputs: which files (`inputs`), opened as JSON lines whatever they hold (`source`:
//! compressed JSON lines through `decompress`, Parquet and Arrow rows through `columnar`), their
//! lines (`lines`) and the text fields of each JSON line (`json`).

pub mod columnar;
pub mod decompress;
mod fast_json;
pub mod inputs;
pub mod json;
pub mod lines;
pub mod source;

pub use decompress::{decompress, decompress_buffered, open_decompressed, Compression, CountingReader};
pub use inputs::{expand_inputs, Inputs, ScanReport, ScanSkip, INPUT_EXTENSIONS};
pub use json::{extract_fields, extract_fields_reference, extract_fields_with, Field, FieldOptions, Rejection};
pub use lines::{LineBatch, LineReader, Truncation};
pub use source::{input_size, is_stdin, open_lines, STDIN};
