//! Flat token arrays: OLMo's headerless `.npy` token files (a raw little-endian array of
//! unsigned ids, every document's tokens concatenated) and the `.bin` of an indexed dataset seen
//! as one stream. Documents are found by scanning for EOS ([`scan`]) or read from Dolma's
//! `.csv.gz` metadata ([`metadata`]); [`write`] produces OLMo files.
//!
//! Shared helper: anything that reads OLMo token files (the streaming loader too) can use
//! [`TokenArray`] and [`document_spans`].

mod array;
mod indexed_docs;
mod metadata;
mod scan;
mod write;

pub use array::{TokenArray, TokenType};
pub use indexed_docs::indexed_document_spans;
pub use metadata::{parse_metadata, read_metadata, write_metadata};
pub use scan::document_spans;
pub use write::{convert_indexed, ConvertOutputs, TokenFileWriter};
