//! cl100k_base and Llama 3. The classic spelling (HF `tokenizer.json`, Meta's Llama 3):
//! `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//! tiktoken's current spelling replaces the whitespace tail with `\s++$|\s*[\r\n]|\s+(?!\S)|\s`,
//! which differs on one input shape: a whitespace run that ends the text and contains a line
//! break before other whitespace (`"x\n "`: classic `"\n"`, `" "`; tiktoken `"\n "`).

use super::{class_at, contraction_ci, digits_1_3, run, run_l, trailing_whitespace, whitespace_run, Scanner};
use crate::tokenize::bpe::unicode::{CRLF, L, N, O};

pub(crate) struct Cl100k {
    /// tiktoken's `\s++$`: a whitespace run reaching the end of the text is one piece.
    pub trailing_run_whole: bool,
}

impl Scanner for Cl100k {
    #[inline(always)]
    fn next(&self, t: &[u8], pos: usize) -> usize {
        let b = t[pos];
        if b == b'\'' {
            if let Some(k) = contraction_ci(t, pos) {
                return pos + k;
            }
        }
        let (c, l) = class_at(t, pos);
        if c & L != 0 {
            return run_l(t, pos + l);
        }
        // `[^\r\n\p{L}\p{N}]?\p{L}+`: one non-letter, non-digit, non-newline character before letters.
        if c & (N | CRLF) == 0 {
            let (c2, l2) = class_at(t, pos + l);
            if c2 & L != 0 {
                return run_l(t, pos + l + l2);
            }
        }
        if c & N != 0 {
            return digits_1_3(t, pos, l);
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
        if b == b' ' {
            let (c2, l2) = class_at(t, pos + 1);
            if c2 & O != 0 {
                return run(t, run(t, pos + 1 + l2, O), CRLF);
            }
        }
        if c & O != 0 {
            return run(t, run(t, pos + l, O), CRLF);
        }
        let (end, last, after_crlf) = whitespace_run(t, pos);
        if self.trailing_run_whole && end == t.len() {
            return end;
        }
        // `\s*[\r\n]+`: up to and including the run's last line break.
        if let Some(e) = after_crlf {
            return e;
        }
        trailing_whitespace(t, pos, end, last)
    }
}
