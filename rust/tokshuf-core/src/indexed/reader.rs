//! Memory-mapped, validated reader of `.bin/.idx` pairs.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::format::{bin_path, idx_path};
use super::format::{Header, Layout, HEADER_LEN, MAGIC, VERSION};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::storage::RandomAccess;

use super::source::{Mapping, RemoteBin};

/// How much of the index to check at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validate {
    /// Header, array sizes, first/last document index, and that the last sequence ends exactly
    /// at the end of the `.bin`: O(1).
    Header,
    /// Also every length, that every pointer is the running sum of the lengths before it (as
    /// Megatron writes them), that they add up to the `.bin`'s size, and that document indices
    /// never decrease: O(sequences + documents).
    Full,
}

/// Where the `.bin`'s bytes come from.
#[derive(Debug, Clone)]
enum Bin {
    Mapped(Mapping),
    Ranged(Arc<RandomAccess>),
}

/// An opened indexed dataset.
#[derive(Debug, Clone)]
pub struct IndexedDataset {
    prefix: PathBuf,
    idx_path: PathBuf,
    bin_path: PathBuf,
    idx: Mapping,
    bin: Bin,
    header: Header,
    layout: Layout,
    multimodal: bool,
}

#[inline]
fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl IndexedDataset {
    /// Open `{prefix}.idx` and `{prefix}.bin`.
    ///
    /// `multimodal`: `None` detects `sequence_modes` from the file size, `Some(x)` requires it.
    /// A prefix in a store (`s3://...`) reads local copies of both files.
    pub fn open(prefix: impl AsRef<Path>, multimodal: Option<bool>, validate: Validate) -> Result<Self> {
        Self::open_with(prefix, multimodal, validate, RemoteBin::Copy)
    }

    /// [`IndexedDataset::open`], with the `.bin` of a prefix in a store read as `remote` says.
    pub fn open_with(
        prefix: impl AsRef<Path>,
        multimodal: Option<bool>,
        validate: Validate,
        remote: RemoteBin,
    ) -> Result<Self> {
        let prefix = prefix.as_ref().to_path_buf();
        if let Some(url) = prefix.to_str().filter(|s| crate::storage::is_remote(s)) {
            let pinned = super::pinned::pin_remote_pair(url, remote)?;
            let idx = Mapping::open(&pinned.idx)?;
            let bin = match pinned.bin {
                super::pinned::PinnedBin::Local(path) => Bin::Mapped(Mapping::open(&path)?),
                super::pinned::PinnedBin::Ranged(ra) => Bin::Ranged(Arc::new(ra)),
            };
            return Self::with_bin(prefix, idx, bin, multimodal, validate);
        }
        let (idx, bin) = super::pinned::open_local_pair(&prefix)?;
        Self::with_bin(prefix, idx, Bin::Mapped(bin), multimodal, validate)
    }

    /// A dataset over already-loaded `.idx` and `.bin` bytes; `prefix` is only used in messages.
    pub fn from_mappings(
        prefix: impl AsRef<Path>,
        idx: Mapping,
        bin: Mapping,
        multimodal: Option<bool>,
        validate: Validate,
    ) -> Result<Self> {
        Self::with_bin(prefix, idx, Bin::Mapped(bin), multimodal, validate)
    }

    fn with_bin(
        prefix: impl AsRef<Path>,
        idx: Mapping,
        bin: Bin,
        multimodal: Option<bool>,
        validate: Validate,
    ) -> Result<Self> {
        let prefix = prefix.as_ref().to_path_buf();
        let (idx_path, bin_path) = (idx_path(&prefix), bin_path(&prefix));
        let (header, layout, multimodal) = parse_index(idx.bytes(), &idx_path, multimodal)?;
        let ds = IndexedDataset { prefix, idx_path, bin_path, idx, bin, header, layout, multimodal };
        ds.validate(validate)?;
        Ok(ds)
    }

    fn corrupt(&self, msg: String) -> Error {
        Error::format(&self.idx_path, msg)
    }

    fn validate(&self, level: Validate) -> Result<()> {
        let s = self.len();
        let d = self.header.document_count as usize;
        if d == 0 {
            return Err(self.corrupt("document count is 0, but document_indices always holds a leading 0".into()));
        }
        if self.document_index(0) != 0 {
            return Err(self.corrupt(format!("document_indices[0] is {}, expected 0", self.document_index(0))));
        }
        let last = self.document_index(d - 1);
        if last != s as u64 {
            return Err(self.corrupt(format!(
                "document_indices[-1] is {last} but there are {s} sequences; the two must be equal"
            )));
        }
        let item = self.dtype().itemsize() as u64;
        let length = |i: usize| {
            let len = self.raw_length(i);
            u64::try_from(len).map_err(|_| self.corrupt(format!("sequence_lengths[{i}] is negative ({len})")))
        };
        let bin_len = self.bin_len();
        let size_mismatch = |end: u64| {
            Error::format(
                &self.bin_path,
                format!(
                    "the .bin has {bin_len} bytes but its index {} describes {end} ({s} sequences of {}): \
                     the two files do not belong together (a .bin replaced or cut without its .idx?)",
                    self.idx_path.display(),
                    self.dtype()
                ),
            )
        };
        match level {
            Validate::Header => {
                // O(1): the last sequence must end exactly where the .bin does, which a .bin
                // beside another run's .idx almost never does.
                let end = match s.checked_sub(1) {
                    None => 0,
                    Some(i) => {
                        length(i)?.checked_mul(item).and_then(|n| n.checked_add(self.sequence_pointer(i))).ok_or_else(
                            || self.corrupt(format!("sequence {i}'s pointer and length overflow a 64-bit offset")),
                        )?
                    }
                };
                if end != bin_len {
                    return Err(size_mismatch(end));
                }
            }
            Validate::Full => {
                // Megatron's writer derives every pointer from the lengths: anything else is a
                // damaged or mismatched index.
                let mut expect = 0u64;
                for i in 0..s {
                    let len = length(i)?;
                    let ptr = self.sequence_pointer(i);
                    if ptr != expect {
                        return Err(self.corrupt(format!(
                            "sequence_pointers[{i}] is {ptr}, but the lengths before it add up to byte {expect} \
                             ({} bytes a token): pointers must be the running sum of the lengths",
                            item
                        )));
                    }
                    expect += len * item;
                }
                if expect != bin_len {
                    return Err(size_mismatch(expect));
                }
                if let Some(i) = (1..d).find(|&i| self.document_index(i) < self.document_index(i - 1)) {
                    let (prev, cur) = (self.document_index(i - 1), self.document_index(i));
                    return Err(self.corrupt(format!(
                        "document_indices are not non-decreasing: [{}] = {prev} > [{i}] = {cur}",
                        i - 1
                    )));
                }
            }
        }
        Ok(())
    }

    /// The prefix this dataset was opened from.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    pub fn idx_path(&self) -> &Path {
        &self.idx_path
    }

    pub fn bin_path(&self) -> &Path {
        &self.bin_path
    }

    /// Byte offsets of the `.idx` arrays.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn dtype(&self) -> DType {
        self.header.dtype
    }

    /// Whether the index carries `sequence_modes`.
    pub fn multimodal(&self) -> bool {
        self.multimodal
    }

    pub fn len(&self) -> usize {
        self.header.sequence_count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of documents (the document-index array has one more entry).
    pub fn num_documents(&self) -> usize {
        self.header.document_count as usize - 1
    }

    /// The `.idx` mapping (arrays at the offsets of [`IndexedDataset::layout`]).
    pub fn idx_mapping(&self) -> &Mapping {
        &self.idx
    }

    /// The `.bin` mapping; an error for a `.bin` read by ranges ([`RemoteBin::Ranges`]).
    pub fn bin_mapping(&self) -> Result<&Mapping> {
        match &self.bin {
            Bin::Mapped(m) => Ok(m),
            Bin::Ranged(_) => Err(Error::invalid(format!(
                "{} is read by ranged requests, not mapped; open it with a local copy of the .bin",
                self.bin_path.display()
            ))),
        }
    }

    /// Whether the `.bin` is an object read by ranged requests.
    pub fn is_ranged(&self) -> bool {
        matches!(self.bin, Bin::Ranged(_))
    }

    /// Size of the `.bin` in bytes.
    pub fn bin_len(&self) -> u64 {
        match &self.bin {
            Bin::Mapped(m) => m.bytes().len() as u64,
            Bin::Ranged(r) => r.size(),
        }
    }

    fn raw_length(&self, i: usize) -> i32 {
        let at = self.layout.lengths + 4 * i;
        i32::from_le_bytes(self.idx.bytes()[at..at + 4].try_into().expect("4 bytes"))
    }

    /// Tokens in sequence `i` (validated non-negative at open with [`Validate::Full`]).
    #[inline]
    pub fn sequence_length(&self, i: usize) -> u32 {
        self.raw_length(i).max(0) as u32
    }

    /// Byte offset of sequence `i` in the `.bin`.
    #[inline]
    pub fn sequence_pointer(&self, i: usize) -> u64 {
        le_u64(self.idx.bytes(), self.layout.pointers + 8 * i)
    }

    /// Entry `i` of the document-index array (`0..=num_documents()`).
    #[inline]
    pub fn document_index(&self, i: usize) -> u64 {
        le_u64(self.idx.bytes(), self.layout.document_indices + 8 * i)
    }

    /// Mode of sequence `i` (multimodal datasets only).
    pub fn sequence_mode(&self, i: usize) -> Option<i8> {
        self.multimodal.then(|| self.idx.bytes()[self.layout.modes + i] as i8)
    }

    /// All sequence lengths as a vector (the `.idx` array is unaligned, so this copies).
    pub fn sequence_lengths(&self) -> Vec<i32> {
        let b = &self.idx.bytes()[self.layout.lengths..self.layout.pointers];
        b.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes"))).collect()
    }

    /// The raw bytes of `length` tokens of sequence `i` starting at token `offset`
    /// (`length = None`: to the end of the sequence), bounds-checked against the sequence. Only
    /// for a mapped `.bin`; [`IndexedDataset::sequence_range`] and
    /// [`IndexedDataset::read_ranges`] serve both kinds.
    pub fn sequence_bytes(&self, i: usize, offset: u64, length: Option<u64>) -> Result<&[u8]> {
        let range = self.sequence_range(i, offset, length)?;
        Ok(&self.bin_mapping()?.bytes()[range.start as usize..range.end as usize])
    }

    /// The byte range of the `.bin` that [`IndexedDataset::sequence_bytes`] would return,
    /// checked against the sequence and the `.bin`'s size.
    pub fn sequence_range(&self, i: usize, offset: u64, length: Option<u64>) -> Result<Range<u64>> {
        if i >= self.len() {
            return Err(Error::invalid(format!("sequence index {i} out of range for {} sequences", self.len())));
        }
        let n = u64::from(self.sequence_length(i));
        let length = length.unwrap_or(n.saturating_sub(offset));
        if offset.checked_add(length).is_none_or(|end| end > n) {
            return Err(Error::invalid(format!("offset {offset} + length {length} exceeds sequence {i}'s {n} tokens")));
        }
        let item = self.dtype().itemsize() as u64;
        // Saturating: with only the header validated, a pointer may be anything.
        let start = self.sequence_pointer(i).saturating_add(offset * item);
        let end = start.saturating_add(length * item);
        if end > self.bin_len() {
            return Err(Error::format(
                &self.bin_path,
                format!("sequence {i} bytes {start}..{end} lie outside the .bin"),
            ));
        }
        Ok(start..end)
    }

    /// The bytes of each of `ranges` of the `.bin` (copies out of the map, or for a `.bin` read
    /// by ranges, few coalesced requests in parallel).
    pub fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        match &self.bin {
            Bin::Ranged(r) => r.read_many(ranges).map_err(|e| Error::io(&self.bin_path, e)),
            Bin::Mapped(_) => ranges.iter().map(|r| self.read_range(r.clone())).collect(),
        }
    }

    /// The bytes of `range` of the `.bin` (for a `.bin` read by ranges, one request).
    pub fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        let read = match &self.bin {
            Bin::Ranged(r) => r.read(range),
            Bin::Mapped(m) => m
                .bytes()
                .get(range.start as usize..range.end as usize)
                .map(Bytes::copy_from_slice)
                .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "beyond the end")),
        };
        read.map_err(|e| Error::io(&self.bin_path, e))
    }

    /// Whether sequence pointers are exactly the running sum of lengths (Megatron's writer
    /// always produces this; merges can then copy the `.bin` in one piece).
    pub fn is_contiguous(&self) -> bool {
        let item = self.dtype().itemsize() as u64;
        let mut expect = 0u64;
        (0..self.len()).all(|i| {
            let ok = self.sequence_pointer(i) == expect;
            expect += u64::from(self.sequence_length(i)) * item;
            ok
        })
    }

    /// Bytes of `.bin` covered by the sequences (Σ lengths × itemsize).
    pub fn data_bytes(&self) -> u64 {
        let item = self.dtype().itemsize() as u64;
        (0..self.len()).map(|i| u64::from(self.sequence_length(i)) * item).sum()
    }
}

fn parse_index(b: &[u8], path: &Path, multimodal: Option<bool>) -> Result<(Header, Layout, bool)> {
    let corrupt = |msg: String| Error::format(path, msg);
    if b.len() < HEADER_LEN {
        return Err(corrupt(format!(
            "truncated index: the file has {} bytes but the MMIDIDX header alone is {HEADER_LEN}",
            b.len()
        )));
    }
    if &b[..9] != MAGIC {
        return Err(corrupt(format!(
            "not a Megatron MMIDIDX index: the file starts with {:?}, expected {:?}",
            String::from_utf8_lossy(&b[..9]),
            String::from_utf8_lossy(MAGIC)
        )));
    }
    let version = le_u64(b, 9);
    if version != VERSION {
        return Err(corrupt(format!("unsupported index version {version} (only version {VERSION} exists)")));
    }
    let code = b[17];
    let dtype = DType::from_code(code).ok_or_else(|| {
        let valid: Vec<_> = DType::ALL.iter().map(|d| format!("{}={}", d.code(), d.name())).collect();
        corrupt(format!("unknown dtype code {code} (valid codes: {})", valid.join(", ")))
    })?;
    let header = Header { dtype, sequence_count: le_u64(b, 18), document_count: le_u64(b, 26) };
    let layout = Layout::of(&header).ok_or_else(|| {
        corrupt(format!(
            "the header's counts ({} sequences, {} document entries) cannot describe a real file",
            header.sequence_count, header.document_count
        ))
    })?;
    let len = b.len();
    let plain = layout.end;
    let modal = plain.saturating_add(header.sequence_count as usize);
    let has_modes = multimodal.unwrap_or(len != plain && len == modal);
    let need = if has_modes { modal } else { plain };
    if len < need {
        return Err(corrupt(format!(
            "truncated index: {} sequences and {} document entries need {need} bytes{}, the file has {len}",
            header.sequence_count,
            header.document_count,
            if has_modes { " (with sequence_modes)" } else { "" },
        )));
    }
    if len > need {
        return Err(corrupt(format!(
            "index size {len} does not match its header: {} sequences and {} document entries need \
             {plain} bytes ({modal} with sequence_modes)",
            header.sequence_count, header.document_count
        )));
    }
    Ok((header, layout, has_modes))
}
