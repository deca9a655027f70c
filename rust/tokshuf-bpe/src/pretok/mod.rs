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

/// Test check: the scalar and the window scanner `scanner` split `text` as `pattern`'s regex does.
#[cfg(test)]
fn assert_agrees<S: window::Window + Copy>(scanner: S, pattern: crate::Pattern, text: &str) {
    type Regexes = std::sync::Mutex<std::collections::HashMap<crate::Pattern, &'static fancy_regex::Regex>>;
    static RES: std::sync::OnceLock<Regexes> = std::sync::OnceLock::new();
    let re = *RES
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(pattern)
        .or_insert_with(|| Box::leak(Box::new(fancy_regex::Regex::new(pattern.regex()).unwrap())));
    let expected: Vec<&str> = re.find_iter(text).map(|m| m.unwrap().as_str()).collect();
    assert_eq!(pieces(&scanner, text), expected, "scalar scanner on {text:?} ({pattern})");
    assert_eq!(pieces(WindowCursor::new(scanner), text), expected, "window scanner on {text:?} ({pattern})");
}
