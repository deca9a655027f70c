//! tiktoken vocabularies: the encodings embedded in the `tiktoken-rs` crate, and `.tiktoken`
//! files (`base64(token) rank` per line, as OpenAI publishes them and Llama 3 ships them).

use base64::Engine as _;

use super::pattern::Pattern;
use crate::tokenize::tiktoken_files::{embedded_ranks, known_encoding};
use crate::{Error, Result};

/// `(token bytes, rank)`; the rank is the id.
pub type Ranks = Vec<(Vec<u8>, u32)>;

/// The names [`embedded`] knows.
pub const ENCODINGS: [&str; 7] =
    ["gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base", "o200k_harmony"];

/// An embedded encoding: ranks, special tokens and split pattern, as `tiktoken` defines them.
pub struct Encoding {
    pub name: String,
    pub ranks: Ranks,
    pub specials: Vec<(String, u32)>,
    pub pattern: Pattern,
}

/// Load an encoding embedded in `tiktoken-rs` by its tiktoken name (`cl100k_base`, ...): the
/// ranks checked against tiktoken's pinned SHA-256, and the specials and pattern of
/// [`KNOWN_ENCODINGS`](crate::tokenize::tiktoken_files::KNOWN_ENCODINGS), the one table of them.
pub fn embedded(name: &str) -> Result<Encoding> {
    let known = known_encoding(name).ok_or_else(|| {
        Error::invalid(format!("unknown tiktoken encoding {name:?} (expected one of: {})", ENCODINGS.join(", ")))
    })?;
    let table = embedded_ranks(known)?;
    Ok(Encoding {
        name: name.to_string(),
        ranks: table.entries.clone(),
        specials: known.specials(),
        pattern: known.pattern,
    })
}

/// Parse a `.tiktoken` file's contents.
pub fn parse(contents: &[u8], path: &std::path::Path) -> Result<Ranks> {
    let bad = |line: usize, msg: String| Error::Format { path: path.to_path_buf(), msg: format!("line {line}: {msg}") };
    let mut ranks = Vec::new();
    for (i, line) in contents.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let mut parts = line.split(|&b| b == b' ');
        let (Some(tok), Some(rank), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad(i + 1, "expected `<base64 token> <rank>`".into()));
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(tok)
            .map_err(|e| bad(i + 1, format!("bad base64 token: {e}")))?;
        let rank = std::str::from_utf8(rank)
            .ok()
            .and_then(|r| r.parse::<u32>().ok())
            .ok_or_else(|| bad(i + 1, format!("bad rank {:?}", String::from_utf8_lossy(rank))))?;
        ranks.push((bytes, rank));
    }
    if ranks.is_empty() {
        return Err(Error::Format { path: path.to_path_buf(), msg: "no tokens in the file".into() });
    }
    Ok(ranks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines_and_reports_errors() {
        let p = std::path::Path::new("x.tiktoken");
        let r = parse(b"IQ== 0\r\nIg== 1\n\n", p).unwrap();
        assert_eq!(r, vec![(b"!".to_vec(), 0), (b"\"".to_vec(), 1)]);
        for bad in [&b"IQ==\n"[..], b"IQ== x\n", b"!!! 0\n", b"IQ== 0 1\n", b"\n"] {
            assert!(parse(bad, p).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unknown_name_lists_the_choices() {
        let msg = embedded("cl100k").err().unwrap().to_string();
        assert!(msg.contains("cl100k_base") && msg.contains("o200k_base"), "{msg}");
    }
}
