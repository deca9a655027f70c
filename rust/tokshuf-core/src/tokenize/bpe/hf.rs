//! Hugging Face `tokenizer.json` files that the fast encoder reproduces exactly: a byte-level
//! `BPE` model, no normalizer, and a pre-tokenizer that is either `ByteLevel(use_regex=true)`
//! (GPT-2's split) or `Sequence[Split(Regex(p), Isolated), ByteLevel(use_regex=false)]` with `p`
//! one of the known patterns. Anything else is [`Unsupported`], and callers use the
//! `tokenizers` crate instead.

use serde_json::Value;

use super::pattern::Pattern;
use super::vocab::{FastMap, Merges};

/// Why a `tokenizer.json` cannot take the fast path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not supported by the fast BPE encoder: {}", self.0)
    }
}

impl std::error::Error for Unsupported {}

/// What a supported file describes.
pub(crate) struct HfBpe {
    pub tokens: Vec<(Vec<u8>, u32)>,
    pub merges: Merges,
    pub pattern: Pattern,
    /// `BPE.ignore_merges`: a piece that is a token encodes to that token (tiktoken's rule).
    pub ignore_merges: bool,
    pub specials: Vec<(String, u32)>,
}

fn unsupported<T>(msg: impl Into<String>) -> Result<T, Unsupported> {
    Err(Unsupported(msg.into()))
}

/// GPT-2's byte ↔ printable-character table: the character each byte is written as.
fn byte_chars() -> [char; 256] {
    let mut table = ['\0'; 256];
    let printable = |b: u32| (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b);
    let mut n = 0;
    for b in 0..256u32 {
        table[b as usize] = if printable(b) {
            char::from_u32(b).expect("latin-1")
        } else {
            n += 1;
            char::from_u32(255 + n).expect("valid")
        };
    }
    table
}

/// The bytes of a token written in GPT-2's byte-to-character spelling.
pub(crate) fn decode_token(s: &str) -> Option<Vec<u8>> {
    use std::sync::OnceLock;
    static INVERSE: OnceLock<FastMap<char, u8>> = OnceLock::new();
    decode(s, INVERSE.get_or_init(|| byte_chars().iter().enumerate().map(|(b, &c)| (c, b as u8)).collect()))
}

/// Decode a byte-level token string back into its bytes.
fn decode(s: &str, inverse: &FastMap<char, u8>) -> Option<Vec<u8>> {
    s.chars().map(|c| inverse.get(&c).copied()).collect()
}

fn is_null_or(v: Option<&Value>, ok: impl Fn(&Value) -> bool) -> bool {
    v.is_none_or(|v| v.is_null() || ok(v))
}

fn byte_level(v: &Value, use_regex: bool) -> Result<(), Unsupported> {
    if v.get("type").and_then(Value::as_str) != Some("ByteLevel") {
        return unsupported(format!("pre-tokenizer {} is not ByteLevel", v.get("type").unwrap_or(&Value::Null)));
    }
    if v.get("add_prefix_space").and_then(Value::as_bool).unwrap_or(true) {
        return unsupported("ByteLevel add_prefix_space=true");
    }
    if v.get("use_regex").and_then(Value::as_bool).unwrap_or(true) != use_regex {
        return unsupported(format!("ByteLevel use_regex={}", !use_regex));
    }
    Ok(())
}

fn pre_tokenizer(v: &Value) -> Result<Pattern, Unsupported> {
    match v.get("type").and_then(Value::as_str) {
        Some("ByteLevel") => {
            byte_level(v, true)?;
            Ok(Pattern::Gpt2)
        }
        Some("Sequence") => {
            let steps = v.get("pretokenizers").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let [split, bl] = steps else {
                return unsupported("a pre-tokenizer Sequence other than [Split, ByteLevel]");
            };
            if split.get("type").and_then(Value::as_str) != Some("Split") {
                return unsupported("a pre-tokenizer Sequence other than [Split, ByteLevel]");
            }
            let Some(regex) = split.pointer("/pattern/Regex").and_then(Value::as_str) else {
                return unsupported("Split by a string, not a regex");
            };
            if split.get("behavior").and_then(Value::as_str) != Some("Isolated")
                || split.get("invert").and_then(Value::as_bool).unwrap_or(false)
            {
                return unsupported("Split behavior other than Isolated, or inverted");
            }
            byte_level(bl, false)?;
            Pattern::from_regex(regex).ok_or_else(|| Unsupported(format!("split regex {regex:?} has no fast scanner")))
        }
        other => unsupported(format!("pre-tokenizer type {}", other.unwrap_or("null"))),
    }
}

/// Read a `tokenizer.json`'s text.
pub(crate) fn parse(json: &str) -> Result<HfBpe, Unsupported> {
    let root: Value = serde_json::from_str(json).map_err(|e| Unsupported(format!("invalid JSON: {e}")))?;
    if !root.get("normalizer").is_none_or(Value::is_null) {
        return unsupported("a normalizer");
    }
    let pattern = pre_tokenizer(root.get("pre_tokenizer").unwrap_or(&Value::Null))?;
    let model = root.get("model").unwrap_or(&Value::Null);
    if model.get("type").and_then(Value::as_str) != Some("BPE") {
        return unsupported(format!("model type {}", model.get("type").unwrap_or(&Value::Null)));
    }
    if !is_null_or(model.get("dropout"), |_| false) {
        return unsupported("BPE dropout");
    }
    let empty = |k: &str| is_null_or(model.get(k), |v| v.as_str() == Some(""));
    if !empty("continuing_subword_prefix") || !empty("end_of_word_suffix") {
        return unsupported("a subword prefix or end-of-word suffix");
    }
    let ignore_merges = model.get("ignore_merges").and_then(Value::as_bool).unwrap_or(false);

    let chars = byte_chars();
    let inverse: FastMap<char, u8> = chars.iter().enumerate().map(|(b, &c)| (c, b as u8)).collect();
    let Some(vocab) = model.get("vocab").and_then(Value::as_object) else {
        return unsupported("no BPE vocab");
    };
    let mut ids: FastMap<&str, u32> = FastMap::default();
    let mut tokens = Vec::with_capacity(vocab.len());
    for (s, id) in vocab {
        let Some(id) = id.as_u64().and_then(|i| u32::try_from(i).ok()) else {
            return unsupported(format!("vocab id of {s:?} is not a u32"));
        };
        let Some(bytes) = decode(s, &inverse) else {
            return unsupported(format!("vocab token {s:?} is not byte-level"));
        };
        ids.insert(s.as_str(), id);
        tokens.push((bytes, id));
    }
    // Added tokens: special ones are matched only on request; others would always be split out
    // by `tokenizers`, which this encoder does not reproduce.
    let mut specials = Vec::new();
    for t in root.get("added_tokens").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        let (Some(content), Some(id)) = (t.get("content").and_then(Value::as_str), t.get("id").and_then(Value::as_u64))
        else {
            return unsupported("an added token without content or id");
        };
        let id = u32::try_from(id).map_err(|_| Unsupported(format!("added token id {id}")))?;
        if !t.get("special").and_then(Value::as_bool).unwrap_or(false) {
            return unsupported(format!("non-special added token {content:?}"));
        }
        for flag in ["single_word", "lstrip", "rstrip"] {
            if t.get(flag).and_then(Value::as_bool).unwrap_or(false) {
                return unsupported(format!("added token {content:?} with {flag}"));
            }
        }
        if let Some(&vid) = ids.get(content) {
            if vid != id {
                return unsupported(format!("added token {content:?} has id {id} but vocab id {vid}"));
            }
        }
        specials.push((content.to_string(), id));
    }
    // Special tokens also listed in the vocab (as the GPT-2 file does) are not BPE tokens.
    tokens.retain(|(_, id)| !specials.iter().any(|s| s.1 == *id));

    let Some(merges) = model.get("merges").and_then(Value::as_array) else {
        return unsupported("no BPE merges");
    };
    let mut pairs = FastMap::default();
    pairs.reserve(merges.len());
    for (rank, m) in merges.iter().enumerate() {
        let (a, b) = match m {
            Value::String(s) => match s.split_once(' ') {
                Some((a, b)) if !b.contains(' ') => (a, b),
                _ => return unsupported(format!("merge {s:?}")),
            },
            Value::Array(v) => match v.as_slice() {
                [Value::String(a), Value::String(b)] => (a.as_str(), b.as_str()),
                _ => return unsupported(format!("merge {m}")),
            },
            _ => return unsupported(format!("merge {m}")),
        };
        let (Some(&l), Some(&r), Some(&new)) = (ids.get(a), ids.get(b), ids.get(format!("{a}{b}").as_str())) else {
            return unsupported(format!("merge {a:?} {b:?} uses a token missing from the vocab"));
        };
        // `tokenizers` keeps the first rank of a duplicated merge.
        pairs.entry(u64::from(l) << 32 | u64::from(r)).or_insert((rank as u64) << 32 | u64::from(new));
    }
    Ok(HfBpe { tokens, merges: Merges::List(pairs), pattern, ignore_merges, specials })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_chars_match_gpt2() {
        let c = byte_chars();
        assert_eq!(c[b' ' as usize], 'Ġ');
        assert_eq!(c[b'\n' as usize], 'Ċ');
        assert_eq!(c[b'!' as usize], '!');
        assert_eq!(c[0], 'Ā');
        assert_eq!(c[0xad], 'Ń');
        let distinct: std::collections::HashSet<char> = c.iter().copied().collect();
        assert_eq!(distinct.len(), 256);
    }

    fn minimal(pre: &str, extra: &str) -> String {
        let chars = byte_chars();
        let vocab: Vec<String> =
            (0..256).map(|b| format!("{:?}: {}", chars[b].to_string(), b)).chain(["\"ab\": 256".into()]).collect();
        format!(
            r#"{{"normalizer": null, "pre_tokenizer": {pre}, "added_tokens": [{extra}],
               "model": {{"type": "BPE", "vocab": {{{}}}, "merges": ["a b"]}}}}"#,
            vocab.join(",")
        )
    }

    #[test]
    fn accepts_gpt2_shapes_and_rejects_others() {
        let gpt2 = r#"{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}"#;
        let hf = parse(&minimal(gpt2, "")).unwrap();
        assert_eq!(hf.pattern, Pattern::Gpt2);
        assert_eq!(hf.tokens.len(), 257);
        let seq = format!(
            r#"{{"type": "Sequence", "pretokenizers": [{{"type": "Split", "pattern": {{"Regex": {}}},
                 "behavior": "Isolated", "invert": false}},
                {{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}}]}}"#,
            serde_json::to_string(Pattern::O200k.regex()).unwrap()
        );
        assert_eq!(parse(&minimal(&seq, "")).unwrap().pattern, Pattern::O200k);
        let special = r#"{"id": 300, "content": "<|x|>", "special": true}"#;
        assert_eq!(parse(&minimal(gpt2, special)).unwrap().specials, vec![("<|x|>".to_string(), 300)]);

        let prefix = r#"{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}"#;
        assert!(parse(&minimal(prefix, "")).is_err_and(|e| e.0.contains("add_prefix_space")));
        let other_regex = seq.replace(r"\\p{N}{1,3}", r"\\p{N}+");
        assert!(parse(&minimal(&other_regex, "")).is_err_and(|e| e.0.contains("no fast scanner")));
        let plain = r#"{"id": 300, "content": "<|x|>", "special": false}"#;
        assert!(parse(&minimal(gpt2, plain)).is_err());
        assert!(parse(&minimal(gpt2, "").replace("\"BPE\"", "\"WordPiece\"")).is_err());
        assert!(
            parse(&minimal(gpt2, "").replace("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}")).is_err()
        );
    }
}
