//! What a spec resolves to: the vocabulary, split pattern and special tokens, loaded but not yet
//! turned into an encoder. Keeping this step separate lets [`super::build`] pick the encoder
//! for a model (e.g. a faster exact one for a byte-level BPE family) without callers knowing.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::spec::TokenizerSpec;
use tokshuf_bpe::encodings::{
    embedded_ranks, known_by_sha256, known_encoding, llama3_specials, sha256_hex, RankTable, LLAMA3_SHA256,
};
use tokshuf_bpe::tekken;
use tokshuf_bpe::Pattern;

use crate::error::{Error, IoContext, Result};

/// A loaded tokenizer description.
#[derive(Debug, Clone)]
pub enum TokenizerModel {
    /// UTF-8 byte + 1, eod 0.
    Byte,
    /// A tiktoken-style byte-level BPE: mergeable ranks + split regex + special tokens.
    Bpe(BpeModel),
    /// A Hugging Face `tokenizer.json`.
    Hf(HfModel),
    /// A SentencePiece `.model` file.
    SentencePiece(SentencePieceModel),
}

/// A SentencePiece model, as the file's bytes.
#[derive(Debug, Clone)]
pub struct SentencePieceModel {
    pub bytes: Arc<Vec<u8>>,
    /// The spec it came from.
    pub spec: String,
    /// SHA-256 of the file.
    pub sha256: String,
}

/// A tiktoken-style byte-level BPE.
#[derive(Debug, Clone)]
pub struct BpeModel {
    /// The encoding's name (`cl100k_base`) or the rank file's path.
    pub name: String,
    /// The spec it came from.
    pub spec: String,
    pub ranks: Arc<RankTable>,
    pub pattern: Pattern,
    /// Special tokens (recognised only by `encode` with specials allowed; `encode_ordinary`,
    /// which preprocessing uses, treats them as text).
    pub specials: Vec<(String, u32)>,
}

impl BpeModel {
    /// Ids `0..vocab_size` cover every rank and special token.
    pub fn vocab_size(&self) -> u64 {
        let specials = self.specials.iter().map(|&(_, id)| u64::from(id) + 1).max().unwrap_or(0);
        self.ranks.n_vocab().max(specials)
    }

    /// The end-of-document token's id: `<|endoftext|>` (OpenAI), `<|end_of_text|>` (Llama 3) or
    /// `</s>` (Mistral's Tekken), if the encoding has one.
    pub fn endoftext(&self) -> Option<u32> {
        ["<|endoftext|>", "<|end_of_text|>", "</s>"]
            .iter()
            .find_map(|name| self.specials.iter().find(|(t, _)| t == name).map(|&(_, id)| id))
    }
}

/// A Hugging Face tokenizer, as JSON.
#[derive(Debug, Clone)]
pub struct HfModel {
    /// The serialized tokenizer.
    pub json: JsonText,
    /// The spec it came from (a path, or a description of the Python object).
    pub spec: String,
    /// SHA-256 of `json`.
    pub sha256: String,
    /// The eos token named by a `tokenizer_config.json` beside the file, if any.
    pub config_eos: Option<String>,
}

/// A `tokenizer.json`'s text, read from its file when first asked for: a vocabulary prepared
/// before and stored under the file's SHA-256 needs only the hash (see `tokshuf_bpe`'s `stored`), not the
/// megabytes of JSON.
#[derive(Debug, Clone)]
pub struct JsonText {
    /// The file, and the SHA-256 its contents had when it was hashed.
    file: Option<(PathBuf, String)>,
    text: Arc<OnceLock<String>>,
}

impl JsonText {
    /// A text at hand.
    pub fn new(text: String) -> JsonText {
        JsonText { file: None, text: Arc::new(OnceLock::from(text)) }
    }

    /// The text of `path`, whose contents have the SHA-256 `sha256`.
    fn file(path: &Path, sha256: &str) -> JsonText {
        JsonText { file: Some((path.to_path_buf(), sha256.to_string())), text: Arc::new(OnceLock::new()) }
    }

    /// The text (read now if it was not). A file whose contents changed since they were hashed
    /// is an error: what is loaded must be what the identity names.
    pub fn get(&self) -> Result<&str> {
        if let Some(text) = self.text.get() {
            return Ok(text);
        }
        let Some((path, sha256)) = &self.file else { unreachable!("a JsonText holds a text or a file") };
        let text = read_text(path)?;
        if sha256_hex(text.as_bytes()) != *sha256 {
            return Err(Error::format(path, "the file changed while it was being loaded"));
        }
        Ok(self.text.get_or_init(|| text))
    }
}

/// Load what `spec` names.
pub fn resolve(spec: &TokenizerSpec) -> Result<TokenizerModel> {
    let described = spec.describe();
    match spec {
        TokenizerSpec::Byte => Ok(TokenizerModel::Byte),
        TokenizerSpec::TiktokenEmbedded(name) => {
            let enc = known_encoding(name).expect("parsed specs name known encodings");
            Ok(TokenizerModel::Bpe(BpeModel {
                name: enc.name.to_string(),
                spec: described,
                ranks: embedded_ranks(enc)?,
                pattern: enc.pattern,
                specials: enc.specials(),
            }))
        }
        TokenizerSpec::TiktokenFile { path, pattern, llama3 } => {
            let bytes = std::fs::read(path).with_path(path)?;
            let ranks = RankTable::parse(&bytes, &path.display().to_string())?;
            let known = known_by_sha256(&ranks.sha256);
            let is_llama3 = *llama3 || (ranks.sha256 == LLAMA3_SHA256 && pattern.is_none());
            if is_llama3 && ranks.n_vocab() != 128_000 {
                return Err(Error::invalid(format!(
                    "tokenizer {described:?}: @llama3 brings Meta's special tokens at ids 128000 and up, but the \
                     rank file has {} ranks, not 128000 (give the split pattern as @cl100k_classic instead)",
                    ranks.n_vocab()
                )));
            }
            let pattern = match (pattern, known) {
                (Some(p), _) => *p,
                (None, Some(k)) => k.pattern,
                (None, None) if is_llama3 => Pattern::Cl100kClassic,
                (None, None) => {
                    return Err(Error::invalid(format!(
                        "tokenizer {described:?}: the rank file is not one of OpenAI's encodings or Llama 3's, so its \
                         split pattern must be given: {}@PATTERN with PATTERN one of {}",
                        path.display(),
                        Pattern::NAMES
                    )));
                }
            };
            // The special tokens of a known file are its encoding's, Llama 3's are Meta's; a custom
            // file has none (give the end-of-document id explicitly).
            let specials = if is_llama3 { Some(llama3_specials()) } else { known.map(|k| k.specials()) };
            Ok(TokenizerModel::Bpe(BpeModel {
                name: if is_llama3 { "llama3".into() } else { path.display().to_string() },
                spec: described,
                ranks: Arc::new(ranks),
                pattern,
                specials: specials.unwrap_or_default(),
            }))
        }
        TokenizerSpec::SentencePiece(path) => {
            let bytes = std::fs::read(path).with_path(path)?;
            Ok(TokenizerModel::SentencePiece(SentencePieceModel {
                sha256: sha256_hex(&bytes),
                bytes: Arc::new(bytes),
                spec: described,
            }))
        }
        TokenizerSpec::HfFile(path) => {
            let (sha256, head) = hash_file(path)?;
            let json = JsonText::file(path, &sha256);
            if tekken::is_tekken(&head) {
                let tekken = tekken::read(json.get()?, path)?;
                return Ok(TokenizerModel::Bpe(BpeModel {
                    name: "tekken".into(),
                    spec: described,
                    ranks: Arc::new(tekken.ranks),
                    pattern: tekken.pattern,
                    specials: tekken.specials,
                }));
            }
            let config_eos = path.parent().map(config_eos_token).transpose()?.flatten();
            Ok(TokenizerModel::Hf(HfModel { sha256, json, spec: described, config_eos }))
        }
        TokenizerSpec::HfJson { json, origin } => Ok(TokenizerModel::Hf(HfModel {
            sha256: sha256_hex(json.as_bytes()),
            json: JsonText::new(json.clone()),
            spec: origin.clone(),
            config_eos: None,
        })),
    }
}

/// The SHA-256 of a file, read in blocks rather than kept whole, and its first 4 KiB as text
/// (lossily).
fn hash_file(path: &Path) -> Result<(String, String)> {
    use sha2::Digest as _;
    use std::io::Read as _;
    let mut file = std::io::BufReader::with_capacity(256 << 10, std::fs::File::open(path).with_path(path)?);
    let mut head = Vec::with_capacity(4096);
    (&mut file).take(4096).read_to_end(&mut head).with_path(path)?;
    let mut hasher = sha2::Sha256::new_with_prefix(&head);
    std::io::copy(&mut file, &mut hasher).with_path(path)?;
    Ok((format!("{:x}", hasher.finalize()), String::from_utf8_lossy(&head).into_owned()))
}

/// A text file's contents (a `tokenizer.json` is megabytes: its UTF-8 is checked by SIMD).
fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_path(path)?;
    if simdutf8::basic::from_utf8(&bytes).is_ok() {
        // SAFETY: the bytes were just checked to be UTF-8.
        return Ok(unsafe { String::from_utf8_unchecked(bytes) });
    }
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)).with_path(path)
}

/// The `eos_token` of `dir/tokenizer_config.json` (a string or an `{"content": ...}` object),
/// which is what `transformers` — and so Megatron's HuggingFaceTokenizer — uses as eod.
fn config_eos_token(dir: &Path) -> Result<Option<String>> {
    let path = dir.join("tokenizer_config.json");
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).with_path(&path)?;
    let config: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::format(&path, format!("not valid JSON: {e}")))?;
    Ok(match config.get("eos_token") {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(serde_json::Value::Object(o)) => o.get("content").and_then(|c| c.as_str()).map(str::to_string),
        _ => None,
    })
}
