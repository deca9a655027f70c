//! o200k_base:
//! `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
//! `|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
//! `|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//!
//! The two letter classes overlap (Lm, Lo and marks are in both) and marks are also
//! `[^\r\n\p{L}\p{N}]`, so the first two alternatives are resolved the way a backtracking engine
//! resolves them: optional prefix first taken, then not; `[UP]*` giving characters back.

use super::{class_at, contraction_ci, digits_1_3, run, run_letters, trailing_whitespace, whitespace_run, Scanner};
use crate::tokenize::bpe::unicode::{CRLF, L, LO, N, O, UP};

pub(crate) struct O200k;

#[inline(always)]
fn run_lower(t: &[u8], i: usize) -> usize {
    run_letters(t, i, LO, false, true)
}

/// `[UP]*[LO]+` at `q`: the match end, if any. `[UP]*` takes its longest run, then gives back
/// characters until `[LO]+` can start; `[LO]+` then runs as far as it can.
#[inline]
fn upper_then_lower(t: &[u8], q: usize) -> Option<usize> {
    let (mut i, mut last_lo_end) = (q, None);
    loop {
        let (c, l) = class_at(t, i);
        if c & UP == 0 {
            if c & LO != 0 {
                return Some(run_lower(t, i + l));
            }
            return last_lo_end;
        }
        i += l;
        if c & LO != 0 {
            last_lo_end = Some(i);
        }
    }
}

/// `[UP]+[LO]*` at `q`.
#[inline]
fn upper_run_then_lower(t: &[u8], q: usize) -> Option<usize> {
    let (c, _) = class_at(t, q);
    (c & UP != 0).then(|| run_lower(t, run_letters(t, q, UP, true, false)))
}

impl Scanner for O200k {
    #[inline]
    fn next(&self, t: &[u8], pos: usize) -> usize {
        let b = t[pos];
        let (c, l) = class_at(t, pos);
        // ASCII words (`word`, `Word`, ` word`, ` Word`): what the general rules below give
        // when the letters start with at most one ASCII capital followed by a lowercase letter.
        let q = pos + usize::from(b == b' ');
        let word = match (t.get(q), t.get(q + 1)) {
            (Some(x), _) if x.is_ascii_lowercase() => Some(run_lower(t, q + 1)),
            (Some(x), Some(y)) if x.is_ascii_uppercase() && y.is_ascii_lowercase() => Some(run_lower(t, q + 2)),
            _ => None,
        };
        if let Some(e) = word {
            return e + contraction_ci(t, e).unwrap_or(0);
        }
        let prefix = c & (L | N | CRLF) == 0; // `[^\r\n\p{L}\p{N}]`
                                              // Each alternative needs a letter or mark where it starts.
        let c2 = class_at(t, pos + l).0;
        let word = (if prefix && c2 & (UP | LO) != 0 { upper_then_lower(t, pos + l) } else { None })
            .or_else(|| if c & (UP | LO) != 0 { upper_then_lower(t, pos) } else { None })
            .or_else(|| if prefix && c2 & UP != 0 { upper_run_then_lower(t, pos + l) } else { None })
            .or_else(|| if c & UP != 0 { upper_run_then_lower(t, pos) } else { None });
        if let Some(e) = word {
            return e + contraction_ci(t, e).unwrap_or(0);
        }
        if c & N != 0 {
            return digits_1_3(t, pos, l);
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
        let tail = |e: usize| {
            let mut e = e;
            while matches!(t.get(e), Some(b'\r' | b'\n' | b'/')) {
                e += 1;
            }
            e
        };
        if b == b' ' {
            let (c2, l2) = class_at(t, pos + 1);
            if c2 & O != 0 {
                return tail(run(t, pos + 1 + l2, O));
            }
        }
        if c & O != 0 {
            return tail(run(t, pos + l, O));
        }
        let (end, last, after_crlf) = whitespace_run(t, pos);
        if let Some(e) = after_crlf {
            return e;
        }
        trailing_whitespace(t, pos, end, last)
    }
}
