//! Cutting one input file's documents into fixed-length contexts (tokshuf-rust's rules).
//!
//! Every document becomes `[BOS] + ids + [EOT]` (BOS only where the convention has one), the
//! documents of one file are concatenated and cut into contexts of exactly `seqlen` tokens, so a
//! context may start mid-document; the file's last partial context is filled with PAD. Nothing
//! is carried across files.

use serde::{Deserialize, Serialize};

/// Bits of a context id that hold the context's index within its file.
const INDEX_BITS: u32 = 40;
/// Bits of a context id that hold the input file's index.
pub(super) const FILE_BITS: u32 = 24;

/// The id of context `index` of input file `file`: the content position every random decision
/// and the order inside a cell derive from.
pub fn context_id(file: usize, index: u64) -> u64 {
    debug_assert!(index < 1 << INDEX_BITS);
    ((file as u64) << INDEX_BITS) | index
}

/// The special ids written around documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecialIds {
    /// Written before every document, if set.
    pub bos: Option<u32>,
    /// Written after every document.
    pub eot: u32,
    /// Fills the last context of a file.
    pub pad: u32,
}

/// The running state of one file: tokens not yet emitted and the next context's index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cutter {
    /// Tokens of the next context (always fewer than `seqlen` between calls).
    pub pending: Vec<u32>,
    /// Index (within the file) of the next context.
    pub next_index: u64,
}

impl Cutter {
    /// Append a document; full contexts are appended to `out` (`seqlen` ids each). Returns how
    /// many contexts were emitted.
    pub fn push_document(&mut self, ids: &[u32], special: &SpecialIds, seqlen: usize, out: &mut Vec<u32>) -> u64 {
        let before = out.len();
        self.pending.extend(special.bos);
        // Whole contexts go from `ids` straight to `out`: only a document's ends wait in `pending`.
        let (head, mut rest) = ids.split_at((seqlen - self.pending.len()).min(ids.len()));
        self.pending.extend_from_slice(head);
        if self.pending.len() == seqlen {
            out.append(&mut self.pending);
            let full = rest.len() / seqlen * seqlen;
            out.extend_from_slice(&rest[..full]);
            rest = &rest[full..];
        }
        self.pending.extend_from_slice(rest);
        self.pending.push(special.eot);
        if self.pending.len() == seqlen {
            out.append(&mut self.pending);
        }
        let n = ((out.len() - before) / seqlen) as u64;
        self.next_index += n;
        n
    }

    /// End of file: pad the remainder into one last context. With `all_pad_quirk` an empty
    /// remainder still yields a context of PAD only (tokshuf-rust's behaviour). Returns the
    /// number of PAD tokens written, or `None` if no context was emitted.
    pub fn finish(
        &mut self,
        special: &SpecialIds,
        seqlen: usize,
        all_pad_quirk: bool,
        out: &mut Vec<u32>,
    ) -> Option<u64> {
        if self.pending.is_empty() && !all_pad_quirk {
            return None;
        }
        let pads = seqlen - self.pending.len();
        out.extend_from_slice(&self.pending);
        out.extend(std::iter::repeat_n(special.pad, pads));
        self.pending.clear();
        self.next_index += 1;
        Some(pads as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SP: SpecialIds = SpecialIds { bos: None, eot: 0, pad: 9 };

    fn cut(docs: &[&[u32]], special: &SpecialIds, seqlen: usize, quirk: bool) -> Vec<Vec<u32>> {
        let mut c = Cutter::default();
        let mut out = Vec::new();
        for d in docs {
            c.push_document(d, special, seqlen, &mut out);
        }
        c.finish(special, seqlen, quirk, &mut out);
        assert_eq!(c.next_index as usize, out.len() / seqlen);
        out.chunks(seqlen).map(<[u32]>::to_vec).collect()
    }

    #[test]
    fn concatenate_and_chunk_then_pad() {
        let got = cut(&[&[1, 2, 3], &[4], &[], &[5, 6, 7, 8]], &SP, 4, false);
        assert_eq!(got, vec![vec![1, 2, 3, 0], vec![4, 0, 0, 5], vec![6, 7, 8, 0]]);
        assert_eq!(cut(&[&[1, 2]], &SP, 4, false), vec![vec![1, 2, 0, 9]]);
    }

    #[test]
    fn exact_multiple_has_no_all_pad_context_unless_quirk() {
        assert_eq!(cut(&[&[1, 2, 3]], &SP, 4, false), vec![vec![1, 2, 3, 0]]);
        assert_eq!(cut(&[&[1, 2, 3]], &SP, 4, true), vec![vec![1, 2, 3, 0], vec![9; 4]]);
        assert!(cut(&[], &SP, 4, false).is_empty());
        assert_eq!(cut(&[], &SP, 4, true), vec![vec![9; 4]]);
    }

    #[test]
    fn bos_before_every_document_and_long_documents() {
        let sp = SpecialIds { bos: Some(7), eot: 0, pad: 9 };
        let long: Vec<u32> = (10..20).collect();
        assert_eq!(cut(&[&[1], &long], &sp, 5, false).concat(), [vec![7, 1, 0, 7], long, vec![0]].concat());
    }
}
