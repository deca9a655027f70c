//! The files of a dataset laid end to end: one global token space.

use super::Span;
use crate::error::{Error, Result};
use crate::tokens::TokenArray;

/// Token files in order; file `f` holds global positions `starts[f]..starts[f + 1]`.
#[derive(Debug, Clone)]
pub struct TokenStore {
    files: Vec<TokenArray>,
    starts: Vec<u64>,
}

impl TokenStore {
    /// Lay `files` end to end.
    pub fn new(files: Vec<TokenArray>) -> Self {
        let mut starts = vec![0u64];
        for f in &files {
            starts.push(starts.last().copied().unwrap_or(0) + f.len());
        }
        Self { files, starts }
    }

    pub fn files(&self) -> &[TokenArray] {
        &self.files
    }

    /// Global position of each file's first token, plus the total.
    pub fn starts(&self) -> &[u64] {
        &self.starts
    }

    /// The file holding global position `pos` (the last file for positions past the end).
    pub fn file_of(&self, pos: u64) -> usize {
        self.starts.partition_point(|&x| x <= pos).saturating_sub(1).min(self.files.len().saturating_sub(1))
    }

    /// The file holding `span` and the span's local start.
    fn locate(&self, [s, e]: Span, len: usize) -> Result<(usize, u64)> {
        let f = self.starts.partition_point(|&x| x <= s).saturating_sub(1);
        if e < s || f >= self.files.len() || e > self.starts[f + 1] || len as u64 != e - s {
            return Err(Error::invalid(format!(
                "token span {s}..{e} does not lie inside one of the dataset's files (a stale or foreign index?)"
            )));
        }
        Ok((f, s - self.starts[f]))
    }

    /// Read the tokens of `span` (which must lie inside one file) into `out` (its length).
    pub fn read(&self, span: Span, out: &mut [i64]) -> Result<()> {
        let (f, start) = self.locate(span, out.len())?;
        self.files[f].read_into(start, out)
    }

    /// Read the bytes of `span` as 0/1 flags (label-mask files: numpy bools, one per token).
    pub fn read_flags(&self, span: Span, out: &mut [u8]) -> Result<()> {
        let (f, start) = self.locate(span, out.len())?;
        let bytes = self.files[f].bytes();
        let src = &bytes[start as usize..start as usize + out.len()];
        for (o, &b) in out.iter_mut().zip(src) {
            *o = u8::from(b != 0);
        }
        Ok(())
    }
}
