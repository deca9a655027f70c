//! The vocabulary of a byte-level BPE and how two adjacent parts merge.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::pairs::PairTable;
use super::stored::{In, Out};
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
    List(MergeList),
}

/// The pairs of a merge list: `(left << 32 | right, priority << 32 | merged id)`, each pair once,
/// in order of priority.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct MergeList(Vec<(u64, u64)>);

impl MergeList {
    /// The list of the pairs of `map` (pair → `priority << 32 | merged id`).
    pub fn new(map: FastMap<u64, u64>) -> MergeList {
        let mut pairs: Vec<(u64, u64)> = map.into_iter().collect();
        pairs.sort_unstable_by_key(|&(k, v)| (v, k));
        MergeList(pairs)
    }

    /// `(pair, priority << 32 | merged id)`, in order of priority.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (u64, u64)> + '_ {
        self.0.iter().copied()
    }

    /// `priority << 32 | merged id` of each pair, in order of priority.
    pub fn values(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().map(|p| p.1)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The value of `pair`, if it is listed (a scan: for tests).
    #[cfg(test)]
    pub fn get(&self, pair: u64) -> Option<u64> {
        self.0.iter().find(|p| p.0 == pair).map(|p| p.1)
    }
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

/// A list of tokens `(bytes, id)` in one buffer: what every vocabulary source (rank files,
/// `tokenizer.json`, SentencePiece models) produces, with no allocation per token.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TokenList {
    bytes: Vec<u8>,
    /// Token `i` is `bytes[ends[i - 1]..ends[i]]` (`ends[-1]` = 0).
    ends: Vec<usize>,
    ids: Vec<u32>,
}

impl std::fmt::Debug for TokenList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter().map(|(t, id)| (String::from_utf8_lossy(t), id))).finish()
    }
}

impl TokenList {
    /// An empty list with room for `tokens` tokens of `bytes` bytes in all.
    pub fn with_capacity(tokens: usize, bytes: usize) -> TokenList {
        TokenList {
            bytes: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(tokens),
            ids: Vec::with_capacity(tokens),
        }
    }

    /// Add `token` with `id`.
    pub fn push(&mut self, token: &[u8], id: u32) {
        self.bytes.extend_from_slice(token);
        self.ends.push(self.bytes.len());
        self.ids.push(id);
    }

    /// Add the token that `write` appends to the buffer it is given (e.g. a decoder's output),
    /// or nothing if it fails.
    pub fn push_with<E>(&mut self, id: u32, write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>) -> Result<(), E> {
        let start = self.bytes.len();
        write(&mut self.bytes).inspect_err(|_| self.bytes.truncate(start))?;
        self.ends.push(self.bytes.len());
        self.ids.push(id);
        Ok(())
    }

    /// The number of tokens.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there is no token.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Token `i` (in the list's order) and its id.
    pub fn get(&self, i: usize) -> (&[u8], u32) {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        (&self.bytes[start..self.ends[i]], self.ids[i])
    }

    /// The tokens and their ids, in the list's order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], u32)> + '_ {
        let mut start = 0;
        self.ends.iter().zip(&self.ids).map(move |(&end, &id)| {
            let token = &self.bytes[start..end];
            start = end;
            (token, id)
        })
    }

    /// The ids, in the list's order.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Keep the tokens for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8], u32) -> bool) {
        let (mut w, mut start, mut kept) = (0, 0, 0);
        for i in 0..self.len() {
            let (end, id) = (self.ends[i], self.ids[i]);
            if keep(&self.bytes[start..end], id) {
                self.bytes.copy_within(start..end, w);
                w += end - start;
                self.ends[kept] = w;
                self.ids[kept] = id;
                kept += 1;
            }
            start = end;
        }
        self.bytes.truncate(w);
        self.ends.truncate(kept);
        self.ids.truncate(kept);
    }
}

impl<T: AsRef<[u8]>> FromIterator<(T, u32)> for TokenList {
    fn from_iter<I: IntoIterator<Item = (T, u32)>>(iter: I) -> TokenList {
        let mut list = TokenList::default();
        for (t, id) in iter {
            list.push(t.as_ref(), id);
        }
        list
    }
}

impl From<Vec<(Vec<u8>, u32)>> for TokenList {
    fn from(tokens: Vec<(Vec<u8>, u32)>) -> TokenList {
        tokens.into_iter().collect()
    }
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
    /// round of merging a piece looks up nothing else); for a vocabulary of characters, of every
    /// two ASCII ones (no merge for the others).
    byte_pairs: Vec<u64>,
    /// The digest of the merge list this vocabulary was given, when it now merges by ranks
    /// (see [`Vocab::into_ranks`]): a tokenizer's identity does not depend on how it runs.
    list_digest: Option<u64>,
    /// When ranks do not follow the ids (see [`Vocab::into_ranks`]): the priorities of the
    /// merges, lowest first, equals leftmost first.
    prio: Option<Priorities>,
    pub units: Units,
}

/// The priorities of the merges of a list that runs as ranks, by the id each makes and, for an
/// id made by merges of different priorities (a `tokenizer.json` converted from SentencePiece
/// lists every split of a token, each at its own priority), by where the merge splits it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Priorities {
    /// Per id: the priority of the merges making it (`u32::MAX`: none), or `SPLITS | i` when
    /// they differ, `splits[i + k]` being that of the merge whose left part has `k` bytes.
    by_id: Box<[u32]>,
    /// Such priorities, one per byte of each such token (`u32::MAX`: no merge splits it there).
    splits: Box<[u32]>,
    /// One past the largest priority.
    bound: u32,
}

/// Marks an entry of [`Priorities::by_id`] that points into [`Priorities::splits`].
const SPLITS: u32 = 1 << 31;

/// The longest left part whose split priority a [`Vocab::prio_hint`] carries inline, in
/// [`INLINE_BITS`] bits each (its 32 high bits hold ten of them).
const INLINE_LEFTS: usize = 10;
const INLINE_BITS: usize = 3;
/// The inline field that marks a split no merge makes; the others are below it.
const INLINE_NONE: u32 = (1 << INLINE_BITS) - 1;

impl Priorities {
    /// From each id's merges, `(bytes of the left part, priority)` (none: the id is made by no
    /// merge), and the length of each token; priorities are packed into ranks `0, 1, …` in their
    /// order. `None` if there are too many of them to point at, or a left part is no shorter
    /// than the token made.
    pub fn new(merges: &[Vec<(u32, u32)>], len: impl Fn(u32) -> usize) -> Option<Priorities> {
        let mut order: Vec<u32> = merges.iter().flatten().map(|m| m.1).collect();
        order.sort_unstable();
        order.dedup();
        let rank = |p: u32| order.binary_search(&p).expect("a priority of the list") as u32;
        let mut by_id = Vec::with_capacity(merges.len());
        let mut splits = Vec::new();
        for (id, m) in (0..).zip(merges) {
            by_id.push(match m[..] {
                [] => u32::MAX,
                [(_, p), ..] if m.iter().all(|x| x.1 == p) => rank(p),
                _ => {
                    let at = splits.len();
                    splits.resize(at + len(id), u32::MAX);
                    for &(left, p) in m {
                        *splits[at..].get_mut(left as usize)? = rank(p);
                    }
                    SPLITS | u32::try_from(at).ok().filter(|&i| i < SPLITS - 1)?
                }
            });
        }
        let bound = u32::try_from(order.len()).ok().filter(|&b| b < SPLITS)?;
        Some(Priorities { by_id: by_id.into(), splits: splits.into(), bound })
    }

    /// Whether every id has one priority and they grow with the ids (then comparing the ids
    /// compares them).
    pub fn follow_ids(&self) -> bool {
        self.splits.is_empty() && self.by_id.iter().filter(|&&p| p != u32::MAX).is_sorted_by(|a, b| a < b)
    }

    /// The priority of the merge making `id` whose left part has `left` bytes (`u32::MAX`: no
    /// listed merge splits it there).
    #[inline(always)]
    pub fn of(&self, id: u32, left: usize) -> u32 {
        match self.by_id[id as usize] {
            p if p < SPLITS || p == u32::MAX => p,
            p => self.split((p & !SPLITS) as usize + left),
        }
    }

    /// The inline form of a [`Vocab::prio_hint`] for the token of `len` bytes whose splits start
    /// at `at`: `None` if it is too long or its priorities are too far apart.
    fn inline_hint(&self, at: u32, len: usize) -> Option<u64> {
        if len > INLINE_LEFTS + 1 {
            return None;
        }
        let splits = self.splits.get(at as usize..at as usize + len)?;
        let lowest = splits[1..].iter().copied().min().filter(|&p| p != u32::MAX && p + 1 < SPLITS)?;
        let mut fields = 0;
        for left in (1..=INLINE_LEFTS).rev() {
            let field = match splits.get(left) {
                Some(&p) if p != u32::MAX => Some(p - lowest).filter(|&d| d < INLINE_NONE)?,
                _ => INLINE_NONE,
            };
            fields = fields << INLINE_BITS | u64::from(field);
        }
        Some(u64::from(lowest + 1) | fields << 32)
    }

    /// `splits[i]` (`u32::MAX` past its end).
    #[inline(always)]
    fn split(&self, i: usize) -> u32 {
        self.splits.get(i).copied().unwrap_or(u32::MAX)
    }

    fn store(&self, out: &mut Out) {
        out.u32s(&self.by_id);
        out.u32s(&self.splits);
    }

    /// What [`Priorities::store`] wrote for the ids of tokens of `len(id)` bytes, checked to
    /// point within itself at ranks `0, 1, …`; `None` if it does not.
    fn load(r: &mut In<'_>, n: usize, len: impl Fn(u32) -> usize) -> Option<Priorities> {
        let by_id = r.u32s().filter(|p| p.len() == n)?;
        let splits = r.u32s()?;
        // Dense ranks number at most the merges: one per id, or one per split.
        let bound = u32::try_from(n + splits.len()).ok().filter(|&b| b < SPLITS)?;
        let mut most = 0;
        for (id, &p) in (0..).zip(&by_id[..]).filter(|p| *p.1 != u32::MAX) {
            if p < SPLITS {
                most = most.max(p);
                continue;
            }
            let at = (p & !SPLITS) as usize;
            let split = splits.get(at..at.checked_add(len(id))?)?;
            most = split.iter().filter(|&&p| p != u32::MAX).try_fold(most, |m, &p| (p < bound).then_some(m.max(p)))?;
        }
        (most < bound).then_some(Priorities { by_id, splits, bound: most + 1 })
    }
}

/// Whether ids up to `max_id` are too many for `tokens` tokens: the tables are by id, so ids far
/// beyond the number of tokens would size them by the ids (real vocabularies are dense).
pub(crate) fn too_sparse(max_id: usize, tokens: usize) -> bool {
    max_id > tokens.saturating_mul(4).saturating_add(1 << 20)
}

/// What a vocabulary cannot be used for.
#[derive(Debug)]
pub(crate) struct VocabError(pub String);

impl Vocab {
    /// Build from `(token bytes, id)` pairs. Every single byte that UTF-8 text can hold must be
    /// a token (byte-level BPE).
    pub fn new(tokens: impl Into<TokenList>, merges: Merges) -> Result<Vocab, VocabError> {
        Vocab::with_units(tokens.into(), merges, Units::Bytes, true)
    }

    /// Build a vocabulary whose merging starts from characters (the tokens are UTF-8 text).
    pub fn new_chars(tokens: impl Into<TokenList>, merges: Merges, fallback: Fallback) -> Result<Vocab, VocabError> {
        let tokens = tokens.into();
        if let Some((t, _)) = tokens.iter().find(|t| simdutf8::basic::from_utf8(t.0).is_err()) {
            return Err(VocabError(format!("token {t:?} is not UTF-8 text")));
        }
        Vocab::with_units(tokens, merges, Units::Chars(fallback), true)
    }

    /// The vocabulary of `tokens`; `checked`: a token whose bytes another token has is an error
    /// (else the caller knows there is none: a vocabulary that was built before).
    fn with_units(tokens: TokenList, merges: Merges, units: Units, checked: bool) -> Result<Vocab, VocabError> {
        if tokens.is_empty() {
            return Err(VocabError("the vocabulary is empty".into()));
        }
        let max_id = tokens.ids().iter().copied().max().unwrap_or(0) as usize;
        if too_sparse(max_id, tokens.len()) {
            return Err(VocabError(format!("ids up to {max_id} for {} tokens (too sparse)", tokens.len())));
        }
        // Where each id's token is in the list.
        let mut at = vec![u32::MAX; max_id + 1];
        let mut short_count = 0;
        for (i, (bytes, id)) in tokens.iter().enumerate() {
            if bytes.is_empty() {
                return Err(VocabError(format!("token {id} is empty")));
            }
            if at[id as usize] != u32::MAX {
                return Err(VocabError(format!("id {id} is given to two tokens")));
            }
            at[id as usize] = i as u32;
            short_count += usize::from(bytes.len() <= MAX_SHORT);
        }
        let mut long = FastMap::default();
        let mut byte_ids = [u32::MAX; 256];
        let mut short = KeyIndex::new(short_count, max_id as u32 + 1);
        for (bytes, id) in tokens.iter() {
            let dup = if bytes.len() <= MAX_SHORT {
                let key = pack(bytes);
                let dup = checked && short.get_one(key).is_some();
                if !dup {
                    short.insert(key, id);
                }
                dup
            } else {
                long.insert(Box::<[u8]>::from(bytes), id).is_some()
            };
            if dup {
                return Err(VocabError(format!("the bytes of token {id} ({bytes:?}) appear twice")));
            }
            if let [b] = bytes[..] {
                byte_ids[b as usize] = id;
            }
        }
        // Every byte that valid UTF-8 can hold needs a token (GPT-NeoX has none for the others:
        // 0xC0, 0xC1 and 0xF5 to 0xFF never occur in text).
        let in_utf8 = |b: usize| !matches!(b, 0xc0 | 0xc1 | 0xf5..=0xff);
        if let Some(b) = (0..256).find(|&b| byte_ids[b] == u32::MAX && in_utf8(b) && units == Units::Bytes) {
            return Err(VocabError(format!("byte {b:#04x} has no token: not a byte-level BPE vocabulary")));
        }
        if u32::try_from(tokens.bytes.len()).is_err() {
            return Err(VocabError("vocabulary over 4 GB".into()));
        }
        let mut offsets = Vec::with_capacity(at.len() + 1);
        offsets.push(0u32);
        // A list in id order with no id missing (rank files) already is the byte layout.
        let bytes = if tokens.len() == at.len() && tokens.ids().iter().enumerate().all(|(i, &id)| i == id as usize) {
            offsets.extend(tokens.ends.iter().map(|&e| e as u32));
            tokens.bytes
        } else {
            let mut bytes = Vec::with_capacity(tokens.bytes.len());
            for &i in &at {
                if i != u32::MAX {
                    bytes.extend_from_slice(tokens.get(i as usize).0);
                }
                offsets.push(bytes.len() as u32);
            }
            bytes
        };
        let pairs = match &merges {
            Merges::List(m) => Some(PairTable::new(m.iter())),
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
            prio: None,
            units,
        };
        vocab.fill_byte_pairs();
        Ok(vocab)
    }

    fn fill_byte_pairs(&mut self) {
        let chars = self.units != Units::Bytes;
        self.byte_pairs = (0..1usize << 16)
            .map(|ab| {
                let pair = [(ab >> 8) as u8, ab as u8];
                let (l, r) = (self.byte_ids[pair[0] as usize], self.byte_ids[pair[1] as usize]);
                if chars && (!pair.is_ascii() || l == u32::MAX || r == u32::MAX) {
                    return u64::from(u32::MAX) << 32;
                }
                let (prio, merged) = self.merge(&pair, 0, 2, l, r);
                u64::from(prio) << 32 | u64::from(merged)
            })
            .collect();
    }

    /// Merge by ranks instead of the merge list, which the caller has proved gives the same
    /// encodings (see `equiv`): compared by the ids made (id = rank), or by the list's own
    /// priorities (`prio`) where they do not grow with the ids, tie, or differ between the
    /// merges making one id.
    pub(crate) fn into_ranks(mut self, prio: Option<Priorities>) -> Vocab {
        self.list_digest = Some(self.digest());
        self.merges = Merges::Ranks;
        self.pairs = None;
        self.prio = prio;
        self.fill_byte_pairs();
        self
    }

    /// The payload of a prepared vocabulary (see the `stored` module): `meta` (as JSON, what the
    /// loader keeps beside it), then the vocabulary.
    pub(crate) fn pack(&self, meta: &impl serde::Serialize) -> Vec<u8> {
        let mut out = Out::default();
        out.bytes(&serde_json::to_vec(meta).expect("plain data serializes"));
        self.store(&mut out);
        out.0
    }

    /// What [`Vocab::pack`] wrote, if `payload` is a whole one.
    pub(crate) fn unpack<M: serde::de::DeserializeOwned>(payload: &[u8]) -> Option<(M, Vocab)> {
        let mut r = In(payload);
        let meta = serde_json::from_slice(r.bytes()?).ok()?;
        let vocab = Vocab::load(&mut r)?;
        r.is_empty().then_some((meta, vocab))
    }

    /// Write what this vocabulary is built from (see [`Vocab::load`]): its units, tokens by id,
    /// and merges (the list, or the digest of a list proved to run as ranks).
    fn store(&self, out: &mut Out) {
        match &self.units {
            Units::Bytes => out.u32(0),
            Units::Chars(Fallback::Bytes(ids)) => {
                out.u32(1);
                out.u32s(&ids[..]);
            }
            Units::Chars(Fallback::Unk { id, fuse }) => {
                out.u32(2);
                out.u32(*id);
                out.u32(u32::from(*fuse));
            }
        }
        out.u32s(&self.offsets);
        out.bytes(&self.bytes);
        match (&self.merges, self.list_digest, &self.prio) {
            (Merges::Ranks, None, _) => out.u32(0),
            (Merges::Ranks, Some(digest), None) => {
                out.u32(1);
                out.u64(digest);
            }
            (Merges::Ranks, Some(digest), Some(prio)) => {
                out.u32(3);
                out.u64(digest);
                prio.store(out);
            }
            (Merges::List(list), _, _) => {
                out.u32(2);
                out.u64(list.len() as u64);
                for (k, v) in list.iter() {
                    out.u64(k);
                    out.u64(v);
                }
            }
        }
    }

    /// The vocabulary [`Vocab::store`] wrote, rebuilt; `None` if `r` does not hold one.
    fn load(r: &mut In<'_>) -> Option<Vocab> {
        let units = match r.u32()? {
            0 => Units::Bytes,
            1 => {
                let ids: Box<[u32; 256]> = r.u32s()?.try_into().ok()?;
                Units::Chars(Fallback::Bytes(ids))
            }
            2 => Units::Chars(Fallback::Unk { id: r.u32()?, fuse: r.u32()? != 0 }),
            _ => return None,
        };
        let offsets = r.u32s()?;
        let bytes = r.bytes()?;
        let n = offsets.len().checked_sub(1)?;
        let mut tokens = TokenList::with_capacity(n, bytes.len());
        for id in 0..n {
            let (a, b) = (offsets[id] as usize, offsets[id + 1] as usize);
            let token = bytes.get(a..b)?;
            if !token.is_empty() {
                tokens.push(token, id as u32);
            }
        }
        let mut prio = None;
        let (merges, digest) = match r.u32()? {
            0 => (Merges::Ranks, None),
            1 => (Merges::Ranks, Some(r.u64()?)),
            3 => {
                let digest = r.u64()?;
                prio = Some(Priorities::load(r, n, |id| (offsets[id as usize + 1] - offsets[id as usize]) as usize)?);
                (Merges::Ranks, Some(digest))
            }
            2 => {
                let n = usize::try_from(r.u64()?).ok()?;
                let mut list = Vec::with_capacity(n.min(r.0.len() / 16));
                for _ in 0..n {
                    list.push((r.u64()?, r.u64()?));
                }
                // As stored: in order of priority (and each pair once, as the checksum vouches).
                if list.windows(2).any(|w| (w[0].1, w[0].0) >= (w[1].1, w[1].0)) {
                    return None;
                }
                (Merges::List(MergeList(list)), None)
            }
            _ => return None,
        };
        let mut vocab = Vocab::with_units(tokens, merges, units, false).ok()?;
        vocab.list_digest = digest;
        if prio.is_some() {
            vocab.prio = prio;
            vocab.fill_byte_pairs();
        }
        Some(vocab)
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
    /// alike, which includes that every token a merge makes, merged on its own, comes out as
    /// itself.
    pub(crate) fn proven_ranks(&self) -> bool {
        self.list_digest.is_some()
    }

    /// Whether merging `id`'s units on their own gives `id`, as far as a proof of
    /// [`Vocab::proven_ranks`] says: true for every token a merge makes and for single units.
    pub(crate) fn proven_whole(&self, id: u32) -> bool {
        self.proven_ranks()
            && (self.units_len(id) < 2 || self.prio.as_ref().is_none_or(|p| p.by_id[id as usize] != u32::MAX))
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

    pub fn len(&self) -> usize {
        self.short.len() + self.long.len()
    }

    /// The merge of the parts `piece[a..b]` (id `left`) and `piece[b..c]` (id `right`):
    /// `(priority, merged id)`, priority `u32::MAX` when they do not merge.
    #[inline(always)]
    pub fn merge(&self, piece: &[u8], a: usize, c: usize, left: u32, right: u32) -> (u32, u32) {
        match &self.merges {
            Merges::Ranks => match self.id_of(&piece[a..c]) {
                Some(id) => (self.prio_of(id, self.token(left).len(), 0), id),
                None => (u32::MAX, 0),
            },
            Merges::List(_) => match self.pairs.as_ref().and_then(|p| p.get(left, right)) {
                Some(v) => ((v >> 32) as u32, v as u32),
                None => (u32::MAX, 0),
            },
        }
    }

    /// Whether merging by ranks compares the ids made (no [`Vocab::into_ranks`] priorities).
    #[inline(always)]
    pub fn ranks_are_ids(&self) -> bool {
        self.prio.is_none()
    }

    /// The priority of merging into `id`, the left part having `left` bytes, when merging by
    /// ranks: the id itself, unless [`Vocab::into_ranks`] gave priorities. `hint` is what the
    /// table that gave `id` kept beside it ([`Vocab::prio_hint`], 0 if nothing): when set, it
    /// spares the look in [`Priorities::by_id`] and, mostly, [`Priorities::splits`], whose lines
    /// are not in the cache when the table's is (for an SP-converted `tokenizer.json`, that look
    /// costs a fifth of merging a short piece).
    #[inline(always)]
    pub fn prio_of(&self, id: u32, left: usize, hint: u64) -> u32 {
        let (h, fields) = (hint as u32, hint >> 32);
        if fields != 0 {
            debug_assert!((1..=INLINE_LEFTS).contains(&left));
            return match (fields >> (INLINE_BITS * (left - 1))) as u32 & INLINE_NONE {
                INLINE_NONE => u32::MAX,
                above => h - 1 + above,
            };
        }
        match (h, &self.prio) {
            (0, p) => p.as_ref().map_or(id, |p| p.of(id, left)),
            (h, Some(p)) if h & SPLITS != 0 => p.split((h & !SPLITS) as usize + left),
            (h, _) => h - 1,
        }
    }

    /// When merging by ranks with priorities, what [`Vocab::prio_of`] takes for `id`, 0 when no
    /// merge makes it. Its low half: 1 + the priority of the merges making `id` when they all
    /// have the same one; when they differ, 1 + the lowest, the high half holding, for each left
    /// part of 1 to [`INLINE_LEFTS`] bytes, how far above it that split's priority lies
    /// ([`INLINE_BITS`] each, [`INLINE_NONE`]: no merge splits `id` there), if `id` is short
    /// enough and the spread small enough (SentencePiece conversions list a token's splits one
    /// after the other: it is, for all but a few); else `SPLITS | i`, `id`'s splits starting at
    /// `i`.
    pub fn prio_hint(&self, id: u32) -> u64 {
        self.prio.as_ref().map_or(0, |p| match p.by_id[id as usize] {
            u32::MAX => 0,
            at if at & SPLITS != 0 => p.inline_hint(at & !SPLITS, self.token(id).len()).unwrap_or(u64::from(at)),
            // (A priority whose successor would read as splits is looked up: none is that large.)
            q if q + 1 < SPLITS => u64::from(q + 1),
            _ => 0,
        })
    }

    /// One past the largest priority of merging by ranks.
    pub fn prio_bound(&self) -> u32 {
        self.prio.as_ref().map_or(self.id_bound(), |p| p.bound)
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
            for (k, v) in m.iter() {
                eat(&k.to_le_bytes());
                eat(&v.to_le_bytes());
            }
        }
        h
    }
}
