//! Encoding many texts at once on the shared thread pool (the Python `encode_batch`, and any
//! stage that tokenizes records it already holds in memory).

use rayon::prelude::*;

use super::Tokenizer;
use crate::cancel::Cancel;
use crate::error::{BadInputReason, Error, Result};

/// Texts per task: enough to amortize scheduling, small enough to balance uneven lengths.
const CHUNK: usize = 16;

/// The ids of every text, concatenated, and `offsets` (`len + 1` entries) such that text `i`
/// has ids `ids[offsets[i]..offsets[i + 1]]`. Order is the input order for any thread count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncodedTexts {
    /// All ids.
    pub ids: Vec<u32>,
    /// Start of each text's ids, plus the total at the end.
    pub offsets: Vec<u64>,
}

/// Encode `texts` with `threads` threads (`None`: the default count). Fails on the first text the
/// tokenizer rejects, naming its index; stops early once `cancel` is set.
pub fn encode_many<S: AsRef<str> + Sync>(
    tokenizer: &dyn Tokenizer,
    texts: &[S],
    threads: Option<usize>,
    cancel: &Cancel,
) -> Result<EncodedTexts> {
    let encode_chunk = |(c, chunk): (usize, &[S])| -> Result<(Vec<u32>, Vec<u64>)> {
        cancel.check()?;
        let mut ids = Vec::new();
        let mut lens = Vec::with_capacity(chunk.len());
        for (j, text) in chunk.iter().enumerate() {
            let before = ids.len();
            tokenizer.encode(text.as_ref(), &mut ids).map_err(|msg| Error::BadInput {
                path: "<texts>".into(),
                line: (c * CHUNK + j + 1) as u64,
                reason: BadInputReason::Tokenizer,
                msg,
            })?;
            lens.push((ids.len() - before) as u64);
        }
        Ok((ids, lens))
    };
    let parts: Vec<(Vec<u32>, Vec<u64>)> = if texts.len() <= CHUNK {
        vec![encode_chunk((0, texts))?]
    } else {
        crate::parallel::pool(threads)
            .install(|| texts.par_chunks(CHUNK).enumerate().map(encode_chunk).collect::<Result<Vec<_>>>())?
    };
    let total: usize = parts.iter().map(|(ids, _)| ids.len()).sum();
    let mut out = EncodedTexts { ids: Vec::with_capacity(total), offsets: Vec::with_capacity(texts.len() + 1) };
    out.offsets.push(0);
    for (ids, lens) in parts {
        out.ids.extend_from_slice(&ids);
        for len in lens {
            let last = *out.offsets.last().expect("starts with 0");
            out.offsets.push(last + len);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::ByteTokenizer;

    #[test]
    fn order_and_offsets_do_not_depend_on_threads() {
        let texts: Vec<String> = (0..100).map(|i| "x".repeat(i % 7)).collect();
        let one = encode_many(&ByteTokenizer, &texts, Some(1), &Cancel::new()).unwrap();
        let four = encode_many(&ByteTokenizer, &texts, Some(4), &Cancel::new()).unwrap();
        assert_eq!(one, four);
        assert_eq!(one.offsets.len(), 101);
        assert_eq!(one.offsets[8] - one.offsets[7], 0); // text 7 is ""
        assert_eq!(one.ids.len() as u64, *one.offsets.last().unwrap());
        assert_eq!(&one.ids[one.offsets[3] as usize..one.offsets[4] as usize], &[b'x' as u32 + 1; 3]);
    }
}
