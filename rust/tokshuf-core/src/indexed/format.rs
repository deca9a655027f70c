//! The `.idx` byte layout: a 34-byte header, then int32 lengths, int64 pointers,
//! int64 document indices and (multimodal only) int8 modes, unaligned, little-endian.

use std::path::{Path, PathBuf};

use crate::dtype::DType;

/// `b"MMIDIDX\x00\x00"`
pub const MAGIC: &[u8; 9] = b"MMIDIDX\x00\x00";
/// The only version Megatron writes or reads.
pub const VERSION: u64 = 1;
/// magic (9) + version (8) + dtype code (1) + sequence count (8) + document count (8).
pub const HEADER_LEN: usize = 34;

/// The fixed-size header of an `.idx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Token dtype of the `.bin`.
    pub dtype: DType,
    /// Number of sequences (S).
    pub sequence_count: u64,
    /// Length of the document-index array, including its leading 0 (D + 1).
    pub document_count: u64,
}

impl Header {
    /// Serialize exactly as Megatron's `_IndexWriter` does.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..9].copy_from_slice(MAGIC);
        b[9..17].copy_from_slice(&VERSION.to_le_bytes());
        b[17] = self.dtype.code();
        b[18..26].copy_from_slice(&self.sequence_count.to_le_bytes());
        b[26..34].copy_from_slice(&self.document_count.to_le_bytes());
        b
    }
}

/// Byte offsets of the arrays that follow the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Start of `sequence_lengths` (int32).
    pub lengths: usize,
    /// Start of `sequence_pointers` (int64).
    pub pointers: usize,
    /// Start of `document_indices` (int64).
    pub document_indices: usize,
    /// Start of `sequence_modes` (int8), present or not.
    pub modes: usize,
    /// File size without modes.
    pub end: usize,
}

impl Layout {
    /// The layout for a header, or `None` when the sizes overflow the address space.
    pub fn of(h: &Header) -> Option<Layout> {
        let s = usize::try_from(h.sequence_count).ok()?;
        let d = usize::try_from(h.document_count).ok()?;
        let lengths = HEADER_LEN;
        let pointers = lengths.checked_add(s.checked_mul(4)?)?;
        let document_indices = pointers.checked_add(s.checked_mul(8)?)?;
        let modes = document_indices.checked_add(d.checked_mul(8)?)?;
        Some(Layout { lengths, pointers, document_indices, modes, end: modes })
    }
}

/// `{prefix}.bin`
pub fn bin_path(prefix: &Path) -> PathBuf {
    crate::fsutil::with_suffix(prefix, ".bin")
}

/// `{prefix}.idx`
pub fn idx_path(prefix: &Path) -> PathBuf {
    crate::fsutil::with_suffix(prefix, ".idx")
}
