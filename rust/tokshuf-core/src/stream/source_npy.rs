//! OLMo-style token files: a raw, headerless little-endian array of unsigned ids (written with
//! `np.memmap`, so `np.load` rejects them), documents separated by an end-of-document id.
//!
//! A document is the run of tokens between two EOS ids; the EOS itself is the boundary, not
//! content (the loader adds its own `eos` structurally). A tail after the last EOS is a document.

use std::path::PathBuf;

use super::source::{cumulative, locate, DocSource};
use crate::error::{Error, Result};
use crate::indexed::Mapping;
use crate::tokens::TokenType;

/// The element type of raw token files named by `s` (unsigned only; numpy's short names too).
pub fn parse_width(s: &str) -> Result<TokenType> {
    Ok(match s {
        "uint8" | "u1" => TokenType::U8,
        "uint16" | "u2" => TokenType::U16,
        "uint32" | "u4" => TokenType::U32,
        "uint64" | "u8" => TokenType::U64,
        _ => {
            return Err(Error::invalid(format!(
                "unknown token dtype {s:?} for raw token files (expected uint8, uint16, uint32 or uint64)"
            )))
        }
    })
}

#[derive(Debug)]
struct TokenFile {
    path: PathBuf,
    map: Mapping,
    /// Positions of the EOS ids, then (if the file does not end with EOS) the file's length.
    ends: Vec<u64>,
}

/// Raw token files split into documents at an EOS id.
#[derive(Debug)]
pub struct NpySource {
    width: TokenType,
    files: Vec<TokenFile>,
    cum: Vec<u64>,
}

impl NpySource {
    /// Map `paths` and find the document boundaries (one pass over each file).
    pub fn open(paths: &[PathBuf], width: TokenType, eos: u64) -> Result<Self> {
        let files = paths
            .iter()
            .map(|p| {
                let map = crate::indexed::open_token_file(p)?;
                let b = map.bytes();
                if b.len() % width.itemsize() != 0 {
                    return Err(Error::format(
                        p,
                        format!(
                            "size {} is not a multiple of the {}-byte token size: wrong dtype, or a torn file",
                            b.len(),
                            width.itemsize()
                        ),
                    ));
                }
                let n = b.len() / width.itemsize();
                let mut ends: Vec<u64> = (0..n).filter(|&i| width.decode(b, i) == eos).map(|i| i as u64).collect();
                if ends.last().map_or(n > 0, |&e| e + 1 < n as u64) {
                    ends.push(n as u64);
                }
                Ok(TokenFile { path: p.clone(), map, ends })
            })
            .collect::<Result<Vec<_>>>()?;
        let cum = cumulative(files.iter().map(|f| f.ends.len() as u64));
        Ok(NpySource { width, files, cum })
    }

    fn span(&self, doc: u64) -> Result<(&TokenFile, u64, u64)> {
        let (f, d) = locate(&self.cum, doc)
            .ok_or_else(|| Error::invalid(format!("document {doc} out of range for {} documents", self.num_docs())))?;
        let file = &self.files[f];
        let d = d as usize;
        let start = if d == 0 { 0 } else { file.ends[d - 1] + 1 };
        Ok((file, start, file.ends[d]))
    }
}

impl DocSource for NpySource {
    fn num_docs(&self) -> u64 {
        *self.cum.last().unwrap_or(&0)
    }

    fn doc_len(&mut self, doc: u64) -> Result<u64> {
        let (_, a, b) = self.span(doc)?;
        Ok(b - a)
    }

    fn read(&mut self, doc: u64, start: u64, len: u64, out: &mut Vec<u32>) -> Result<()> {
        let (file, a, b) = self.span(doc)?;
        if start + len > b - a {
            return Err(Error::invalid(format!("read past the end of document {doc}")));
        }
        let bytes = file.map.bytes();
        let (lo, hi) = ((a + start) as usize, (a + start + len) as usize);
        out.reserve(len as usize);
        match self.width {
            TokenType::U8 => out.extend(bytes[lo..hi].iter().map(|&x| u32::from(x))),
            TokenType::U16 => {
                out.extend(bytes[2 * lo..2 * hi].chunks_exact(2).map(|c| u32::from(u16::from_le_bytes([c[0], c[1]]))))
            }
            TokenType::U32 => {
                out.extend(bytes[4 * lo..4 * hi].chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            }
            // uint64 (and any other type): element by element, checked against 32 bits
            _ => {
                for i in lo..hi {
                    let v = self.width.decode(bytes, i);
                    out.push(u32::try_from(v).map_err(|_| {
                        Error::format(&file.path, format!("token id {v} at position {i} does not fit 32 bits"))
                    })?);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &std::path::Path, name: &str, toks: &[u16]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, toks.iter().flat_map(|t| t.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        p
    }

    fn docs(src: &mut NpySource) -> Vec<Vec<u32>> {
        (0..src.num_docs())
            .map(|d| {
                let n = src.doc_len(d).unwrap();
                let mut v = vec![];
                src.read(d, 0, n, &mut v).unwrap();
                v
            })
            .collect()
    }

    #[test]
    fn splits_at_eos_and_keeps_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.npy", &[5, 6, 0, 0, 7, 0, 8, 9]);
        let b = write(dir.path(), "b.npy", &[]);
        let c = write(dir.path(), "c.npy", &[0]);
        let mut src = NpySource::open(&[a, b, c], TokenType::U16, 0).unwrap();
        assert_eq!(docs(&mut src), vec![vec![5, 6], vec![], vec![7], vec![8, 9], vec![]]);
    }

    #[test]
    fn a_torn_file_is_a_format_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.npy");
        std::fs::write(&p, [1u8, 2, 3]).unwrap();
        let err = NpySource::open(&[p], TokenType::U16, 0).unwrap_err();
        assert!(matches!(err, Error::Format { .. }), "{err}");
    }
}
