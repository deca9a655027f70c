//! A gzip writer for one thing only: the compact JSON list of a context's token ids.
//!
//! Each id's JSON text (`,` and its digits) and its code in the fixed Huffman code come from a
//! table, and [`Deflater`] codes the list as one deflate block with matches over repeated runs of
//! tokens. The result is a standard gzip member that any inflater reads, a little smaller than
//! libdeflate's fastest level and about three times as fast.

use super::deflate::Deflater;

/// Scratch buffers reused across calls (one per thread).
#[derive(Default)]
pub struct JsonGz {
    deflater: Deflater,
    /// `units[id]`: the JSON of `id` as it follows another id, and its code.
    units: Vec<Unit>,
    /// The JSON text is `json[..json_len]` (the buffer keeps the size of the longest so far).
    json: Vec<u8>,
    json_len: usize,
    /// `starts[i]`: offset in `json` of token `i`'s unit (its separator and digits);
    /// `starts[n]`: the closing bracket.
    starts: Vec<u32>,
    /// `codes[i]`: the code of token `i`'s unit (as in [`Unit`]), 0 for an id without one.
    codes: Vec<u64>,
}

/// One id's literal unit: 16 bytes, so that one cache line access serves both the text and the
/// code (the table of a 50k-token vocabulary is 800 KiB, not all in cache beside a tokenizer's).
#[derive(Clone, Copy)]
struct Unit {
    /// `,` and the digits in the low bytes, their number in the top byte.
    text: u64,
    /// The Huffman code of those bytes, its length in bits in the top byte.
    code: u64,
}

/// Ids below this have their JSON unit in a table (2 MiB at most; at most 6 digits, so a unit
/// fits in 8 bytes with its length); larger ones are formatted.
const UNIT_TABLE_MAX: usize = 1 << 18;

const DIGITS: [u8; 200] = {
    let mut d = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        d[2 * i] = b'0' + (i / 10) as u8;
        d[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    d
};

/// Number of decimal digits of `n`.
#[inline(always)]
fn decimal_len(n: u32) -> usize {
    const POW10: [u32; 9] = [10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000];
    1 + POW10.iter().map(|&p| usize::from(n >= p)).sum::<usize>()
}

/// Write the decimal digits of `n` at the start of `dst` (at least 10 bytes); returns their
/// number. Fixed-size stores only: a variable-length copy per number would cost a `memcpy` call.
#[inline(always)]
pub(crate) fn write_decimal(dst: &mut [u8], mut n: u32) -> usize {
    let len = decimal_len(n);
    let dst = &mut dst[..10];
    let mut i = len;
    while n >= 100 {
        let r = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        dst[i] = DIGITS[r];
        dst[i + 1] = DIGITS[r + 1];
    }
    if n >= 10 {
        let r = n as usize * 2;
        dst[0] = DIGITS[r];
        dst[1] = DIGITS[r + 1];
    } else {
        dst[0] = b'0' + n as u8;
    }
    len
}

/// The JSON unit of `id`: `,` and its digits, their number in the top byte.
fn format_unit(id: u32) -> u64 {
    debug_assert!((id as usize) < UNIT_TABLE_MAX);
    let mut b = [0u8; 11];
    b[0] = b',';
    let n = 1 + write_decimal(&mut b[1..11], id);
    b[7] = n as u8;
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

impl JsonGz {
    /// The compact JSON list of `ids` (as `serde_json::to_string(&Vec<u32>)` writes it), from the
    /// unit table.
    pub fn json(&mut self, ids: &[u32]) -> &[u8] {
        self.build_json(ids);
        &self.json[..self.json_len]
    }

    /// Append a gzip member of `[ids[0],ids[1],...]` (compact JSON) to `out`.
    pub fn compress(&mut self, ids: &[u32], out: &mut Vec<u8>) {
        self.build_json(ids);
        out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
        let (n, json) = (ids.len(), &self.json[..self.json_len]);
        self.deflater.write_block(ids, json, &self.starts[..=n], &self.codes[..n], out);
        out.extend_from_slice(&libdeflater::crc32(json).to_le_bytes());
        out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    }

    fn build_json(&mut self, ids: &[u32]) {
        let n = ids.len();
        // Units are stored 8 bytes at a time into a buffer with room for the longest (11
        // bytes each); the text is its first `json_len` bytes. The buffers keep their largest size.
        if self.json.len() < n * 11 + 32 {
            self.json.resize(n * 11 + 32, 0);
        }
        if self.starts.len() < n + 1 {
            self.starts.resize(n + 1, 0);
            self.codes.resize(n + 1, 0);
        }
        let Self { deflater, units, json, starts, codes, .. } = self;
        let max = ids.iter().copied().max().unwrap_or(0) as usize;
        if max >= units.len() && max < UNIT_TABLE_MAX {
            let len = (max + 1).next_power_of_two().clamp(1 << 16, UNIT_TABLE_MAX);
            units.extend((units.len() as u32..len as u32).map(|id| {
                let text = format_unit(id);
                Unit { text, code: deflater.unit(text) }
            }));
        }
        let mut pos = 0;
        if max < units.len() {
            for (i, &id) in ids.iter().enumerate() {
                let u = units[id as usize];
                starts[i] = pos as u32;
                codes[i] = u.code;
                json[pos..pos + 8].copy_from_slice(&u.text.to_le_bytes());
                pos += (u.text >> 56) as usize;
            }
        } else {
            // Ids beyond the table are formatted here and coded byte by byte (`codes[i]` 0).
            for (i, &id) in ids.iter().enumerate() {
                starts[i] = pos as u32;
                match units.get(id as usize) {
                    Some(u) => {
                        codes[i] = u.code;
                        json[pos..pos + 8].copy_from_slice(&u.text.to_le_bytes());
                        pos += (u.text >> 56) as usize;
                    }
                    None => {
                        codes[i] = 0;
                        json[pos] = b',';
                        pos += 1 + write_decimal(&mut json[pos + 1..pos + 11], id);
                    }
                }
            }
        }
        let end = pos.max(1);
        starts[n] = end as u32;
        json[0] = b'[';
        json[end] = b']';
        self.json_len = end + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_the_json_of_each_id_after_a_comma() {
        for (id, text) in [(0u32, ",0"), (9, ",9"), (10, ",10"), (99_999, ",99999"), (262_143, ",262143")] {
            let u = format_unit(id);
            assert_eq!(u >> 56, text.len() as u64, "{id}");
            assert_eq!(&u.to_le_bytes()[..text.len()], text.as_bytes(), "{id}");
        }
    }

    #[test]
    fn every_unit_fits_one_put() {
        let deflater = Deflater::default();
        // The longest unit is `,` and six digits; its code must fit one 56-bit write.
        for id in [0, 9, 10, 99_999, 100_000, 111_111, 188_888, (UNIT_TABLE_MAX - 1) as u32] {
            let c = deflater.unit(format_unit(id));
            assert!(c >> 56 <= 56, "unit of {id}: {} bits", c >> 56);
        }
    }

    #[test]
    fn json_is_what_serde_writes() {
        let mut gz = JsonGz::default();
        for ids in [vec![], vec![0], vec![u32::MAX, 0, 262_144, 262_143, 10, 9]] {
            assert_eq!(gz.json(&ids), serde_json::to_string(&ids).unwrap().as_bytes());
        }
    }
}
