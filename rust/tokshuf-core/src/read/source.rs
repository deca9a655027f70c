//! One front end for every input of `preprocess` and `shuffle`: a path (a local file, an object
//! in a store, `-` for standard input) becomes batches of records, whatever the file holds: JSON
//! lines, compressed or not, or the rows of a Parquet or Arrow file (read from the columns, with
//! no JSON in between).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::columnar::{Columnar, RowReader};
use super::decompress::{decompress, decompress_buffered, Compression, CountingReader};
use super::lines::{LineBatch, LineReader, Truncation};
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

/// The records of one input, batch after batch.
pub enum Records {
    /// JSON lines.
    Lines(LineReader<Box<dyn Read + Send>>),
    /// The rows of a Parquet or Arrow file.
    Rows(RowReader),
}

impl Records {
    /// Open `path`: `keys` are the columns a Parquet or Arrow file is read for, `counter` grows by
    /// the bytes read as stored (progress), batches hold about `batch_bytes` and a longer line
    /// than `max_line_bytes` is [`super::lines::LineSpan::TooLong`]. A file that cannot be
    /// decoded to its end ends early, with its [`Records::truncation`].
    pub fn open(
        path: &Path,
        keys: &[String],
        counter: Arc<AtomicU64>,
        batch_bytes: usize,
        max_line_bytes: usize,
    ) -> Result<Records> {
        let stream = if is_stdin(path) {
            stdin(counter)?
        } else if let Some(format) = Columnar::from_path(path) {
            return Ok(Records::Rows(RowReader::open(path, format, keys, counter, batch_bytes, max_line_bytes)?));
        } else {
            decompress(path, CountingReader::new(crate::storage::open(path)?, counter))?
        };
        Ok(Records::Lines(LineReader::new(path, stream, batch_bytes, max_line_bytes).tolerate_corruption()))
    }

    /// The next batch, or `None` at the end; a batch of lines is read into `buf`'s memory.
    pub fn next_batch_in(&mut self, buf: Vec<u8>) -> Result<Option<LineBatch>> {
        match self {
            Records::Lines(r) => r.next_batch_in(buf),
            Records::Rows(r) => r.next_batch(),
        }
    }

    /// Where the input stopped decoding, if it did.
    pub fn truncation(&self) -> Option<&Truncation> {
        match self {
            Records::Lines(r) => r.truncation(),
            Records::Rows(r) => r.truncation(),
        }
    }

    /// Decompressed bytes read so far (for rows, of the JSON lines they stand for).
    pub fn offset(&self) -> u64 {
        match self {
            Records::Lines(r) => r.offset(),
            Records::Rows(r) => r.offset(),
        }
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
