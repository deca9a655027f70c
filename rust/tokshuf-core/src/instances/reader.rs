//! Turning index arrays into batches: the rows of `input_ids` (int64), `label_mask` and the
//! per-instance document lengths, filled in parallel straight from the token files.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::{concat, interleaved, Span, TokenStore};
use crate::error::{Error, Result};
use crate::indexed::Mapping;
use crate::parallel;

/// A little-endian `u64` array: a cache file mapped read-only, or owned values.
#[derive(Debug, Clone)]
pub struct U64s(Mapping, Option<PathBuf>);

impl U64s {
    /// Map a raw little-endian `u64` file.
    pub fn open(path: &Path) -> Result<U64s> {
        let map = Mapping::open(path)?;
        if map.bytes().len() % 8 != 0 {
            return Err(Error::format(path, format!("size {} is not a whole number of uint64", map.bytes().len())));
        }
        Ok(U64s(map, Some(path.to_path_buf())))
    }

    /// Owned values.
    pub fn from_vec(v: &[u64]) -> U64s {
        U64s(Mapping::from_bytes(v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()), None)
    }

    pub fn len(&self) -> usize {
        self.0.bytes().len() / 8
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i` (panics out of range).
    #[inline]
    pub fn get(&self, i: usize) -> u64 {
        u64::from_le_bytes(self.0.bytes()[8 * i..8 * i + 8].try_into().expect("8 bytes"))
    }

    /// Pair `i` of an `(n, 2)` array.
    #[inline]
    pub fn span(&self, i: usize) -> Span {
        [self.get(2 * i), self.get(2 * i + 1)]
    }

    /// Number of pairs of an `(n, 2)` array.
    pub fn spans(&self) -> usize {
        self.len() / 2
    }

    /// Value `i`, or an error if the array is shorter (a damaged or foreign index).
    #[inline]
    pub fn at(&self, i: u64) -> Result<u64> {
        if i >= self.len() as u64 {
            let msg = format!("entry {i} of {} was asked for: the index is damaged; delete it to rebuild", self.len());
            return Err(match &self.1 {
                Some(path) => Error::format(path, msg),
                None => Error::invalid(msg),
            });
        }
        Ok(self.get(i as usize))
    }

    /// Pair `i`, checked.
    #[inline]
    pub fn span_at(&self, i: u64) -> Result<Span> {
        Ok([self.at(2 * i)?, self.at(2 * i + 1)?])
    }
}

/// How instances map onto tokens.
#[derive(Debug, Clone)]
pub enum Layout {
    /// Concatenate and chunk: file `f` holds instances `first[f]..first[f + 1]`, instance `j` of a
    /// file being its tokens `j * seq_len..(j + 1) * seq_len`. `docs[f]` (local `(n, 2)` spans)
    /// gives document lengths; empty when they are not wanted.
    Chunks {
        /// Prefix sums of instances per file.
        first: Vec<u64>,
        /// Per-file document spans (local offsets).
        docs: Vec<U64s>,
    },
    /// One span per instance (padded and VSL datasets): `(n, 2)` global spans.
    Spans(U64s),
    /// Packed instances: `doc_ids[offsets[i]..offsets[i + 1]]` index the `(n, 2)` `docs`.
    Packed {
        /// Document spans in packing order.
        docs: U64s,
        /// `instances + 1` offsets into `doc_ids`.
        offsets: U64s,
        /// Document ids, instance by instance.
        doc_ids: U64s,
        /// How `doc_lens` are found.
        doc_lens: PackedDocLens,
    },
    /// Interleaved instances over padded base spans.
    Interleaved {
        /// Base (padded) spans.
        base: U64s,
        /// Exempt base ids (served first, un-interleaved).
        exempt: U64s,
        /// Permuted interleavable base ids.
        order: U64s,
        docs_per_instance: u64,
        /// Chunks each document is split into.
        chunks_per_doc: u64,
    },
}

/// How the `doc_lens` of a packed instance are found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackedDocLens {
    /// The packing's own: one entry per packed document, then the padding as one entry.
    Packing,
    /// OLMo-core's (`NumpyPackedFSLDataset`), which depends on where the documents came from.
    /// `recorded[f]` says whether the source group of file `f` took them from recorded
    /// boundaries (Dolma metadata, an index) rather than an EOS scan (empty: every file scanned).
    /// Scanned: [`olmo_doc_lens`] over the padded row. Recorded: [`olmo_recorded_doc_lens`], so
    /// that a document without EOS never runs into the next one.
    Olmo {
        /// Per file: recorded boundaries.
        recorded: Vec<bool>,
    },
}

/// Document lengths of a batch, ragged: row `r` has `counts[r]` entries of `lens`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocLens {
    /// Concatenated lengths.
    pub lens: Vec<i32>,
    /// Entries per row.
    pub counts: Vec<u32>,
}

/// Fills batches of one dataset.
#[derive(Debug, Clone)]
pub struct Reader {
    store: TokenStore,
    masks: Option<TokenStore>,
    layout: Layout,
    seq_len: u64,
    pad: i64,
    eos: i64,
    bos: Option<i64>,
}

impl Reader {
    /// A reader of `layout` over `store`; `seq_len` is the fixed instance length (the maximum
    /// for VSL), `pad`, `eos` and `bos` the special token ids.
    pub fn new(store: TokenStore, layout: Layout, seq_len: u64, pad: i64, eos: i64, bos: Option<i64>) -> Result<Self> {
        super::positive("sequence_length", seq_len)?;
        let bad = |m: &str| Err(Error::invalid(format!("inconsistent instance index: {m}")));
        match &layout {
            Layout::Chunks { first, docs }
                if first.len() != store.files().len() + 1
                    || !(docs.is_empty() || docs.len() == store.files().len()) =>
            {
                return bad("one instance count and one document list per file expected")
            }
            Layout::Spans(s) if s.len() % 2 != 0 => return bad("spans must be pairs"),
            Layout::Packed { docs, offsets, .. } if docs.len() % 2 != 0 || offsets.is_empty() => {
                return bad("packed documents must be pairs and offsets non-empty")
            }
            Layout::Packed { doc_lens: PackedDocLens::Olmo { recorded }, .. }
                if !(recorded.is_empty() || recorded.len() == store.files().len()) =>
            {
                return bad("one recorded-boundaries flag per file expected")
            }
            Layout::Interleaved { base, docs_per_instance, chunks_per_doc, .. }
                if base.len() % 2 != 0 || *docs_per_instance == 0 || *chunks_per_doc == 0 =>
            {
                return bad("interleaving needs pairs and positive docs_per_instance/chunks_per_doc")
            }
            _ => {}
        }
        Ok(Self { store, masks: None, layout, seq_len, pad, eos, bos })
    }

    /// Take `label_mask` from per-file mask arrays (one byte per token, numpy bools), as OLMo-core's
    /// `label_mask_paths`; each must have exactly as many elements as its token file.
    pub fn with_label_masks(mut self, masks: TokenStore) -> Result<Self> {
        if masks.files().len() != self.store.files().len() {
            return Err(Error::invalid(format!(
                "{} label-mask files for {} token files",
                masks.files().len(),
                self.store.files().len()
            )));
        }
        for (m, t) in masks.files().iter().zip(self.store.files()) {
            if m.token_type().itemsize() != 1 || m.len() != t.len() {
                return Err(Error::format(
                    m.path(),
                    format!(
                        "the label mask has {} one-byte flags but {} has {} tokens",
                        m.len(),
                        t.path().display(),
                        t.len()
                    ),
                ));
            }
        }
        self.masks = Some(masks);
        Ok(self)
    }

    pub fn len(&self) -> u64 {
        match &self.layout {
            Layout::Chunks { first, .. } => *first.last().unwrap_or(&0),
            Layout::Spans(s) => s.spans() as u64,
            Layout::Packed { offsets, .. } => offsets.len() as u64 - 1,
            Layout::Interleaved { exempt, order, docs_per_instance, .. } => {
                exempt.len() as u64 + order.len() as u64 / docs_per_instance
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fill one row per index: `ids` (`indices.len() × width`, int64), `mask` (same shape, 1 on
    /// tokens, 0 on padding) and, if `doc_lens`, the document lengths of each row.
    pub fn fill(
        &self,
        indices: &[u64],
        width: usize,
        ids: &mut [i64],
        mask: Option<&mut [u8]>,
        doc_lens: bool,
        threads: Option<usize>,
    ) -> Result<DocLens> {
        if width == 0 || ids.len() != indices.len() * width || mask.as_ref().is_some_and(|m| m.len() != ids.len()) {
            return Err(Error::invalid(format!(
                "output buffers must hold {} rows of width {width} > 0",
                indices.len()
            )));
        }
        if !matches!(self.layout, Layout::Spans(_)) && width as u64 != self.seq_len {
            return Err(Error::invalid(format!("rows must be sequence_length ({}) wide, got {width}", self.seq_len)));
        }
        let mut scratch = Vec::new();
        let mask = match mask {
            Some(m) => m,
            None => {
                scratch.resize(ids.len(), 0u8);
                &mut scratch[..]
            }
        };
        let rows = ids.par_chunks_mut(width).zip(mask.par_chunks_mut(width)).zip(indices.par_iter());
        let run = || -> Result<Vec<Vec<i32>>> {
            rows.map(|((row, m), &i)| {
                let mut lens = Vec::new();
                self.fill_row(i, row, m, doc_lens.then_some(&mut lens))?;
                Ok(lens)
            })
            .collect()
        };
        let per_row = if indices.len() <= 1 { run()? } else { parallel::pool(threads).install(run)? };
        let counts = per_row.iter().map(|r| r.len() as u32).collect();
        Ok(DocLens { lens: per_row.concat(), counts })
    }

    fn fill_row(&self, i: u64, row: &mut [i64], mask: &mut [u8], lens: Option<&mut Vec<i32>>) -> Result<()> {
        if i >= self.len() {
            return Err(Error::invalid(format!("instance index {i} out of range for {} instances", self.len())));
        }
        let mut after_padding = None;
        let used = match &self.layout {
            Layout::Chunks { first, docs } => {
                let f = first.partition_point(|&x| x <= i) - 1;
                let local = (i - first[f]) * self.seq_len;
                let start = self.store.starts()[f] + local;
                self.read_span([start, start + self.seq_len], row, mask)?;
                if let (Some(lens), Some(d)) = (lens, docs.get(f)) {
                    concat::window_doc_lens(d, local, local + self.seq_len, lens);
                }
                row.len()
            }
            Layout::Spans(s) => {
                let n = self.read_span(s.span(i as usize), row, mask)?;
                if let Some(l) = lens {
                    l.push(n as i32);
                }
                n
            }
            Layout::Packed { docs, offsets, doc_ids, doc_lens } => {
                let (a, b) = (offsets.at(i)?, offsets.at(i + 1)?);
                let mut at = 0;
                let mut own = Vec::new();
                let mut first = None;
                for k in a..b {
                    let span = docs.span_at(doc_ids.at(k)?)?;
                    let n = span[1].saturating_sub(span[0]) as usize;
                    if at + n > row.len() {
                        return Err(Error::invalid(format!(
                            "packed instance {i} holds more than {} tokens",
                            self.seq_len
                        )));
                    }
                    self.read_span(span, &mut row[at..at + n], &mut mask[at..at + n])?;
                    first.get_or_insert(span[0]);
                    if lens.is_some() {
                        own.push(n as i32);
                    }
                    at += n;
                }
                // OLMo's lengths may need the padded row: computed below, after the padding.
                after_padding = lens.map(|l| (l, own, first, doc_lens));
                at
            }
            Layout::Interleaved { base, exempt, order, docs_per_instance, chunks_per_doc } => {
                let n_ex = exempt.len() as u64;
                if i < n_ex {
                    self.read_span(base.span_at(exempt.at(i)?)?, row, mask)?
                } else {
                    let k = *docs_per_instance as usize;
                    let j = (i - n_ex) as usize * k;
                    let spans = (j..j + k).map(|x| base.span_at(order.at(x as u64)?)).collect::<Result<Vec<Span>>>()?;
                    self.interleave_row(&spans, *chunks_per_doc as usize, row, mask)?
                }
            }
        };
        row[used..].fill(self.pad);
        mask[used..].fill(0);
        if let Some((out, own, first, rule)) = after_padding {
            match rule {
                PackedDocLens::Packing => {
                    out.extend_from_slice(&own);
                    if used < row.len() {
                        out.push((row.len() - used) as i32); // the padding as one last entry
                    }
                }
                PackedDocLens::Olmo { recorded } => {
                    let file = first.map(|p| self.store.file_of(p));
                    if file.is_some_and(|f| recorded.get(f).copied().unwrap_or(false)) {
                        olmo_recorded_doc_lens(row, &own, self.eos, self.bos, out);
                    } else {
                        olmo_doc_lens(row, self.eos, self.bos, out);
                    }
                }
            }
        }
        Ok(())
    }

    /// Read up to `row.len()` tokens of `span` and their label mask (1s without mask files);
    /// returns the number read.
    fn read_span(&self, [s, e]: Span, row: &mut [i64], mask: &mut [u8]) -> Result<usize> {
        if e < s {
            return Err(Error::invalid(format!("an instance index holds the reversed span {s}..{e}")));
        }
        let n = ((e - s) as usize).min(row.len());
        let span = [s, s + n as u64];
        self.store.read(span, &mut row[..n])?;
        match &self.masks {
            Some(m) => m.read_flags(span, &mut mask[..n])?,
            None => mask[..n].fill(1),
        }
        Ok(n)
    }

    /// OLMo's interleaving: each document truncated to `seq_len / k` tokens, special tokens
    /// (pad, EOS, BOS) dropped with their mask flags, chunks interleaved, then BOS and EOS added
    /// (with mask 1) if there is room.
    fn interleave_row(&self, spans: &[Span], chunks: usize, row: &mut [i64], mask: &mut [u8]) -> Result<usize> {
        let per_doc = self.seq_len / spans.len() as u64;
        let mut docs = Vec::with_capacity(spans.len());
        for &[s, e] in spans {
            let n = e.saturating_sub(s).min(per_doc) as usize;
            let (mut toks, mut flags) = (vec![0i64; n], vec![1u8; n]);
            self.read_span([s, s + n as u64], &mut toks, &mut flags)?;
            let special = |t: i64| t == self.pad || t == self.eos || Some(t) == self.bos;
            docs.push(toks.into_iter().zip(flags).filter(|&(t, _)| !special(t)).collect());
        }
        let mut body = Vec::with_capacity(row.len());
        interleaved::interleave(&docs, chunks, &mut body);
        let mut out: Vec<(i64, u8)> = Vec::with_capacity(row.len());
        if let Some(b) = self.bos.filter(|_| body.len() < row.len()) {
            out.push((b, 1));
        }
        out.extend(body);
        if out.len() < row.len() {
            out.push((self.eos, 1));
        }
        let n = out.len().min(row.len());
        for (k, &(t, m)) in out[..n].iter().enumerate() {
            row[k] = t;
            mask[k] = m;
        }
        Ok(n)
    }
}

/// OLMo-core's `get_document_lengths` on one padded row: without `bos`, a document ends at every
/// EOS and at the last token; with `bos`, only at an EOS followed by BOS and at the last token.
/// So with `bos` the padding joins the last document, and with `pad == eos` (no `bos`) every
/// padding token is a one-token document. Appends the lengths to `out`.
pub fn olmo_doc_lens(row: &[i64], eos: i64, bos: Option<i64>, out: &mut Vec<i32>) {
    let mut start = 0;
    for k in 0..row.len() {
        let end = match bos {
            None => row[k] == eos || k + 1 == row.len(),
            Some(b) => k + 1 == row.len() || (row[k] == eos && row[k + 1] == b),
        };
        if end {
            out.push((k + 1 - start) as i32);
            start = k + 1;
        }
    }
}

/// OLMo-core's `doc_lens` of a packed row whose documents came from recorded boundaries (its
/// `use_array_if_local=False` or remote files): each packed document's length `docs`, then the
/// padding after them as its `get_document_lengths` cuts it. Without `bos`, the padding alone is
/// scanned, so it is one entry (one per token when pad == EOS). With `bos`, the scan starts at
/// the last document's last token and its first piece joins that document: the padding joins the
/// last document unless that ends with EOS and the padding starts with BOS. Appends to `out`.
pub fn olmo_recorded_doc_lens(row: &[i64], docs: &[i32], eos: i64, bos: Option<i64>, out: &mut Vec<i32>) {
    let used = docs.iter().map(|&n| n as usize).sum::<usize>().min(row.len());
    out.extend_from_slice(docs);
    if used == row.len() {
        return;
    }
    match bos {
        Some(_) if used > 0 => {
            let from = out.len();
            olmo_doc_lens(&row[used - 1..], eos, bos, out);
            let joined = out.remove(from) - 1; // the scan's first piece, less the document's token
            out[from - 1] += joined;
        }
        _ => olmo_doc_lens(&row[used..], eos, None, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::{TokenArray, TokenType};

    fn store(files: &[&[u64]]) -> TokenStore {
        TokenStore::new(
            files
                .iter()
                .map(|t| {
                    let mut b = Vec::new();
                    TokenType::U16.encode(t, &mut b).unwrap();
                    TokenArray::from_bytes(b, TokenType::U16)
                })
                .collect(),
        )
    }

    fn fill(r: &Reader, idx: &[u64], width: usize, lens: bool) -> (Vec<i64>, Vec<u8>, DocLens) {
        let mut ids = vec![-1; idx.len() * width];
        let mut mask = vec![9; idx.len() * width];
        let d = r.fill(idx, width, &mut ids, Some(&mut mask), lens, Some(2)).unwrap();
        (ids, mask, d)
    }

    #[test]
    fn chunks_per_file_with_doc_lens() {
        // File 0: docs [0, 3) [3, 5); file 1: one doc [0, 4). Windows of 2.
        let s = store(&[&[5, 6, 0, 7, 0], &[8, 9, 10, 0]]);
        let docs = vec![U64s::from_vec(&[0, 3, 3, 5]), U64s::from_vec(&[0, 4])];
        let r = Reader::new(s, Layout::Chunks { first: vec![0, 2, 4], docs }, 2, 99, 0, None).unwrap();
        assert_eq!(r.len(), 4);
        let (ids, mask, d) = fill(&r, &[1, 2, 0], 2, true);
        assert_eq!(ids, [0, 7, 8, 9, 5, 6]);
        assert_eq!(mask, [1; 6]);
        assert_eq!(d, DocLens { lens: vec![1, 1, 2, 2], counts: vec![2, 1, 1] });
        assert!(r.fill(&[4], 2, &mut [0; 2], None, false, None).is_err());
        assert!(r.fill(&[0], 3, &mut [0; 3], None, false, None).is_err());
    }

    #[test]
    fn spans_pad_and_packed_count_padding_as_a_document() {
        let s = store(&[&[5, 6, 0, 7, 0], &[8, 9, 10, 0]]);
        let spans = Reader::new(s.clone(), Layout::Spans(U64s::from_vec(&[5, 9, 3, 5])), 4, 99, 0, None).unwrap();
        let (ids, mask, _) = fill(&spans, &[1, 0], 4, false);
        assert_eq!(ids, [7, 0, 99, 99, 8, 9, 10, 0]);
        assert_eq!(mask, [1, 1, 0, 0, 1, 1, 1, 1]);
        let packed = Layout::Packed {
            docs: U64s::from_vec(&[0, 3, 5, 9, 3, 5]),
            offsets: U64s::from_vec(&[0, 1, 3]),
            doc_ids: U64s::from_vec(&[1, 0, 2]),
            doc_lens: PackedDocLens::Packing,
        };
        let r = Reader::new(s, packed, 6, 99, 0, None).unwrap();
        let (ids, _, d) = fill(&r, &[0, 1], 6, true);
        assert_eq!(ids, [8, 9, 10, 0, 99, 99, 5, 6, 0, 7, 0, 99]);
        assert_eq!(d, DocLens { lens: vec![4, 2, 3, 2, 1], counts: vec![2, 3] });
    }

    #[test]
    fn packed_olmo_doc_lens_merge_padding_with_bos_and_split_it_when_pad_is_eos() {
        // Issue 33's examples, worked by hand from OLMo-core's `get_document_lengths`.
        // Two documents, [0, a) and [a, n).
        let packed = |a: u64, n: u64| Layout::Packed {
            docs: U64s::from_vec(&[0, a, a, n]),
            offsets: U64s::from_vec(&[0, 2]),
            doc_ids: U64s::from_vec(&[0, 1]),
            doc_lens: PackedDocLens::Olmo { recorded: vec![] },
        };
        // [2 5 6 1][2 7 1] + pad 0; EOS 1 followed by BOS 2 ends a document, else the row's end.
        let r = Reader::new(store(&[&[2, 5, 6, 1, 2, 7, 1]]), packed(4, 7), 8, 0, 1, Some(2)).unwrap();
        let (ids, _, d) = fill(&r, &[0], 8, true);
        assert_eq!(ids, [2, 5, 6, 1, 2, 7, 1, 0]);
        assert_eq!(d, DocLens { lens: vec![4, 4], counts: vec![2] });
        // [5 6 1][7 1] padded with pad = EOS = 1: every padding token is a document.
        let r = Reader::new(store(&[&[5, 6, 1, 7, 1]]), packed(3, 5), 8, 1, 1, None).unwrap();
        let (ids, _, d) = fill(&r, &[0], 8, true);
        assert_eq!(ids, [5, 6, 1, 7, 1, 1, 1, 1]);
        assert_eq!(d, DocLens { lens: vec![3, 2, 1, 1, 1], counts: vec![5] });
        // A full row ending without EOS is one document to its end; BOS not after EOS is no cut.
        let mut out = Vec::new();
        olmo_doc_lens(&[2, 5, 1, 9, 2, 1, 2], 1, Some(2), &mut out);
        assert_eq!(out, [6, 1]);
    }

    #[test]
    fn packed_olmo_doc_lens_from_recorded_boundaries_keep_documents_apart() {
        // File 0 (recorded): documents [5 6 7] (no EOS), [8 1], [9 1]; file 1 (scanned): [3 1], [4].
        let s = store(&[&[5, 6, 7, 8, 1, 9, 1], &[3, 1, 4]]);
        let layout = |recorded: Vec<bool>| Layout::Packed {
            docs: U64s::from_vec(&[0, 3, 3, 5, 5, 7, 7, 9, 9, 10]),
            offsets: U64s::from_vec(&[0, 3, 5]),
            doc_ids: U64s::from_vec(&[0, 1, 2, 3, 4]),
            doc_lens: PackedDocLens::Olmo { recorded },
        };
        let r = Reader::new(s.clone(), layout(vec![true, false]), 8, 0, 1, None).unwrap();
        let (ids, _, d) = fill(&r, &[0, 1], 8, true);
        assert_eq!(ids, [5, 6, 7, 8, 1, 9, 1, 0, 3, 1, 4, 0, 0, 0, 0, 0]);
        // Recorded: [3, 2, 2] and the padding; scanned (file 1): OLMo's rescan of the row.
        assert_eq!(d, DocLens { lens: vec![3, 2, 2, 1, 2, 6], counts: vec![4, 2] });
        // Every file scanned: the first document runs into the second.
        let r = Reader::new(s.clone(), layout(vec![]), 8, 0, 1, None).unwrap();
        assert_eq!(fill(&r, &[0], 8, true).2.lens, [5, 2, 1]);
        // pad == EOS: one entry per padding token after the recorded documents.
        let r = Reader::new(s.clone(), layout(vec![true, true]), 8, 1, 1, None).unwrap();
        assert_eq!(fill(&r, &[0, 1], 8, true).2.lens, [3, 2, 2, 1, 2, 1, 1, 1, 1, 1, 1]);
        assert!(Reader::new(s, layout(vec![true]), 8, 0, 1, None).is_err());
        // With a BOS (2) the padding joins the last document, unless it ends with EOS and the
        // padding starts with BOS.
        let mut out = Vec::new();
        olmo_recorded_doc_lens(&[2, 5, 2, 6, 1, 0, 0, 0], &[2, 3], 1, Some(2), &mut out);
        assert_eq!(out, [2, 6]);
        out.clear();
        olmo_recorded_doc_lens(&[2, 5, 2, 6, 1, 2, 2, 2], &[2, 3], 1, Some(2), &mut out);
        assert_eq!(out, [2, 3, 3]);
        out.clear();
        olmo_recorded_doc_lens(&[2, 5, 2, 6], &[2, 2], 1, Some(2), &mut out);
        assert_eq!(out, [2, 2]);
    }

    #[test]
    fn interleaved_rows() {
        let s = store(&[&[5, 6, 7, 8, 0, 11, 12, 0]]);
        let layout = Layout::Interleaved {
            base: U64s::from_vec(&[0, 5, 5, 8]),
            exempt: U64s::from_vec(&[]),
            order: U64s::from_vec(&[1, 0]),
            docs_per_instance: 2,
            chunks_per_doc: 2,
        };
        let r = Reader::new(s, layout, 8, 99, 0, Some(1)).unwrap();
        let (ids, mask, _) = fill(&r, &[0], 8, false);
        // Docs [11 12] and [5 6 7 8] (EOS dropped), chunks interleaved, BOS + EOS added.
        assert_eq!(ids, [1, 11, 5, 6, 12, 7, 8, 0]);
        assert_eq!(mask, [1; 8]);
    }
}
