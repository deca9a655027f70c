//! A document as the loader emits it: `[bos] + stripped tokens + [eos]`, cut into chunks of at
//! most `chunk_size` tokens at multiples of `chunk_size`. Positions in this *emitted* sequence
//! are what the state records, so a document end is known from its length, never from a token.

use super::config::StreamConfig;
use super::source::DocSource;
use crate::error::{Error, Result};

/// Where a document's content lies in its source, and what the loader adds around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocLayout {
    /// First source token kept (1 if a leading strip token was removed).
    pub raw_start: u64,
    /// Source tokens kept.
    pub len: u64,
    /// Added before the content.
    pub bos: Option<u32>,
    /// Added after the content.
    pub eos: Option<u32>,
}

impl DocLayout {
    /// Apply `cfg`'s strip rule to document `doc`: remove its first token if it is a strip
    /// token, then its last token if it is one (one token at each end at most).
    pub fn of(src: &mut dyn DocSource, doc: u64, cfg: &StreamConfig) -> Result<Self> {
        let raw = src.doc_len(doc)?;
        let (mut start, mut len) = (0, raw);
        if !cfg.strip.is_empty() && len > 0 {
            let mut t = Vec::with_capacity(2);
            src.read(doc, 0, 1, &mut t)?;
            if cfg.strip.contains(&t[0]) {
                start = 1;
                len -= 1;
            }
            if len > 0 {
                t.clear();
                src.read(doc, raw - 1, 1, &mut t)?;
                if cfg.strip.contains(&t[0]) {
                    len -= 1;
                }
            }
        }
        Ok(DocLayout { raw_start: start, len, bos: cfg.bos, eos: cfg.eos })
    }

    /// Whether the document is emitted at all (not empty, not shorter than `min_length`).
    pub fn emitted(&self, cfg: &StreamConfig) -> bool {
        self.len > 0 && self.emitted_len() >= cfg.min_length
    }

    /// Length of the emitted sequence.
    pub fn emitted_len(&self) -> u64 {
        self.len + u64::from(self.bos.is_some()) + u64::from(self.eos.is_some())
    }

    /// Append emitted positions `start..start + n` to `out`.
    pub fn read(&self, src: &mut dyn DocSource, doc: u64, start: u64, n: u64, out: &mut Vec<u32>) -> Result<()> {
        let end = start + n;
        if end > self.emitted_len() {
            return Err(Error::invalid(format!(
                "positions {start}..{end} lie past the end of document {doc} ({} emitted tokens)",
                self.emitted_len()
            )));
        }
        let mut p = start;
        let head = u64::from(self.bos.is_some());
        if let Some(b) = self.bos.filter(|_| p == 0 && p < end) {
            out.push(b);
            p = 1;
        }
        let stop = end.min(head + self.len);
        if p < stop {
            src.read(doc, self.raw_start + p - head, stop - p, out)?;
            p = stop;
        }
        if let Some(e) = self.eos.filter(|_| p < end) {
            out.push(e);
        }
        Ok(())
    }
}

/// End of the chunk holding emitted position `offset` of a document of `len` emitted tokens.
#[inline]
pub fn chunk_end(offset: u64, len: u64, chunk: u64) -> u64 {
    (offset / chunk + 1).saturating_mul(chunk).min(len)
}

#[cfg(test)]
mod tests {
    use super::super::config::test_config;
    use super::super::source::VecSource;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Chunks round-trip: concatenated, minus bos/eos, they are the stripped document;
        /// bos only opens the first, eos only closes the last, each is at most C long, and
        /// there are ceil(emitted / C) of them.
        #[test]
        fn chunks_round_trip(
            doc in proptest::collection::vec(0u32..6, 0..40),
            c in 1u64..9, bos: bool, eos: bool, strip: bool,
        ) {
            let mut cfg = test_config(vec![1]);
            cfg.bos = bos.then_some(100);
            cfg.eos = eos.then_some(101);
            cfg.strip = if strip { vec![0, 1] } else { vec![] };
            cfg.chunk_size = c;
            let mut src = VecSource::new(vec![doc.clone()]);
            let lay = DocLayout::of(&mut src, 0, &cfg).unwrap();
            let n = lay.emitted_len();
            let mut chunks = vec![];
            let mut at = 0;
            while at < n {
                let e = chunk_end(at, n, c);
                let mut v = vec![];
                lay.read(&mut src, 0, at, e - at, &mut v).unwrap();
                prop_assert!(v.len() as u64 <= c && !v.is_empty());
                chunks.push(v);
                at = e;
            }
            prop_assert_eq!(chunks.len() as u64, n.div_ceil(c));
            let mut expect = doc.clone();
            if strip && expect.first().is_some_and(|t| *t <= 1) { expect.remove(0); }
            if strip && expect.last().is_some_and(|t| *t <= 1) { expect.pop(); }
            prop_assert_eq!(lay.len as usize, expect.len());
            let flat: Vec<u32> = chunks.concat();
            let mut body = flat.clone();
            if bos { prop_assert_eq!(body.remove(0), 100); }
            if eos { prop_assert_eq!(body.pop(), Some(101)); }
            prop_assert_eq!(body, expect);
            for (i, ch) in chunks.iter().enumerate() {
                if bos && i > 0 { prop_assert!(ch[0] != 100 || doc.contains(&100)); }
                if eos && i + 1 < chunks.len() { prop_assert!(*ch.last().unwrap() != 101); }
            }
        }
    }
}
