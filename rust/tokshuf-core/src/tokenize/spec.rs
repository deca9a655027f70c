//! Tokenizer specs: the strings users write after `--tokenizer`.
//!
//! | spec | tokenizer |
//! | --- | --- |
//! | `byte` | UTF-8 byte + 1, eod 0 (the Megatron fixtures' tokenizer) |
//! | `tiktoken:NAME` | an OpenAI encoding embedded in the binary: `r50k_base` (alias `gpt2`), `p50k_base`, `p50k_edit`, `cl100k_base`, `o200k_base` |
//! | `tiktoken:PATH[@PATTERN]` | a `.tiktoken` rank file; `PATTERN` is `r50k`, `p50k`, `cl100k` or `o200k` (the split regex of that family); without it the file must be one of the known encodings (recognised by its SHA-256) |
//! | `PATH.tiktoken[@PATTERN]` | the same, recognised by the extension |
//! | `hf:PATH`, `PATH` | a Hugging Face `tokenizer.json`, or a directory holding one (its `tokenizer_config.json`, if any, names the eos token) |

use std::path::{Path, PathBuf};

use super::tiktoken_files::{known_encoding, Pattern, KNOWN_ENCODINGS};
use crate::error::{Error, Result};

/// A parsed tokenizer spec: where the vocabulary comes from, not yet loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenizerSpec {
    /// The byte tokenizer.
    Byte,
    /// A tiktoken encoding embedded in the binary, by its canonical name.
    TiktokenEmbedded(&'static str),
    /// A `.tiktoken` rank file, with the split pattern if given.
    TiktokenFile {
        /// The rank file.
        path: PathBuf,
        /// The split pattern family; `None`: recognise the file by its hash.
        pattern: Option<Pattern>,
    },
    /// A Hugging Face `tokenizer.json` file.
    HfFile(PathBuf),
    /// A serialized Hugging Face tokenizer (e.g. `tokenizers.Tokenizer.to_str()` from Python).
    HfJson {
        /// The JSON text.
        json: String,
        /// Where it came from, for messages and the identity record.
        origin: String,
    },
}

const SPEC_HELP: &str = "expected one of: byte, tiktoken:NAME (r50k_base, gpt2, p50k_base, p50k_edit, cl100k_base, \
     o200k_base), tiktoken:PATH.tiktoken[@r50k|p50k|cl100k|o200k], hf:PATH or a path to a tokenizer.json or \
     a directory holding one";

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
        let (file, _) = split_pattern(spec);
        if file.ends_with(".tiktoken") {
            return tiktoken_file(spec, spec);
        }
        let path = Path::new(spec);
        if path.exists() {
            return hf_path(spec, path);
        }
        if known_encoding(spec).is_some() {
            return Err(Error::invalid(format!("unknown tokenizer {spec:?}: did you mean \"tiktoken:{spec}\"?")));
        }
        Err(Error::invalid(format!("unknown tokenizer {spec:?}: no such file or directory ({SPEC_HELP})")))
    }

    /// A short human-readable description, used as the `spec` of the identity record.
    pub fn describe(&self) -> String {
        match self {
            Self::Byte => "byte".into(),
            Self::TiktokenEmbedded(name) => format!("tiktoken:{name}"),
            Self::TiktokenFile { path, pattern: Some(p) } => format!("tiktoken:{}@{}", path.display(), p.name()),
            Self::TiktokenFile { path, pattern: None } => format!("tiktoken:{}", path.display()),
            Self::HfFile(path) => format!("hf:{}", path.display()),
            Self::HfJson { origin, .. } => origin.clone(),
        }
    }
}

/// `PATH@PATTERN` → (PATH, Some(PATTERN)) when PATTERN is a family name; else the whole string.
fn split_pattern(s: &str) -> (&str, Option<Pattern>) {
    match s.rsplit_once('@') {
        Some((path, p)) => match Pattern::from_name(p) {
            Some(pattern) => (path, Some(pattern)),
            None => (s, None),
        },
        None => (s, None),
    }
}

fn tiktoken_file(spec: &str, rest: &str) -> Result<TokenizerSpec> {
    let (file, pattern) = split_pattern(rest);
    let path = PathBuf::from(file);
    if !path.is_file() {
        let names: Vec<&str> = KNOWN_ENCODINGS.iter().map(|e| e.name).collect();
        return Err(Error::invalid(format!(
            "unknown tokenizer {spec:?}: {file:?} is neither a known encoding ({}, gpt2) nor a .tiktoken file",
            names.join(", ")
        )));
    }
    Ok(TokenizerSpec::TiktokenFile { path, pattern })
}

fn hf_path(spec: &str, path: &Path) -> Result<TokenizerSpec> {
    if path.is_dir() {
        let file = path.join("tokenizer.json");
        if !file.is_file() {
            return Err(Error::invalid(format!(
                "tokenizer {spec:?}: the directory has no tokenizer.json (only Hugging Face fast tokenizers are \
                 supported)"
            )));
        }
        return Ok(TokenizerSpec::HfFile(file));
    }
    if path.is_file() {
        return Ok(TokenizerSpec::HfFile(path.to_path_buf()));
    }
    Err(Error::invalid(format!("tokenizer {spec:?}: no such file or directory")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_paths_and_patterns() {
        assert_eq!(TokenizerSpec::parse("byte").unwrap(), TokenizerSpec::Byte);
        assert_eq!(
            TokenizerSpec::parse("tiktoken:cl100k_base").unwrap(),
            TokenizerSpec::TiktokenEmbedded("cl100k_base")
        );
        assert_eq!(TokenizerSpec::parse("tiktoken:gpt2").unwrap(), TokenizerSpec::TiktokenEmbedded("r50k_base"));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.tiktoken");
        std::fs::write(&f, "").unwrap();
        let s = format!("{}@cl100k", f.display());
        assert_eq!(
            TokenizerSpec::parse(&s).unwrap(),
            TokenizerSpec::TiktokenFile { path: f.clone(), pattern: Some(Pattern::Cl100k) }
        );
        assert_eq!(
            TokenizerSpec::parse(&format!("tiktoken:{}", f.display())).unwrap(),
            TokenizerSpec::TiktokenFile { path: f, pattern: None }
        );
        std::fs::write(dir.path().join("tokenizer.json"), "{}").unwrap();
        assert_eq!(
            TokenizerSpec::parse(dir.path().to_str().unwrap()).unwrap(),
            TokenizerSpec::HfFile(dir.path().join("tokenizer.json"))
        );
    }

    #[test]
    fn errors_name_the_spec_and_the_choices() {
        let e = TokenizerSpec::parse("cl100k_base").unwrap_err().to_string();
        assert!(e.contains("tiktoken:cl100k_base"), "{e}");
        let e = TokenizerSpec::parse("tiktoken:nope").unwrap_err().to_string();
        assert!(e.contains("o200k_base"), "{e}");
        let e = TokenizerSpec::parse("/no/such/tokenizer.json").unwrap_err().to_string();
        assert!(e.contains("byte") && e.contains("tiktoken:NAME"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = TokenizerSpec::parse(dir.path().to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("no tokenizer.json"), "{e}");
    }
}
