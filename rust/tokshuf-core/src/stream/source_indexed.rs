//! Megatron/tokshuf `.bin/.idx` files as a document source. A document is the run of sequences
//! `document_indices[d]..document_indices[d+1]`, read through the bounds-checked mmap reader.

use std::path::PathBuf;

use super::source::{cumulative, locate, DocSource};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::indexed::{IndexedDataset, Validate};

/// The documents of several indexed datasets, in the given order.
#[derive(Debug)]
pub struct IndexedSource {
    files: Vec<IndexedDataset>,
    cum: Vec<u64>,
}

impl IndexedSource {
    /// Open `prefixes` (`data/x` for `data/x.{bin,idx}`); `full` checks every index entry.
    pub fn open(prefixes: &[PathBuf], full: bool) -> Result<Self> {
        let level = if full { Validate::Full } else { Validate::Header };
        let files = prefixes
            .iter()
            .map(|p| {
                let ds = IndexedDataset::open(p, None, level)?;
                if matches!(ds.dtype(), DType::F32 | DType::F64) {
                    return Err(Error::format(
                        ds.idx_path(),
                        format!("dtype {} cannot hold token ids", ds.dtype().name()),
                    ));
                }
                Ok(ds)
            })
            .collect::<Result<Vec<_>>>()?;
        let cum = cumulative(files.iter().map(|f| f.num_documents() as u64));
        Ok(IndexedSource { files, cum })
    }

    fn find(&self, doc: u64) -> Result<(&IndexedDataset, usize)> {
        let (f, d) = locate(&self.cum, doc)
            .ok_or_else(|| Error::invalid(format!("document {doc} out of range for {} documents", self.num_docs())))?;
        Ok((&self.files[f], d as usize))
    }
}

fn sequences(ds: &IndexedDataset, d: usize) -> std::ops::Range<usize> {
    let a = ds.document_index(d) as usize;
    let b = (ds.document_index(d + 1) as usize).clamp(a, ds.len());
    a.min(b)..b
}

/// Append little-endian `dtype` elements to `out` as u32, rejecting negative or too-large ids.
fn decode(ds: &IndexedDataset, bytes: &[u8], out: &mut Vec<u32>) -> Result<()> {
    let bad = |v: i64| Error::format(ds.bin_path(), format!("token id {v} is not a valid unsigned 32-bit id"));
    match ds.dtype() {
        DType::U8 => out.extend(bytes.iter().map(|&b| u32::from(b))),
        DType::U16 => out.extend(bytes.chunks_exact(2).map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))),
        DType::I8 | DType::I16 | DType::I64 => {
            for c in bytes.chunks_exact(ds.dtype().itemsize()) {
                let v = match *c {
                    [b] => i64::from(b as i8),
                    [a, b] => i64::from(i16::from_le_bytes([a, b])),
                    _ => i64::from_le_bytes(c.try_into().expect("8 bytes")),
                };
                out.push(u32::try_from(v).map_err(|_| bad(v))?);
            }
        }
        DType::I32 => {
            let start = out.len();
            out.extend(bytes.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u32));
            if let Some(&v) = out[start..].iter().find(|&&v| v > i32::MAX as u32) {
                return Err(bad(i64::from(v as i32)));
            }
        }
        DType::F32 | DType::F64 => unreachable!("rejected at open"),
    }
    Ok(())
}

impl DocSource for IndexedSource {
    fn num_docs(&self) -> u64 {
        *self.cum.last().unwrap_or(&0)
    }

    fn doc_len(&mut self, doc: u64) -> Result<u64> {
        let (ds, d) = self.find(doc)?;
        Ok(sequences(ds, d).map(|s| u64::from(ds.sequence_length(s))).sum())
    }

    fn read(&mut self, doc: u64, mut start: u64, mut len: u64, out: &mut Vec<u32>) -> Result<()> {
        let (ds, d) = self.find(doc)?;
        out.reserve(len as usize);
        for s in sequences(ds, d) {
            if len == 0 {
                break;
            }
            let n = u64::from(ds.sequence_length(s));
            if start >= n {
                start -= n;
                continue;
            }
            let take = len.min(n - start);
            decode(ds, ds.sequence_bytes(s, start, Some(take))?, out)?;
            start = 0;
            len -= take;
        }
        if len > 0 {
            return Err(Error::invalid(format!("read past the end of document {doc}")));
        }
        Ok(())
    }
}
