//! Token dtypes and Megatron's dtype codes.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Element type of a `.bin` file, with Megatron's `DType` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// code 1
    U8,
    /// code 2
    I8,
    /// code 3
    I16,
    /// code 4
    I32,
    /// code 5
    I64,
    /// code 6
    F64,
    /// code 7
    F32,
    /// code 8
    U16,
}

impl DType {
    /// Every dtype, in code order.
    pub const ALL: [DType; 8] =
        [DType::U8, DType::I8, DType::I16, DType::I32, DType::I64, DType::F64, DType::F32, DType::U16];

    /// Megatron's code for this dtype (the byte at offset 17 of an `.idx`).
    pub fn code(self) -> u8 {
        match self {
            DType::U8 => 1,
            DType::I8 => 2,
            DType::I16 => 3,
            DType::I32 => 4,
            DType::I64 => 5,
            DType::F64 => 6,
            DType::F32 => 7,
            DType::U16 => 8,
        }
    }

    /// The dtype of a Megatron code, if it is one.
    pub fn from_code(code: u8) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.code() == code)
    }

    /// Bytes per element.
    pub fn itemsize(self) -> usize {
        match self {
            DType::U8 | DType::I8 => 1,
            DType::I16 | DType::U16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// numpy's name for this dtype.
    pub fn name(self) -> &'static str {
        match self {
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F64 => "float64",
            DType::F32 => "float32",
            DType::U16 => "uint16",
        }
    }

    /// Megatron's `DType.optimal_dtype`: uint16 below 65500 ids, else int32.
    pub fn optimal(vocab_size: Option<u64>) -> DType {
        match vocab_size {
            Some(v) if v < 65500 => DType::U16,
            _ => DType::I32,
        }
    }

    /// The largest token id this dtype stores exactly.
    pub fn max_token(self) -> u64 {
        match self {
            DType::U8 => u8::MAX as u64,
            DType::I8 => i8::MAX as u64,
            DType::I16 => i16::MAX as u64,
            DType::U16 => u16::MAX as u64,
            DType::I32 => i32::MAX as u64,
            DType::I64 => i64::MAX as u64,
            DType::F32 => 1 << 24,
            DType::F64 => 1 << 53,
        }
    }

    /// Append `tokens` to `out` as little-endian elements of this dtype.
    ///
    /// Fails on the first id the dtype cannot hold, naming it and the dtype's limit.
    pub fn encode_tokens(self, tokens: &[u32], out: &mut Vec<u8>) -> Result<()> {
        let max = self.max_token();
        // A branch-free maximum first (vectorized); the slow search only to name a bad id.
        if u64::from(tokens.iter().fold(0u32, |m, &t| m.max(t))) > max {
            let bad = tokens.iter().find(|&&t| u64::from(t) > max).expect("the maximum is out of range");
            return Err(Error::invalid(format!(
                "token id {bad} does not fit dtype {} (largest id {max}); choose a wider dtype such as int32",
                self.name()
            )));
        }
        out.reserve(tokens.len() * self.itemsize());
        match self {
            DType::U8 | DType::I8 => out.extend(tokens.iter().map(|&t| t as u8)),
            DType::I16 | DType::U16 => {
                let start = out.len();
                out.resize(start + 2 * tokens.len(), 0);
                for (dst, &t) in out[start..].chunks_exact_mut(2).zip(tokens) {
                    dst.copy_from_slice(&(t as u16).to_le_bytes());
                }
            }
            DType::I32 => {
                let start = out.len();
                out.resize(start + 4 * tokens.len(), 0);
                for (dst, &t) in out[start..].chunks_exact_mut(4).zip(tokens) {
                    dst.copy_from_slice(&t.to_le_bytes());
                }
            }
            DType::I64 => tokens.iter().for_each(|&t| out.extend_from_slice(&u64::from(t).to_le_bytes())),
            DType::F32 => tokens.iter().for_each(|&t| out.extend_from_slice(&(t as f32).to_le_bytes())),
            DType::F64 => tokens.iter().for_each(|&t| out.extend_from_slice(&f64::from(t).to_le_bytes())),
        }
        Ok(())
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        DType::ALL.into_iter().find(|d| d.name() == s).ok_or_else(|| {
            let names: Vec<_> = DType::ALL.iter().map(|d| d.name()).collect();
            Error::invalid(format!("unknown dtype {s:?} (expected one of: {})", names.join(", ")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_match_megatron() {
        let expected = [
            (1, "uint8"),
            (2, "int8"),
            (3, "int16"),
            (4, "int32"),
            (5, "int64"),
            (6, "float64"),
            (7, "float32"),
            (8, "uint16"),
        ];
        for (code, name) in expected {
            let d = DType::from_code(code).unwrap();
            assert_eq!(d.name(), name);
            assert_eq!(d.code(), code);
            assert_eq!(name.parse::<DType>().unwrap(), d);
        }
        assert_eq!(DType::from_code(0), None);
        assert_eq!(DType::from_code(9), None);
    }

    #[test]
    fn optimal_dtype_threshold_is_65500() {
        assert_eq!(DType::optimal(Some(257)), DType::U16);
        assert_eq!(DType::optimal(Some(65499)), DType::U16);
        assert_eq!(DType::optimal(Some(65500)), DType::I32);
        assert_eq!(DType::optimal(None), DType::I32);
    }

    #[test]
    fn out_of_range_token_names_the_value() {
        let mut out = Vec::new();
        let err = DType::U16.encode_tokens(&[1, 70000], &mut out).unwrap_err().to_string();
        assert!(err.contains("70000") && err.contains("uint16"), "{err}");
        DType::I32.encode_tokens(&[1, 70000], &mut out).unwrap();
        assert_eq!(out, [1, 0, 0, 0, 0x70, 0x11, 1, 0]);
    }
}
