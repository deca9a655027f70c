//! How one context is stored as a tar member: gzipped compact JSON (what open_lm reads) or
//! `.npy` (compact, for tokshuf's own loaders). Encoding happens once, in stage 1; stage 2
//! only copies the bytes.

use libdeflater::{CompressionLvl, Compressor};
use serde::{Deserialize, Serialize};

use super::json_gz::JsonGz;
use crate::dtype::DType;
use crate::error::{Error, Result};

/// The member encoding of a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemberFormat {
    /// `<key>.json.gz`: gzip of `[t0,t1,...]` (no spaces). Level 1 is tokshuf's own
    /// token-level deflate ([`JsonGz`]), the others libdeflate's levels 0-12.
    JsonGz {
        /// Compression level.
        level: u8,
    },
    /// `<key>.npy`: a 1-D little-endian array, `uint16` when every id fits, else `uint32`.
    Npy {
        /// `uint32` rather than `uint16`.
        wide: bool,
    },
}

impl MemberFormat {
    /// Parse `json.gz` or `npy`; `max_id` is the largest id that can occur (picks the npy dtype).
    pub fn parse(name: &str, gzip_level: u8, max_id: u32) -> Result<Self> {
        match name.trim_start_matches('.') {
            "json.gz" => {
                if gzip_level > 12 {
                    return Err(Error::invalid(format!("gzip level {gzip_level} is out of range (0-12)")));
                }
                Ok(Self::JsonGz { level: gzip_level })
            }
            "npy" => Ok(Self::Npy { wide: max_id > u32::from(u16::MAX) }),
            other => Err(Error::invalid(format!("unknown member format {other:?} (expected one of: json.gz, npy)"))),
        }
    }

    /// The bytes to reserve for a member of `len` ids: exact for npy (a header of at most 128
    /// bytes), twice the ids for json.gz (which takes about 1.5 bytes an id).
    pub fn member_bytes(&self, len: usize) -> usize {
        match self {
            Self::JsonGz { .. } => 2 * len,
            Self::Npy { wide } => 128 + len * if *wide { 4 } else { 2 },
        }
    }

    /// The member extension (after the key's dot).
    pub fn extension(&self) -> &'static str {
        match self {
            Self::JsonGz { .. } => "json.gz",
            Self::Npy { .. } => "npy",
        }
    }
}

/// The `.npy` (format 1.0) header of a 1-D array of `len` elements.
fn npy_header(len: usize, wide: bool, out: &mut Vec<u8>) {
    let descr = if wide { "<u4" } else { "<u2" };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({len},), }}");
    // Magic (6) + version (2) + length (2) + dict + '\n', padded with spaces to 64 bytes.
    let dict = format!("{dict:<width$}\n", width = (10 + dict.len() + 1).div_ceil(64) * 64 - 11);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
}

/// The gzip level that selects [`JsonGz`] rather than libdeflate: on lists of token ids it is
/// about 3× as fast as libdeflate's level 1, and a little smaller.
pub const TOKEN_DEFLATE_LEVEL: u8 = 1;

/// A per-thread encoder (the compressor holds state and scratch space).
pub struct Encoder {
    format: MemberFormat,
    json: JsonGz,
    /// libdeflate, for the levels other than [`TOKEN_DEFLATE_LEVEL`].
    compressor: Option<Compressor>,
}

impl Encoder {
    /// An encoder for `format`.
    pub fn new(format: MemberFormat) -> Self {
        let compressor = match format {
            MemberFormat::JsonGz { level } if level != TOKEN_DEFLATE_LEVEL => {
                Some(Compressor::new(CompressionLvl::new(i32::from(level)).unwrap_or_default()))
            }
            _ => None,
        };
        Self { format, json: JsonGz::default(), compressor }
    }

    /// Append the member bytes of the context `ids` to `out`.
    pub fn encode(&mut self, ids: &[u32], out: &mut Vec<u8>) {
        match self.format {
            MemberFormat::JsonGz { .. } => match self.compressor.as_mut() {
                None => self.json.compress(ids, out),
                Some(c) => {
                    let json = self.json.json(ids);
                    let start = out.len();
                    out.resize(start + c.gzip_compress_bound(json.len()), 0);
                    let n = c.gzip_compress(json, &mut out[start..]).expect("the bound is enough");
                    out.truncate(start + n);
                }
            },
            MemberFormat::Npy { wide } => {
                npy_header(ids.len(), wide, out);
                // The ids fit: `wide` is chosen from the vocabulary's largest id.
                (if wide { DType::I32 } else { DType::U16 }).convert_checked(ids, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_round_trip_at_every_level() {
        let ids: Vec<u32> = (0..2049).map(|i| (i * 7919) % 50_000).collect();
        for level in 0..=12 {
            let mut enc = Encoder::new(MemberFormat::JsonGz { level });
            let mut out = Vec::new();
            enc.encode(&ids, &mut out);
            enc.encode(&ids[..10], &mut out);
            // Two members, read back as one stream (as gzip readers concatenate members).
            let mut d = flate2::read::MultiGzDecoder::new(&out[..]);
            let mut s = String::new();
            std::io::Read::read_to_string(&mut d, &mut s).unwrap();
            let expected = serde_json::to_string(&ids).unwrap() + &serde_json::to_string(&ids[..10]).unwrap();
            assert_eq!(s, expected, "level {level}");
        }
    }

    #[test]
    fn npy_header_is_aligned_and_members_fill_what_is_reserved() {
        for (len, wide) in [(1, false), (2049, false), (2049, true), (1 << 20, true), (usize::MAX / 4, true)] {
            let mut out = Vec::new();
            npy_header(len, wide, &mut out);
            assert_eq!(out.len() % 64, 0);
            assert_eq!(*out.last().unwrap(), b'\n');
            assert!(out.len() <= MemberFormat::Npy { wide }.member_bytes(0), "{len}");
        }
        let ids: Vec<u32> = (0..2049).collect();
        let mut out = Vec::new();
        Encoder::new(MemberFormat::Npy { wide: false }).encode(&ids, &mut out);
        assert_eq!(out.len(), MemberFormat::Npy { wide: false }.member_bytes(ids.len()));
    }

    #[test]
    fn formats_parse_with_choices_in_the_message() {
        assert_eq!(MemberFormat::parse("npy", 1, 70_000).unwrap(), MemberFormat::Npy { wide: true });
        assert_eq!(MemberFormat::parse("npy", 1, 65_535).unwrap(), MemberFormat::Npy { wide: false });
        let e = MemberFormat::parse("bin", 1, 10).unwrap_err().to_string();
        assert!(e.contains("json.gz, npy"), "{e}");
    }
}
