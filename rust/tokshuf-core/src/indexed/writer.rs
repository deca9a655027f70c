//! Streaming writer: the `.bin` grows as sequences arrive, the `.idx` is written at the end
//! (from arrays kept on disk meanwhile, see [`Column`]). Both go to temporary names and are
//! renamed only when complete.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::column::{Column, LeChunks, CHUNK};
use super::format::{bin_path, idx_path};
use super::format::{Header, HEADER_LEN};
use super::reader::IndexedDataset;
use crate::dtype::DType;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::record::{self, Sum, Summing};
use crate::fsutil::{RecordSpec, Staging, StreamingFile, TempFile};

/// What a finished writer produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct WriteSummary {
    /// Documents (entries of document_indices minus one).
    pub documents: u64,
    pub sequences: u64,
    pub tokens: u64,
    pub bin_bytes: u64,
    pub idx_bytes: u64,
}

/// Writes one indexed dataset, byte-identical to Megatron's `IndexedDatasetBuilder`.
#[derive(Debug)]
pub struct IndexedDatasetWriter {
    prefix: PathBuf,
    dtype: DType,
    bin_tmp: TempFile,
    idx_tmp: TempFile,
    bin: StreamingFile,
    bin_bytes: u64,
    lengths: Column<i32>,
    document_indices: Column<u64>,
    /// The last entry of `document_indices`.
    last_boundary: u64,
    modes: Option<Column<i8>>,
    scratch: Vec<u8>,
    /// A write failed part-way, so the files miss bytes: every later call fails.
    failed: bool,
    /// The output's directory, where the index arrays spill (named by their errors: the spill
    /// files have no name).
    dir: PathBuf,
}

impl IndexedDatasetWriter {
    /// Start writing `{prefix}.bin/.idx` with token `dtype`; `multimodal` adds `sequence_modes`.
    pub fn create(prefix: impl AsRef<Path>, dtype: DType, multimodal: bool) -> Result<Self> {
        let prefix = prefix.as_ref().to_path_buf();
        let dir = match prefix.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(dir) => {
                std::fs::create_dir_all(dir).with_path(dir)?;
                dir.to_path_buf()
            }
            None => PathBuf::from("."),
        };
        let bin_tmp = TempFile::new(bin_path(&prefix));
        let idx_tmp = TempFile::new(idx_path(&prefix));
        let bin = StreamingFile::new(bin_tmp.create()?);
        let mut document_indices = Column::new(dir.clone());
        document_indices.push(0).with_path(&dir)?;
        Ok(Self {
            prefix,
            dtype,
            bin_bytes: 0,
            lengths: Column::new(dir.clone()),
            document_indices,
            last_boundary: 0,
            modes: multimodal.then(|| Column::new(dir.clone())),
            scratch: Vec::new(),
            failed: false,
            dir,
            bin_tmp,
            idx_tmp,
            bin,
        })
    }

    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// Run `step`, unless an earlier one failed on I/O; one that does leaves the writer refusing
    /// every later call (its files miss bytes). Checks that fail before writing leave it usable.
    fn checked<T>(&mut self, step: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.usable()?;
        let result = step(self);
        self.failed = matches!(result, Err(Error::Io { .. }));
        result
    }

    fn usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::invalid(format!(
                "an earlier write to {} failed: the dataset is incomplete and cannot be continued",
                self.prefix.display()
            )));
        }
        Ok(())
    }

    fn push_length(&mut self, n: usize, mode: Option<i8>) -> Result<()> {
        let len = i32::try_from(n).map_err(|_| {
            Error::invalid(format!("a sequence of {n} tokens exceeds the format's limit of {} (int32)", i32::MAX))
        })?;
        if self.modes.is_none() && mode.is_some() {
            return Err(Error::invalid("a sequence mode was given to a non-multimodal writer"));
        }
        if let Some(modes) = &mut self.modes {
            modes.push(mode.unwrap_or(0)).with_path(&self.dir)?;
        }
        self.lengths.push(len).with_path(&self.dir)?;
        Ok(())
    }

    fn push_boundary(&mut self, boundary: u64) -> Result<()> {
        self.last_boundary = boundary;
        self.document_indices.push(boundary).with_path(&self.dir)
    }

    /// Append one sequence of token ids (checked against the dtype's range).
    pub fn add_sequence(&mut self, tokens: &[u32]) -> Result<()> {
        self.add_sequence_with_mode(tokens, None)
    }

    /// Append one sequence with a mode (multimodal writers; `None` records mode 0).
    pub fn add_sequence_with_mode(&mut self, tokens: &[u32], mode: Option<i8>) -> Result<()> {
        self.checked(|w| {
            w.dtype.check_tokens(tokens)?;
            w.push_length(tokens.len(), mode)?;
            // Straight from the ids where the dtype stores them as they are (int32).
            let bytes = match w.dtype.stored_bytes(tokens) {
                Some(bytes) => bytes,
                None => {
                    w.scratch.clear();
                    w.dtype.convert_checked(tokens, &mut w.scratch);
                    &w.scratch
                }
            };
            w.bin.write_all(bytes).with_path(w.bin_tmp.path())?;
            w.bin_bytes += bytes.len() as u64;
            Ok(())
        })
    }

    /// Append one sequence already encoded as little-endian elements of the dtype.
    pub fn add_sequence_bytes(&mut self, bytes: &[u8], mode: Option<i8>) -> Result<()> {
        let item = self.dtype.itemsize();
        if !bytes.len().is_multiple_of(item) {
            return Err(Error::invalid(format!(
                "{} bytes is not a whole number of {} elements",
                bytes.len(),
                self.dtype
            )));
        }
        self.checked(|w| {
            w.push_length(bytes.len() / item, mode)?;
            w.bin.write_all(bytes).with_path(w.bin_tmp.path())?;
            w.bin_bytes += bytes.len() as u64;
            Ok(())
        })
    }

    /// Close the current document (an empty document repeats the previous boundary, as in Megatron).
    pub fn end_document(&mut self) -> Result<()> {
        self.checked(|w| w.push_boundary(w.lengths.len()))
    }

    /// Append every document of `other` (Megatron's `add_index`): same dtype required.
    pub fn append(&mut self, other: &IndexedDataset) -> Result<()> {
        if other.dtype() != self.dtype {
            return Err(Error::invalid(format!(
                "cannot merge {} ({}) into a {} dataset: every input must have the same dtype",
                other.prefix().display(),
                other.dtype(),
                self.dtype
            )));
        }
        if other.multimodal() != self.modes.is_some() {
            return Err(Error::invalid(format!(
                "cannot merge {}: it is {}multimodal and the output is {}",
                other.prefix().display(),
                if other.multimodal() { "" } else { "not " },
                if self.modes.is_some() { "multimodal" } else { "not" }
            )));
        }
        self.checked(|w| {
            let offset = w.lengths.len();
            for i in 0..other.len() {
                w.push_length(other.sequence_length(i) as usize, other.sequence_mode(i))?;
            }
            for d in 1..=other.num_documents() {
                w.push_boundary(offset + other.document_index(d))?;
            }
            let bytes = other.bin_mapping()?.bytes();
            let out = w.bin_tmp.path().to_path_buf();
            if other.is_contiguous() {
                let n = other.data_bytes() as usize;
                w.bin.write_all(&bytes[..n]).with_path(&out)?;
                w.bin_bytes += n as u64;
            } else {
                for i in 0..other.len() {
                    let seq = other.sequence_bytes(i, 0, None)?;
                    w.bin.write_all(seq).with_path(&out)?;
                    w.bin_bytes += seq.len() as u64;
                }
            }
            Ok(())
        })
    }

    /// Write the `.idx`, flush and sync both files and move them into place (see [`Staging`]
    /// for the order, which never leaves an old `.idx` beside a new `.bin`).
    ///
    /// Sequences added after the last [`end_document`](Self::end_document) form a final document.
    pub fn finish(self) -> Result<WriteSummary> {
        let (summary, staged) = self.finish_staged()?;
        staged.commit()?;
        Ok(summary)
    }

    /// [`finish`](Self::finish), publishing the pair as a set by its own commit record
    /// (`{prefix}.commit.json`, see [`crate::fsutil::record`]) written by `command` from `inputs`
    /// (the identity of what it read).
    pub fn finish_as_set(self, command: &str, inputs: serde_json::Value) -> Result<WriteSummary> {
        let path = record::record_path(&self.prefix);
        let (summary, mut staged) = self.finish_staged()?;
        staged.set_record(RecordSpec { path, command: command.into(), run: serde_json::Value::Null, inputs });
        staged.commit()?;
        Ok(summary)
    }

    /// Write the `.idx` and sync both files, but leave them under their temporary names in the
    /// returned set, to be committed together with the other outputs of a run.
    pub fn finish_staged(mut self) -> Result<(WriteSummary, Staging)> {
        self.usable()?;
        if self.last_boundary != self.lengths.len() {
            self.end_document()?;
        }
        let bin_path = self.bin_tmp.path().to_path_buf();
        let bin_sum = self.bin.finish().with_path(&bin_path)?;

        let idx_file = self.idx_tmp.create()?;
        let (idx_bytes, idx_sum) = write_index(
            idx_file,
            self.dtype,
            self.lengths.len(),
            self.document_indices.len(),
            &mut self.lengths,
            &mut self.document_indices,
            self.modes.as_mut().map(|m| m as &mut dyn LeChunks),
        )
        .with_path(self.idx_tmp.path())?;
        let summary = WriteSummary {
            documents: self.document_indices.len() - 1,
            sequences: self.lengths.len(),
            tokens: self.bin_bytes / self.dtype.itemsize() as u64,
            bin_bytes: self.bin_bytes,
            idx_bytes,
        };
        let mut staged = Staging::new();
        staged.add_data(self.bin_tmp, bin_sum);
        staged.add_index(self.idx_tmp, idx_sum);
        Ok((summary, staged))
    }
}

/// Write an `.idx` for arrays that describe an existing `.bin` (Megatron's `_IndexWriter.write`),
/// atomically. `document_indices` must start at 0, never decrease and end at `lengths.len()`.
pub fn write_index_file(
    path: &Path,
    dtype: DType,
    lengths: &[i32],
    document_indices: &[u64],
    modes: Option<&[i8]>,
) -> Result<u64> {
    let bad = |msg: String| Err(Error::invalid(msg));
    if document_indices.first() != Some(&0) {
        return bad("document_indices must start with 0".into());
    }
    if let Some(w) = document_indices.windows(2).position(|w| w[1] < w[0]) {
        return bad(format!("document_indices decrease at position {}", w + 1));
    }
    if document_indices.last() != Some(&(lengths.len() as u64)) {
        return bad(format!(
            "document_indices must end at the number of sequences ({}), not {}",
            lengths.len(),
            document_indices.last().unwrap_or(&0)
        ));
    }
    if let Some(i) = lengths.iter().position(|&l| l < 0) {
        return bad(format!("sequence_lengths[{i}] is negative"));
    }
    if modes.is_some_and(|m| m.len() != lengths.len()) {
        return bad("sequence_modes must have one entry per sequence".into());
    }
    let (mut lengths, mut document_indices, mut modes) = (lengths, document_indices, modes);
    let tmp = TempFile::new(path);
    let file = tmp.create()?;
    let (n, _) = write_index(
        file,
        dtype,
        lengths.len() as u64,
        document_indices.len() as u64,
        &mut lengths,
        &mut document_indices,
        modes.as_mut().map(|m| m as &mut dyn LeChunks),
    )
    .with_path(tmp.path())?;
    tmp.commit()?;
    Ok(n)
}

/// Write the header and the arrays (`lengths` twice: as themselves, then as byte offsets) and
/// sync; the `.idx`'s size and checksum.
fn write_index(
    file: File,
    dtype: DType,
    sequences: u64,
    documents: u64,
    lengths: &mut dyn LeChunks,
    document_indices: &mut dyn LeChunks,
    modes: Option<&mut dyn LeChunks>,
) -> io::Result<(u64, Sum)> {
    let mut file = Summing::new(file);
    let header = Header { dtype, sequence_count: sequences, document_count: documents };
    crate::fsutil::fault::point()?;
    file.write_all(&header.to_bytes())?;
    let mut copy = |b: &[u8]| {
        crate::fsutil::fault::point()?;
        file.write_all(b)
    };
    lengths.each(&mut copy)?;
    let item = dtype.itemsize() as u64;
    let (mut ptr, mut out) = (0u64, Vec::with_capacity(2 * CHUNK));
    lengths.each(&mut |b| {
        for l in b.chunks_exact(4) {
            out.extend_from_slice(&ptr.to_le_bytes());
            ptr += i32::from_le_bytes(l.try_into().expect("4 bytes")) as u64 * item;
        }
        if out.len() >= CHUNK {
            copy(&out)?;
            out.clear();
        }
        Ok(())
    })?;
    copy(&out)?;
    document_indices.each(&mut copy)?;
    let mut n_modes = 0;
    if let Some(modes) = modes {
        modes.each(&mut |b| {
            n_modes += b.len() as u64;
            copy(b)
        })?;
    }
    let (file, sum) = file.into_parts();
    file.sync_all()?;
    Ok((HEADER_LEN as u64 + sequences * 12 + documents * 8 + n_modes, sum))
}
