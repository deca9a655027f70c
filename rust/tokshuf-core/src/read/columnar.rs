//! Parquet and Arrow IPC inputs, read as the JSON lines they stand for.
//!
//! Each row becomes one line `{"key": value, ...}` of the columns the run asks for (`--json-keys`),
//! in the file's row order, and goes through the same line reader, JSON checks and error policy
//! as a `.jsonl` file: a null or a non-string value is `not_string`, invalid UTF-8 in a binary
//! column is `invalid_utf8`, and line N of an error is row N of the file. So a corpus gives the
//! same `.bin/.idx` and the same shards whether it ships as Parquet, Arrow or JSON lines.
//!
//! Parquet is read by row group, only the asked-for columns: the column chunks of the next row
//! group are fetched (ranged GETs for an object) while the current one is decoded, so memory is
//! about two row groups of those columns. Arrow IPC (HF `datasets` cache files, the stream format,
//! and the file format, whose body is a stream) is read front to back like any stream.

use std::io::{self, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow_array::cast::AsArray as _;
use arrow_array::types::{Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{Array, RecordBatch};
use arrow_ipc::reader::StreamReader;
use bytes::Bytes;
use crossbeam_channel::{bounded, Receiver, Sender};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ProjectionMask;
use parquet::file::reader::{ChunkReader, Length};

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

/// Batches of lines converted ahead of the reader.
const AHEAD: usize = 2;
/// Rows per record batch: at a few KiB per web document, a batch's arrays and lines stay under
/// the size the allocator keeps for reuse (`alloc::CACHE_MAX_BLOCK`), so no batch pays for fresh
/// pages.
const BATCH_ROWS: usize = 512;

/// Open `path` as JSON lines of its `keys` columns. `counter` grows by the file's bytes read.
pub fn open(path: &Path, format: Columnar, keys: &[String], counter: Arc<AtomicU64>) -> Result<Box<dyn Read + Send>> {
    let keys = keys.to_vec();
    let rows: Box<dyn Iterator<Item = io::Result<RecordBatch>> + Send> = match format {
        Columnar::Parquet => Box::new(parquet_batches(path, &keys, counter)?),
        Columnar::Arrow => Box::new(arrow_batches(path, counter)?),
    };
    let (tx, rx) = bounded::<io::Result<Vec<u8>>>(AHEAD);
    // Line buffers go back to the converting thread, to be filled again.
    let (spare_tx, spare_rx) = bounded::<Vec<u8>>(AHEAD + 1);
    let name = path.display().to_string();
    std::thread::Builder::new()
        .name("tokshuf-columnar".into())
        .spawn(move || {
            for batch in rows {
                let mut out = spare_rx.try_recv().unwrap_or_default();
                out.clear();
                let lines = batch.and_then(|b| to_json_lines(&b, &keys, &name, out));
                let failed = lines.is_err();
                // The reader hung up (the run stopped): nothing more to do.
                if tx.send(lines).is_err() || failed {
                    return;
                }
            }
        })
        .map_err(|e| Error::io(path, e))?;
    Ok(Box::new(ChannelReader { rx, spare: spare_tx, current: Vec::new(), pos: 0 }))
}

/// The lines the converting thread sends, as a byte stream.
struct ChannelReader {
    rx: Receiver<io::Result<Vec<u8>>>,
    spare: Sender<Vec<u8>>,
    current: Vec<u8>,
    pos: usize,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.current.len() {
            match self.rx.recv() {
                Ok(lines) => {
                    let used = std::mem::replace(&mut self.current, lines?);
                    let _ = self.spare.try_send(used);
                    self.pos = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len() - self.pos);
        buf[..n].copy_from_slice(&self.current[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
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
    let source = Source { access: Arc::new(RandomAccess::open(path)?), counter, fetched: Arc::default() };
    let meta = ArrowReaderMetadata::load(&source, ArrowReaderOptions::new()).map_err(|e| parquet_error(path, e))?;
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
                    return Some(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
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
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
        })();
        next += 1;
        match step {
            Ok(reader) => current = Some(reader),
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
}

impl Source {
    fn bytes(&self, start: u64, len: u64) -> io::Result<Bytes> {
        let end = start + len;
        let fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((r, b)) = fetched.iter().find(|(r, _)| r.start <= start && end <= r.end) {
            return Ok(b.slice((start - r.start) as usize..(end - r.start) as usize));
        }
        drop(fetched);
        let bytes = self.access.read(start..end)?;
        self.counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(bytes)
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

/// The record batches of an Arrow IPC stream, or of a file (its body is a stream).
fn arrow_batches(path: &Path, counter: Arc<AtomicU64>) -> Result<impl Iterator<Item = io::Result<RecordBatch>> + Send> {
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

/// The rows of `batch` as JSON lines of the `keys` columns (a column missing is an error).
fn to_json_lines(batch: &RecordBatch, keys: &[String], name: &str, mut out: Vec<u8>) -> io::Result<Vec<u8>> {
    let columns = keys
        .iter()
        .map(|k| {
            batch.column_by_name(k).cloned().ok_or_else(|| {
                let schema = batch.schema();
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{name}: no column {k:?} (columns: {})", names.join(", ")),
                )
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    let prefixes: Vec<Vec<u8>> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let mut p = if i == 0 { b"{".to_vec() } else { b",".to_vec() };
            write_str(&mut p, k.as_bytes());
            p.push(b':');
            p
        })
        .collect();
    out.reserve(batch.get_array_memory_size() + batch.num_rows() * 16);
    for row in 0..batch.num_rows() {
        for (prefix, column) in prefixes.iter().zip(&columns) {
            out.extend_from_slice(prefix);
            write_value(&mut out, column.as_ref(), row);
        }
        out.extend_from_slice(b"}\n");
    }
    Ok(out)
}

/// Row `i` of `array` as a JSON value. Text is written exactly; other values only need to be
/// recognisably not text (they are `not_string` downstream), so numbers are written as `0`.
fn write_value(out: &mut Vec<u8>, array: &dyn Array, i: usize) {
    use arrow_array::types::GenericBinaryType;
    use arrow_schema::DataType as T;
    if array.is_null(i) {
        out.extend_from_slice(b"null");
        return;
    }
    match array.data_type() {
        T::Utf8 => write_str(out, array.as_string::<i32>().value(i).as_bytes()),
        T::LargeUtf8 => write_str(out, array.as_string::<i64>().value(i).as_bytes()),
        T::Utf8View => write_str(out, array.as_string_view().value(i).as_bytes()),
        T::Binary => write_str(out, array.as_bytes::<GenericBinaryType<i32>>().value(i)),
        T::LargeBinary => write_str(out, array.as_bytes::<GenericBinaryType<i64>>().value(i)),
        T::BinaryView => write_str(out, array.as_binary_view().value(i)),
        T::List(_) => write_list(out, array.as_list::<i32>().value(i).as_ref()),
        T::LargeList(_) => write_list(out, array.as_list::<i64>().value(i).as_ref()),
        T::Dictionary(key, _) => {
            let (values, k) = match key.as_ref() {
                T::Int8 => dict_key(array.as_dictionary::<Int8Type>(), i),
                T::Int16 => dict_key(array.as_dictionary::<Int16Type>(), i),
                T::Int32 => dict_key(array.as_dictionary::<Int32Type>(), i),
                T::Int64 => dict_key(array.as_dictionary::<Int64Type>(), i),
                T::UInt8 => dict_key(array.as_dictionary::<UInt8Type>(), i),
                T::UInt16 => dict_key(array.as_dictionary::<UInt16Type>(), i),
                T::UInt32 => dict_key(array.as_dictionary::<UInt32Type>(), i),
                _ => dict_key(array.as_dictionary::<UInt64Type>(), i),
            };
            write_value(out, values.as_ref(), k);
        }
        T::Boolean => out.extend_from_slice(b"false"),
        t if t.is_numeric() => out.push(b'0'),
        _ => out.extend_from_slice(b"{}"),
    }
}

fn dict_key<K: arrow_array::types::ArrowDictionaryKeyType>(
    d: &arrow_array::DictionaryArray<K>,
    i: usize,
) -> (arrow_array::ArrayRef, usize) {
    use arrow_buffer::ArrowNativeType as _;
    (d.values().clone(), d.keys().value(i).as_usize())
}

/// A list value: `[...]` of its items.
fn write_list(out: &mut Vec<u8>, items: &dyn Array) {
    out.push(b'[');
    for j in 0..items.len() {
        if j > 0 {
            out.push(b',');
        }
        write_value(out, items, j);
    }
    out.push(b']');
}

/// A JSON string of `bytes`: quotes, backslashes and control characters escaped, everything
/// else as is, so that text reads back exactly and invalid UTF-8 reads back as invalid UTF-8.
fn write_str(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Eight bytes at a time while none needs escaping (the common case by far).
        if i + 8 <= bytes.len() {
            let word = u64::from_le_bytes(bytes[i..i + 8].try_into().expect("eight bytes"));
            if !needs_escape(word) {
                i += 8;
                continue;
            }
        }
        let b = bytes[i];
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        } else {
            out.extend_from_slice(escape);
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Whether any byte of `word` is a control character, `"` or `\\` (may say yes for a byte
/// after one that is; never no for one that is).
fn needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH != 0;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH != 0;
    below_space || has_zero(word ^ (ONES * u64::from(b'"'))) || has_zero(word ^ (ONES * u64::from(b'\\')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &[u8]) -> serde_json::Value {
        serde_json::from_slice(line).unwrap()
    }

    #[test]
    fn strings_read_back_exactly() {
        for s in ["", "plain", "q\"b\\s/", "nl\nrt\r\ttab\u{0}\u{1f}\u{7f}", "é€😀\u{2028}"] {
            let mut out = Vec::new();
            write_str(&mut out, s.as_bytes());
            assert_eq!(parse(&out), serde_json::Value::String(s.into()), "{s:?}");
            assert!(!out.contains(&b'\n'));
        }
    }

    #[test]
    fn every_byte_in_every_position() {
        for b in 0..=255u8 {
            for pos in 0..12 {
                let mut bytes = vec![b'a'; 12];
                bytes[pos] = b;
                let mut out = Vec::new();
                write_str(&mut out, &bytes);
                if let Ok(s) = std::str::from_utf8(&bytes) {
                    assert_eq!(parse(&out), serde_json::Value::String(s.into()), "{b} at {pos}");
                } else {
                    assert_eq!(&out[1..out.len() - 1], &bytes[..], "{b} at {pos}");
                }
            }
        }
    }

    #[test]
    fn invalid_utf8_stays_invalid() {
        let mut out = Vec::new();
        write_str(&mut out, b"a\xffb");
        assert_eq!(out, b"\"a\xffb\"");
    }
}
