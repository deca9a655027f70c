//! tiktoken vocabularies: the encodings embedded in the binary, and `.tiktoken` files
//! (`base64(token) rank` per line, as OpenAI publishes them and Llama 3 ships them).

use super::pattern::Pattern;
use super::vocab::TokenList;
use crate::tokenize::tiktoken_files::{embedded_ranks, encoding_names, known_encoding, parse_lines};
use crate::{Error, Result};

/// An embedded encoding: ranks, special tokens and split pattern, as `tiktoken` defines them.
pub struct Encoding {
    pub name: String,
    /// `(token bytes, rank)`; the rank is the id.
    pub ranks: TokenList,
    pub specials: Vec<(String, u32)>,
    pub pattern: Pattern,
}

/// Load an encoding embedded in the binary by its tiktoken name (`cl100k_base`, ...): the
/// ranks of tiktoken's pinned file, and the specials and pattern of
/// [`KNOWN_ENCODINGS`](crate::tokenize::tiktoken_files::KNOWN_ENCODINGS), the one table of them.
pub fn embedded(name: &str) -> Result<Encoding> {
    let known = known_encoding(name).ok_or_else(|| {
        Error::invalid(format!("unknown tiktoken encoding {name:?} (expected one of: {})", encoding_names().join(", ")))
    })?;
    let table = embedded_ranks(known)?;
    Ok(Encoding {
        name: name.to_string(),
        ranks: table.tokens.clone(),
        specials: known.specials(),
        pattern: known.pattern,
    })
}

/// Parse a `.tiktoken` file's contents.
pub fn parse(contents: &[u8], path: &std::path::Path) -> Result<TokenList> {
    parse_lines(contents).map_err(|msg| Error::Format { path: path.to_path_buf(), msg })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines_and_reports_errors() {
        let p = std::path::Path::new("x.tiktoken");
        let r = parse(b"IQ== 0\r\nIg== 1\n\n", p).unwrap();
        assert_eq!(r, vec![(b"!".to_vec(), 0), (b"\"".to_vec(), 1)].into());
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
