//! The vocabulary of a byte-level BPE and how two adjacent parts merge.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::pairs::PairTable;
use super::table::{pack, KeyIndex, MAX_SHORT};

/// A multiply-rotate hasher for the miss path's maps (keys are ids or short byte strings).
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// How two adjacent parts of a piece merge, and which merge goes first.
pub(crate) enum Merges {
    /// tiktoken: two parts merge when their concatenated bytes are a token; the lowest rank
    /// (= id) merges first, the leftmost among equals.
    Ranks,
    /// Hugging Face `BPE`: only the listed pairs merge, in list order, the leftmost among equals.
    /// Key `left << 32 | right`, value `priority << 32 | merged id`.
    List(FastMap<u64, u64>),
}

/// What merging starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Units {
    /// Bytes (byte-level BPE: every byte is a token).
    Bytes,
    /// Characters (SentencePiece-style BPE), and what a character that is no token becomes.
    Chars(Fallback),
}

/// What a character outside a character vocabulary becomes (it never merges).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// Its UTF-8 bytes, as the ids of the `<0xNN>` tokens (`byte_fallback`), by byte.
    Bytes(Box<[u32; 256]>),
    /// The unknown token; with `fuse`, a run of such characters is one.
    Unk { id: u32, fuse: bool },
}

/// Token bytes ↔ ids, plus the merge rule.
pub(crate) struct Vocab {
    /// Bytes of id `i`: `bytes[offsets[i]..offsets[i + 1]]` (empty for unused ids).
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    /// The id of each single byte.
    pub byte_ids: [u32; 256],
    /// Tokens of at most [`MAX_SHORT`] bytes → id.
    short: KeyIndex,
    /// Longer tokens → id.
    long: FastMap<Box<[u8]>, u32>,
    pub merges: Merges,
    /// The pairs of a merge list, for lookups (the list itself is kept for the digest).
    pairs: Option<PairTable>,
    /// The merge of every two bytes, `priority << 32 | merged` (a dense 256×256 table: the first
    /// round of merging a piece looks up nothing else).
    byte_pairs: Vec<u64>,
    /// The digest of the merge list this vocabulary was given, when it now merges by ranks
    /// (see [`Vocab::into_ranks`]): a tokenizer's identity does not depend on how it runs.
    list_digest: Option<u64>,
    pub units: Units,
}

/// What a vocabulary cannot be used for.
#[derive(Debug)]
pub(crate) struct VocabError(pub String);

impl Vocab {
    /// Build from `(token bytes, id)` pairs. Every single byte that UTF-8 text can hold must be
    /// a token (byte-level BPE).
    pub fn new(tokens: Vec<(Vec<u8>, u32)>, merges: Merges) -> Result<Vocab, VocabError> {
        Vocab::with_units(tokens, merges, Units::Bytes)
    }

    /// Build a vocabulary whose merging starts from characters (the tokens are UTF-8 text).
    pub fn new_chars(tokens: Vec<(Vec<u8>, u32)>, merges: Merges, fallback: Fallback) -> Result<Vocab, VocabError> {
        if let Some((t, _)) = tokens.iter().find(|t| std::str::from_utf8(&t.0).is_err()) {
            return Err(VocabError(format!("token {t:?} is not UTF-8 text")));
        }
        Vocab::with_units(tokens, merges, Units::Chars(fallback))
    }

    fn with_units(tokens: Vec<(Vec<u8>, u32)>, merges: Merges, units: Units) -> Result<Vocab, VocabError> {
        if tokens.is_empty() {
            return Err(VocabError("the vocabulary is empty".into()));
        }
        let max_id = tokens.iter().map(|t| t.1).max().unwrap_or(0) as usize;
        let mut by_id: Vec<Option<Vec<u8>>> = vec![None; max_id + 1];
        let mut long = FastMap::default();
        let mut byte_ids = [u32::MAX; 256];
        let short_count = tokens.iter().filter(|t| t.0.len() <= MAX_SHORT).count();
        let mut short = KeyIndex::new(short_count, max_id as u32 + 1);
        for (bytes, id) in tokens {
            if bytes.is_empty() {
                return Err(VocabError(format!("token {id} is empty")));
            }
            if by_id[id as usize].is_some() {
                return Err(VocabError(format!("id {id} is given to two tokens")));
            }
            let dup = if bytes.len() <= MAX_SHORT {
                let key = pack(&bytes);
                let dup = short.get_one(key).is_some();
                if !dup {
                    short.insert(key, id);
                }
                dup
            } else {
                long.insert(bytes.clone().into_boxed_slice(), id).is_some()
            };
            if dup {
                return Err(VocabError(format!("the bytes of token {id} ({bytes:?}) appear twice")));
            }
            if let [b] = bytes[..] {
                byte_ids[b as usize] = id;
            }
            by_id[id as usize] = Some(bytes);
        }
        // Every byte that valid UTF-8 can hold needs a token (GPT-NeoX has none for the others:
        // 0xC0, 0xC1 and 0xF5 to 0xFF never occur in text).
        let in_utf8 = |b: usize| !matches!(b, 0xc0 | 0xc1 | 0xf5..=0xff);
        if let Some(b) = (0..256).find(|&b| byte_ids[b] == u32::MAX && in_utf8(b) && units == Units::Bytes) {
            return Err(VocabError(format!("byte {b:#04x} has no token: not a byte-level BPE vocabulary")));
        }
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(by_id.len() + 1);
        offsets.push(0u32);
        for t in &by_id {
            bytes.extend_from_slice(t.as_deref().unwrap_or_default());
            offsets.push(u32::try_from(bytes.len()).map_err(|_| VocabError("vocabulary over 4 GB".into()))?);
        }
        let pairs = match &merges {
            Merges::List(m) => Some(PairTable::new(m)),
            Merges::Ranks => None,
        };
        let mut vocab = Vocab {
            bytes,
            offsets,
            byte_ids,
            short,
            long,
            merges,
            pairs,
            byte_pairs: Vec::new(),
            list_digest: None,
            units,
        };
        vocab.fill_byte_pairs();
        Ok(vocab)
    }

    fn fill_byte_pairs(&mut self) {
        if self.units != Units::Bytes {
            return; // merging never starts from bytes
        }
        self.byte_pairs = (0..1usize << 16)
            .map(|ab| {
                let pair = [(ab >> 8) as u8, ab as u8];
                let (l, r) = (self.byte_ids[pair[0] as usize], self.byte_ids[pair[1] as usize]);
                let (prio, merged) = self.merge(&pair, 0, 2, l, r);
                u64::from(prio) << 32 | u64::from(merged)
            })
            .collect();
    }

    /// Merge by ranks (id = rank) instead of the merge list, which the caller has proved gives
    /// the same encodings (see `equiv`).
    pub(crate) fn into_ranks(mut self) -> Vocab {
        self.list_digest = Some(self.digest());
        self.merges = Merges::Ranks;
        self.pairs = None;
        self.fill_byte_pairs();
        self
    }

    /// The number of units (bytes or characters) of token `id`.
    pub(crate) fn units_len(&self, id: u32) -> usize {
        let t = self.token(id);
        match self.units {
            Units::Bytes => t.len(),
            Units::Chars(_) => t.iter().filter(|&&b| b & 0xc0 != 0x80).count(),
        }
    }

    /// Whether this vocabulary merges by ranks because its merge list was proved to merge
    /// alike, which includes that every token, merged on its own, comes out as itself.
    pub(crate) fn proven_ranks(&self) -> bool {
        self.list_digest.is_some()
    }

    /// The id of the token whose bytes are `bytes`.
    #[inline(always)]
    pub fn id_of(&self, bytes: &[u8]) -> Option<u32> {
        if bytes.len() <= MAX_SHORT {
            self.short.get_one(pack(bytes))
        } else {
            self.long.get(bytes).copied()
        }
    }

    /// The table of short tokens (piece → id), for merging.
    pub fn short_table(&self) -> &KeyIndex {
        &self.short
    }

    /// Bytes of token `id` (empty if unused).
    pub fn token(&self, id: u32) -> &[u8] {
        match (self.offsets.get(id as usize), self.offsets.get(id as usize + 1)) {
            (Some(&a), Some(&b)) => &self.bytes[a as usize..b as usize],
            _ => &[],
        }
    }

    /// One past the largest id.
    pub fn id_bound(&self) -> u32 {
        (self.offsets.len() - 1) as u32
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.short.len() + self.long.len()
    }

    /// The merge of the parts `piece[a..b]` (id `left`) and `piece[b..c]` (id `right`):
    /// `(priority, merged id)`, priority `u32::MAX` when they do not merge.
    #[inline(always)]
    pub fn merge(&self, piece: &[u8], a: usize, c: usize, left: u32, right: u32) -> (u32, u32) {
        match &self.merges {
            Merges::Ranks => match self.id_of(&piece[a..c]) {
                Some(id) => (id, id),
                None => (u32::MAX, 0),
            },
            Merges::List(_) => match self.pairs.as_ref().and_then(|p| p.get(left, right)) {
                Some(v) => ((v >> 32) as u32, v as u32),
                None => (u32::MAX, 0),
            },
        }
    }

    /// Prefetch the merge of `left` and `right` (merge lists only: ranks are looked up by bytes).
    #[inline(always)]
    pub fn prefetch_merge(&self, left: u32, right: u32) {
        if let Some(p) = &self.pairs {
            p.prefetch(left, right);
        }
    }

    /// The merge of the bytes `a` and `b`: `(priority, merged id)`.
    #[inline(always)]
    pub fn merge_bytes(&self, a: u8, b: u8) -> (u32, u32) {
        let v = self.byte_pairs[usize::from(a) << 8 | usize::from(b)];
        ((v >> 32) as u32, v as u32)
    }

    /// A 64-bit digest of the tokens and merges (FNV-1a), for the tokenizer's identity.
    pub fn digest(&self) -> u64 {
        if let Some(d) = self.list_digest {
            return d;
        }
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        for id in 0..self.id_bound() {
            eat(&(self.token(id).len() as u32).to_le_bytes());
            eat(self.token(id));
        }
        if let Merges::List(m) = &self.merges {
            let mut pairs: Vec<(u64, u64)> = m.iter().map(|(&k, &v)| (v, k)).collect();
            pairs.sort_unstable();
            for (v, k) in pairs {
                eat(&k.to_le_bytes());
                eat(&v.to_le_bytes());
            }
        }
        h
    }
}
