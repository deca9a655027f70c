//! Arrow IPC inputs: the stream format (HF `datasets` cache files) and the file format (Feather
//! v2, `pyarrow.feather.write_feather`), whose body is a stream between a magic number and a
//! footer, read message by message front to back. Bodies may be LZ4- or ZSTD-compressed.
//!
//! The arrow-ipc reader is used for each message, under a schema whose text types are their byte
//! twins (`Utf8` as `Binary`, `LargeUtf8` as `LargeBinary`, `Utf8View` as `BinaryView`, the same
//! buffers), so one value that is not UTF-8 costs its row, checked where the row is read; and only
//! the key columns are decoded. The lengths a message gives are not trusted for allocation: a body
//! is read as it arrives, so a damaged length ends the file where its bytes end.

use std::collections::HashMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_ipc::reader::{read_dictionary, RecordBatchDecoder};
use arrow_ipc::{root_as_message, MessageHeader};
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Schema, SchemaRef, UnionFields};

use super::batches::{guarded, key_indices, unsupported, Batches, Stop};
use super::decompress::CountingReader;
use crate::error::Error;
use crate::fsutil::read_up_to;

type Stopped<T> = std::result::Result<T, Stop>;

/// The file format's leading magic number (with its padding to 8 bytes).
const FILE_MAGIC: &[u8; 6] = b"ARROW1";
const CONTINUATION: [u8; 4] = [0xff; 4];
/// Bodies are read in pieces of at most this, so that a damaged length costs no more memory than
/// the bytes that are there.
const READ_PIECE: usize = 64 << 20;

/// The record batches of the `keys` columns of the Arrow IPC file `path`.
pub(super) fn batches(path: &Path, keys: &[String], counter: Arc<AtomicU64>) -> Stopped<Batches> {
    let raw = CountingReader::new(crate::storage::open(path).map_err(Stop::Fatal)?, counter);
    let mut raw = io::BufReader::with_capacity(1 << 20, raw);
    let mut head = [0u8; 8];
    let n = read_up_to(&mut raw, &mut head).map_err(|e| Stop::Fatal(Error::io(path, e)))?;
    let file_format = n >= FILE_MAGIC.len() && head.starts_with(FILE_MAGIC);
    // The file format's magic and padding go; a stream's first bytes are its first message.
    let kept = if file_format { Vec::new() } else { head[..n].to_vec() };
    let input: Box<dyn Read + Send> = Box::new(io::Cursor::new(kept).chain(raw));
    let mut messages = Messages { path: path.to_path_buf(), input, file_format, meta: Vec::new() };
    let body = messages.next()?.ok_or_else(|| Stop::Damaged("an empty Arrow IPC stream: no schema".into()))?;
    drop(body);
    let schema = messages.schema()?;
    let projection = key_indices(path, keys, &schema).map_err(Stop::Fatal)?;
    Ok(Box::new(IpcBatches { messages, schema, projection, dictionaries: HashMap::new(), done: false }))
}

/// The messages of a stream: each one's header (flatbuffers) in `meta`, its body returned.
struct Messages {
    path: PathBuf,
    input: Box<dyn Read + Send>,
    /// The file format ends its stream with an end-of-stream marker before the footer; a plain
    /// stream may also just end.
    file_format: bool,
    meta: Vec<u8>,
}

fn damaged(why: impl Into<String>) -> Stop {
    Stop::Damaged(why.into())
}

impl Messages {
    fn storage(&self, e: io::Error) -> Stop {
        Stop::Fatal(Error::io(&self.path, e))
    }

    /// Fill `buf` from the input; how many bytes were there.
    fn read_up_to(&mut self, buf: &mut [u8]) -> Stopped<usize> {
        read_up_to(&mut self.input, buf).map_err(|e| self.storage(e))
    }

    /// The length of the next message's header; `None` at the end of the stream.
    fn header_len(&mut self) -> Stopped<Option<usize>> {
        let mut word = [0u8; 4];
        match self.read_up_to(&mut word)? {
            0 if !self.file_format => return Ok(None),
            4 => {}
            _ => return Err(damaged("the file ends before its end-of-stream marker and footer (cut short?)")),
        }
        // Since Arrow 0.15 a header length follows a continuation marker; before, it came alone.
        if word == CONTINUATION && self.read_up_to(&mut word)? < 4 {
            return Err(damaged("the file ends inside a message's length (cut short?)"));
        }
        match i32::from_le_bytes(word) {
            0 => Ok(None),
            len => usize::try_from(len).map(Some).map_err(|_| damaged(format!("a message length of {len} bytes"))),
        }
    }

    /// The next message: its header in `self.meta`, its body returned; `None` at the end.
    fn next(&mut self) -> Stopped<Option<Buffer>> {
        let Some(len) = self.header_len()? else { return Ok(None) };
        self.meta.clear();
        let read = (&mut self.input).take(len as u64).read_to_end(&mut self.meta);
        read.map_err(|e| self.storage(e))?;
        if self.meta.len() < len {
            return Err(damaged(format!("the file ends inside a message header of {len} bytes (cut short?)")));
        }
        let message = root_as_message(&self.meta).map_err(|e| damaged(format!("unreadable message header: {e}")))?;
        let body_len = usize::try_from(message.bodyLength())
            .map_err(|_| damaged(format!("a message body of {} bytes", message.bodyLength())))?;
        let mut body = MutableBuffer::new(body_len.min(READ_PIECE));
        while body.len() < body_len {
            let at = body.len();
            let piece = (body_len - at).min(READ_PIECE);
            body.extend_zeros(piece);
            if self.read_up_to(&mut body.as_slice_mut()[at..])? < piece {
                return Err(damaged(format!("the file ends inside a message body of {body_len} bytes (cut short?)")));
            }
        }
        Ok(Some(body.into()))
    }

    /// The schema the current message holds, text types read as bytes.
    fn schema(&self) -> Stopped<SchemaRef> {
        let message = root_as_message(&self.meta).map_err(|e| damaged(format!("unreadable message header: {e}")))?;
        let Some(schema) = message.header_as_schema() else {
            return Err(damaged(format!(
                "not an Arrow IPC stream: its first message is a {:?}, not a schema",
                message.header_type()
            )));
        };
        if !schema.endianness().equals_to_target_endianness() {
            return Err(unsupported(&self.path, "Arrow IPC byte order: the file is big-endian"));
        }
        match guarded(|| arrow_ipc::convert::fb_to_schema(schema)) {
            Ok(schema) => Ok(Arc::new(text_as_bytes(&schema))),
            // The schema reader panics on types it does not know, as on nonsense.
            Err(why) if why.contains("not supported") || why.contains("unsupported") => {
                Err(unsupported(&self.path, format!("Arrow IPC schema: {why}")))
            }
            Err(why) => Err(damaged(format!("unreadable schema: {why}"))),
        }
    }
}

/// `schema` with every text type, at any depth, as its byte twin (same buffers, no UTF-8 check).
fn text_as_bytes(schema: &Schema) -> Schema {
    fn field(f: &FieldRef) -> FieldRef {
        Arc::new(Field::clone(f).with_data_type(data_type(f.data_type())))
    }
    fn data_type(t: &DataType) -> DataType {
        match t {
            DataType::Utf8 => DataType::Binary,
            DataType::LargeUtf8 => DataType::LargeBinary,
            DataType::Utf8View => DataType::BinaryView,
            DataType::List(f) => DataType::List(field(f)),
            DataType::LargeList(f) => DataType::LargeList(field(f)),
            DataType::ListView(f) => DataType::ListView(field(f)),
            DataType::LargeListView(f) => DataType::LargeListView(field(f)),
            DataType::FixedSizeList(f, n) => DataType::FixedSizeList(field(f), *n),
            DataType::Struct(fields) => DataType::Struct(fields.iter().map(field).collect()),
            DataType::Map(f, sorted) => DataType::Map(field(f), *sorted),
            DataType::Union(fields, mode) => {
                DataType::Union(fields.iter().map(|(id, f)| (id, field(f))).collect::<UnionFields>(), *mode)
            }
            DataType::Dictionary(k, v) => DataType::Dictionary(k.clone(), Box::new(data_type(v))),
            DataType::RunEndEncoded(ends, values) => DataType::RunEndEncoded(Arc::clone(ends), field(values)),
            other => other.clone(),
        }
    }
    Schema::new_with_metadata(schema.fields().iter().map(field).collect::<Vec<_>>(), schema.metadata().clone())
}

struct IpcBatches {
    messages: Messages,
    schema: SchemaRef,
    projection: Vec<usize>,
    dictionaries: HashMap<i64, ArrayRef>,
    done: bool,
}

impl IpcBatches {
    /// The decoder's error as why the file stops.
    fn stop(&self, e: ArrowError) -> Stop {
        match e {
            ArrowError::NotYetImplemented(what) => {
                unsupported(&self.messages.path, format!("Arrow IPC feature: {what}"))
            }
            e => damaged(e.to_string()),
        }
    }

    fn next_batch(&mut self) -> Stopped<Option<RecordBatch>> {
        loop {
            let Some(body) = self.messages.next()? else { return Ok(None) };
            let message = root_as_message(&self.messages.meta).expect("checked when read");
            let version = message.version();
            let decoded = match message.header_type() {
                MessageHeader::RecordBatch => {
                    let batch =
                        message.header_as_record_batch().ok_or_else(|| damaged("an empty record batch header"))?;
                    let (schema, dictionaries, projection) = (&self.schema, &self.dictionaries, &self.projection);
                    guarded(|| {
                        RecordBatchDecoder::try_new(&body, batch, Arc::clone(schema), dictionaries, &version)?
                            .with_projection(Some(projection.as_slice()))
                            .read_record_batch()
                            .map(Some)
                    })
                }
                MessageHeader::DictionaryBatch => {
                    let batch =
                        message.header_as_dictionary_batch().ok_or_else(|| damaged("an empty dictionary header"))?;
                    let (schema, dictionaries) = (&self.schema, &mut self.dictionaries);
                    guarded(|| read_dictionary(&body, batch, schema, dictionaries, &version).map(|()| None))
                }
                MessageHeader::Schema => return Err(damaged("a second schema in the stream")),
                other => return Err(damaged(format!("a {other:?} message in a stream of record batches"))),
            };
            match decoded {
                Ok(Ok(Some(batch))) => return Ok(Some(batch)),
                Ok(Ok(None)) => {}
                Ok(Err(e)) => return Err(self.stop(e)),
                Err(panic) => return Err(damaged(panic)),
            }
        }
    }
}

impl Iterator for IpcBatches {
    type Item = Stopped<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.next_batch();
        self.done = !matches!(next, Ok(Some(_)));
        next.transpose()
    }
}
