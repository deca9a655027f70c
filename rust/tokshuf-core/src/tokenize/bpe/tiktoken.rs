//! tiktoken vocabularies: the encodings embedded in the `tiktoken-rs` crate, and `.tiktoken`
//! files (`base64(token) rank` per line, as OpenAI publishes them and Llama 3 ships them).

use base64::Engine as _;

use super::pattern::Pattern;
use crate::{Error, Result};

/// `(token bytes, rank)`; the rank is the id.
pub type Ranks = Vec<(Vec<u8>, u32)>;

const ENDOFTEXT: &str = "<|endoftext|>";
const FIM_PREFIX: &str = "<|fim_prefix|>";
const FIM_MIDDLE: &str = "<|fim_middle|>";
const FIM_SUFFIX: &str = "<|fim_suffix|>";
const ENDOFPROMPT: &str = "<|endofprompt|>";

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

/// The special tokens and pattern of the OpenAI encoding `name` (tiktoken's `openai_public.py`).
fn definition(name: &str) -> Option<(Vec<(String, u32)>, Pattern)> {
    let s = |v: &[(&str, u32)]| v.iter().map(|&(t, i)| (t.to_string(), i)).collect::<Vec<_>>();
    Some(match name {
        "gpt2" | "r50k_base" | "p50k_base" => (s(&[(ENDOFTEXT, 50256)]), Pattern::Gpt2),
        "p50k_edit" => {
            (s(&[(ENDOFTEXT, 50256), (FIM_PREFIX, 50281), (FIM_MIDDLE, 50282), (FIM_SUFFIX, 50283)]), Pattern::Gpt2)
        }
        "cl100k_base" => (
            s(&[
                (ENDOFTEXT, 100257),
                (FIM_PREFIX, 100258),
                (FIM_MIDDLE, 100259),
                (FIM_SUFFIX, 100260),
                (ENDOFPROMPT, 100276),
            ]),
            Pattern::Cl100k,
        ),
        "o200k_base" => (s(&[(ENDOFTEXT, 199999), (ENDOFPROMPT, 200018)]), Pattern::O200k),
        "o200k_harmony" => {
            let mut v = s(&[
                ("<|startoftext|>", 199998),
                (ENDOFTEXT, 199999),
                ("<|reserved_200000|>", 200000),
                ("<|reserved_200001|>", 200001),
                ("<|return|>", 200002),
                ("<|constrain|>", 200003),
                ("<|reserved_200004|>", 200004),
                ("<|channel|>", 200005),
                ("<|start|>", 200006),
                ("<|end|>", 200007),
                ("<|message|>", 200008),
                ("<|reserved_200009|>", 200009),
                ("<|reserved_200010|>", 200010),
                ("<|reserved_200011|>", 200011),
                ("<|call|>", 200012),
                (ENDOFPROMPT, 200018),
            ]);
            v.extend((200013..201088).map(|i| (format!("<|reserved_{i}|>"), i)));
            (v, Pattern::O200k)
        }
        _ => return None,
    })
}

/// Load an encoding embedded in `tiktoken-rs` by its tiktoken name (`cl100k_base`, ...).
pub fn embedded(name: &str) -> Result<Encoding> {
    let (specials, pattern) = definition(name).ok_or_else(|| {
        Error::invalid(format!("unknown tiktoken encoding {name:?} (expected one of: {})", ENCODINGS.join(", ")))
    })?;
    let bpe = match name {
        "gpt2" | "r50k_base" => tiktoken_rs::r50k_base(),
        "p50k_base" | "p50k_edit" => tiktoken_rs::p50k_base(),
        "cl100k_base" => tiktoken_rs::cl100k_base(),
        _ => tiktoken_rs::o200k_base(),
    }
    .map_err(|e| Error::invalid(format!("tiktoken-rs could not load {name}: {e}")))?;
    // tiktoken-rs keeps its ranks private; decoding each id gives them back. Ranks are dense
    // from 0, with the special tokens (which `decode_bytes` also knows) above them.
    let first_special = specials.iter().map(|s| s.1).min().unwrap_or(u32::MAX);
    let mut ranks = Vec::new();
    for id in 0..first_special {
        match bpe.decode_bytes(&[id]) {
            Ok(bytes) => ranks.push((bytes, id)),
            Err(_) if id > 0 => break,
            Err(e) => return Err(Error::invalid(format!("tiktoken-rs {name}: no token 0: {e}"))),
        }
    }
    if name.starts_with("p50k") && ranks.len() != 50281 {
        // p50k's ranks continue past the <|endoftext|> special (50256) up to 50280.
        for id in ranks.len() as u32 + 1..50281 {
            if let Ok(bytes) = bpe.decode_bytes(&[id]) {
                ranks.push((bytes, id));
            }
        }
    }
    Ok(Encoding { name: name.to_string(), ranks, specials, pattern })
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
