//! GPT-2 / r50k / p50k:
//! `'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//! (tiktoken spells it with possessive quantifiers and `\s++$|\s+(?!\S)|\s`: the same matches).

use super::{class_at, contraction_cs, run, run_l, trailing_whitespace, whitespace_run, Scanner};
use crate::tokenize::bpe::unicode::{L, N, O};

pub(crate) struct Gpt2;

impl Scanner for Gpt2 {
    #[inline(always)]
    fn next(&self, t: &[u8], pos: usize) -> usize {
        let b = t[pos];
        if b == b'\'' {
            if let Some(k) = contraction_cs(t, pos) {
                return pos + k;
            }
        }
        // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: L, N, O partition the non-space characters,
        // so the class of the first non-space character picks the alternative.
        if b == b' ' {
            let (c2, l2) = class_at(t, pos + 1);
            let m = c2 & (L | N | O);
            if m == L {
                return run_l(t, pos + 1 + l2);
            }
            if m != 0 {
                return run(t, pos + 1 + l2, m);
            }
        }
        let (c, l) = class_at(t, pos);
        let m = c & (L | N | O);
        if m == L {
            return run_l(t, pos + l);
        }
        if m != 0 {
            return run(t, pos + l, m);
        }
        let (end, last, _) = whitespace_run(t, pos);
        trailing_whitespace(t, pos, end, last)
    }
}
