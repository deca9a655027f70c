//! Hand-written pre-tokenizers: one scanner per split-pattern family, each reproducing its
//! regex's leftmost-first matches exactly (alternation order, greedy runs, the backtracking of
//! `\s+(?!\S)`, `\s*[\r\n]+` and o200k's two letter classes) without a regex engine.
//!
//! Every pattern here matches at every position (each character falls in some alternative), so
//! splitting is a loop of "the match starting at `pos` ends at `next(text, pos)`". The texts are
//! `&str`, so the bytes are valid UTF-8.

mod ascii;
mod automaton;
mod cl100k;
mod gpt2;
mod o200k;
mod scan;
pub(crate) mod split;
mod window;

pub(crate) use automaton::Automaton;
pub(crate) use cl100k::Cl100k;
pub(crate) use gpt2::Gpt2;
pub(crate) use o200k::O200k;
pub(crate) use scan::{pieces, Cursor};
pub(crate) use window::WindowCursor;
