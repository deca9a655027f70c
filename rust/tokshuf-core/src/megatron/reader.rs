//! Reading samples (`_query_document_sample_shuffle_indices`): shuffle index → sample-index rows
//! → document-index positions → token ranges of the `.bin`, concatenated and padded. Every read is
//! bounds-checked, so corrupt or foreign index arrays give errors, never out-of-bounds reads.

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use super::array::{IndexArray, IndexView};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::indexed::IndexedDataset;

/// A run of a sample's tokens: bytes of one dataset's `.bin`.
pub struct Piece<'a> {
    pub dataset: &'a IndexedDataset,
    pub bytes: Range<u64>,
}

/// Anything that can fill samples of a fixed width from the `.bin`s of indexed datasets.
pub trait SampleSource: Send + Sync {
    fn len(&self) -> u64;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tokens per sample (`sequence_length + extra`).
    fn width(&self) -> usize;

    /// Whether any of its `.bin`s is read by ranged requests (batches are then planned whole,
    /// fetched in few requests, and filled).
    fn is_ranged(&self) -> bool;

    /// Call `each` with the pieces of sample `k` (`k < len()`) in order, together at most
    /// `width()` tokens; returns the id that pads the rest.
    fn pieces<'a>(&'a self, k: u64, each: &mut dyn FnMut(Piece<'a>) -> Result<()>) -> Result<i64>;
}

/// One GPTDataset's samples.
#[derive(Debug, Clone)]
pub struct GptSampleSource {
    dataset: IndexedDataset,
    document_index: IndexArray,
    sample_index: IndexArray,
    shuffle_index: IndexArray,
    width: usize,
    extra: u64,
    pad: i64,
    /// Where the index arrays came from and how to replace them (a cache entry), for messages
    /// about arrays that do not fit the data.
    origin: Option<String>,
}

impl GptSampleSource {
    /// Serve samples of `sequence_length + extra` tokens, padded with `pad`.
    pub fn new(
        dataset: IndexedDataset,
        document_index: IndexArray,
        sample_index: IndexArray,
        shuffle_index: IndexArray,
        sequence_length: u64,
        add_extra_token: bool,
        pad: i64,
    ) -> Result<Self> {
        if sample_index.shape().len() != 2 || sample_index.shape()[1] != 2 {
            return Err(Error::invalid(format!("sample_index must have shape [n, 2], got {:?}", sample_index.shape())));
        }
        if document_index.shape().len() != 1 || shuffle_index.shape().len() != 1 {
            return Err(Error::invalid("document_index and shuffle_index must be 1-D"));
        }
        let extra = u64::from(add_extra_token);
        let width = usize::try_from(sequence_length + extra)
            .ok()
            .filter(|&w| sequence_length > 0 && w < 1 << 40)
            .ok_or_else(|| Error::invalid(format!("invalid sequence_length {sequence_length}")))?;
        Ok(Self { dataset, document_index, sample_index, shuffle_index, width, extra, pad, origin: None })
    }

    /// Name where the index arrays came from (e.g. "the cache entry X: delete ... to rebuild"),
    /// said in every error about arrays that do not fit the data.
    pub fn with_origin(mut self, origin: impl Into<String>) -> Self {
        self.origin = Some(origin.into());
        self
    }

    fn corrupt(&self, what: String) -> Error {
        let origin = self.origin.as_deref().map(|o| format!("; {o}")).unwrap_or_default();
        Error::invalid(format!("corrupt index arrays for {}: {what}{origin}", self.dataset.prefix().display()))
    }

    fn entry(&self, view: IndexView<'_>, i: u64, name: &str) -> Result<u64> {
        let v = view.get(i as usize).ok_or_else(|| self.corrupt(format!("{name}[{i}] is out of range")))?;
        u64::try_from(v).map_err(|_| self.corrupt(format!("{name}[{i}] is negative ({v})")))
    }
}

impl SampleSource for GptSampleSource {
    fn len(&self) -> u64 {
        self.shuffle_index.len() as u64
    }

    fn width(&self) -> usize {
        self.width
    }

    fn is_ranged(&self) -> bool {
        self.dataset.is_ranged()
    }

    fn pieces<'a>(&'a self, k: u64, each: &mut dyn FnMut(Piece<'a>) -> Result<()>) -> Result<i64> {
        let (shuffle, samples, docs) =
            (self.shuffle_index.view(), self.sample_index.view(), self.document_index.view());
        let j = self.entry(shuffle, k, "shuffle_index")?;
        let b = self.entry(samples, 2 * j, "sample_index")?;
        let bo = self.entry(samples, 2 * j + 1, "sample_index")?;
        let e = self.entry(samples, 2 * j + 2, "sample_index")?;
        let eo = self.entry(samples, 2 * j + 3, "sample_index")?;
        if e < b || (b == e && eo < bo) {
            return Err(self.corrupt(format!("sample {j} ends before it starts")));
        }
        let item = self.dataset.dtype().itemsize() as u64;
        let mut filled = 0u64;
        let mut piece = |pos: u64, offset: u64, length: Option<u64>| -> Result<()> {
            let seq = self.entry(docs, pos, "document_index")? as usize;
            // The arrays point past a document (or past the dataset): they were not built from
            // this data, so the error names the arrays' origin, not only the offsets.
            let bytes = self.dataset.sequence_range(seq, offset, length).map_err(|e| match e {
                Error::InvalidArgument(msg) => self.corrupt(msg),
                other => other,
            })?;
            filled += (bytes.end - bytes.start) / item;
            if filled > self.width as u64 {
                return Err(self.corrupt(format!("sample {j} holds more than {} tokens", self.width)));
            }
            each(Piece { dataset: &self.dataset, bytes })
        };
        if b == e {
            piece(b, bo, Some(eo - bo + self.extra))?;
        } else {
            piece(b, bo, None)?;
            for pos in b + 1..e {
                piece(pos, 0, None)?;
            }
            piece(e, 0, Some(eo + self.extra))?;
        }
        Ok(self.pad)
    }
}

/// A blend: sample k is sample `dataset_sample_index[k]` of dataset `dataset_index[k]`.
#[derive(Clone)]
pub struct BlendSampleSource {
    datasets: Vec<Option<Arc<dyn SampleSource>>>,
    dataset_index: IndexArray,
    dataset_sample_index: IndexArray,
    width: usize,
}

impl BlendSampleSource {
    /// `datasets[d]` is `None` for datasets that take no part (zero weight or empty).
    pub fn new(
        datasets: Vec<Option<Arc<dyn SampleSource>>>,
        dataset_index: IndexArray,
        dataset_sample_index: IndexArray,
    ) -> Result<Self> {
        let width = datasets.iter().flatten().map(|d| d.width()).next().unwrap_or(0);
        if datasets.iter().flatten().any(|d| d.width() != width) {
            return Err(Error::invalid("the datasets of a blend must have the same sample width"));
        }
        if dataset_index.len() != dataset_sample_index.len() {
            return Err(Error::invalid(format!(
                "dataset_index has {} entries but dataset_sample_index {}",
                dataset_index.len(),
                dataset_sample_index.len()
            )));
        }
        Ok(Self { datasets, dataset_index, dataset_sample_index, width })
    }
}

impl SampleSource for BlendSampleSource {
    fn len(&self) -> u64 {
        self.dataset_index.len() as u64
    }

    fn width(&self) -> usize {
        self.width
    }

    fn is_ranged(&self) -> bool {
        self.datasets.iter().flatten().any(|d| d.is_ranged())
    }

    fn pieces<'a>(&'a self, k: u64, each: &mut dyn FnMut(Piece<'a>) -> Result<()>) -> Result<i64> {
        let d = self.dataset_index.view().get(k as usize);
        let s = self.dataset_sample_index.view().get(k as usize);
        let (Some(d), Some(s)) = (d, s) else {
            return Err(Error::invalid(format!("blend sample {k} is out of range for {} samples", self.len())));
        };
        let ds = usize::try_from(d).ok().and_then(|d| self.datasets.get(d)).and_then(|x| x.as_ref());
        let ds =
            ds.ok_or_else(|| Error::invalid(format!("blend sample {k} names dataset {d}, which is not in the blend")))?;
        let s = u64::try_from(s).ok().filter(|&s| s < ds.len()).ok_or_else(|| {
            Error::invalid(format!(
                "blend sample {k} asks for sample {s} of dataset {d}, which has {} (the blend oversamples it)",
                ds.len()
            ))
        })?;
        ds.pieces(s, each)
    }
}

/// Resolve a possibly negative index against `len`.
pub fn resolve_index(k: i64, len: u64) -> Result<u64> {
    let r = if k < 0 { (len as i64).checked_add(k) } else { Some(k) };
    r.and_then(|r| u64::try_from(r).ok())
        .filter(|&r| r < len)
        .ok_or_else(|| Error::invalid(format!("sample index {k} is out of range for a dataset of {len} samples")))
}

/// Fill `out` (`width()` long) with sample `k` of a source whose `.bin`s are mapped.
pub fn read_sample(src: &dyn SampleSource, k: u64, out: &mut [i64]) -> Result<()> {
    let mut filled = 0;
    let pad = src.pieces(k, &mut |p| {
        let bytes = p.dataset.bin_mapping()?.bytes();
        let bytes = &bytes[p.bytes.start as usize..p.bytes.end as usize];
        filled += decode_into(p.dataset.dtype(), bytes, &mut out[filled..])?;
        Ok(())
    })?;
    out[filled..].fill(pad);
    Ok(())
}

/// Decode `bytes` to the front of `out`; returns the tokens written.
fn decode_into(dtype: DType, bytes: &[u8], out: &mut [i64]) -> Result<usize> {
    let n = bytes.len() / dtype.itemsize();
    let out =
        out.get_mut(..n).ok_or_else(|| Error::invalid(format!("a sample of {n}+ tokens does not fit its row")))?;
    macro_rules! conv {
        ($t:ty, $n:expr) => {
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact($n)) {
                *o = <$t>::from_le_bytes(c.try_into().expect("chunk size")) as i64;
            }
        };
    }
    match dtype {
        DType::U8 => out.iter_mut().zip(bytes).for_each(|(o, &b)| *o = i64::from(b)),
        DType::I8 => out.iter_mut().zip(bytes).for_each(|(o, &b)| *o = i64::from(b as i8)),
        DType::U16 => conv!(u16, 2),
        DType::I16 => conv!(i16, 2),
        DType::I32 => conv!(i32, 4),
        DType::I64 => conv!(i64, 8),
        DType::F32 => conv!(f32, 4),
        DType::F64 => conv!(f64, 8),
    }
    Ok(n)
}

/// Fill `out` (`ks.len() × width`) with the samples `ks`, in parallel on `threads` threads.
pub fn read_batch(src: &dyn SampleSource, ks: &[i64], out: &mut [i64], threads: Option<usize>) -> Result<()> {
    let w = src.width();
    if out.len() != ks.len() * w {
        return Err(Error::invalid(format!("output holds {} tokens, expected {} × {w}", out.len(), ks.len())));
    }
    let len = src.len();
    if src.is_ranged() {
        return read_batch_ranged(src, ks, out);
    }
    let one = |(row, &k): (&mut [i64], &i64)| read_sample(src, resolve_index(k, len)?, row);
    // Samples are a few KB each: below a few dozen, threads cost more than they save.
    if ks.len() < 32 || threads == Some(1) || w == 0 {
        return out.chunks_mut(w.max(1)).zip(ks).try_for_each(one);
    }
    crate::parallel::pool(threads).install(|| out.par_chunks_mut(w).zip(ks.par_iter()).try_for_each(one))
}

/// A batch over `.bin`s read by ranges: every piece of every sample is planned first, each
/// dataset's pieces are fetched together ([`IndexedDataset::read_ranges`]: nearby ones in one
/// request, many requests at once), then decoded into place. Mapped datasets of a blend are
/// read from their maps as usual.
fn read_batch_ranged(src: &dyn SampleSource, ks: &[i64], out: &mut [i64]) -> Result<()> {
    let (w, len) = (src.width(), src.len());
    let mut wanted: Vec<Wanted<'_>> = Vec::new();
    for (row, &k) in ks.iter().enumerate() {
        let k = resolve_index(k, len)?;
        let start = row * w;
        let mut at = start;
        let pad = src.pieces(k, &mut |p| {
            let n = ((p.bytes.end - p.bytes.start) / p.dataset.dtype().itemsize() as u64) as usize;
            if p.dataset.is_ranged() {
                let slot = match wanted.iter().position(|w| std::ptr::eq(w.dataset, p.dataset)) {
                    Some(i) => i,
                    None => {
                        wanted.push(Wanted { dataset: p.dataset, ranges: Vec::new(), into: Vec::new() });
                        wanted.len() - 1
                    }
                };
                wanted[slot].ranges.push(p.bytes);
                wanted[slot].into.push(at..start + w);
            } else {
                let bytes = &p.dataset.bin_mapping()?.bytes()[p.bytes.start as usize..p.bytes.end as usize];
                decode_into(p.dataset.dtype(), bytes, &mut out[at..start + w])?;
            }
            at += n;
            Ok(())
        })?;
        out[at..start + w].fill(pad);
    }
    for Wanted { dataset, ranges, into } in wanted {
        for (bytes, into) in dataset.read_ranges(&ranges)?.iter().zip(into) {
            decode_into(dataset.dtype(), bytes, &mut out[into])?;
        }
    }
    Ok(())
}

/// The pieces of a batch to fetch from one dataset read by ranges (told apart by address):
/// their byte ranges, and where in the batch their tokens go: from the piece's place to the end
/// of its row (kept, not derived from the place: an empty piece after a full row sits at the
/// row's end, which is also the next row's start).
struct Wanted<'a> {
    dataset: &'a IndexedDataset,
    ranges: Vec<Range<u64>>,
    into: Vec<Range<usize>>,
}
