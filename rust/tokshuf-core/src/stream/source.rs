//! Where documents come from: one [`DocSource`] per sub-dataset, addressing its documents by a
//! global index (its files concatenated in order).

use crate::error::Result;

/// Random access to the documents of one sub-dataset, as unsigned token ids.
///
/// Implementations live in this crate for the native formats (`.bin/.idx`, raw `.npy` token
/// files) and in the binding for handlers written in Python.
pub trait DocSource: Send {
    fn num_docs(&self) -> u64;

    /// Number of tokens in document `doc` (`doc < num_docs()`).
    fn doc_len(&mut self, doc: u64) -> Result<u64>;

    /// Append tokens `start..start + len` of document `doc` to `out`.
    fn read(&mut self, doc: u64, start: u64, len: u64, out: &mut Vec<u32>) -> Result<()>;
}

/// Which file of a concatenation holds global document `doc`, and its index in that file.
/// `cum` holds the running document counts, starting at 0.
pub(crate) fn locate(cum: &[u64], doc: u64) -> Option<(usize, u64)> {
    if doc >= *cum.last()? {
        return None;
    }
    let file = cum.partition_point(|&c| c <= doc) - 1;
    Some((file, doc - cum[file]))
}

/// Running sums `[0, a, a+b, ...]`.
pub(crate) fn cumulative(counts: impl IntoIterator<Item = u64>) -> Vec<u64> {
    let mut cum = vec![0u64];
    for c in counts {
        cum.push(cum.last().copied().unwrap_or(0) + c);
    }
    cum
}

/// An in-memory source (tests, and small corpora built in code).
#[derive(Debug, Clone, Default)]
pub struct VecSource {
    docs: Vec<Vec<u32>>,
}

impl VecSource {
    /// A source over these documents.
    pub fn new(docs: Vec<Vec<u32>>) -> Self {
        VecSource { docs }
    }
}

impl DocSource for VecSource {
    fn num_docs(&self) -> u64 {
        self.docs.len() as u64
    }

    fn doc_len(&mut self, doc: u64) -> Result<u64> {
        Ok(self.docs[doc as usize].len() as u64)
    }

    fn read(&mut self, doc: u64, start: u64, len: u64, out: &mut Vec<u32>) -> Result<()> {
        out.extend_from_slice(&self.docs[doc as usize][start as usize..(start + len) as usize]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_skips_empty_files() {
        let cum = cumulative([2, 0, 3]);
        assert_eq!(cum, vec![0, 2, 2, 5]);
        assert_eq!(locate(&cum, 0), Some((0, 0)));
        assert_eq!(locate(&cum, 2), Some((2, 0)));
        assert_eq!(locate(&cum, 4), Some((2, 2)));
        assert_eq!(locate(&cum, 5), None);
        assert_eq!(locate(&cumulative([]), 0), None);
    }
}
