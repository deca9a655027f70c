//! Parquet and Arrow IPC inputs, read as batches of rows whose `--json-keys` values go to the
//! tokenizer straight from the Arrow arrays ([`super::rows`]: the same documents and rejections
//! as the JSON lines the rows stand for). Row N is line N in messages, and the rows come in the
//! file's order, so a corpus gives the same `.bin/.idx` and the same shards whether it ships as
//! Parquet, Arrow or JSON lines.
//!
//! Parquet is read by row group, only the asked-for columns: the column chunks of the next row
//! group are fetched (ranged GETs for an object) while the current one is decoded, so memory is
//! about two row groups of those columns. Arrow IPC (HF `datasets` cache files, the stream format,
//! and the file format, whose body is a stream) is read front to back like any stream.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow_array::{ArrayRef, RecordBatch};
use arrow_ipc::reader::StreamReader;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ProjectionMask;
use parquet::file::reader::{ChunkReader, Length};

use super::lines::{is_decoding_error, LineBatch, LineSpan, Truncation};
use super::rows::{line_lengths, Rows};
use crate::error::{Error, Result};
use crate::storage::{Pending, RandomAccess};

/// The columnar formats, by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Columnar {
    Parquet,
    /// Arrow IPC, stream or file format.
    Arrow,
}

impl Columnar {
    /// The format `path`'s extension names, if columnar.
    pub fn from_path(path: &Path) -> Option<Columnar> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("parquet" | "pq") => Some(Columnar::Parquet),
            Some("arrow") => Some(Columnar::Arrow),
            _ => None,
        }
    }
}

/// Rows per record batch: at a few KiB per web document, a batch's arrays stay under the size the
/// allocator keeps for reuse (`alloc::CACHE_MAX_BLOCK`), so no batch pays for fresh pages.
const BATCH_ROWS: usize = 512;

type Batches = Box<dyn Iterator<Item = io::Result<RecordBatch>> + Send>;

/// The rows of a Parquet or Arrow file, in batches of about `batch_bytes` (of the JSON lines they
/// stand for), as a [`super::LineReader`] gives lines: a row longer than `max_line_bytes` is
/// [`LineSpan::TooLong`], and a file that cannot be decoded past some row ends there, with its
/// [`Truncation`].
pub struct RowReader {
    path: PathBuf,
    keys: Vec<String>,
    batches: Batches,
    batch_bytes: usize,
    max_line_bytes: usize,
    /// The key columns of the record batch being cut, the length of each row, and the next row.
    current: Option<(Arc<[ArrayRef]>, Vec<usize>, usize)>,
    next_line: u64,
    offset: u64,
    truncation: Option<Truncation>,
}

impl RowReader {
    /// The rows of the `keys` columns of `path`; `counter` grows by the file's bytes read.
    pub fn open(
        path: &Path,
        format: Columnar,
        keys: &[String],
        counter: Arc<AtomicU64>,
        batch_bytes: usize,
        max_line_bytes: usize,
    ) -> Result<RowReader> {
        let batches: Batches = match format {
            Columnar::Parquet => Box::new(parquet_batches(path, keys, counter)?),
            Columnar::Arrow => Box::new(arrow_batches(path, keys, counter)?),
        };
        Ok(RowReader {
            path: path.to_path_buf(),
            keys: keys.to_vec(),
            batches,
            batch_bytes: batch_bytes.max(1),
            max_line_bytes,
            current: None,
            next_line: 1,
            offset: 0,
            truncation: None,
        })
    }

    /// Where the file stopped decoding, if it did.
    pub fn truncation(&self) -> Option<&Truncation> {
        self.truncation.as_ref()
    }

    /// Bytes of the JSON lines the rows read so far stand for.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next batch, or `None` after the last row.
    pub fn next_batch(&mut self) -> Result<Option<LineBatch>> {
        loop {
            if let Some((columns, lens, next)) = self.current.as_mut().filter(|c| c.2 < c.1.len()) {
                // `bytes` of lines in all, `kept` of the rows not too long (as a line reader
                // keeps none of an over-long line).
                let (mut lines, mut bytes, mut kept) = (Vec::new(), 0, 0);
                while *next < lens.len() && bytes < self.batch_bytes {
                    let len = lens[*next];
                    if len > self.max_line_bytes {
                        lines.push(LineSpan::TooLong(len as u64));
                    } else {
                        lines.push(LineSpan::Row(*next));
                        kept += len + 1;
                    }
                    bytes += len + 1;
                    *next += 1;
                }
                let batch = LineBatch {
                    first_line: self.next_line,
                    data: Vec::new(),
                    rows: Some(Rows::new(Arc::clone(columns), kept)),
                    lines,
                };
                self.next_line += batch.len() as u64;
                self.offset += bytes as u64;
                return Ok(Some(batch));
            }
            if self.truncation.is_some() {
                return Ok(None);
            }
            match self.batches.next() {
                None => return Ok(None),
                Some(Ok(batch)) => {
                    let columns = key_columns(&batch, &self.keys, &self.path)?;
                    let lens = line_lengths(&columns, &self.keys);
                    self.current = Some((columns, lens, 0));
                }
                Some(Err(e)) if is_decoding_error(&e) => {
                    let message = e.to_string();
                    self.truncation =
                        Some(Truncation { offset: self.offset, line: self.next_line, fragment_bytes: 0, message });
                }
                Some(Err(e)) => return Err(Error::io(&self.path, e)),
            }
        }
    }
}

/// The `keys` columns of `batch`, in that order.
fn key_columns(batch: &RecordBatch, keys: &[String], path: &Path) -> Result<Arc<[ArrayRef]>> {
    keys.iter()
        .map(|k| {
            batch.column_by_name(k).cloned().ok_or_else(|| {
                let schema = batch.schema();
                missing_column(path, k, schema.fields().iter().map(|f| f.name()))
            })
        })
        .collect()
}

fn parquet_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::io(path, io::Error::new(io::ErrorKind::InvalidData, format!("not a readable Parquet file: {e}")))
}

/// The record batches of the `keys` columns, row group after row group, the next one's column
/// chunks fetched while the current one is decoded.
fn parquet_batches(
    path: &Path,
    keys: &[String],
    counter: Arc<AtomicU64>,
) -> Result<impl Iterator<Item = io::Result<RecordBatch>> + Send> {
    let access = Arc::new(RandomAccess::open(path)?);
    let source = Source { access, counter, fetched: Arc::default(), store_failure: Arc::default() };
    let meta = ArrowReaderMetadata::load(&source, ArrowReaderOptions::new())
        .map_err(|e| source.store_failure().map_or_else(|| parquet_error(path, e), |f| Error::io(path, f)))?;
    let schema = meta.schema().clone();
    let columns = keys
        .iter()
        .map(|k| schema.index_of(k).map_err(|_| missing_column(path, k, schema.fields().iter().map(|f| f.name()))))
        .collect::<Result<Vec<_>>>()?;
    let mask = ProjectionMask::roots(meta.parquet_schema(), columns.iter().copied());
    let chunks = |rg: usize| -> Vec<std::ops::Range<u64>> {
        let group = meta.metadata().row_group(rg);
        let leaves = (0..group.num_columns()).filter(|&c| mask.leaf_included(c));
        leaves
            .map(|c| {
                let (start, len) = group.column(c).byte_range();
                start..start + len
            })
            .collect()
    };
    let groups = meta.metadata().num_row_groups();
    let plan: Vec<Vec<std::ops::Range<u64>>> = (0..groups).map(chunks).collect();
    let path = path.to_path_buf();
    let mut next = 0usize;
    let mut ahead: Option<Vec<(std::ops::Range<u64>, Pending)>> = None;
    let mut current: Option<parquet::arrow::arrow_reader::ParquetRecordBatchReader> = None;
    let start = move |source: &Source, rg: usize| -> io::Result<Vec<(std::ops::Range<u64>, Pending)>> {
        plan[rg].iter().map(|r| Ok((r.clone(), source.access.start(r.clone())?))).collect()
    };
    let mut fail = false;
    Ok(std::iter::from_fn(move || loop {
        if fail {
            return None;
        }
        if let Some(reader) = current.as_mut() {
            match reader.next() {
                Some(Ok(batch)) => return Some(Ok(batch)),
                Some(Err(e)) => {
                    fail = true;
                    let e = source.store_failure().unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidData, e));
                    return Some(Err(e));
                }
                None => current = None,
            }
        }
        if next == groups {
            return None;
        }
        let step = (|| -> io::Result<_> {
            let pending = match ahead.take() {
                Some(p) => p,
                None => start(&source, next)?,
            };
            let mut fetched = Vec::with_capacity(pending.len());
            for (range, p) in pending {
                let bytes = p.wait()?;
                source.counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                fetched.push((range, bytes));
            }
            *source.fetched.lock().unwrap_or_else(|e| e.into_inner()) = fetched;
            if next + 1 < groups {
                ahead = Some(start(&source, next + 1)?);
            }
            ParquetRecordBatchReaderBuilder::new_with_metadata(source.clone(), meta.clone())
                .with_projection(mask.clone())
                .with_row_groups(vec![next])
                .with_batch_size(BATCH_ROWS)
                .build()
                .map_err(|e| source.store_failure().unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidData, e)))
        })();
        next += 1;
        match step {
            Ok(reader) => current = Some(reader),
            // A failed request names its object itself, and must stay a store error.
            Err(e) if crate::storage::is_store_error(&e) => {
                fail = true;
                return Some(Err(e));
            }
            Err(e) => {
                fail = true;
                return Some(Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))));
            }
        }
    }))
}

fn missing_column<'a>(path: &Path, key: &str, names: impl Iterator<Item = &'a String>) -> Error {
    let names: Vec<&str> = names.map(String::as_str).collect();
    Error::invalid(format!(
        "{}: no column {key:?} (the --json-keys of a Parquet or Arrow input name its columns: {})",
        path.display(),
        names.join(", ")
    ))
}

/// A range of the file and its bytes.
type Fetched = (std::ops::Range<u64>, Bytes);

/// A Parquet file for the decoder: the current row group's column chunks from memory, anything
/// else (the footer) read where it lies.
#[derive(Clone)]
struct Source {
    access: Arc<RandomAccess>,
    counter: Arc<AtomicU64>,
    fetched: Arc<Mutex<Vec<Fetched>>>,
    /// A failed request of a read the decoder asked for: the decoder's error only says it in
    /// words, so the reader reports this one instead (a failing store is never a corrupt file).
    store_failure: Arc<Mutex<Option<io::Error>>>,
}

impl Source {
    fn bytes(&self, start: u64, len: u64) -> io::Result<Bytes> {
        let end = start + len;
        let fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((r, b)) = fetched.iter().find(|(r, _)| r.start <= start && end <= r.end) {
            return Ok(b.slice((start - r.start) as usize..(end - r.start) as usize));
        }
        drop(fetched);
        let bytes = self.access.read(start..end).inspect_err(|e| {
            if crate::storage::is_store_error(e) {
                *self.store_failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(crate::storage::same_error(e));
            }
        })?;
        self.counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(bytes)
    }

    /// The failed request of a read the decoder asked for, if there was one.
    fn store_failure(&self) -> Option<io::Error> {
        self.store_failure.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(crate::storage::same_error)
    }
}

impl Length for Source {
    fn len(&self) -> u64 {
        self.access.size()
    }
}

impl ChunkReader for Source {
    type T = io::Cursor<Bytes>;

    /// Page headers are read through this: from the fetched chunk when it holds `start`, else up
    /// to 64 KiB from the input.
    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        let fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((r, b)) = fetched.iter().find(|(r, _)| r.start <= start && start < r.end) {
            return Ok(io::Cursor::new(b.slice((start - r.start) as usize..)));
        }
        drop(fetched);
        let len = (self.access.size().saturating_sub(start)).min(64 << 10);
        Ok(io::Cursor::new(self.bytes(start, len)?))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        Ok(self.bytes(start, length as u64)?)
    }
}

/// The record batches of an Arrow IPC stream, or of a file (its body is a stream), which must have
/// the `keys` columns.
fn arrow_batches(
    path: &Path,
    keys: &[String],
    counter: Arc<AtomicU64>,
) -> Result<impl Iterator<Item = io::Result<RecordBatch>> + Send> {
    let mut raw = crate::read::CountingReader::new(crate::storage::open(path)?, counter);
    let mut head = [0u8; 8];
    let n = read_up_to(&mut raw, &mut head).map_err(|e| Error::io(path, e))?;
    let prefix: Box<dyn Read + Send> = if n >= 6 && &head[..6] == b"ARROW1" {
        Box::new(io::Cursor::new(Vec::new())) // the file format's magic and padding
    } else {
        Box::new(io::Cursor::new(head[..n].to_vec()))
    };
    let stream = io::BufReader::with_capacity(1 << 20, prefix.chain(raw));
    let reader = StreamReader::try_new(stream, None).map_err(|e| {
        Error::io(path, io::Error::new(io::ErrorKind::InvalidData, format!("not a readable Arrow IPC file: {e}")))
    })?;
    let schema = reader.schema();
    if let Some(k) = keys.iter().find(|k| schema.index_of(k).is_err()) {
        return Err(missing_column(path, k, schema.fields().iter().map(|f| f.name())));
    }
    Ok(reader.map(|b| b.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))))
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}
