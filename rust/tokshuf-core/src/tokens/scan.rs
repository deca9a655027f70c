//! Document boundaries by scanning for EOS, in parallel chunks (OLMo's `iter_document_indices`).

use rayon::prelude::*;

use super::array::TokenArray;
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::parallel;

/// Tokens per parallel task: large enough to amortize scheduling, small enough to balance.
const CHUNK: usize = 1 << 22;

/// `(start, end)` of every document of `tokens`, in order, `end` exclusive.
///
/// A document runs from just after the previous boundary up to and including the next one.
/// Without `bos` every EOS is a boundary; with `bos` a boundary is an EOS followed by a BOS, or
/// an EOS that ends the array (for tokenizers whose BOS equals their EOS). Tokens after the last
/// boundary belong to no document, as in OLMo-core.
pub fn document_spans(
    tokens: &TokenArray,
    eos: u64,
    bos: Option<u64>,
    threads: Option<usize>,
    cancel: &Cancel,
) -> Result<Vec<[u64; 2]>> {
    let ty = tokens.token_type();
    if eos > ty.max_token() {
        return Err(Error::invalid(format!("eos_token_id {eos} cannot occur in a {} token file", ty.name())));
    }
    let n = tokens.len() as usize;
    let chunks: Vec<(usize, usize)> = (0..n).step_by(CHUNK).map(|s| (s, (s + CHUNK).min(n))).collect();
    let per_chunk: Vec<Vec<u64>> = parallel::pool(threads).install(|| {
        chunks
            .par_iter()
            .map(|&(s, e)| {
                cancel.check()?;
                let mut ends = Vec::new();
                eos_positions(tokens, s, e, eos, &mut ends);
                if let Some(bos) = bos {
                    // Keep an EOS only if a BOS follows it, or if it is the array's last token.
                    ends.retain(|&i| i as usize + 1 == n || tokens.get(i + 1) == bos);
                }
                Ok(ends)
            })
            .collect::<Result<_>>()
    })?;
    let mut spans = Vec::with_capacity(per_chunk.iter().map(Vec::len).sum());
    let mut start = 0u64;
    for i in per_chunk.into_iter().flatten() {
        spans.push([start, i + 1]);
        start = i + 1;
    }
    Ok(spans)
}

/// Push the positions in `s..e` holding `eos`, in order.
fn eos_positions(tokens: &TokenArray, s: usize, e: usize, eos: u64, out: &mut Vec<u64>) {
    let w = tokens.token_type().itemsize();
    let bytes = &tokens.bytes()[s * w..e * w];
    match w {
        1 => scan!(u8, bytes, s, eos, out),
        2 => scan!(u16, bytes, s, eos, out),
        4 => scan!(u32, bytes, s, eos, out),
        _ => scan!(u64, bytes, s, eos, out),
    }
}

/// Compare 64 elements at a time into a bit mask (the compares vectorize), then walk the set
/// bits. Only the bit pattern matters, so signed files are scanned as unsigned.
macro_rules! scan {
    ($t:ty, $bytes:expr, $base:expr, $eos:expr, $out:expr) => {{
        const W: usize = std::mem::size_of::<$t>();
        let target = $eos as $t;
        let read = |c: &[u8]| <$t>::from_le_bytes(c.try_into().expect("W bytes"));
        let mut blocks = $bytes.chunks_exact(64 * W);
        let mut at = $base as u64;
        for b in &mut blocks {
            let mut mask = 0u64;
            for j in 0..64 {
                mask |= u64::from(read(&b[j * W..(j + 1) * W]) == target) << j;
            }
            while mask != 0 {
                $out.push(at + u64::from(mask.trailing_zeros()));
                mask &= mask - 1;
            }
            at += 64;
        }
        for (j, c) in blocks.remainder().chunks_exact(W).enumerate() {
            if read(c) == target {
                $out.push(at + j as u64);
            }
        }
    }};
}
use scan;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::TokenType;

    fn arr(tokens: &[u64], ty: TokenType) -> TokenArray {
        let mut b = Vec::new();
        ty.encode(tokens, &mut b).unwrap();
        TokenArray::from_bytes(b, ty)
    }

    fn naive(tokens: &[u64], eos: u64, bos: Option<u64>) -> Vec<[u64; 2]> {
        let mut out = Vec::new();
        let mut start = 0;
        for i in 0..tokens.len() {
            let boundary = tokens[i] == eos
                && match bos {
                    None => true,
                    Some(b) => i + 1 == tokens.len() || tokens[i + 1] == b,
                };
            if boundary {
                out.push([start, i as u64 + 1]);
                start = i as u64 + 1;
            }
        }
        out
    }

    #[test]
    fn eos_and_bos_rules() {
        let t = [5, 1, 2, 0, 3, 0, 0, 4, 9];
        let a = arr(&t, TokenType::U16);
        let c = Cancel::new();
        assert_eq!(document_spans(&a, 0, None, Some(2), &c).unwrap(), vec![[0, 4], [4, 6], [6, 7]]);
        // BOS == EOS (dolma2_sigdig): E a b E E c d E → two documents.
        let t = [7, 1, 2, 7, 7, 3, 4, 7];
        let a = arr(&t, TokenType::U32);
        assert_eq!(document_spans(&a, 7, Some(7), Some(2), &c).unwrap(), vec![[0, 4], [4, 8]]);
        assert_eq!(document_spans(&a, 7, None, Some(2), &c).unwrap(), vec![[0, 1], [1, 4], [4, 5], [5, 8]]);
    }

    #[test]
    fn matches_a_naive_scan_across_chunk_and_block_edges() {
        let mut t = Vec::new();
        let mut x = 12345u64;
        for _ in 0..(CHUNK + 1000) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            t.push((x >> 60) % 7);
        }
        for ty in [TokenType::U8, TokenType::U16, TokenType::U64] {
            let a = arr(&t, ty);
            for bos in [None, Some(3)] {
                assert_eq!(document_spans(&a, 0, bos, Some(2), &Cancel::new()).unwrap(), naive(&t, 0, bos));
            }
        }
    }
}
