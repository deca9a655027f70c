//! Tokenizer specs: the strings users write after `--tokenizer`.
//!
//! | spec | tokenizer |
//! | --- | --- |
//! | `byte` | UTF-8 byte + 1, eod 0 (the Megatron fixtures' tokenizer) |
//! | `tiktoken:NAME` | an OpenAI encoding embedded in the binary: `r50k_base` (alias `gpt2`), `p50k_base`, `p50k_edit`, `cl100k_base`, `o200k_base`, `o200k_harmony` |
//! | `tiktoken:PATH[@PATTERN]` | a `.tiktoken` rank file; `PATTERN` names a split regex (`r50k`, `p50k`, `cl100k`, `cl100k_classic`, `llama3`, `o200k`, `qwen2`, `tekken`; `llama3` also brings Meta's 256 special tokens); without it the file must be a known one (OpenAI's encodings, Llama 3's), recognised by its SHA-256 |
//! | `PATH.tiktoken[@PATTERN]`, `PATH@PATTERN` | the same, recognised by the extension or the pattern |
//! | `hf:PATH`, `PATH` | a Hugging Face `tokenizer.json`, or a directory holding one (its `tokenizer_config.json`, if any, names the eos token); also a SentencePiece `.model`, a tiktoken rank file or Mistral's `tekken.json`, recognised by their contents |

use std::path::{Path, PathBuf};

use tokshuf_bpe::encodings::{encoding_names, known_encoding};
use tokshuf_bpe::Pattern;

use crate::error::{Error, IoContext, Result};

/// A parsed tokenizer spec: where the vocabulary comes from, not yet loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenizerSpec {
    Byte,
    /// A tiktoken encoding embedded in the binary, by its canonical name.
    TiktokenEmbedded(&'static str),
    /// A `.tiktoken` rank file, with the split pattern if given.
    TiktokenFile {
        /// The rank file.
        path: PathBuf,
        /// The split pattern family; `None`: recognise the file by its hash.
        pattern: Option<Pattern>,
        /// Given as `@llama3`: Llama 3's pattern and Meta's special tokens.
        llama3: bool,
    },
    /// A SentencePiece `.model` file.
    SentencePiece(PathBuf),
    /// A Hugging Face `tokenizer.json` file.
    HfFile(PathBuf),
    /// A serialized Hugging Face tokenizer (e.g. `tokenizers.Tokenizer.to_str()` from Python).
    HfJson {
        json: String,
        /// Where it came from, for messages and the identity record.
        origin: String,
    },
}

/// What a tokenizer spec may be, for the message that refuses one.
fn spec_help() -> String {
    format!(
        "expected one of: byte, tiktoken:NAME ({}), tiktoken:PATH[@PATTERN] (a rank file; PATTERN one of r50k, \
         p50k, cl100k, cl100k_classic, llama3, o200k, qwen2, tekken), hf:PATH, or a path to a tokenizer.json, a \
         SentencePiece .model, Mistral's tekken.json or a directory holding one",
        encoding_names().join(", ")
    )
}

impl TokenizerSpec {
    /// Parse a spec string (see the module docs). Paths must exist.
    pub fn parse(spec: &str) -> Result<Self> {
        let spec = spec.trim();
        if spec == "byte" {
            return Ok(Self::Byte);
        }
        if let Some(rest) = spec.strip_prefix("tiktoken:") {
            if let Some(known) = known_encoding(rest) {
                return Ok(Self::TiktokenEmbedded(known.name));
            }
            return tiktoken_file(spec, rest);
        }
        if let Some(rest) = spec.strip_prefix("hf:") {
            return hf_path(spec, Path::new(rest));
        }
        let (file, pattern) = split_pattern(spec);
        if file.ends_with(".tiktoken") || (pattern.is_some() && Path::new(file).is_file()) {
            return tiktoken_file(spec, spec);
        }
        let path = Path::new(spec);
        if path.exists() {
            return hf_path(spec, path);
        }
        if known_encoding(spec).is_some() {
            return Err(Error::invalid(format!("unknown tokenizer {spec:?}: did you mean \"tiktoken:{spec}\"?")));
        }
        Err(Error::invalid(format!("unknown tokenizer {spec:?}: no such file or directory ({})", spec_help())))
    }

    /// A short human-readable description, used as the `spec` of the identity record.
    pub fn describe(&self) -> String {
        match self {
            Self::Byte => "byte".into(),
            Self::TiktokenEmbedded(name) => format!("tiktoken:{name}"),
            Self::TiktokenFile { path, llama3: true, .. } => format!("tiktoken:{}@llama3", path.display()),
            Self::TiktokenFile { path, pattern: Some(p), .. } => format!("tiktoken:{}@{}", path.display(), p.name()),
            Self::TiktokenFile { path, pattern: None, .. } => format!("tiktoken:{}", path.display()),
            Self::SentencePiece(path) => format!("sentencepiece:{}", path.display()),
            Self::HfFile(path) => format!("hf:{}", path.display()),
            Self::HfJson { origin, .. } => origin.clone(),
        }
    }
}

/// `PATH@PATTERN` → (PATH, Some(PATTERN)) when PATTERN is a family name; else the whole string.
fn split_pattern(s: &str) -> (&str, Option<Pattern>) {
    s.rsplit_once('@').and_then(|(path, p)| Some((path, Some(p.parse().ok()?)))).unwrap_or((s, None))
}

fn tiktoken_file(spec: &str, rest: &str) -> Result<TokenizerSpec> {
    let (file, pattern) = split_pattern(rest);
    let llama3 = rest
        .rsplit_once('@')
        .is_some_and(|(_, p)| matches!(p.trim().to_ascii_lowercase().as_str(), "llama3" | "llama-3"));
    let path = PathBuf::from(file);
    if !path.is_file() {
        return Err(Error::invalid(format!(
            "unknown tokenizer {spec:?}: {file:?} is neither a known encoding ({}) nor a .tiktoken file",
            encoding_names().join(", ")
        )));
    }
    Ok(TokenizerSpec::TiktokenFile { path, pattern, llama3 })
}

/// The files a tokenizer directory is looked in for, in this order.
const DIR_FILES: [&str; 3] = ["tokenizer.json", "tokenizer.model", "tekken.json"];

fn hf_path(spec: &str, path: &Path) -> Result<TokenizerSpec> {
    if path.is_dir() {
        let Some(file) = DIR_FILES.iter().map(|f| path.join(f)).find(|f| f.is_file()) else {
            return Err(Error::invalid(format!(
                "tokenizer {spec:?}: the directory has none of {} (Hugging Face fast tokenizers, SentencePiece \
                 models, tiktoken rank files and Mistral's tekken.json are read)",
                DIR_FILES.join(", ")
            )));
        };
        return file_spec(spec, &file);
    }
    if path.is_file() {
        return file_spec(spec, path);
    }
    Err(Error::invalid(format!("tokenizer {spec:?}: no such file or directory")))
}

/// What a tokenizer file is, from its first bytes: JSON (a `tokenizer.json`, or a
/// `tekken.json`, told apart when read), a SentencePiece model, or a tiktoken rank file.
fn file_spec(spec: &str, path: &Path) -> Result<TokenizerSpec> {
    use std::io::Read;
    let mut head = Vec::with_capacity(256);
    std::fs::File::open(path).and_then(|f| f.take(256).read_to_end(&mut head)).with_path(path)?;
    if tokshuf_bpe::FastBpe::is_sentencepiece(&head) {
        return Ok(TokenizerSpec::SentencePiece(path.to_path_buf()));
    }
    let text = head.trim_ascii_start();
    if text.first() == Some(&b'{') {
        return Ok(TokenizerSpec::HfFile(path.to_path_buf()));
    }
    let first_line = text.split(|&b| b == b'\n').next().unwrap_or_default();
    let rank_line = first_line.split(|&b| b == b' ').collect::<Vec<_>>();
    if let [token, rank] = rank_line[..] {
        let b64 = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=');
        let rank = rank.trim_ascii();
        if !token.is_empty() && token.iter().all(b64) && !rank.is_empty() && rank.iter().all(u8::is_ascii_digit) {
            return Ok(TokenizerSpec::TiktokenFile { path: path.to_path_buf(), pattern: None, llama3: false });
        }
    }
    Err(Error::invalid(format!(
        "tokenizer {spec:?}: {} is neither a tokenizer.json, a SentencePiece .model, a tiktoken rank file nor \
         Mistral's tekken.json",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(spec: impl AsRef<str>) -> TokenizerSpec {
        TokenizerSpec::parse(spec.as_ref()).unwrap()
    }

    fn error(spec: impl AsRef<str>) -> String {
        TokenizerSpec::parse(spec.as_ref()).unwrap_err().to_string()
    }

    #[test]
    fn names_paths_and_patterns() {
        assert_eq!(parse("byte"), TokenizerSpec::Byte);
        assert_eq!(parse("tiktoken:cl100k_base"), TokenizerSpec::TiktokenEmbedded("cl100k_base"));
        assert_eq!(parse("tiktoken:gpt2"), TokenizerSpec::TiktokenEmbedded("r50k_base"));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.tiktoken");
        std::fs::write(&f, "").unwrap();
        assert_eq!(
            parse(format!("{}@cl100k", f.display())),
            TokenizerSpec::TiktokenFile { path: f.clone(), pattern: Some(Pattern::Cl100k), llama3: false }
        );
        assert_eq!(
            parse(format!("tiktoken:{}", f.display())),
            TokenizerSpec::TiktokenFile { path: f, pattern: None, llama3: false }
        );
        std::fs::write(dir.path().join("tokenizer.json"), "{}").unwrap();
        assert_eq!(parse(dir.path().to_str().unwrap()), TokenizerSpec::HfFile(dir.path().join("tokenizer.json")));
    }

    #[test]
    fn files_are_told_apart_by_their_contents() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("tokenizer.model");
        std::fs::write(&model, b"\x0a\x09\x0a\x05<unk>").unwrap();
        assert_eq!(parse(model.to_str().unwrap()), TokenizerSpec::SentencePiece(model.clone()));
        assert_eq!(parse(dir.path().to_str().unwrap()), TokenizerSpec::SentencePiece(model.clone()));
        std::fs::write(&model, "IQ== 0\nIg== 1\n").unwrap();
        let file = |pattern, llama3| TokenizerSpec::TiktokenFile { path: model.clone(), pattern, llama3 };
        assert_eq!(parse(model.to_str().unwrap()), file(None, false));
        assert_eq!(parse(format!("{}@llama3", model.display())), file(Some(Pattern::Cl100kClassic), true));
        assert_eq!(parse(format!("tiktoken:{}@qwen2", model.display())), file(Some(Pattern::Qwen2), false));
        std::fs::write(&model, "hello world\n").unwrap();
        let e = error(model.to_str().unwrap());
        assert!(e.contains("neither a tokenizer.json"), "{e}");
    }

    #[test]
    fn errors_name_the_spec_and_the_choices() {
        let e = error("cl100k_base");
        assert!(e.contains("tiktoken:cl100k_base"), "{e}");
        let e = error("tiktoken:nope");
        assert!(e.contains("o200k_base"), "{e}");
        let e = error("/no/such/tokenizer.json");
        assert!(e.contains("byte") && e.contains("tiktoken:NAME"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = error(dir.path().to_str().unwrap());
        assert!(e.contains("tokenizer.json, tokenizer.model, tekken.json"), "{e}");
    }
}
