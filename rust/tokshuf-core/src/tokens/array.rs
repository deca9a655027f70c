//! A memory-mapped, typed, flat array of token ids.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::indexed::{IndexedDataset, Mapping};

/// Element type of a flat token array. OLMo files are unsigned; Megatron `.bin`s may be signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenType {
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    /// int32 (Megatron's large-vocabulary dtype)
    I32,
    I64,
}

impl TokenType {
    pub const ALL: [TokenType; 8] = [
        TokenType::U8,
        TokenType::U16,
        TokenType::U32,
        TokenType::U64,
        TokenType::I8,
        TokenType::I16,
        TokenType::I32,
        TokenType::I64,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TokenType::U8 => "uint8",
            TokenType::U16 => "uint16",
            TokenType::U32 => "uint32",
            TokenType::U64 => "uint64",
            TokenType::I8 => "int8",
            TokenType::I16 => "int16",
            TokenType::I32 => "int32",
            TokenType::I64 => "int64",
        }
    }

    pub fn itemsize(self) -> usize {
        match self {
            TokenType::U8 | TokenType::I8 => 1,
            TokenType::U16 | TokenType::I16 => 2,
            TokenType::U32 | TokenType::I32 => 4,
            TokenType::U64 | TokenType::I64 => 8,
        }
    }

    /// The largest id this type stores.
    pub fn max_token(self) -> u64 {
        match self {
            TokenType::U8 => u8::MAX.into(),
            TokenType::U16 => u16::MAX.into(),
            TokenType::U32 => u32::MAX.into(),
            TokenType::U64 => u64::MAX,
            TokenType::I8 => i8::MAX as u64,
            TokenType::I16 => i16::MAX as u64,
            TokenType::I32 => i32::MAX as u64,
            TokenType::I64 => i64::MAX as u64,
        }
    }

    /// The type of an indexed dataset's `.bin`, the one of the same numpy name (floats are not
    /// token ids).
    pub fn from_dtype(dtype: DType) -> Result<TokenType> {
        let ty = TokenType::ALL.into_iter().find(|t| t.name() == dtype.name());
        ty.ok_or_else(|| Error::invalid(format!("{} is not an integer token dtype", dtype.name())))
    }

    /// Decode element `i` of little-endian `bytes`.
    #[inline]
    pub fn decode(self, bytes: &[u8], i: usize) -> u64 {
        let w = self.itemsize();
        let b = &bytes[i * w..(i + 1) * w];
        match self {
            TokenType::U8 => b[0].into(),
            TokenType::I8 => b[0] as i8 as u64,
            TokenType::U16 => u16::from_le_bytes([b[0], b[1]]).into(),
            TokenType::I16 => i16::from_le_bytes([b[0], b[1]]) as u64,
            TokenType::U32 => u32::from_le_bytes(b.try_into().expect("4 bytes")).into(),
            TokenType::I32 => i32::from_le_bytes(b.try_into().expect("4 bytes")) as u64,
            TokenType::U64 | TokenType::I64 => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        }
    }

    /// Decode all of `bytes` (a whole number of elements) into `out` as int64 (torch's `long`).
    pub fn decode_into_i64(self, bytes: &[u8], out: &mut [i64]) {
        let w = self.itemsize();
        debug_assert_eq!(bytes.len(), out.len() * w);
        macro_rules! run {
            ($t:ty) => {
                for (o, c) in out.iter_mut().zip(bytes.chunks_exact(w)) {
                    *o = <$t>::from_le_bytes(c.try_into().expect("item")) as i64;
                }
            };
        }
        match self {
            TokenType::U8 => out.iter_mut().zip(bytes).for_each(|(o, &b)| *o = b.into()),
            TokenType::I8 => out.iter_mut().zip(bytes).for_each(|(o, &b)| *o = (b as i8).into()),
            TokenType::U16 => run!(u16),
            TokenType::I16 => run!(i16),
            TokenType::U32 => run!(u32),
            TokenType::I32 => run!(i32),
            TokenType::U64 => run!(u64),
            TokenType::I64 => run!(i64),
        }
    }

    /// Append `tokens` as little-endian elements, failing on the first id the type cannot hold.
    pub fn encode(self, tokens: &[u64], out: &mut Vec<u8>) -> Result<()> {
        let max = self.max_token();
        if let Some(&bad) = tokens.iter().find(|&&t| t > max) {
            return Err(Error::invalid(format!(
                "token id {bad} does not fit {} (largest id {max}); choose a wider dtype",
                self.name()
            )));
        }
        out.reserve(tokens.len() * self.itemsize());
        for &t in tokens {
            out.extend_from_slice(&t.to_le_bytes()[..self.itemsize()]);
        }
        Ok(())
    }
}

impl FromStr for TokenType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        TokenType::ALL.into_iter().find(|t| t.name() == s).ok_or_else(|| {
            let names: Vec<_> = TokenType::ALL.iter().map(|t| t.name()).collect();
            Error::invalid(format!("unknown token dtype {s:?} (expected one of: {})", names.join(", ")))
        })
    }
}

/// A read-only flat array of token ids over a memory map.
#[derive(Debug, Clone)]
pub struct TokenArray {
    path: PathBuf,
    map: Mapping,
    ty: TokenType,
    len: u64,
}

impl TokenArray {
    /// Map an OLMo token file (headerless; length = file size / item size).
    ///
    /// A size that is not a whole number of elements means a truncated file or a wrong dtype,
    /// and is an error rather than OLMo's silent floor.
    pub fn open(path: impl AsRef<Path>, ty: TokenType) -> Result<TokenArray> {
        let path = path.as_ref().to_path_buf();
        let map = crate::indexed::open_token_file(&path)?;
        let size = map.bytes().len();
        if size % ty.itemsize() != 0 {
            return Err(Error::format(
                &path,
                format!(
                    "size {size} bytes is not a multiple of {} ({}): the file is truncated or its dtype is not {}",
                    ty.itemsize(),
                    ty.name(),
                    ty.name()
                ),
            ));
        }
        if map.bytes().starts_with(b"\x93NUMPY") {
            return Err(Error::format(
                &path,
                "this is a numpy .npy file with a header (np.save); OLMo token files are raw arrays (np.memmap)",
            ));
        }
        Ok(TokenArray { len: (size / ty.itemsize()) as u64, path, map, ty })
    }

    /// The `.bin` of an indexed dataset as one token stream (its documents come from the index).
    pub fn from_indexed(ds: &IndexedDataset) -> Result<TokenArray> {
        let ty = TokenType::from_dtype(ds.dtype())?;
        let map = ds.bin_mapping()?.clone();
        let len = (map.bytes().len() / ty.itemsize()) as u64;
        Ok(TokenArray { path: ds.bin_path().to_path_buf(), map, ty, len })
    }

    /// An array over owned bytes (tests).
    pub fn from_bytes(bytes: Vec<u8>, ty: TokenType) -> TokenArray {
        let len = (bytes.len() / ty.itemsize()) as u64;
        TokenArray { path: PathBuf::from("<memory>"), map: Mapping::from_bytes(bytes), ty, len }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn token_type(&self) -> TokenType {
        self.ty
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The raw bytes of the whole array.
    pub fn bytes(&self) -> &[u8] {
        &self.map.bytes()[..self.len as usize * self.ty.itemsize()]
    }

    /// Token `i` (panics out of range).
    #[inline]
    pub fn get(&self, i: u64) -> u64 {
        self.ty.decode(self.map.bytes(), i as usize)
    }

    /// Tokens `start..start + out.len()` into `out` as int64, bounds-checked.
    pub fn read_into(&self, start: u64, out: &mut [i64]) -> Result<()> {
        let end = start.checked_add(out.len() as u64).filter(|&e| e <= self.len).ok_or_else(|| {
            Error::format(
                &self.path,
                format!("tokens {start}..{} lie outside the file's {} tokens", start + out.len() as u64, self.len),
            )
        })?;
        let w = self.ty.itemsize();
        self.ty.decode_into_i64(&self.map.bytes()[start as usize * w..end as usize * w], out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() {
        for ty in TokenType::ALL {
            let toks = [0u64, 1, 100, ty.max_token()];
            let mut b = Vec::new();
            ty.encode(&toks, &mut b).unwrap();
            let arr = TokenArray::from_bytes(b, ty);
            assert_eq!(arr.len(), 4);
            let mut out = [0i64; 3];
            arr.read_into(1, &mut out).unwrap();
            assert_eq!(out, [1, 100, ty.max_token() as i64]);
            assert_eq!(arr.get(3), ty.max_token());
            assert!(arr.read_into(2, &mut out).is_err());
        }
        assert!(TokenType::U8.encode(&[256], &mut Vec::new()).is_err());
    }
}
