//! Token dtypes and Megatron's dtype codes.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Element type of a `.bin` file, with Megatron's `DType` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    U8 = 1,
    I8 = 2,
    I16 = 3,
    I32 = 4,
    I64 = 5,
    F64 = 6,
    F32 = 7,
    U16 = 8,
}

impl DType {
    /// Every dtype, in code order.
    pub const ALL: [DType; 8] =
        [DType::U8, DType::I8, DType::I16, DType::I32, DType::I64, DType::F64, DType::F32, DType::U16];

    /// Megatron's code for this dtype (the byte at offset 17 of an `.idx`).
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The dtype of a Megatron code, if it is one.
    pub fn from_code(code: u8) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.code() == code)
    }

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

    /// Fail on the first id of `tokens` this dtype cannot hold, naming it and the dtype's limit.
    pub fn check_tokens(self, tokens: &[u32]) -> Result<()> {
        let max = self.max_token();
        // A branch-free pass first; the slow search only to name a bad id. Where the limit is
        // one less than a power of two, an id exceeds it exactly when it has a bit above the
        // limit's, so the bits of all ids OR-ed together tell: one vector OR per 16 bytes, where
        // an unsigned maximum takes five SSE2 instructions (it has no unsigned compare).
        let too_large = if (max + 1).is_power_of_two() {
            u64::from(tokens.iter().fold(0u32, |m, &t| m | t)) > max
        } else {
            u64::from(tokens.iter().fold(0u32, |m, &t| m.max(t))) > max
        };
        if too_large {
            let bad = tokens.iter().find(|&&t| u64::from(t) > max).expect("an id is out of range");
            return Err(Error::invalid(format!(
                "token id {bad} does not fit dtype {} (largest id {max}); choose a wider dtype such as int32",
                self.name()
            )));
        }
        Ok(())
    }

    /// `tokens` (already checked) as this dtype's little-endian bytes, without a copy, where the
    /// two layouts are the same: int32 on a little-endian machine.
    pub fn stored_bytes(self, tokens: &[u32]) -> Option<&[u8]> {
        (self == DType::I32 && cfg!(target_endian = "little")).then(|| {
            // SAFETY: any initialized memory is valid as bytes, and the byte slice covers exactly
            // the memory of `tokens` (u8 has no alignment requirement).
            unsafe { std::slice::from_raw_parts(tokens.as_ptr().cast::<u8>(), std::mem::size_of_val(tokens)) }
        })
    }

    /// Append `tokens` (already checked) to `out` as little-endian elements of this dtype.
    pub fn convert_checked(self, tokens: &[u32], out: &mut Vec<u8>) {
        match self {
            DType::U8 | DType::I8 => out.extend(tokens.iter().map(|&t| t as u8)),
            DType::I16 | DType::U16 => extend_le(out, tokens, |t| (t as u16).to_le_bytes()),
            DType::I32 => extend_le(out, tokens, u32::to_le_bytes),
            DType::I64 => extend_le(out, tokens, |t| u64::from(t).to_le_bytes()),
            DType::F32 => extend_le(out, tokens, |t| (t as f32).to_le_bytes()),
            DType::F64 => extend_le(out, tokens, |t| f64::from(t).to_le_bytes()),
        }
    }
}

/// Append `encode(t)` for every token to `out`, written once into its spare capacity (no
/// zero-fill first: this runs over every token a preprocess writes).
#[inline(always)]
fn extend_le<const K: usize>(out: &mut Vec<u8>, tokens: &[u32], encode: impl Fn(u32) -> [u8; K]) {
    let n = K * tokens.len();
    out.reserve(n);
    for (dst, &t) in out.spare_capacity_mut()[..n].chunks_exact_mut(K).zip(tokens) {
        for (d, b) in dst.iter_mut().zip(encode(t)) {
            d.write(b);
        }
    }
    // SAFETY: the loop wrote all `n` bytes after the length (one chunk of `K` per token), within
    // the capacity reserved above.
    unsafe { out.set_len(out.len() + n) };
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
    fn every_dtype_takes_its_largest_id_and_refuses_the_next() {
        for d in DType::ALL {
            let max = d.max_token();
            let fits = u32::try_from(max).unwrap_or(u32::MAX);
            // The largest id among others, at either end of a run long enough to vectorize.
            for at in [0, 40] {
                let mut ids = vec![1u32; 41];
                ids[at] = fits;
                d.check_tokens(&ids).unwrap();
                if max < u64::from(u32::MAX) {
                    ids[at] = fits + 1;
                    let err = d.check_tokens(&ids).unwrap_err().to_string();
                    assert!(err.contains(&(fits + 1).to_string()), "{err}");
                }
            }
        }
    }

    #[test]
    fn out_of_range_token_names_the_value() {
        let err = DType::U16.check_tokens(&[1, 70000]).unwrap_err().to_string();
        assert!(err.contains("70000") && err.contains("uint16"), "{err}");
        DType::I32.check_tokens(&[1, 70000]).unwrap();
        assert_eq!(DType::I32.stored_bytes(&[1, 70000]).unwrap(), [1, 0, 0, 0, 0x70, 0x11, 1, 0]);
    }

    proptest::proptest! {
        /// Every dtype appends its elements after what `out` holds, as numpy lays them out.
        #[test]
        fn convert_checked_appends_little_endian_elements(
            tokens in proptest::collection::vec(0u32..(1 << 24), 0..100),
            prefix in proptest::collection::vec(proptest::num::u8::ANY, 0..5),
        ) {
            for d in DType::ALL {
                let max = d.max_token().min(1 << 24) as u32;
                let ids: Vec<u32> = tokens.iter().map(|&t| t % (max + 1)).collect();
                let mut want = prefix.clone();
                for &t in &ids {
                    match d {
                        DType::U8 => want.push(t as u8),
                        DType::I8 => want.push(t as i8 as u8),
                        DType::U16 => want.extend((t as u16).to_le_bytes()),
                        DType::I16 => want.extend((t as i16).to_le_bytes()),
                        DType::I32 => want.extend((t as i32).to_le_bytes()),
                        DType::I64 => want.extend(i64::from(t).to_le_bytes()),
                        DType::F32 => want.extend((t as f32).to_le_bytes()),
                        DType::F64 => want.extend(f64::from(t).to_le_bytes()),
                    }
                }
                let mut out = prefix.clone();
                d.convert_checked(&ids, &mut out);
                proptest::prop_assert_eq!(&out, &want, "{}", d);
            }
        }
    }
}
