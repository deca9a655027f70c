//! One front end for every input of `preprocess` and `shuffle`: a path (a local file, an object
//! in a store, `-` for standard input) becomes a stream of JSON lines, whatever the file holds:
//! JSON lines, compressed or not, or the rows of a Parquet or Arrow file.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::columnar::{self, Columnar};
use super::decompress::{decompress, decompress_buffered, Compression, CountingReader};
use crate::error::{IoContext, Result};

/// The path that stands for standard input.
pub const STDIN: &str = "-";

/// Whether `path` stands for standard input.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// The input's size in bytes as stored (compressed); `None` for standard input.
pub fn input_size(path: &Path) -> Result<Option<u64>> {
    if is_stdin(path) {
        return Ok(None);
    }
    crate::storage::size(path).map(Some)
}

/// Open `path` as JSON lines; `keys` are the columns a Parquet or Arrow file is read for, and
/// `counter` grows by the bytes read as stored (progress).
pub fn open_lines(path: &Path, keys: &[String], counter: Arc<AtomicU64>) -> Result<Box<dyn Read + Send>> {
    if is_stdin(path) {
        return stdin(counter);
    }
    match Columnar::from_path(path) {
        Some(format) => columnar::open(path, format, keys, counter),
        None => decompress(path, CountingReader::new(crate::storage::open(path)?, counter)),
    }
}

/// Standard input, decompressed when it starts with a gzip or zstd magic number (a pipe has no
/// extension to tell).
fn stdin(counter: Arc<AtomicU64>) -> Result<Box<dyn Read + Send>> {
    let path = Path::new(STDIN);
    let mut raw = BufReader::with_capacity(1 << 20, CountingReader::new(std::io::stdin(), counter));
    let head = raw.fill_buf().with_path(path)?;
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        decompress_buffered(Compression::Gzip, raw)
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        decompress_buffered(Compression::Zstd, raw)
    } else {
        Box::new(raw)
    })
}
