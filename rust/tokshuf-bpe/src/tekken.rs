//! Mistral's `tekken.json` (`mistral-common`'s Tekkenizer), read directly: a tiktoken-style
//! vocabulary whose ordinary tokens come after the special ones.
//!
//! `config.default_num_special_tokens` ids (1000) come first: the file's `special_tokens`, or,
//! in files without them, Mistral's built-in list filled up with `<SPECIAL_n>`. Then the
//! first `default_vocab_size - default_num_special_tokens` ranks of `vocab`, rank `r` being id
//! `r + default_num_special_tokens`. Text is encoded as tiktoken's `encode_ordinary` (special
//! tokens written in the text are text, as the Tekkenizer encodes them).

use std::borrow::Cow;
use std::path::Path;

use base64::Engine as _;
use serde::Deserialize;

use crate::encodings::{sha256_hex, RankTable};
use crate::error::{Error, Result};
use crate::pattern::Pattern;
use crate::vocab::TokenList;

#[derive(Deserialize)]
struct File<'a> {
    config: Config,
    #[serde(borrow)]
    vocab: Vec<Token<'a>>,
    special_tokens: Option<Vec<Special>>,
}

#[derive(Deserialize)]
struct Config {
    pattern: String,
    default_vocab_size: u32,
    default_num_special_tokens: u32,
}

#[derive(Deserialize)]
struct Token<'a> {
    rank: u32,
    /// Base64 (which JSON writes unescaped, so it is borrowed from the file).
    #[serde(borrow)]
    token_bytes: Cow<'a, str>,
}

#[derive(Deserialize)]
struct Special {
    rank: u32,
    token_str: String,
}

/// The special tokens of files that do not list them (tekken versions up to v7).
const BUILT_IN: [&str; 20] = [
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
];

/// Whether a JSON text is a `tekken.json` (its config comes first, with Tekken's own keys).
pub fn is_tekken(json: &str) -> bool {
    let head = &json.as_bytes()[..json.len().min(4096)];
    let has = |key: &[u8]| head.windows(key.len()).any(|w| w == key);
    has(b"\"default_num_special_tokens\"") && has(b"\"config\"")
}

/// What a `tekken.json` defines: a tiktoken-style model (the caller names it).
pub struct Tekken {
    pub ranks: RankTable,
    pub pattern: Pattern,
    pub specials: Vec<(String, u32)>,
}

/// Read a `tekken.json`'s text.
pub fn read(json: &str, path: &Path) -> Result<Tekken> {
    let bad = |msg: String| Error::format(path, msg);
    let file: File = serde_json::from_str(json).map_err(|e| bad(format!("not a tekken.json: {e}")))?;
    let c = &file.config;
    let n_special = c.default_num_special_tokens;
    let inner = c.default_vocab_size.checked_sub(n_special).ok_or_else(|| {
        bad(format!("default_vocab_size {} is below default_num_special_tokens {n_special}", c.default_vocab_size))
    })?;
    let pattern = Pattern::from_regex(&c.pattern).ok_or_else(|| {
        bad(format!(
            "its split pattern {:?} is not one tokshuf knows (convert the file to a tokenizer.json with \
             transformers)",
            c.pattern
        ))
    })?;
    let n = file.vocab.len().min(inner as usize);
    let mut tokens = TokenList::with_capacity(n, n * 8);
    for t in file.vocab.iter().filter(|t| t.rank < inner) {
        tokens
            .push_with(t.rank + n_special, |out| {
                base64::engine::general_purpose::STANDARD.decode_vec(t.token_bytes.as_bytes(), out)
            })
            .map_err(|e| bad(format!("rank {}: invalid base64: {e}", t.rank)))?;
    }
    if tokens.len() != inner as usize {
        return Err(bad(format!("{} ranks below {inner}, expected {inner}", tokens.len())));
    }
    let specials: Vec<(String, u32)> = match &file.special_tokens {
        Some(list) => list.iter().map(|s| (s.token_str.clone(), s.rank)).collect(),
        None => {
            let names =
                BUILT_IN.iter().map(|s| s.to_string()).chain((BUILT_IN.len()..).map(|i| format!("<SPECIAL_{i}>")));
            names.take(n_special as usize).zip(0..).collect()
        }
    };
    Ok(Tekken { ranks: RankTable { tokens, sha256: sha256_hex(json.as_bytes()) }, pattern, specials })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> String {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let mut vocab: Vec<String> = (0..=255u8)
            .map(|b| format!(r#"{{"rank": {b}, "token_bytes": "{}", "token_str": null}}"#, b64(&[b])))
            .collect();
        vocab.push(format!(r#"{{"rank": 256, "token_bytes": "{}", "token_str": "ab"}}"#, b64(b"ab")));
        vocab.push(format!(r#"{{"rank": 257, "token_bytes": "{}", "token_str": "xx"}}"#, b64(b"xx")));
        format!(
            r#"{{"config": {{"pattern": {}, "num_vocab_tokens": 258, "default_vocab_size": 261,
                "default_num_special_tokens": 4, "version": "v3"}}, "vocab": [{}]}}"#,
            serde_json::to_string(Pattern::Tekken.regex()).unwrap(),
            vocab.join(",")
        )
    }

    #[test]
    fn ids_follow_the_special_tokens() {
        let json = tiny();
        assert!(is_tekken(&json));
        let m = read(&json, Path::new("tekken.json")).unwrap();
        assert_eq!(m.pattern, Pattern::Tekken);
        // 261 - 4 = 257 ranks kept: "xx" (rank 257) is past the default vocabulary.
        assert_eq!(m.ranks.tokens.len(), 257);
        assert_eq!(m.ranks.tokens.get(256), (&b"ab"[..], 260));
        assert_eq!(m.specials[..3], [("<unk>".into(), 0), ("<s>".into(), 1), ("</s>".into(), 2)]);
        assert_eq!(m.specials[3], ("[INST]".into(), 3));
        assert!(!is_tekken(r#"{"version": "1.0", "model": {}}"#));
    }
}
