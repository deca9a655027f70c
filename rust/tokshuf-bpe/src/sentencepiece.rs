//! SentencePiece `.model` files of BPE models (Llama 2, Mistral v1, and the like), read directly:
//! ids identical to the `sentencepiece` package's `encode`.
//!
//! The file is a serialized `ModelProto` (protocol buffers); the few fields an encoder needs are
//! read by hand. SentencePiece's BPE starts from the characters of the normalized text (` ` →
//! `▁`, one `▁` put in front) and repeatedly merges the adjacent pair whose concatenation is a
//! piece with the highest score, the leftmost among equal scores; characters that are no piece
//! become their UTF-8 bytes' `<0xNN>` pieces (`byte_fallback`) or, a run of them, the unknown
//! piece. That is a merge list over characters — every split of a piece into two pieces is a
//! pair that makes it, ranked by the piece's score — which the fast encoder runs as it runs a
//! converted `tokenizer.json`: as a rank table ordered by score where [`equiv`](super::equiv)
//! proves that alike (Mistral v1's model), else by pairs.
//!
//! User-defined pieces are matched whole in the normalized text, longest first, and never merge
//! (as added tokens are). Unigram models, unused pieces, and normalizers other than the identity
//! are refused with the reason (a `tokenizer.json` converted by `transformers` covers them).

use super::equiv::list_as_ranks;
use super::hf::{unsupported, Unsupported};
use super::normalize::{Normalizer, Step};
use super::stored::Store;
use super::vocab::{Fallback, FastMap, MergeList, Merges, TokenList, Vocab};

/// What a `.model` file describes, as read.
pub(crate) struct SpBpe {
    pub tokens: TokenList,
    pub merges: Merges,
    pub fallback: Fallback,
    pub meta: Meta,
}

/// What a `.model` file describes besides its vocabulary (stored beside it as JSON).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Meta {
    /// `add_dummy_prefix`: a `▁` before the text.
    pub dummy_prefix: bool,
    /// The end-of-sentence piece (`</s>`), if the model has one.
    pub eos: Option<u32>,
    /// User-defined pieces: matched whole, never merged.
    pub user_defined: Vec<(String, u32)>,
    pub vocab_size: u32,
}

/// A `.model` file ready for the encoder: its vocabulary built (its merges running as ranks
/// where [`equiv`](super::equiv) proves that alike), and the rest of what it describes.
pub(crate) struct SpModel {
    pub vocab: Vocab,
    pub normalizer: Normalizer,
    pub eos: Option<u32>,
    pub user_defined: Vec<(String, u32)>,
    pub vocab_size: u32,
}

/// Read a `.model` file and build its vocabulary, or read what an earlier load stored under the
/// file's SHA-256 (see [`stored`](super::stored)).
pub(crate) fn load(bytes: &[u8], store: Option<Store>) -> Result<SpModel, Unsupported> {
    let (meta, vocab) = match store.as_ref().and_then(Store::read).and_then(|payload| Vocab::unpack(&payload)) {
        Some(prepared) => prepared,
        None => {
            let sp = read(bytes)?;
            let vocab = Vocab::new_chars(sp.tokens, sp.merges, sp.fallback).map_err(|e| Unsupported(e.0))?;
            let vocab = list_as_ranks(vocab);
            if let Some(store) = &store {
                store.write(&vocab.pack(&sp.meta));
            }
            (sp.meta, vocab)
        }
    };
    Ok(SpModel {
        vocab,
        normalizer: normalizer(meta.dummy_prefix),
        eos: meta.eos,
        user_defined: meta.user_defined,
        vocab_size: meta.vocab_size,
    })
}

/// SentencePiece's escaping: `▁` for every space, and one before the text (`add_dummy_prefix`).
fn normalizer(dummy_prefix: bool) -> Normalizer {
    let mut steps = Vec::new();
    if dummy_prefix {
        steps.push(Step::Prepend("▁".into()));
    }
    steps.push(Step::Replace { from: " ".into(), to: "▁".into() });
    Normalizer::new(steps)
}

/// A piece's type (`SentencePiece.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

struct Piece {
    text: String,
    score: f32,
    kind: Kind,
}

/// The fields read from a `ModelProto`, with their proto2 defaults.
struct Model {
    pieces: Vec<Piece>,
    model_type: u64,
    byte_fallback: bool,
    treat_whitespace_as_suffix: bool,
    eos_id: i64,
    normalizer_name: String,
    charsmap_len: usize,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
}

/// A protocol-buffers reader over (the rest of) one message.
struct Reader<'a>(&'a [u8]);

/// A field's value.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
    Fixed64,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.0.split_first().ok_or("a truncated varint")?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err("a varint longer than 10 bytes".into())
    }

    /// The next field: its number and value.
    fn field(&mut self) -> Result<Option<(u64, Wire<'a>)>, String> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed64
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| "a field longer than memory")?;
                Wire::Bytes(self.take(n)?)
            }
            5 => Wire::Fixed32(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes"))),
            w => return Err(format!("wire type {w} (field {})", key >> 3)),
        };
        Ok(Some((key >> 3, value)))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let (head, rest) = self.0.split_at_checked(n).ok_or("a field past the end of the file")?;
        self.0 = rest;
        Ok(head)
    }
}

fn message(b: &[u8], mut each: impl FnMut(u64, Wire<'_>) -> Result<(), String>) -> Result<(), String> {
    let mut r = Reader(b);
    while let Some((field, value)) = r.field()? {
        each(field, value)?;
    }
    Ok(())
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "a piece that is not UTF-8".to_string())
}

fn parse(bytes: &[u8]) -> Result<Model, String> {
    let mut m = Model {
        pieces: Vec::new(),
        model_type: 1,
        byte_fallback: false,
        treat_whitespace_as_suffix: false,
        eos_id: 2,
        normalizer_name: String::new(),
        charsmap_len: 0,
        add_dummy_prefix: true,
        remove_extra_whitespaces: true,
        escape_whitespaces: true,
    };
    message(bytes, |field, value| {
        match (field, value) {
            (1, Wire::Bytes(b)) => {
                let mut piece = Piece { text: String::new(), score: 0.0, kind: Kind::Normal };
                message(b, |f, v| {
                    match (f, v) {
                        (1, Wire::Bytes(s)) => piece.text = text(s)?,
                        // `+ 0.0`: -0.0 is 0.0, as sentencepiece compares scores.
                        (2, Wire::Fixed32(x)) => piece.score = f32::from_bits(x) + 0.0,
                        (3, Wire::Varint(t)) => {
                            piece.kind = match t {
                                1 => Kind::Normal,
                                2 => Kind::Unknown,
                                3 => Kind::Control,
                                4 => Kind::UserDefined,
                                5 => Kind::Unused,
                                6 => Kind::Byte,
                                other => return Err(format!("piece type {other}")),
                            }
                        }
                        _ => {}
                    }
                    Ok(())
                })?;
                m.pieces.push(piece);
            }
            (2, Wire::Bytes(b)) => message(b, |f, v| {
                match (f, v) {
                    (3, Wire::Varint(t)) => m.model_type = t,
                    (24, Wire::Varint(x)) => m.treat_whitespace_as_suffix = x != 0,
                    (35, Wire::Varint(x)) => m.byte_fallback = x != 0,
                    // An int32 (negative ones are ten-byte varints).
                    (42, Wire::Varint(x)) => m.eos_id = i64::from(x as i32),
                    _ => {}
                }
                Ok(())
            })?,
            (3, Wire::Bytes(b)) => message(b, |f, v| {
                match (f, v) {
                    (1, Wire::Bytes(s)) => m.normalizer_name = text(s)?,
                    (2, Wire::Bytes(s)) => m.charsmap_len = s.len(),
                    (3, Wire::Varint(x)) => m.add_dummy_prefix = x != 0,
                    (4, Wire::Varint(x)) => m.remove_extra_whitespaces = x != 0,
                    (5, Wire::Varint(x)) => m.escape_whitespaces = x != 0,
                    _ => {}
                }
                Ok(())
            })?,
            _ => {}
        }
        Ok(())
    })?;
    if m.pieces.is_empty() {
        return Err("no pieces".into());
    }
    Ok(m)
}

/// Whether `bytes` look like a SentencePiece model rather than a text file (a tiktoken rank
/// file is also called `tokenizer.model`): a `ModelProto` starts with its first piece (field 1,
/// length-delimited).
pub(crate) fn looks_like_model(bytes: &[u8]) -> bool {
    bytes.first() == Some(&0x0a)
}

/// Read a `.model` file's bytes.
pub(crate) fn read(bytes: &[u8]) -> Result<SpBpe, Unsupported> {
    let m = parse(bytes).map_err(|e| Unsupported(format!("not a SentencePiece model: {e}")))?;
    match m.model_type {
        2 => {}
        1 => {
            return unsupported(
                "a SentencePiece unigram model (convert it to a tokenizer.json with transformers' \
                 PreTrainedTokenizerFast to use the tokenizers library)",
            )
        }
        t => return unsupported(format!("SentencePiece model type {t} (only BPE is read directly)")),
    }
    if !(m.normalizer_name == "identity" || m.normalizer_name.is_empty()) || m.charsmap_len > 0 {
        return unsupported(format!(
            "the SentencePiece normalizer {:?} (only the identity is read directly; a tokenizer.json \
             converted by transformers carries the others)",
            m.normalizer_name
        ));
    }
    if m.treat_whitespace_as_suffix || m.remove_extra_whitespaces || !m.escape_whitespaces {
        return unsupported(
            "SentencePiece whitespace options other than add_dummy_prefix (treat_whitespace_as_suffix, \
             remove_extra_whitespaces, or escape_whitespaces off)",
        );
    }
    let id = |i: usize| u32::try_from(i).expect("fewer than 2^32 pieces");
    let mut by_text: FastMap<&str, u32> = FastMap::default();
    let mut unk = None;
    let mut user_defined = Vec::new();
    let mut bytes_ids: Option<Box<[u32; 256]>> = None;
    for (i, p) in m.pieces.iter().enumerate() {
        match p.kind {
            Kind::Normal => {
                if by_text.insert(p.text.as_str(), id(i)).is_some() {
                    return unsupported(format!("the piece {:?} twice", p.text));
                }
            }
            Kind::Unknown => unk = Some(id(i)),
            Kind::Byte => {
                let b = p
                    .text
                    .strip_prefix("<0x")
                    .and_then(|h| h.strip_suffix('>'))
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| Unsupported(format!("the byte piece {:?}", p.text)))?;
                bytes_ids.get_or_insert_with(|| Box::new([u32::MAX; 256]))[b as usize] = id(i);
            }
            Kind::Control => {}
            Kind::UserDefined => user_defined.push((p.text.clone(), id(i))),
            Kind::Unused => {
                return unsupported(format!("the unused piece {:?} (unused pieces are not read directly)", p.text))
            }
        }
    }
    let fallback = if m.byte_fallback {
        match bytes_ids {
            Some(b) if !b.contains(&u32::MAX) => Fallback::Bytes(b),
            _ => return unsupported("byte_fallback without all 256 byte pieces"),
        }
    } else {
        Fallback::Unk { id: unk.ok_or_else(|| Unsupported("no unknown piece".into()))?, fuse: true }
    };
    // Every character of a piece must be a piece: a character that is not never merges then,
    // as the fallback's parts do not.
    for p in m.pieces.iter().filter(|p| p.kind == Kind::Normal) {
        for c in p.text.chars() {
            if !by_text.contains_key(c.encode_utf8(&mut [0; 4]) as &str) {
                return unsupported(format!("the piece {:?} holds {c:?}, which is no piece", p.text));
            }
        }
    }
    // Priorities: the higher the score, the earlier; equal scores are equal (leftmost first).
    if let Some(p) = m.pieces.iter().find(|p| p.kind == Kind::Normal && p.score.is_nan()) {
        return unsupported(format!("the piece {:?} has no score (NaN)", p.text));
    }
    let mut scores: Vec<f32> = m.pieces.iter().filter(|p| p.kind == Kind::Normal).map(|p| p.score).collect();
    scores.sort_by(|a, b| b.total_cmp(a));
    scores.dedup();
    let prio = |score: f32| scores.partition_point(|s| s.total_cmp(&score).is_gt()) as u64;
    let mut pairs = FastMap::default();
    for (i, p) in m.pieces.iter().enumerate().filter(|(_, p)| p.kind == Kind::Normal) {
        let made = prio(p.score) << 32 | u64::from(id(i));
        for (k, _) in p.text.char_indices().skip(1) {
            if let (Some(&l), Some(&r)) = (by_text.get(&p.text[..k]), by_text.get(&p.text[k..])) {
                pairs.insert(u64::from(l) << 32 | u64::from(r), made);
            }
        }
    }
    let tokens = by_text.iter().map(|(t, &i)| (t.as_bytes(), i)).collect();
    let eos = usize::try_from(m.eos_id).ok().filter(|&e| e < m.pieces.len()).map(id);
    let meta = Meta { dummy_prefix: m.add_dummy_prefix, eos, user_defined, vocab_size: id(m.pieces.len()) };
    Ok(SpBpe { tokens, merges: Merges::List(MergeList::new(pairs)), fallback, meta })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `ModelProto` with `pieces` (text, score, type) and the given trainer fields.
    pub(crate) fn model_bytes(pieces: &[(&str, f32, u64)], byte_fallback: bool) -> Vec<u8> {
        fn varint(out: &mut Vec<u8>, mut v: u64) {
            while v >= 0x80 {
                out.push(v as u8 | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        }
        fn field(out: &mut Vec<u8>, n: u64, bytes: &[u8]) {
            varint(out, n << 3 | 2);
            varint(out, bytes.len() as u64);
            out.extend_from_slice(bytes);
        }
        let mut out = Vec::new();
        for &(text, score, kind) in pieces {
            let mut p = Vec::new();
            field(&mut p, 1, text.as_bytes());
            p.push(2 << 3 | 5);
            p.extend_from_slice(&score.to_le_bytes());
            if kind != 1 {
                varint(&mut p, 3 << 3);
                varint(&mut p, kind);
            }
            field(&mut out, 1, &p);
        }
        let mut trainer = Vec::new();
        varint(&mut trainer, 3 << 3);
        varint(&mut trainer, 2); // BPE
        if byte_fallback {
            varint(&mut trainer, 35 << 3);
            varint(&mut trainer, 1);
        }
        field(&mut out, 2, &trainer);
        let mut norm = Vec::new();
        field(&mut norm, 1, b"identity");
        varint(&mut norm, 4 << 3);
        varint(&mut norm, 0); // remove_extra_whitespaces off
        field(&mut out, 3, &norm);
        out
    }

    #[test]
    fn reads_pieces_scores_and_merges() {
        let bytes = model_bytes(
            &[
                ("<unk>", 0.0, 2),
                ("<s>", 0.0, 3),
                ("</s>", 0.0, 3),
                ("▁", -5.0, 1),
                ("a", -6.0, 1),
                ("b", -7.0, 1),
                ("▁a", -1.0, 1),
                ("ab", -2.0, 1),
                ("▁ab", -3.0, 1),
            ],
            false,
        );
        assert!(looks_like_model(&bytes));
        let sp = read(&bytes).unwrap();
        assert_eq!(sp.meta.vocab_size, 9);
        assert_eq!(sp.meta.eos, Some(2));
        assert_eq!(sp.fallback, Fallback::Unk { id: 0, fuse: true });
        let Merges::List(pairs) = &sp.merges else { panic!("a merge list") };
        // "▁ab" is made from "▁a"+"b" and from "▁"+"ab", at the priority of its score.
        assert_eq!(pairs.get(6 << 32 | 5), Some(2 << 32 | 8));
        assert_eq!(pairs.get(3 << 32 | 7), Some(2 << 32 | 8));
        assert_eq!(pairs.get(3 << 32 | 4), Some(6));
        assert_eq!(pairs.len(), 4);
    }

    /// A SentencePiece list makes each piece from every split of it, all at the piece's score:
    /// it runs as ranks, compared by id where the scores fall as the ids grow, else by score.
    #[test]
    fn merges_run_as_ranks() {
        let pieces = |ab: f32| {
            model_bytes(
                &[("<unk>", 0.0, 2), ("a", -6.0, 1), ("b", -7.0, 1), ("ab", ab, 1), ("ba", -2.0, 1), ("aba", -3.0, 1)],
                false,
            )
        };
        let by_id = load(&pieces(-1.0), None).unwrap().vocab;
        assert!(by_id.proven_ranks() && by_id.ranks_are_ids());
        // "ab" and "ba" at one score: the first of them in the text merges first.
        let tie = load(&pieces(-2.0), None).unwrap().vocab;
        assert!(tie.proven_ranks() && !tie.ranks_are_ids());
        let path = format!(
            "{}/../../tests/fixtures/tokenizers/mistral-v1-sentencepiece_tokenizer.model.zst",
            env!("CARGO_MANIFEST_DIR")
        );
        let mistral = zstd::decode_all(std::fs::File::open(path).unwrap()).unwrap();
        assert!(load(&mistral, None).unwrap().vocab.proven_ranks(), "Mistral v1's .model runs as ranks");
    }

    /// sentencepiece compares scores as numbers: -0.0 ranks with 0.0, above -1.0.
    #[test]
    fn negative_zero_scores_rank_as_zero() {
        let bytes = model_bytes(
            &[
                ("<unk>", 0.0, 2),
                ("a", -6.0, 1),
                ("b", -7.0, 1),
                ("c", -8.0, 1),
                ("x", 0.0, 1),
                ("ab", -1.0, 1),
                ("bc", -0.0, 1),
            ],
            false,
        );
        let v = load(&bytes, None).unwrap().vocab;
        let mut ids = Vec::new();
        crate::merge::encode_piece(&v, v.short_table(), b"abc", &mut ids, &mut Default::default());
        assert_eq!(ids, [1, 6], "\"bc\" (-0.0) merges before \"ab\" (-1.0)");
        let nan = model_bytes(&[("<unk>", 0.0, 2), ("a", -1.0, 1), ("b", f32::NAN, 1)], false);
        assert!(read(&nan).is_err_and(|e| e.0.contains("NaN")));
    }

    #[test]
    fn refuses_what_it_does_not_read_with_the_reason() {
        let unused = model_bytes(&[("<unk>", 0.0, 2), ("a", -1.0, 1), ("ab", -2.0, 5)], false);
        let user = read(&model_bytes(&[("<unk>", 0.0, 2), ("a", -1.0, 1), ("[X]", 0.0, 4)], false)).unwrap();
        assert_eq!(user.meta.user_defined, [("[X]".to_string(), 2)]);
        assert!(read(&unused).is_err_and(|e| e.0.contains("unused")));
        let partial = model_bytes(&[("<unk>", 0.0, 2), ("ab", -2.0, 1), ("a", -1.0, 1)], false);
        assert!(read(&partial).is_err_and(|e| e.0.contains("no piece")));
        let no_bytes = model_bytes(&[("<unk>", 0.0, 2), ("a", -1.0, 1)], true);
        assert!(read(&no_bytes).is_err_and(|e| e.0.contains("256")));
        assert!(read(b"\x0a\xff").is_err_and(|e| e.0.contains("not a SentencePiece model")));
        assert!(!looks_like_model(b"IQ== 0\n"));
    }
}
