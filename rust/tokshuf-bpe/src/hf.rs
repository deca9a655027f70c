//! Hugging Face `tokenizer.json` files that the fast encoder reproduces exactly, decided from
//! the file's structure: a BPE model over a pipeline made of components it implements.
//!
//! - normalizers: none, NFC, Lowercase, Prepend, Replace of a plain string, and sequences;
//! - pre-tokenizers: `ByteLevel` (GPT-2's regex or none; `add_prefix_space` when it comes
//!   first), `Split` by any regex the [`Automaton`] compiles (the OpenAI families' patterns take
//!   their hand-written scanners) or string, with any behavior, `Digits`, and sequences;
//! - models: byte-level BPE, and BPE over characters with `byte_fallback` or an unknown token
//!   (SentencePiece conversions: `Prepend("▁")` + `Replace(" ", "▁")`, or `Metaspace`), whose
//!   merges run as a rank table when they provably merge like one; `ignore_merges`;
//! - added tokens, special or not, matched in the raw or the normalized text, with their flags.
//!
//! Anything else is [`Unsupported`], naming the first component that is not implemented, and
//! callers use the `tokenizers` crate instead.

use std::borrow::Cow;

use serde_json::Value;

use super::added::AddedToken;
use super::equiv::list_as_ranks;
use super::normalize::{Normalizer, Step as NormStep};
use super::pattern::Pattern;
use super::pretok::split::{Behavior, Matcher, Prefix, PrependScheme, SplitStep, Splitter};
use super::pretok::Automaton;
use super::stored::Store;
use super::unicode::single_char;
use super::vocab::{too_sparse, Fallback, FastMap, MergeList, Merges, TokenList, Units, Vocab};

/// Why a `tokenizer.json` cannot take the fast path: the first component it does not implement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not supported by the fast BPE encoder: {0}")]
pub struct Unsupported(pub String);

/// What a supported file describes, as read.
pub(crate) struct Parsed {
    pub tokens: TokenList,
    /// What merging starts from: bytes, or characters (then the tokens are plain text).
    pub units: Units,
    pub merges: Merges,
    pub pipeline: Pipeline,
}

/// The parts of a supported file besides its vocabulary and merges.
pub(crate) struct Pipeline {
    /// `BPE.ignore_merges`: a piece that is a token encodes to that token (tiktoken's rule).
    pub ignore_merges: bool,
    pub normalizer: Normalizer,
    pub prefix: Prefix,
    pub splitter: Splitter,
    /// Added tokens with the ids `tokenizers` gives them, and the text each is matched by
    /// (normalized for the `normalized` ones).
    pub added: Vec<(AddedToken, String)>,
    /// One past the largest id of the model's vocabulary (tokens that are no merging unit
    /// included).
    pub vocab_bound: u32,
    /// The file's `normalizer` and `pre_tokenizer`, which the normalizer, prefix and splitter
    /// are read from.
    source: [Value; 2],
}

/// A supported file, ready for the encoder: its vocabulary built (and its merge list running
/// as ranks where [`equiv`](super::equiv) proves that alike), and its pipeline.
pub(crate) struct HfBpe {
    pub vocab: Vocab,
    pub pipeline: Pipeline,
}

pub(crate) fn unsupported<T>(msg: impl Into<String>) -> Result<T, Unsupported> {
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
    let mut out = Vec::with_capacity(s.len());
    decode_into(s, &mut out).then_some(out)
}

/// GPT-2's characters (all below U+0144) → their byte, `u16::MAX` for other characters.
fn inverse_table() -> &'static [u16; 0x144] {
    use std::sync::OnceLock;
    static INVERSE: OnceLock<[u16; 0x144]> = OnceLock::new();
    INVERSE.get_or_init(|| {
        let mut t = [u16::MAX; 0x144];
        for (b, &c) in byte_chars().iter().enumerate() {
            t[c as usize] = b as u16;
        }
        t
    })
}

/// Append the bytes of the byte-level token `s` to `out`; false (and `out` partly written) if a
/// character of `s` stands for no byte.
fn decode_into(s: &str, out: &mut Vec<u8>) -> bool {
    let inverse = inverse_table();
    for c in s.chars() {
        match inverse.get(c as usize) {
            Some(&b) if b != u16::MAX => out.push(b as u8),
            _ => return false,
        }
    }
    true
}

fn kind(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("(no type)")
}

fn flag(v: &Value, key: &str, default: bool) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(default)
}

/// The components of a normalizer or pre-tokenizer, with sequences flattened.
fn flatten<'a>(v: &'a Value, list_key: &str, out: &mut Vec<&'a Value>) {
    if v.is_null() {
        return;
    }
    if kind(v) == "Sequence" {
        for c in v.get(list_key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
            flatten(c, list_key, out);
        }
    } else {
        out.push(v);
    }
}

fn normalizer(v: &Value) -> Result<Normalizer, Unsupported> {
    let mut parts = Vec::new();
    flatten(v, "normalizers", &mut parts);
    let mut steps = Vec::new();
    for n in parts {
        steps.push(match kind(n) {
            "NFC" => NormStep::Nfc,
            "Lowercase" => NormStep::Lowercase,
            "Prepend" => match n.get("prepend").and_then(Value::as_str) {
                Some("") => continue,
                Some(p) => NormStep::Prepend(p.to_string()),
                None => return unsupported("a Prepend normalizer without its string"),
            },
            "Replace" => {
                let (Some(from), Some(to)) =
                    (n.pointer("/pattern/String").and_then(Value::as_str), n.get("content").and_then(Value::as_str))
                else {
                    return unsupported("a Replace normalizer by a regex");
                };
                if from.is_empty() {
                    return unsupported("a Replace normalizer of the empty string");
                }
                NormStep::Replace { from: from.to_string(), to: to.to_string() }
            }
            other => return unsupported(format!("the normalizer {other}")),
        });
    }
    Ok(Normalizer::new(steps))
}

/// A split regex: the hand-written scanner of a known family, else a compiled automaton.
fn matcher(regex: &str) -> Result<Matcher, Unsupported> {
    if let Some(p) = Pattern::from_regex(regex) {
        return Ok(Matcher::Scanner(p));
    }
    let a = Automaton::new(regex).map_err(|e| Unsupported(format!("the split regex {regex:?}: {}", e.0)))?;
    Ok(Matcher::Regex(std::sync::Arc::new(a)))
}

/// The pre-tokenizer: the transform of each stretch of text, how it is split, and whether the
/// model's vocabulary is byte-level (a `ByteLevel` step maps bytes to characters last).
fn pre_tokenizer(v: &Value) -> Result<(Prefix, Splitter, bool), Unsupported> {
    let mut parts = Vec::new();
    flatten(v, "pretokenizers", &mut parts);
    let mut prefix = Prefix::None;
    let mut steps = Vec::new();
    let mut byte_level = false;
    let mut metaspace_split = None;
    for (i, p) in parts.iter().enumerate() {
        if byte_level {
            return unsupported(format!("the pre-tokenizer {} after ByteLevel", kind(p)));
        }
        match kind(p) {
            "ByteLevel" => {
                byte_level = true;
                if flag(p, "add_prefix_space", false) {
                    if i > 0 {
                        return unsupported("ByteLevel add_prefix_space after another pre-tokenizer");
                    }
                    prefix = Prefix::Space;
                }
                if flag(p, "use_regex", true) {
                    steps.push(SplitStep {
                        matcher: Matcher::Scanner(Pattern::Gpt2),
                        behavior: Behavior::Isolated,
                        invert: false,
                    });
                }
            }
            "Split" => {
                let m = match (p.pointer("/pattern/Regex"), p.pointer("/pattern/String")) {
                    (Some(Value::String(r)), _) => matcher(r)?,
                    (_, Some(Value::String(s))) if !s.is_empty() => matcher(&regex_syntax::escape(s))?,
                    _ => return unsupported("a Split by the empty string or without a pattern"),
                };
                let name = p.get("behavior").and_then(Value::as_str).unwrap_or("");
                let behavior =
                    Behavior::from_name(name).ok_or_else(|| Unsupported(format!("the Split behavior {name:?}")))?;
                steps.push(SplitStep { matcher: m, behavior, invert: flag(p, "invert", false) });
            }
            "Digits" => steps.push(SplitStep {
                matcher: matcher(r"\p{N}")?,
                behavior: if flag(p, "individual_digits", false) { Behavior::Isolated } else { Behavior::Contiguous },
                invert: false,
            }),
            "Metaspace" => {
                if i > 0 || !steps.is_empty() {
                    return unsupported("Metaspace after another pre-tokenizer");
                }
                let Some(mark) = p.get("replacement").and_then(Value::as_str).and_then(single_char) else {
                    return unsupported("a Metaspace replacement that is not one character");
                };
                if p.get("prepend_scheme").is_none()
                    && p.get("add_prefix_space").and_then(Value::as_bool) == Some(false)
                {
                    return unsupported("a Metaspace with add_prefix_space false and no prepend_scheme");
                }
                let scheme = match p.get("prepend_scheme").and_then(Value::as_str) {
                    None | Some("always") => PrependScheme::Always,
                    Some("first") => PrependScheme::First,
                    Some("never") => PrependScheme::Never,
                    Some(other) => return unsupported(format!("the Metaspace prepend_scheme {other:?}")),
                };
                prefix = Prefix::Metaspace { mark, scheme };
                if flag(p, "split", true) {
                    metaspace_split = Some(mark);
                }
            }
            other => return unsupported(format!("the pre-tokenizer {other}")),
        }
    }
    let splitter = match (metaspace_split, steps.as_slice()) {
        (Some(mark), []) => Splitter::Marks(mark),
        (Some(_), _) => return unsupported("Metaspace with other pre-tokenizers"),
        (None, []) => Splitter::Whole,
        (None, [one]) => simple(one).unwrap_or_else(|| Splitter::Steps(steps.clone().into())),
        (None, _) => Splitter::Steps(steps.into()),
    };
    Ok((prefix, splitter, byte_level))
}

/// The single-cursor form of a one-step split, where there is one: its pieces are the matches
/// and the text between them, in order (an inverted `Removed` keeps exactly these when the
/// pattern matches everywhere).
fn simple(step: &SplitStep) -> Option<Splitter> {
    let isolated = match (step.behavior, step.invert) {
        (Behavior::Isolated, _) => true,
        (Behavior::Removed, true) => match &step.matcher {
            Matcher::Scanner(_) => true,
            Matcher::Regex(a) => a.covers(),
        },
        _ => false,
    };
    isolated.then(|| match &step.matcher {
        Matcher::Scanner(p) => Splitter::Scanner(*p),
        Matcher::Regex(a) => Splitter::Regex(a.clone()),
    })
}

/// The parts of a `tokenizer.json` the encoder reads. The model's vocabulary and merges are
/// read straight into lists of strings borrowed from the file where they have no escapes (a
/// generic JSON value of a 150,000-entry object is a tree map that takes longer to build than
/// the encoder does).
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct FileJson<'a> {
    normalizer: Value,
    pre_tokenizer: Value,
    added_tokens: Vec<Value>,
    truncation: Value,
    padding: Value,
    #[serde(borrow)]
    model: ModelJson<'a>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct ModelJson<'a> {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(borrow)]
    vocab: Entries<'a>,
    #[serde(borrow)]
    merges: Entries<'a>,
    dropout: Option<f64>,
    continuing_subword_prefix: Option<String>,
    end_of_word_suffix: Option<String>,
    ignore_merges: Option<bool>,
    byte_fallback: Option<bool>,
    unk_token: Option<String>,
    fuse_unk: Option<bool>,
}

type Text<'a> = Cow<'a, str>;

/// A string borrowed from the JSON text when it has no escapes (serde's own `Cow` always copies).
struct Str<'a>(Text<'a>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Str<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Str<'a>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// A vocabulary (`{"token": id}`) or merge list (`["a b"]` or `[["a", "b"]]`) as read, or what
/// else the field held (another model's format).
#[derive(Default)]
enum Entries<'a> {
    #[default]
    Missing,
    Vocab(Vec<(Text<'a>, Value)>),
    Merges(Vec<(Text<'a>, Option<Text<'a>>)>),
    Other,
}

/// One element of a merge list: `"a b"`, `["a", "b"]`, or something else.
enum Merge<'a> {
    One(Text<'a>),
    Two(Text<'a>, Text<'a>),
    Other,
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Merge<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Merge<'a>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Merge<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a merge")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Merge<'de>, E> {
                Ok(Merge::One(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Merge<'de>, E> {
                Ok(Merge::One(Cow::Owned(s.to_string())))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Merge<'de>, A::Error> {
                let mut parts = Vec::with_capacity(2);
                while let Some(part) = s.next_element::<Value>()? {
                    parts.push(part);
                }
                // Rare enough (only files written by `tokenizers` 0.20 and later) to go through
                // `Value`; the strings are short.
                Ok(match <[Value; 2]>::try_from(parts) {
                    Ok([Value::String(a), Value::String(b)]) => Merge::Two(Cow::Owned(a), Cow::Owned(b)),
                    _ => Merge::Other,
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Merge<'de>, A::Error> {
                while m.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
                Ok(Merge::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Merge<'de>, E> {
                Ok(Merge::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Merge<'de>, E> {
                Ok(Merge::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Merge<'de>, E> {
                Ok(Merge::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Merge<'de>, E> {
                Ok(Merge::Other)
            }
            fn visit_unit<E>(self) -> Result<Merge<'de>, E> {
                Ok(Merge::Other)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Entries<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Entries<'a>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a vocabulary or a merge list")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Entries<'de>, A::Error> {
                let mut v = Vec::with_capacity(m.size_hint().unwrap_or(0));
                while let Some((Str(token), id)) = m.next_entry::<Str<'de>, Value>()? {
                    v.push((token, id));
                }
                Ok(Entries::Vocab(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Entries<'de>, A::Error> {
                let mut v = Vec::with_capacity(s.size_hint().unwrap_or(0));
                let mut other = false;
                while let Some(e) = s.next_element::<Merge<'de>>()? {
                    match e {
                        Merge::One(a) => v.push((a, None)),
                        Merge::Two(a, b) => v.push((a, Some(b))),
                        Merge::Other => other = true,
                    }
                }
                Ok(if other { Entries::Other } else { Entries::Merges(v) })
            }
            fn visit_unit<E>(self) -> Result<Entries<'de>, E> {
                Ok(Entries::Missing)
            }
        }
        d.deserialize_any(V)
    }
}

/// A `tokenizer.json` ready for the encoder: what an earlier load stored under the file's SHA-256
/// (see [`stored`](super::stored)), else the file's text (`json()`, an error if it cannot be
/// read) [`prepare`]d, and stored. `Ok(Err(why))`: the file is not one the encoder reproduces.
pub(crate) fn load<'a, E>(
    json: impl FnOnce() -> Result<&'a str, E>,
    store: Option<Store>,
) -> Result<Result<HfBpe, Unsupported>, E> {
    if let Some(hf) = store.as_ref().and_then(Store::read).and_then(|payload| from_stored(&payload)) {
        return Ok(Ok(hf));
    }
    let hf = prepare(json()?);
    if let (Some(store), Ok(hf)) = (store, &hf) {
        store.write(&to_stored(hf));
    }
    Ok(hf)
}

/// Read a `tokenizer.json` and build its vocabulary.
pub(crate) fn prepare(json: &str) -> Result<HfBpe, Unsupported> {
    let Parsed { tokens, units, merges, pipeline } = parse(json)?;
    let vocab = match units {
        Units::Bytes => Vocab::new(tokens, merges),
        Units::Chars(fallback) => Vocab::new_chars(tokens, merges, fallback),
    };
    Ok(HfBpe { vocab: list_as_ranks(vocab.map_err(|e| Unsupported(e.0))?), pipeline })
}

/// What [`load`] stores beside the vocabulary: the pipeline's sources and added tokens.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    normalizer: Value,
    pre_tokenizer: Value,
    ignore_merges: bool,
    vocab_bound: u32,
    added: Vec<(AddedToken, String)>,
}

fn to_stored(hf: &HfBpe) -> Vec<u8> {
    let p = &hf.pipeline;
    let [normalizer, pre_tokenizer] = p.source.clone();
    let s = Stored {
        normalizer,
        pre_tokenizer,
        ignore_merges: p.ignore_merges,
        vocab_bound: p.vocab_bound,
        added: p.added.clone(),
    };
    hf.vocab.pack(&s)
}

/// The [`HfBpe`] that [`to_stored`] wrote, if `payload` is one.
fn from_stored(payload: &[u8]) -> Option<HfBpe> {
    let (s, vocab): (Stored, Vocab) = Vocab::unpack(payload)?;
    let (prefix, splitter, _) = pre_tokenizer(&s.pre_tokenizer).ok()?;
    let pipeline = Pipeline {
        ignore_merges: s.ignore_merges,
        normalizer: normalizer(&s.normalizer).ok()?,
        prefix,
        splitter,
        added: s.added,
        vocab_bound: s.vocab_bound,
        source: [s.normalizer, s.pre_tokenizer],
    };
    Some(HfBpe { vocab, pipeline })
}

/// Read a `tokenizer.json`'s text.
pub(crate) fn parse(json: &str) -> Result<Parsed, Unsupported> {
    let root: FileJson = serde_json::from_str(json).map_err(|e| Unsupported(format!("invalid JSON: {e}")))?;
    for (key, v) in [("truncation", &root.truncation), ("padding", &root.padding)] {
        if !v.is_null() {
            return unsupported(format!("{key} set in the file (it changes the ids of encode)"));
        }
    }
    let normalizer = normalizer(&root.normalizer)?;
    let (prefix, splitter, byte_level) = pre_tokenizer(&root.pre_tokenizer)?;
    // Whether a stretch starts the text is told by `tokenizers` from where its normalized text
    // maps back to; a Replace of several characters, or by nothing, moves that.
    let moves = |s: &NormStep| matches!(s, NormStep::Replace { from, to } if to.is_empty() || from.chars().count() > 1);
    if let (Prefix::Metaspace { scheme: PrependScheme::First, .. }, true) =
        (&prefix, normalizer.steps().iter().any(moves))
    {
        return unsupported("Metaspace prepend_scheme \"first\" after a Replace of several characters or by nothing");
    }
    let model = &root.model;
    match model.kind.as_deref() {
        None | Some("BPE") => {}
        Some(other) => return unsupported(format!("the model {other}")),
    }
    if model.dropout.is_some_and(|d| d != 0.0) {
        return unsupported("BPE dropout");
    }
    let empty = |v: &Option<String>| v.as_deref().is_none_or(str::is_empty);
    if !empty(&model.continuing_subword_prefix) || !empty(&model.end_of_word_suffix) {
        return unsupported("a subword prefix or end-of-word suffix");
    }
    let ignore_merges = model.ignore_merges.unwrap_or(false);
    let Entries::Vocab(vocab) = &model.vocab else {
        return unsupported("a BPE model without a vocabulary object");
    };
    let mut ids: FastMap<&str, u32> = FastMap::default();
    ids.reserve(vocab.len());
    let mut vocab_bound = 0;
    for (s, id) in vocab {
        let Some(id) = id.as_u64().and_then(|i| u32::try_from(i).ok()) else {
            return unsupported(format!("vocab id of {s:?} is not a u32"));
        };
        // Repeated keys: the last one counts, as in `tokenizers`.
        ids.insert(s, id);
        vocab_bound = vocab_bound.max(u64::from(id) + 1);
    }
    let vocab_bound = u32::try_from(vocab_bound).map_err(|_| Unsupported("a vocabulary of 2^32 tokens".into()))?;
    if too_sparse(vocab_bound as usize, vocab.len()) {
        return unsupported(format!("vocabulary ids up to {vocab_bound} for {} tokens (too sparse)", vocab.len()));
    }
    let added = added_tokens(&root.added_tokens, &ids, ids.len(), &normalizer)?;
    let source = [root.normalizer.clone(), root.pre_tokenizer.clone()];
    let pipeline = Pipeline { ignore_merges, normalizer, prefix, splitter, added, vocab_bound, source };
    if !byte_level {
        return chars_model(model, &ids, pipeline);
    }
    let mut tokens = TokenList::with_capacity(vocab.len(), vocab.iter().map(|(s, _)| s.len()).sum());
    let mut live = vec![false; vocab_bound as usize];
    for (s, _) in vocab {
        // A token that is not written byte-level (DeepSeek-V3 writes its special tokens as they
        // are) can never be made from bytes: it is reached as an added token, or not at all.
        let id = ids[s.as_ref()];
        if tokens.push_with(id, |out| if decode_into(s, out) { Ok(()) } else { Err(()) }).is_ok() {
            live[id as usize] = true;
        }
    }
    let merges = merges(&model.merges, &ids, |id| live[id as usize])?;
    keep_mergeable(&mut tokens, &pipeline.added, &merges, ignore_merges, <[u8]>::len);
    Ok(Parsed { tokens, units: Units::Bytes, merges, pipeline })
}

/// Leave out of the merging vocabulary the added tokens it also lists (as GPT-2's file lists
/// `<|endoftext|>`) that only matching whole can produce: of two units or more, made by no merge.
/// Merging never reaches them, and left in they would keep merging by ranks from comparing ids.
/// With `ignore_merges` a piece that is one of them encodes to it, so they stay.
fn keep_mergeable(
    tokens: &mut TokenList,
    added: &[(AddedToken, String)],
    merges: &Merges,
    ignore_merges: bool,
    units: impl Fn(&[u8]) -> usize,
) {
    if ignore_merges {
        return;
    }
    let Merges::List(pairs) = merges else { return };
    let made: std::collections::HashSet<u32> = pairs.values().map(|v| v as u32).collect();
    let whole_only: std::collections::HashSet<u32> =
        added.iter().map(|(t, _)| t.id).filter(|id| !made.contains(id)).collect();
    tokens.retain(|bytes, id| units(bytes) < 2 || !whole_only.contains(&id));
}

/// A BPE over characters (no `ByteLevel` step): SentencePiece models converted by
/// `transformers`. Characters outside the vocabulary become `<0xNN>` byte tokens
/// (`byte_fallback`) or the unknown token, which no merge may involve.
fn chars_model(model: &ModelJson, ids: &FastMap<&str, u32>, pipeline: Pipeline) -> Result<Parsed, Unsupported> {
    if !matches!(pipeline.splitter, Splitter::Whole | Splitter::Marks(_)) {
        return unsupported("a BPE model over characters after a Split pre-tokenizer");
    }
    if pipeline.ignore_merges {
        return unsupported("ignore_merges in a BPE model over characters");
    }
    // The byte tokens of `byte_fallback` are no text.
    let mut reserved = std::collections::HashSet::new();
    let fallback = if model.byte_fallback.unwrap_or(false) {
        let mut bytes = Box::new([0u32; 256]);
        for (b, slot) in bytes.iter_mut().enumerate() {
            let name = format!("<0x{b:02X}>");
            *slot = *ids
                .get(name.as_str())
                .ok_or_else(|| Unsupported(format!("byte_fallback without the token {name}")))?;
        }
        reserved.extend(bytes.iter().copied());
        Fallback::Bytes(bytes)
    } else {
        let unk = model.unk_token.as_deref().and_then(|u| ids.get(u).copied());
        let Some(id) = unk else {
            return unsupported("a BPE model over characters with neither byte_fallback nor an unknown token");
        };
        Fallback::Unk { id, fuse: model.fuse_unk.unwrap_or(false) }
    };
    let mut tokens: TokenList = ids.iter().filter(|(_, id)| !reserved.contains(id)).map(|(s, &id)| (s, id)).collect();
    let merges = merges(&model.merges, ids, |_| true)?;
    if let Merges::List(pairs) = &merges {
        let touches = |id: u32| reserved.contains(&id) || matches!(fallback, Fallback::Unk { id: u, .. } if u == id);
        if pairs.iter().any(|(k, v)| touches((k >> 32) as u32) || touches(k as u32) || touches(v as u32)) {
            return unsupported("a merge of a byte-fallback or unknown token");
        }
    }
    let chars = |b: &[u8]| b.iter().filter(|&&x| x & 0xc0 != 0x80).count();
    keep_mergeable(&mut tokens, &pipeline.added, &merges, pipeline.ignore_merges, chars);
    Ok(Parsed { tokens, units: Units::Chars(fallback), merges, pipeline })
}

/// The added tokens, with the ids `tokenizers` gives them when it loads the file: a token whose
/// text is in the model's vocabulary gets that id, the others the next ids after the
/// vocabulary's size, in the file's order (the `id` fields are not read).
fn added_tokens(
    list: &[Value],
    vocab: &FastMap<&str, u32>,
    vocab_len: usize,
    normalizer: &Normalizer,
) -> Result<Vec<(AddedToken, String)>, Unsupported> {
    let mut out: Vec<(AddedToken, String)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut next = u32::try_from(vocab_len).map_err(|_| Unsupported("a vocabulary of 2^32 tokens".into()))?;
    for t in list {
        let Some(content) = t.get("content").and_then(Value::as_str) else {
            return unsupported("an added token without content");
        };
        let field = |key: &str| {
            t.get(key)
                .and_then(Value::as_bool)
                .ok_or_else(|| Unsupported(format!("added token {content:?} without {key}")))
        };
        let (single_word, lstrip, rstrip, normalized, special) =
            (field("single_word")?, field("lstrip")?, field("rstrip")?, field("normalized")?, field("special")?);
        if content.is_empty() {
            continue;
        }
        // A repeated token keeps its id and takes the later flags (and stays special).
        let at = match index.get(content) {
            Some(&at) => at,
            None => {
                let id = vocab.get(content).copied().unwrap_or_else(|| {
                    next += 1;
                    next - 1
                });
                index.insert(content.to_string(), out.len());
                let token = AddedToken::plain(content, id);
                out.push((AddedToken { special: false, ..token }, String::new()));
                out.len() - 1
            }
        };
        let (token, pattern) = &mut out[at];
        (token.single_word, token.lstrip, token.rstrip, token.normalized) = (single_word, lstrip, rstrip, normalized);
        token.special |= special;
        *pattern = if normalized { normalizer.apply(content).into_owned() } else { content.to_string() };
    }
    // `tokenizers` breaks down on a token that normalizes to nothing, and picks at random
    // between tokens that normalize alike.
    let mut patterns: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    for (token, pattern) in out.iter().filter(|(t, _)| t.normalized) {
        if pattern.is_empty() {
            return unsupported(format!("the added token {:?}, which normalizes to nothing", token.content));
        }
        if patterns.insert(pattern, token.id).is_some_and(|id| id != token.id) {
            return unsupported(format!("two added tokens that normalize to {pattern:?}"));
        }
    }
    Ok(out)
}

/// The merge list: `(left, right)` ids → `rank << 32 | merged id`. The last of duplicated
/// merges sets the rank, as in `tokenizers`. Merges of a token that is not `live` (no merging
/// unit: see [`parse`]) are left out: one of their parts can never be made, so they never apply.
fn merges(list: &Entries, ids: &FastMap<&str, u32>, live: impl Fn(u32) -> bool) -> Result<Merges, Unsupported> {
    let list = match list {
        Entries::Merges(list) => list.as_slice(),
        // `"merges": []` reads as an empty vocabulary object's opposite: either is no merge.
        Entries::Vocab(v) if v.is_empty() => &[],
        _ => return unsupported("a BPE model without a merge list"),
    };
    let mut pairs = FastMap::default();
    pairs.reserve(list.len());
    let mut rank = 0u64;
    let mut made = String::new();
    for (a, b) in list {
        let (a, b) = match b {
            Some(b) => (a.as_ref(), b.as_ref()),
            None if a.starts_with("#version") => continue,
            None => match a.split_once(' ') {
                Some((a, b)) if !b.contains(' ') => (a, b),
                _ => return unsupported(format!("merge {a:?}")),
            },
        };
        made.clear();
        made.push_str(a);
        made.push_str(b);
        let (Some(&l), Some(&r), Some(&new)) = (ids.get(a), ids.get(b), ids.get(made.as_str())) else {
            return unsupported(format!("merge {a:?} {b:?} uses a token missing from the vocab"));
        };
        if live(l) && live(r) && live(new) {
            pairs.insert(u64::from(l) << 32 | u64::from(r), rank << 32 | u64::from(new));
        }
        rank += 1;
    }
    Ok(Merges::List(MergeList::new(pairs)))
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
    fn reads_pipelines_and_names_what_it_rejects() {
        let gpt2 = r#"{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}"#;
        let hf = parse(&minimal(gpt2, "")).unwrap();
        assert!(matches!(hf.pipeline.splitter, Splitter::Scanner(Pattern::Gpt2)));
        assert_eq!(hf.tokens.len(), 257);
        let seq = |regex: &str, behavior: &str, invert: bool| {
            format!(
                r#"{{"type": "Sequence", "pretokenizers": [{{"type": "Split", "pattern": {{"Regex": {}}},
                     "behavior": "{behavior}", "invert": {invert}}},
                    {{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}}]}}"#,
                serde_json::to_string(regex).unwrap()
            )
        };
        let pairs = Pattern::Cl100kClassic.regex().replace(r"\p{N}{1,3}", r"\p{N}{1,2}");
        for (regex, behavior, invert, splitter) in [
            (Pattern::O200k.regex(), "Isolated", false, "o200k"),
            // OLMo-2's spelling of the classic cl100k split.
            (Pattern::Cl100kClassic.regex(), "Removed", true, "cl100k_classic"),
            (Pattern::Qwen2.regex(), "Isolated", false, "qwen2"),
            // Any other regex runs on an automaton.
            (&pairs, "Isolated", false, "regex"),
            (r"\s+", "MergedWithNext", false, "1 steps"),
        ] {
            let hf = parse(&minimal(&seq(regex, behavior, invert), "")).unwrap();
            assert_eq!(hf.pipeline.splitter.describe(), splitter, "{regex} {behavior}");
        }
        let lookbehind = seq(r"(?<=a)b|\w+", "Isolated", false);
        assert!(parse(&minimal(&lookbehind, "")).is_err_and(|e| e.0.contains("(?<")));

        // Added tokens take the ids `tokenizers` gives them: the vocabulary's, else the next
        // ones after its size (the file's `id` is not read).
        let special = format!(
            r#"{{"id": 300, "content": "<|x|>", "special": true, "normalized": false, {FLAGS}}},
               {{"id": 5, "content": "ab", "special": false, "normalized": true, {FLAGS}}}"#
        );
        let added: Vec<(String, u32, bool)> = parse(&minimal(gpt2, &special))
            .unwrap()
            .pipeline
            .added
            .into_iter()
            .map(|(t, _)| (t.content, t.id, t.normalized))
            .collect();
        assert_eq!(added, [("<|x|>".into(), 257, false), ("ab".into(), 256, true)]);
        // A repeated token takes the later flags; one without all its fields is not read.
        let repeated = format!(
            r#"{{"id": 300, "content": "<m>", "special": true, "normalized": false, {FLAGS}}},
               {{"id": 300, "content": "<m>", "special": true, "normalized": false, "single_word": false,
                 "lstrip": false, "rstrip": true}}"#
        );
        let added = parse(&minimal(gpt2, &repeated)).unwrap().pipeline.added;
        assert_eq!(added.len(), 1);
        assert!(added[0].0.rstrip);
        let partial = r#"{"id": 300, "content": "<m>", "special": true}"#;
        assert!(parse(&minimal(gpt2, partial)).is_err_and(|e| e.0.contains("without single_word")));

        let prefix = r#"{"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true},
            {"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}]}"#;
        assert!(parse(&minimal(prefix, "")).is_err_and(|e| e.0.contains("add_prefix_space")));
        assert!(parse(&minimal(gpt2, "").replace("\"BPE\"", "\"WordPiece\"")).is_err_and(|e| e.0.contains("WordPiece")));
        let nfkc = minimal(gpt2, "").replace("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFKC\"}");
        assert!(parse(&nfkc).is_err_and(|e| e.0.contains("NFKC")));
        // Ids far beyond the number of tokens are refused before any table is sized by them.
        let sparse = minimal(gpt2, "").replace("\"ab\": 256", "\"ab\": 4000000000");
        assert!(parse(&sparse).is_err_and(|e| e.0.contains("too sparse")));
        let nfc = minimal(gpt2, "").replace("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}");
        assert_eq!(parse(&nfc).unwrap().pipeline.normalizer.steps(), [NormStep::Nfc]);
    }

    const FLAGS: &str = r#""single_word": false, "lstrip": false, "rstrip": false"#;

    /// GPT-2's pipeline over [`minimal`]'s vocabulary, with more vocabulary entries and added
    /// tokens.
    fn with_tokens(vocab: &str, added: &str) -> String {
        let gpt2 = r#"{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}"#;
        minimal(gpt2, added).replace("\"ab\": 256", &format!("\"ab\": 256, {vocab}"))
    }

    #[test]
    fn vocabulary_tokens_written_as_they_are_are_reached_as_added_tokens() {
        // DeepSeek-V3 writes its special tokens into the vocabulary as they are, not byte-level:
        // bytes never merge into them, so only their added tokens reach them.
        let json = with_tokens(
            r#""<｜bos｜>": 257, "<｜tool｜>": 258"#,
            &format!(r#"{{"id": 257, "content": "<｜bos｜>", "special": true, "normalized": true, {FLAGS}}}"#),
        );
        let hf = parse(&json).unwrap();
        assert_eq!(hf.tokens.len(), 257);
        assert_eq!(hf.pipeline.vocab_bound, 259);
        let added: Vec<(String, u32)> = hf.pipeline.added.iter().map(|(t, _)| (t.content.clone(), t.id)).collect();
        assert_eq!(added, [("<｜bos｜>".to_string(), 257)]);
        let bpe = super::super::FastBpe::from_hf_json(&json).unwrap().with_special_tokens_in_text(true);
        assert_eq!(bpe.encode("ab<｜bos｜>ab"), [256, 257, 256]);
        // One that is no added token is text, as in `tokenizers` (its bytes, merged as they merge).
        let raw: Vec<u32> = "<｜tool｜>".bytes().map(u32::from).collect();
        assert_eq!(bpe.encode("<｜tool｜>"), raw);
        assert_eq!(bpe.vocab_size(), 259);
        // A merge that makes one of them never applies.
        let merged = json.replace(r#""merges": ["a b"]"#, r#""merges": ["a b", "<｜bos｜> a"]"#);
        let merged = merged.replace("\"<｜tool｜>\": 258", "\"<｜tool｜>\": 258, \"<｜bos｜>a\": 259");
        assert!(matches!(parse(&merged).unwrap().merges, Merges::List(l) if l.len() == 1));
    }

    /// A vocabulary token that no merge makes is never merged into, and the list still runs as
    /// ranks (by priorities: by ids, "cd" would merge).
    #[test]
    fn a_token_no_merge_makes_is_never_merged_into() {
        let json = with_tokens(r#""cd": 257"#, "");
        assert!(prepare(&json).unwrap().vocab.proven_ranks());
        let bpe = super::super::FastBpe::from_hf_json(&json).unwrap();
        for _ in 0..2 {
            assert_eq!(bpe.encode("cd abcd"), [99, 100, 32, 256, 99, 100]);
        }
    }

    /// Lists converted from SentencePiece models make a token from several splits, each at its
    /// own priority: they run as ranks by those priorities.
    #[test]
    fn converted_sentencepiece_lists_run_as_ranks() {
        for name in ["mistral-tekken", "mistral-v1-sentencepiece"] {
            let path =
                format!("{}/../../tests/fixtures/tokenizers/{name}_tokenizer.json.zst", env!("CARGO_MANIFEST_DIR"));
            let json = zstd::decode_all(std::fs::File::open(path).unwrap()).unwrap();
            let vocab = prepare(std::str::from_utf8(&json).unwrap()).unwrap().vocab;
            assert!(vocab.proven_ranks() && !vocab.ranks_are_ids(), "{name}");
        }
    }

    #[test]
    fn a_stored_preparation_is_the_preparation() {
        let added = format!(
            r#"{{"id": 257, "content": "<bos>", "special": true, "normalized": false, {FLAGS}}},
               {{"id": 258, "content": " ab", "special": false, "normalized": true, "single_word": true,
                 "lstrip": true, "rstrip": false}}"#
        );
        let json =
            with_tokens(r#""<bos>": 257"#, &added).replace("\"normalizer\": null", r#""normalizer": {"type": "NFC"}"#);
        // Merges that run as ranks, and ones that do not ("bc" goes first, but has the larger id).
        let list = json.replace(r#""merges": ["a b"]"#, r#""merges": ["b c", "a b", "ab c"]"#);
        let list = list.replace("\"<bos>\": 257", "\"<bos>\": 257, \"bc\": 300, \"abc\": 301");
        // Ranks by priorities, "abc" made from two splits at two of them.
        let splits = list.replace(r#""b c", "a b", "ab c""#, r#""a b", "b c", "a bc", "ab c""#);
        for (json, ranks) in [(json, true), (list, false), (splits, true)] {
            let fresh = prepare(&json).unwrap();
            assert_eq!(fresh.vocab.proven_ranks(), ranks);
            let again = from_stored(&to_stored(&fresh)).unwrap();
            assert_eq!(again.vocab.digest(), fresh.vocab.digest());
            assert_eq!(again.vocab.proven_ranks(), fresh.vocab.proven_ranks());
            assert_eq!(again.pipeline.added, fresh.pipeline.added);
            assert_eq!(again.pipeline.normalizer.steps(), fresh.pipeline.normalizer.steps());
            assert_eq!(
                (again.pipeline.ignore_merges, again.pipeline.vocab_bound, again.pipeline.splitter.describe()),
                (fresh.pipeline.ignore_merges, fresh.pipeline.vocab_bound, fresh.pipeline.splitter.describe())
            );
            let (a, b) = (super::super::FastBpe::from_hf(fresh), super::super::FastBpe::from_hf(again));
            for text in ["abab abc", "x<bos> ab ab", "\u{e9}t\u{e9} abcabc bc"] {
                assert_eq!(a.encode(text), b.encode(text), "{text:?}");
            }
            // Damaged payloads are not read.
            let stored = to_stored(&prepare(&json).unwrap());
            assert!(from_stored(&stored[..stored.len() - 1]).is_none());
            assert!(from_stored(&[stored.as_slice(), b"x"].concat()).is_none());
        }
    }
}
