//! The split-pattern families with a hand-written scanner, and the regex spellings they replace.

use std::fmt;
use std::str::FromStr;

use crate::pretok::{pieces, Cl100k, Cursor, Gpt2, O200k, WindowCursor};

/// A pre-tokenization pattern with a fast scanner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// GPT-2, r50k_base, p50k_base.
    Gpt2,
    /// cl100k_base as tiktoken spells it today (`\s++$` ends the pattern's whitespace rules).
    Cl100k,
    /// The original cl100k spelling, used by Hugging Face `tokenizer.json` files and Llama 3.
    Cl100kClassic,
    /// o200k_base (and o200k_harmony).
    O200k,
    /// Qwen2 (and Qwen2.5, Qwen3): the classic cl100k pattern with single digits.
    Qwen2,
    /// Mistral's Tekken: o200k's without the contractions, with single digits.
    Tekken,
}

/// The scanner of a pattern, by type (each compiles its own encoding loop).
#[derive(Clone, Copy)]
pub(crate) enum Scanners {
    Gpt2(Gpt2),
    Cl100k(Cl100k),
    O200k(O200k),
}

/// tiktoken's r50k/p50k/gpt2 pattern.
pub const GPT2_TIKTOKEN: &str = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";
/// The pattern of GPT-2's release (also HF `ByteLevel(use_regex=True)`).
pub const GPT2_ORIGINAL: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// tiktoken's cl100k_base pattern.
pub const CL100K_TIKTOKEN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";
/// The classic cl100k pattern (HF files, Meta's Llama 3 `tokenizer.model` loader).
pub const CL100K_CLASSIC: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// tiktoken's o200k_base pattern.
pub const O200K: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);

/// Qwen2's pattern.
pub const QWEN2: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Mistral Tekken's pattern.
pub const TEKKEN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);

/// Other spellings that match exactly like one of the above.
const ALIASES: &[(&str, Pattern)] = &[
    (GPT2_ORIGINAL, Pattern::Gpt2),
    (r"'s|'t|'re|'ve|'m|'ll|'d| ?[\p{L}]+| ?[\p{N}]+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+", Pattern::Gpt2),
];

impl Pattern {
    /// Every family, in documentation order.
    pub const ALL: [Pattern; 6] =
        [Pattern::Gpt2, Pattern::Cl100k, Pattern::Cl100kClassic, Pattern::O200k, Pattern::Qwen2, Pattern::Tekken];

    /// Every name [`Pattern::from_str`] accepts, for messages.
    pub const NAMES: &'static str = "r50k, p50k, gpt2, cl100k, cl100k_classic, llama3, o200k, qwen2, tekken";

    /// The regex this family reproduces.
    pub fn regex(self) -> &'static str {
        match self {
            Pattern::Gpt2 => GPT2_TIKTOKEN,
            Pattern::Cl100k => CL100K_TIKTOKEN,
            Pattern::Cl100kClassic => CL100K_CLASSIC,
            Pattern::O200k => O200K,
            Pattern::Qwen2 => QWEN2,
            Pattern::Tekken => TEKKEN,
        }
    }

    /// The family of a regex, if it is spelled exactly like a known one.
    pub fn from_regex(regex: &str) -> Option<Pattern> {
        Pattern::ALL
            .into_iter()
            .find(|p| p.regex() == regex)
            .or_else(|| ALIASES.iter().find(|(r, _)| *r == regex).map(|(_, p)| *p))
    }

    /// The short name (`gpt2`, `cl100k`, `cl100k_classic`, `o200k`).
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Gpt2 => "gpt2",
            Pattern::Cl100k => "cl100k",
            Pattern::Cl100kClassic => "cl100k_classic",
            Pattern::O200k => "o200k",
            Pattern::Qwen2 => "qwen2",
            Pattern::Tekken => "tekken",
        }
    }

    #[inline(always)]
    pub(crate) fn scanner(self) -> Scanners {
        match self {
            Pattern::Gpt2 => Scanners::Gpt2(Gpt2),
            Pattern::Cl100k => Scanners::Cl100k(Cl100k { trailing_run_whole: true, single_digits: false }),
            Pattern::Cl100kClassic => Scanners::Cl100k(Cl100k { trailing_run_whole: false, single_digits: false }),
            Pattern::Qwen2 => Scanners::Cl100k(Cl100k { trailing_run_whole: false, single_digits: true }),
            Pattern::O200k => Scanners::O200k(O200k::BASE),
            Pattern::Tekken => Scanners::O200k(O200k::TEKKEN),
        }
    }

    /// A cursor over one text (for the paths that are not the encoder's own loop).
    pub(crate) fn cursor(self) -> Box<dyn Cursor> {
        match self.scanner() {
            Scanners::Gpt2(s) => Box::new(WindowCursor::new(s)),
            Scanners::Cl100k(s) => Box::new(WindowCursor::new(s)),
            Scanners::O200k(s) => Box::new(WindowCursor::new(s)),
        }
    }

    /// The pieces `text` splits into, exactly as the regex would split it.
    pub fn split(self, text: &str) -> Vec<&str> {
        pieces(self.cursor(), text)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Pattern {
    type Err = crate::error::Error;

    /// Names: `gpt2` (= `r50k`, `p50k`), `cl100k`, `cl100k_classic` (= `llama3`), `o200k`,
    /// `qwen2`, `tekken`.
    fn from_str(s: &str) -> crate::error::Result<Pattern> {
        let s = s.trim().to_ascii_lowercase();
        let s = s.strip_suffix("_base").unwrap_or(&s);
        Ok(match s {
            "gpt2" | "r50k" | "p50k" => Pattern::Gpt2,
            "cl100k" => Pattern::Cl100k,
            "cl100k_classic" | "llama3" | "llama-3" => Pattern::Cl100kClassic,
            "o200k" => Pattern::O200k,
            "qwen2" | "qwen" => Pattern::Qwen2,
            "tekken" => Pattern::Tekken,
            _ => {
                return Err(crate::error::Error::invalid(format!(
                    "unknown split pattern {s:?} (expected one of: {})",
                    Pattern::NAMES
                )))
            }
        })
    }
}
