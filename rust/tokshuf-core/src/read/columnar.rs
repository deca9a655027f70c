//! Parquet and Arrow IPC inputs, read as batches of rows whose `--json-keys` values go to the
//! tokenizer straight from the Arrow arrays ([`super::rows`]: the same documents and rejections
//! as the JSON lines the rows stand for). Row N is line N in messages, and the rows come in the
//! file's order, so a corpus gives the same `.bin/.idx` and the same shards whether it ships as
//! Parquet, Arrow or JSON lines.
//!
//! Parquet is read by row group, only the asked-for columns: the column chunks of the next row
//! group are fetched (ranged GETs for an object) while the current one is decoded, so memory is
//! about two row groups of those columns. Arrow IPC is read front to back ([`super::ipc`]).
//!
//! Text columns are decoded as bytes (a Parquet string as binary, an Arrow `Utf8` array as
//! `Binary`: the same data, unchecked), so one value that is not UTF-8 costs its row
//! (`invalid_utf8`), as its JSON line would, not the rest of the file. Two columns with the same
//! name are the key repeated in a JSON object: the last one is read.
//!
//! A file stops early for one of two reasons ([`Stop`]): it is damaged (a footer, page or message
//! that cannot be decoded, a file cut short), which is a `truncated_file` like a cut gzip member,
//! skipped under `--on-error skip`; or it cannot be read at all by this build (a codec or an
//! encoding it lacks) or the store failed, which stops the run whatever the policy, naming the
//! feature or the failure.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::ArrowError;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::basic::{Compression, ConvertedType, LogicalType, Type as Physical};
use parquet::errors::ParquetError;
use parquet::file::metadata::{FileMetaData, ParquetMetaData, ParquetMetaDataReader, RowGroupMetaData};
use parquet::file::reader::{ChunkReader, Length};
use parquet::schema::types::{SchemaDescriptor, Type, TypePtr};

use super::batches::{guarded, key_indices, missing_column, unsupported, Batches, Stop};
use super::lines::{LineBatch, LineSpan, Truncation};
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
pub(super) const BATCH_ROWS: usize = 512;

/// The rows of a Parquet or Arrow file, in batches of about `batch_bytes` (of the JSON lines they
/// stand for), as a [`super::LineReader`] gives lines: a row longer than `max_line_bytes` is
/// [`LineSpan::TooLong`], and a file that cannot be decoded past some row ends there, with its
/// [`Truncation`] (at line 1 if nothing of it can be read: a missing footer, a corrupt schema).
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
    ///
    /// An error if the store fails, a key names no column, or the file needs a feature this
    /// build lacks; a file damaged from the start is a reader with no rows and a truncation.
    pub fn open(
        path: &Path,
        format: Columnar,
        keys: &[String],
        counter: Arc<AtomicU64>,
        batch_bytes: usize,
        max_line_bytes: usize,
    ) -> Result<RowReader> {
        let opened = match format {
            Columnar::Parquet => parquet_batches(path, keys, counter),
            Columnar::Arrow => super::ipc::batches(path, keys, counter),
        };
        let (batches, truncation): (Batches, _) = match opened {
            Ok(batches) => (batches, None),
            Err(Stop::Damaged(message)) => {
                (Box::new(std::iter::empty()), Some(Truncation { offset: 0, line: 1, fragment_bytes: 0, message }))
            }
            Err(Stop::Fatal(e)) => return Err(e),
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
            truncation,
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
                Some(Err(Stop::Damaged(message))) => {
                    self.truncation =
                        Some(Truncation { offset: self.offset, line: self.next_line, fragment_bytes: 0, message });
                }
                Some(Err(Stop::Fatal(e))) => return Err(e),
            }
        }
    }
}

/// The `keys` columns of `batch`, in that order (the batch holds one column of each name).
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

/// The Parquet codecs this build decodes (every one pyarrow writes).
const PARQUET_CODECS: &str = "uncompressed, snappy, gzip, brotli, lz4, lz4_raw and zstd";

/// Whether this build decodes `codec` (no catch-all: a codec the crate adds must be decided here).
fn decodes(codec: Compression) -> bool {
    match codec {
        Compression::UNCOMPRESSED
        | Compression::SNAPPY
        | Compression::GZIP(_)
        | Compression::BROTLI(_)
        | Compression::LZ4
        | Compression::ZSTD(_)
        | Compression::LZ4_RAW => true,
        Compression::LZO => false,
    }
}

/// The column chunks of the projected leaves of one row group, as byte ranges of the file, or
/// why that row group is damaged; an error if a chunk needs a codec this build lacks.
type Plan = Result<Vec<Range<u64>>, String>;

fn plan_row_group(path: &Path, group: &RowGroupMetaData, mask: &ProjectionMask, size: u64) -> Result<Plan, Stop> {
    let mut ranges = Vec::new();
    for (c, chunk) in group.columns().iter().enumerate().filter(|&(c, _)| mask.leaf_included(c)) {
        let codec = chunk.compression();
        if !decodes(codec) {
            let column = chunk.column_path().string();
            return Err(unsupported(
                path,
                format!("Parquet codec {codec} (column {column:?}): this build reads {PARQUET_CODECS}; rewrite the file with one of them"),
            ));
        }
        // `byte_range` asserts on negative offsets: a damaged footer must not get there.
        let start = chunk.dictionary_page_offset().unwrap_or(chunk.data_page_offset());
        let len = chunk.compressed_size();
        let range = u64::try_from(start).ok().zip(u64::try_from(len).ok()).map(|(s, l)| s..s.saturating_add(l));
        match range {
            Some(r) if r.end <= size => ranges.push(r),
            _ => {
                return Ok(Err(format!(
                    "the footer places column chunk {c} at bytes {start}..+{len}, beyond the file's {size} bytes (cut short?)"
                )))
            }
        }
    }
    Ok(Ok(ranges))
}

/// `metadata` with its text leaves (Parquet strings and JSON) as plain byte arrays: the decoder
/// checks the UTF-8 of a string column page by page and fails the whole page (and file) on one
/// bad value, where the rows reader checks each value and rejects its row alone.
fn text_as_bytes(metadata: ParquetMetaData) -> Result<ParquetMetaData, ParquetError> {
    fn strip(t: &TypePtr) -> Result<TypePtr, ParquetError> {
        let info = t.get_basic_info();
        if t.is_primitive() {
            let text = matches!(info.logical_type_ref(), Some(LogicalType::String | LogicalType::Json))
                || matches!(info.converted_type(), ConvertedType::UTF8 | ConvertedType::JSON);
            if t.get_physical_type() != Physical::BYTE_ARRAY || !text {
                return Ok(Arc::clone(t));
            }
            let id = info.has_id().then(|| info.id());
            let plain = Type::primitive_type_builder(info.name(), Physical::BYTE_ARRAY).with_id(id);
            let plain = if info.has_repetition() { plain.with_repetition(info.repetition()) } else { plain };
            return Ok(Arc::new(plain.build()?));
        }
        let fields = t.get_fields().iter().map(strip).collect::<Result<Vec<_>, _>>()?;
        if fields.iter().zip(t.get_fields()).all(|(a, b)| Arc::ptr_eq(a, b)) {
            return Ok(Arc::clone(t));
        }
        let group = Type::group_type_builder(info.name())
            .with_fields(fields)
            .with_converted_type(info.converted_type())
            .with_logical_type(info.logical_type_ref().cloned())
            .with_id(info.has_id().then(|| info.id()));
        let group = if info.has_repetition() { group.with_repetition(info.repetition()) } else { group };
        Ok(Arc::new(group.build()?))
    }
    let file = metadata.file_metadata();
    let root = file.schema_descr().root_schema_ptr();
    let stripped = strip(&root)?;
    if Arc::ptr_eq(&stripped, &root) {
        return Ok(metadata);
    }
    let file = FileMetaData::new(
        file.version(),
        file.num_rows(),
        file.created_by().map(str::to_string),
        file.key_value_metadata().cloned(),
        Arc::new(SchemaDescriptor::new(stripped)),
        file.column_orders().cloned(),
    );
    Ok(ParquetMetaData::new(file, metadata.row_groups().to_vec()))
}

/// The record batches of the `keys` columns, row group after row group, the next one's column
/// chunks fetched while the current one is decoded.
fn parquet_batches(path: &Path, keys: &[String], counter: Arc<AtomicU64>) -> Result<Batches, Stop> {
    let access = Arc::new(RandomAccess::open(path).map_err(Stop::Fatal)?);
    let size = access.size();
    let source = Source { access, counter, fetched: Arc::default(), failed: Arc::default() };
    let loaded = guarded(|| {
        let metadata = ParquetMetaDataReader::new().parse_and_finish(&source)?;
        // The Arrow schema pyarrow stores in the footer would make the byte arrays strings again;
        // Parquet's own types give the same values (lists, dictionaries and large types come back
        // plain, which reads the same).
        let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
        ArrowReaderMetadata::try_new(Arc::new(text_as_bytes(metadata)?), options)
    });
    let meta = match loaded {
        Ok(Ok(meta)) => meta,
        Ok(Err(e)) => return Err(source.parquet_stop(path, e)),
        Err(panic) => return Err(Stop::Damaged(format!("not a readable Parquet file: {panic}"))),
    };
    let columns = key_indices(path, keys, meta.schema()).map_err(Stop::Fatal)?;
    let mask = ProjectionMask::roots(meta.parquet_schema(), columns);
    let groups = meta.metadata().num_row_groups();
    let plan: Vec<Plan> =
        meta.metadata().row_groups().iter().map(|g| plan_row_group(path, g, &mask, size)).collect::<Result<_, _>>()?;
    let path = path.to_path_buf();
    let mut next = 0usize;
    let mut ahead: Option<Vec<(Range<u64>, Pending)>> = None;
    let mut current: Option<ParquetRecordBatchReader> = None;
    let start = move |source: &Source, ranges: &[Range<u64>]| -> io::Result<Vec<(Range<u64>, Pending)>> {
        ranges.iter().map(|r| Ok((r.clone(), source.access.start(r.clone())?))).collect()
    };
    let mut next_batch = move || -> Result<Option<RecordBatch>, Stop> {
        loop {
            if let Some(reader) = current.as_mut() {
                match guarded(|| reader.next()) {
                    Ok(Some(Ok(batch))) => return Ok(Some(batch)),
                    Ok(None) => current = None,
                    Ok(Some(Err(e))) => return Err(source.arrow_stop(&path, e)),
                    Err(panic) => return Err(Stop::Damaged(panic)),
                }
            }
            if next == groups {
                return Ok(None);
            }
            let ranges = plan[next].as_ref().map_err(|why| Stop::Damaged(why.clone()))?;
            let storage = |e: io::Error| Stop::Fatal(Error::io(&path, e));
            let pending = match ahead.take() {
                Some(p) => p,
                None => start(&source, ranges).map_err(storage)?,
            };
            let mut fetched = Vec::with_capacity(pending.len());
            for (range, p) in pending {
                let bytes = p.wait().map_err(storage)?;
                source.counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                fetched.push((range, bytes));
            }
            *source.fetched.lock().unwrap_or_else(|e| e.into_inner()) = fetched;
            if let Some(Ok(ranges)) = plan.get(next + 1) {
                ahead = Some(start(&source, ranges).map_err(storage)?);
            }
            let built = guarded(|| {
                ParquetRecordBatchReaderBuilder::new_with_metadata(source.clone(), meta.clone())
                    .with_projection(mask.clone())
                    .with_row_groups(vec![next])
                    .with_batch_size(BATCH_ROWS)
                    .build()
            });
            current = Some(match built {
                Ok(Ok(reader)) => reader,
                Ok(Err(e)) => return Err(source.parquet_stop(&path, e)),
                Err(panic) => return Err(Stop::Damaged(panic)),
            });
            next += 1;
        }
    };
    // The first error ends the batches.
    let mut done = false;
    let batches = std::iter::from_fn(move || {
        if done {
            return None;
        }
        let next = next_batch();
        done = !matches!(next, Ok(Some(_)));
        next.transpose()
    });
    Ok(Box::new(batches))
}

/// A range of the file and its bytes.
type Fetched = (Range<u64>, Bytes);

/// A Parquet file for the decoder: the current row group's column chunks from memory, anything
/// else (the footer, a page header past a chunk's end) read where it lies.
#[derive(Clone)]
struct Source {
    access: Arc<RandomAccess>,
    counter: Arc<AtomicU64>,
    fetched: Arc<Mutex<Vec<Fetched>>>,
    /// The store's failure on a read the decoder asked for: the decoder reports it as its own
    /// error (or as whatever it makes of the missing bytes), and the run must stop on it.
    failed: Arc<Mutex<Option<io::Error>>>,
}

impl Source {
    fn bytes(&self, start: u64, len: u64) -> io::Result<Bytes> {
        let end = start.saturating_add(len);
        let fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((r, b)) = fetched.iter().find(|(r, _)| r.start <= start && end <= r.end) {
            return Ok(b.slice((start - r.start) as usize..(end - r.start) as usize));
        }
        drop(fetched);
        let size = self.access.size();
        if end > size {
            // Where the file's own offsets lead: damage, not a failing store.
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("bytes {start}..{end} lie beyond the end of the file ({size} bytes)"),
            ));
        }
        let bytes = self.access.read(start..end).inspect_err(|e| {
            *self.failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(crate::storage::same_error(e));
        })?;
        self.counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(bytes)
    }

    /// The store's failure, if a read failed.
    fn failure(&self, path: &Path) -> Option<Stop> {
        let failed = self.failed.lock().unwrap_or_else(|e| e.into_inner()).take();
        failed.map(|e| Stop::Fatal(Error::io(path, e)))
    }

    /// Why the file stops, after the decoder's error `e`.
    fn parquet_stop(&self, path: &Path, e: ParquetError) -> Stop {
        if let Some(stop) = self.failure(path) {
            return stop;
        }
        match e {
            ParquetError::NYI(what) => unsupported(path, format!("Parquet feature: {what}")),
            ParquetError::General(m) if m.contains("encrypt") => {
                unsupported(path, format!("Parquet encryption ({m}): decrypt the file first"))
            }
            e => Stop::Damaged(format!("not a readable Parquet file: {e}")),
        }
    }

    /// [`Source::parquet_stop`] for an error of the record batch reader (a Parquet error in
    /// words: the `NYI` of a feature the crate lacks is found by its prefix).
    fn arrow_stop(&self, path: &Path, e: ArrowError) -> Stop {
        if let Some(stop) = self.failure(path) {
            return stop;
        }
        match e {
            ArrowError::ParquetError(m) if m.starts_with("NYI") => unsupported(path, format!("Parquet feature: {m}")),
            ArrowError::NotYetImplemented(m) => unsupported(path, format!("Parquet feature: {m}")),
            e => Stop::Damaged(e.to_string()),
        }
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

#[cfg(test)]
mod tests {
    use parquet::arrow::ArrowWriter;
    use parquet::file::metadata::ColumnChunkMetaDataBuilder;
    use parquet::file::metadata::ParquetMetaDataWriter;

    use super::*;

    /// A Parquet file of one text column, its column chunks' metadata changed by `change`.
    fn parquet_with(change: impl Fn(ColumnChunkMetaDataBuilder) -> ColumnChunkMetaDataBuilder) -> Vec<u8> {
        let text: ArrayRef = Arc::new(arrow_array::StringArray::from(vec!["a", "b"]));
        let batch = RecordBatch::try_from_iter([("text", text)]).unwrap();
        let mut file = Vec::new();
        let mut w = ArrowWriter::try_new(&mut file, batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let meta = ParquetMetaDataReader::new().parse_and_finish(&Bytes::from(file.clone())).unwrap();
        let footer = u32::from_le_bytes(file[file.len() - 8..file.len() - 4].try_into().unwrap()) as usize;
        let groups = meta
            .row_groups()
            .iter()
            .map(|g| {
                let columns = g.columns().iter().map(|c| change(c.clone().into_builder()).build().unwrap()).collect();
                g.clone().into_builder().set_column_metadata(columns).build().unwrap()
            })
            .collect();
        let changed = ParquetMetaData::new(meta.file_metadata().clone(), groups);
        let mut out = file[..file.len() - 8 - footer].to_vec();
        ParquetMetaDataWriter::new(&mut out, &changed).finish().unwrap();
        out
    }

    fn open(bytes: &[u8]) -> Result<RowReader> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        std::fs::write(&path, bytes).unwrap();
        RowReader::open(&path, Columnar::Parquet, &["text".into()], Arc::default(), 1 << 20, 1 << 20)
    }

    #[test]
    fn a_codec_this_build_lacks_is_refused_naming_it() {
        let file = parquet_with(|c| c);
        assert!(open(&file).unwrap().next_batch().unwrap().is_some());
        let Err(e) = open(&parquet_with(|c| c.set_compression(Compression::LZO))) else { panic!("read") };
        assert!(matches!(e, Error::Format { .. }), "{e}");
        let message = e.to_string();
        assert!(message.contains("unsupported Parquet codec LZO (column \"text\")"), "{message}");
        assert!(message.contains(PARQUET_CODECS), "{message}");
        for codec in [
            Compression::UNCOMPRESSED,
            Compression::SNAPPY,
            Compression::GZIP(Default::default()),
            Compression::BROTLI(Default::default()),
            Compression::LZ4,
            Compression::ZSTD(Default::default()),
            Compression::LZ4_RAW,
        ] {
            assert!(decodes(codec), "{codec}");
        }
    }

    #[test]
    fn column_chunks_placed_outside_the_file_are_damage_not_a_panic() {
        for change in [
            (|c: ColumnChunkMetaDataBuilder| c.set_data_page_offset(-5).set_dictionary_page_offset(None))
                as fn(ColumnChunkMetaDataBuilder) -> ColumnChunkMetaDataBuilder,
            |c| c.set_total_compressed_size(-1),
            |c| c.set_total_compressed_size(1 << 40),
            |c| c.set_dictionary_page_offset(Some(i64::MAX)),
        ] {
            let mut reader = open(&parquet_with(change)).unwrap();
            assert!(reader.next_batch().unwrap().is_none());
            let t = reader.truncation().expect("damaged");
            assert_eq!((t.line, t.offset), (1, 0));
            assert!(t.message.contains("column chunk 0"), "{}", t.message);
        }
    }
}
