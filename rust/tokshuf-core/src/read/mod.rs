//! Reading inputs: which files (`inputs`), opened as batches of records whatever they hold
//! (`source`): JSON lines, compressed or not (`decompress`), cut into lines (`lines`) whose text
//! fields `json` reads, or the rows of Parquet and Arrow files (`columnar`, Arrow IPC messages in
//! `ipc`, what the two share in `batches`), whose fields `rows` reads from the columns.

mod batches;
pub mod columnar;
pub mod decompress;
mod fast_json;
#[cfg(test)]
mod fast_json_parity;
mod field;
pub mod inputs;
mod ipc;
pub mod json;
pub mod lines;
pub mod rows;
pub mod source;

pub use decompress::{decompress, decompress_buffered, Compression, CountingReader};
pub use field::Field;
pub use inputs::{expand_inputs, Inputs, ScanReport, ScanSkip, INPUT_EXTENSIONS};
pub use json::{extract_fields, extract_fields_reference, extract_fields_with, FieldOptions, Rejection};
pub use lines::{LineBatch, LineReader, Truncation};
pub use source::{input_size, is_stdin, Records, STDIN};
