//! A fast, exact byte-level BPE encoder for the GPT-2/r50k/p50k, cl100k (and Llama 3) and o200k
//! families: ids identical to tiktoken's `encode_ordinary` and to Hugging Face `tokenizers`.
//!
//! Per piece of text: a hand-written pre-tokenizer ([`pretok`]) finds the piece, one probe of a
//! bounded table that the threads share answers it (the table is seeded with the vocabulary, so it
//! knows every one-token piece, and learns repeated multi-token ones), and only the rest run byte-pair merging
//! ([`merge`]). Nothing allocates per piece once the caches are warm.
//!
//! Special-token strings such as `<|endoftext|>` are ordinary text unless
//! [`FastBpe::with_special_tokens_in_text`] turns them on.

mod batch;
mod cache;
#[cfg(target_arch = "x86_64")]
pub(crate) mod cpu;
mod equiv;
mod filter;
mod hf;
mod merge;
mod pairs;
mod pattern;
pub(crate) mod pretok;
mod select;
mod shared;
mod specials;
mod table;
mod tiktoken;
mod unicode;
mod vocab;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub use batch::EncodedBatch;
pub use cache::{CacheConfig, Stats};
pub use hf::Unsupported;
pub use pattern::Pattern;
pub use select::{for_hf_model, for_tiktoken_model, FAST_BPE_ENV};
pub use tiktoken::ENCODINGS as TIKTOKEN_ENCODINGS;

use cache::State;
use filter::{Filtered, TokenFilter};
use pretok::{Cursor, WindowCursor};
use shared::SharedTable;
use specials::Specials;
use table::{pack_at, Ids, Staged, MAX_SHORT};
use vocab::{Merges, Vocab};

use super::Tokenizer;
use crate::error::IoContext;
use crate::{Error, Result};

/// The fast byte-level BPE encoder. Shared by all threads (`Sync`); each thread that encodes
/// borrows a cache from an internal pool, so the number of caches is the peak concurrency.
pub struct FastBpe {
    vocab: Vocab,
    /// The short pieces whose whole encoding is one id, by id: the shared table starts with them.
    seed: Vec<(u128, u32)>,
    /// The seed's keys: for a tiktoken vocabulary, every short token (see [`filter`]).
    token_filter: TokenFilter,
    /// A piece that is a token encodes to it without merging (tiktoken, `ignore_merges`).
    whole_piece_is_token: bool,
    pattern: Pattern,
    specials: Specials,
    split_specials: bool,
    eod: Option<u32>,
    vocab_size: u64,
    source: String,
    cache: CacheConfig,
    /// The short-piece table every thread uses, made (and seeded) at the first call.
    shared: OnceLock<Arc<SharedTable>>,
    states: Mutex<Vec<State>>,
    /// Caches are allocated whole when created (set for long jobs).
    commit_caches: AtomicBool,
    /// The identity to report instead of the built-in one (see [`FastBpe::with_identity`]).
    identity: Option<serde_json::Value>,
}

impl std::fmt::Debug for FastBpe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastBpe")
            .field("source", &self.source)
            .field("pattern", &self.pattern)
            .field("vocab_size", &self.vocab_size)
            .finish_non_exhaustive()
    }
}

impl FastBpe {
    fn build(
        vocab: Vocab,
        whole_piece_is_token: bool,
        pattern: Pattern,
        specials: Vec<(String, u32)>,
        source: String,
    ) -> FastBpe {
        let specials = Specials::new(specials);
        let eod = specials.id("<|endoftext|>").or_else(|| specials.id("<|end_of_text|>"));
        let max_id = vocab.id_bound().max(specials.tokens().iter().map(|s| s.1 + 1).max().unwrap_or(0));
        let mut bpe = FastBpe {
            vocab,
            seed: Vec::new(),
            token_filter: TokenFilter::new(&[]),
            whole_piece_is_token,
            pattern,
            specials,
            split_specials: false,
            eod,
            vocab_size: u64::from(max_id),
            source,
            cache: CacheConfig::for_threads(crate::parallel::default_threads()),
            shared: OnceLock::new(),
            states: Mutex::new(Vec::new()),
            commit_caches: AtomicBool::new(false),
            identity: None,
        };
        bpe.seed = bpe.single_token_pieces();
        bpe.token_filter = TokenFilter::new(&bpe.seed.iter().map(|s| s.0).collect::<Vec<_>>());
        bpe
    }

    /// The short tokens whose encoding is themselves, by id: all of them when a piece that is a
    /// token encodes to it (tiktoken, `ignore_merges`), else those that BPE merges back whole
    /// (all of them, for well-formed merges).
    fn single_token_pieces(&self) -> Vec<(u128, u32)> {
        let mut scratch = merge::MergeScratch::default();
        let mut ids = Vec::new();
        let mut seed = Vec::with_capacity(self.vocab.len());
        for id in 0..self.vocab.id_bound() {
            let t = self.vocab.token(id);
            if t.is_empty() || t.len() > MAX_SHORT {
                continue;
            }
            if !self.whole_piece_is_token {
                ids.clear();
                merge::encode_piece(&self.vocab, self.vocab.short_table(), t, &mut ids, &mut scratch);
                if ids != [id] {
                    continue;
                }
            }
            seed.push((table::pack(t), id));
        }
        seed
    }

    /// An OpenAI encoding embedded in the `tiktoken-rs` crate: `gpt2`, `r50k_base`, `p50k_base`,
    /// `p50k_edit`, `cl100k_base`, `o200k_base`, `o200k_harmony`.
    pub fn from_tiktoken(name: &str) -> Result<FastBpe> {
        let enc = tiktoken::embedded(name)?;
        Self::from_ranks(enc.ranks, enc.pattern, enc.specials, format!("tiktoken:{}", enc.name))
    }

    /// tiktoken-style mergeable ranks `(token bytes, rank = id)` with a split pattern and special
    /// tokens, e.g. from a resolved tokenizer spec. `source` names it in [`Tokenizer::identity`].
    pub fn from_ranks(
        ranks: Vec<(Vec<u8>, u32)>,
        pattern: Pattern,
        specials: Vec<(String, u32)>,
        source: impl Into<String>,
    ) -> Result<FastBpe> {
        let source = source.into();
        let vocab =
            Vocab::new(ranks, Merges::Ranks).map_err(|e| Error::invalid(format!("tokenizer {source}: {}", e.0)))?;
        Ok(Self::build(vocab, true, pattern, specials, source))
    }

    /// A `.tiktoken` file (`base64(token) rank` lines) with the split `pattern` and the special
    /// tokens `specials` (e.g. `[("<|endoftext|>", 100257)]`; none are implied).
    pub fn from_tiktoken_file(path: &Path, pattern: Pattern, specials: Vec<(String, u32)>) -> Result<FastBpe> {
        let contents = std::fs::read(path).with_path(path)?;
        let ranks = tiktoken::parse(&contents, path)?;
        let vocab =
            Vocab::new(ranks, Merges::Ranks).map_err(|e| Error::Format { path: path.to_path_buf(), msg: e.0 })?;
        Ok(Self::build(vocab, true, pattern, specials, format!("tiktoken-file:{}", path.display())))
    }

    /// A Hugging Face `tokenizer.json` (its text). [`Unsupported`] says why a file needs the
    /// `tokenizers` crate instead (other models, normalizers, pre-tokenizers or patterns).
    pub fn from_hf_json(json: &str) -> std::result::Result<FastBpe, Unsupported> {
        let hf = hf::parse(json)?;
        let vocab = equiv::list_as_ranks(Vocab::new(hf.tokens, hf.merges).map_err(|e| Unsupported(e.0))?);
        Ok(Self::build(vocab, hf.ignore_merges, hf.pattern, hf.specials, "hf-json".into()))
    }

    /// Match the special tokens in the text (tiktoken `allowed_special="all"`, `tokenizers`'
    /// added tokens) instead of encoding them as ordinary text.
    pub fn with_special_tokens_in_text(mut self, on: bool) -> FastBpe {
        self.split_specials = on;
        self
    }

    /// Override the end-of-document id.
    pub fn with_eod(mut self, eod: Option<u32>) -> FastBpe {
        self.eod = eod;
        self
    }

    /// Name the source in [`Tokenizer::identity`] (e.g. the spec the user gave).
    pub fn with_source(mut self, source: impl Into<String>) -> FastBpe {
        self.source = source.into();
        self
    }

    /// Report `identity` (with `"encoder": "fast_bpe"` added) from [`Tokenizer::identity`]: the
    /// identity of the tokenizer this encoder stands in for, whose ids it reproduces.
    pub fn with_identity(mut self, identity: serde_json::Value) -> FastBpe {
        self.identity = Some(identity);
        self
    }

    /// Set the caches' budget (drops the caches built so far).
    pub fn with_cache(mut self, cache: CacheConfig) -> FastBpe {
        self.cache = cache;
        self.shared = OnceLock::new();
        self.states = Mutex::new(Vec::new());
        self
    }

    pub fn pattern(&self) -> Pattern {
        self.pattern
    }

    /// The special tokens (text, id).
    pub fn special_tokens(&self) -> &[(String, u32)] {
        self.specials.tokens()
    }

    /// The id of a special token.
    pub fn special_token(&self, text: &str) -> Option<u32> {
        self.specials.id(text)
    }

    /// The id of a token given as a `tokenizer.json` string (a special token's text, or a
    /// vocabulary entry in GPT-2's byte-to-character spelling).
    pub fn hf_token_id(&self, token: &str) -> Option<u32> {
        self.specials.id(token).or_else(|| hf::decode_token(token).and_then(|b| self.vocab.id_of(&b)))
    }

    /// The bytes of token `id` (empty for special or unused ids).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.vocab.token(id)
    }

    /// Every BPE token as `(id, bytes)`, by id (special tokens are not included).
    pub fn tokens(&self) -> impl Iterator<Item = (u32, &[u8])> {
        (0..self.vocab.id_bound()).map(|id| (id, self.vocab.token(id))).filter(|t| !t.1.is_empty())
    }

    /// Cache counters summed over the pooled caches.
    pub fn cache_stats(&self) -> Stats {
        let states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        states.iter().fold(Stats::default(), |a, s| Stats {
            hits: a.hits + s.stats.hits,
            misses: a.misses + s.stats.misses,
            wipes: a.wipes + s.stats.wipes,
        })
    }

    /// The pieces `text` splits into (for tests and debugging).
    pub fn split<'a>(&self, text: &'a str) -> Vec<&'a str> {
        self.pattern.split(text)
    }

    /// Append the ids of `text` to `out`.
    pub fn encode_into(&self, text: &str, out: &mut Vec<u32>) {
        let mut state = self.take_state();
        if self.split_specials && !self.specials.is_empty() {
            let mut pos = 0;
            while let Some((a, b, id)) = self.specials.find(text, pos) {
                self.encode_ordinary(&text[pos..a], out, &mut state);
                out.push(id);
                pos = b;
            }
            self.encode_ordinary(&text[pos..], out, &mut state);
        } else {
            self.encode_ordinary(text, out, &mut state);
        }
        self.give_state(state);
    }

    /// The ids of `text`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        self.encode_into(text, &mut out);
        out
    }

    /// A cache for this call: the one this thread used last if it is free. A thread keeps its
    /// own caches (long pieces, and the short ones the shared table has no room for: warm in its
    /// core's caches, and learned from its own stream of text) rather than swapping them with
    /// another thread at every document.
    fn take_state(&self) -> State {
        let me = std::thread::current().id();
        let pooled = {
            let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
            match states.iter().rposition(|s| s.owner == Some(me)) {
                Some(i) => Some(states.swap_remove(i)),
                None => states.pop(),
            }
        };
        let mut state = pooled.unwrap_or_else(|| {
            let mut state = State::new(self.cache, Arc::clone(self.shared_table()));
            if self.commit_caches.load(Ordering::Relaxed) {
                state.commit();
            }
            state
        });
        state.owner = Some(me);
        state
    }

    /// The shared table, seeded with the vocabulary on first use.
    fn shared_table(&self) -> &Arc<SharedTable> {
        self.shared.get_or_init(|| {
            let table = cache::seeded_table(&self.cache, &self.seed);
            if self.commit_caches.load(Ordering::Relaxed) {
                table.commit();
            }
            Arc::new(table)
        })
    }

    /// From now on, every cache is allocated whole (see [`Tokenizer::prepare_for_long_job`]),
    /// including those created so far.
    pub fn commit_caches(&self) {
        self.commit_caches.store(true, Ordering::Relaxed);
        // Made now if it was not: a table being made meanwhile (and that read the flag unset) is
        // waited for, then committed.
        self.shared_table().commit();
        for state in self.states.lock().unwrap_or_else(|e| e.into_inner()).iter_mut() {
            state.commit();
        }
    }

    fn give_state(&self, state: State) {
        self.states.lock().unwrap_or_else(|e| e.into_inner()).push(state);
    }

    fn encode_ordinary(&self, text: &str, out: &mut Vec<u32>, state: &mut State) {
        #[cfg(target_arch = "x86_64")]
        if cpu::has_x86_64_v3() {
            // SAFETY: the CPU has the features `encode_ordinary_v3` is compiled for.
            return unsafe { self.encode_ordinary_v3(text, out, state) };
        }
        self.encode_ordinary_any(text, out, state);
    }

    /// [`FastBpe::encode_ordinary`] compiled for x86-64-v3: the scanners' variable shifts and bit
    /// searches become single instructions (BMI1/2, LZCNT) and the class masks of a window are
    /// computed inline instead of through a call per window.
    ///
    /// # Safety
    /// The CPU must have AVX2, BMI1, BMI2, LZCNT and POPCNT.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    unsafe fn encode_ordinary_v3(&self, text: &str, out: &mut Vec<u32>, state: &mut State) {
        self.encode_ordinary_any(text, out, state);
    }

    /// The encoding loop itself, inlined into each compiled variant.
    #[inline(always)]
    fn encode_ordinary_any(&self, text: &str, out: &mut Vec<u32>, state: &mut State) {
        match self.pattern {
            Pattern::Gpt2 => self.encode_with(WindowCursor::new(pretok::Gpt2), text, out, state),
            Pattern::Cl100k => {
                self.encode_with(WindowCursor::new(pretok::Cl100k { trailing_run_whole: true }), text, out, state)
            }
            Pattern::Cl100kClassic => {
                self.encode_with(WindowCursor::new(pretok::Cl100k { trailing_run_whole: false }), text, out, state)
            }
            Pattern::O200k => self.encode_with(WindowCursor::new(pretok::O200k), text, out, state),
        }
    }

    #[inline(always)]
    fn encode_with<C: Cursor>(&self, mut scanner: C, text: &str, out: &mut Vec<u32>, state: &mut State) {
        // Pieces are found a batch ahead of their lookups, and the home slot of each is
        // prefetched when it is found: the lookups of a batch then overlap their cache misses
        // instead of waiting for each in turn. Most pieces take a few nanoseconds once their line
        // arrives, so a batch must be long for a prefetch to land before its use.
        const BATCH: usize = 64;
        let t = text.as_bytes();
        let mut ends = [0usize; BATCH];
        let mut keys = [0u128; BATCH];
        let mut hashes = [0u64; BATCH];
        let mut pos = 0;
        // Short pieces found in the caches, counted as those that were not (rare) rather than
        // one by one.
        let mut hits = 0;
        let mut staged = Staged::new(out);
        while pos < t.len() {
            let n = scanner.fill(t, pos, &mut ends);
            let mut p = pos;
            for (i, &e) in ends[..n].iter().enumerate() {
                let len = e - p;
                if len <= MAX_SHORT {
                    let key = pack_at(t, p, len);
                    let h = table::hash(key);
                    state.prefetch_short(h);
                    (keys[i], hashes[i]) = (key, h);
                } else {
                    let h = cache::hash_bytes(&t[p..e]);
                    state.long.prefetch(h);
                    (keys[i], hashes[i]) = (0, h);
                }
                p = e;
            }
            let mut not_hits = 0;
            for i in 0..n {
                let (end, key, h) = (ends[i], keys[i], hashes[i]);
                if key == 0 {
                    self.encode_long(&t[pos..end], h, staged.vec(), state);
                    not_hits += 1;
                } else if !state.get_short(key, h, &mut staged) {
                    self.encode_short_miss(&t[pos..end], key, staged.vec(), state);
                    not_hits += 1;
                }
                pos = end;
            }
            hits += (n - not_hits) as u64;
        }
        staged.vec();
        state.stats.hits += hits;
    }

    /// The ranks of short tokens for merging: the shared table, which is seeded with all of them
    /// when ranks are used (tiktoken vocabularies), behind the filter of the seed.
    fn ranks<'a>(&'a self, table: &'a SharedTable) -> Filtered<'a, SharedTable> {
        Filtered { filter: &self.token_filter, ranks: table }
    }

    /// Merge a short piece the cache does not know, and remember it.
    #[inline(never)]
    fn encode_short_miss(&self, piece: &[u8], key: u128, out: &mut Vec<u32>, state: &mut State) {
        state.stats.misses += 1;
        let start = out.len();
        merge::encode_piece(&self.vocab, &self.ranks(&state.shared), piece, out, &mut state.merge);
        state.put_short(key, &out[start..]);
    }

    #[inline(never)]
    fn encode_long(&self, piece: &[u8], h: u64, out: &mut Vec<u32>, state: &mut State) {
        if let Some(ids) = state.long.get(piece, h) {
            state.stats.hits += 1;
            out.extend_from_slice(ids);
            return;
        }
        state.stats.misses += 1;
        let start = out.len();
        match self.vocab.id_of(piece).filter(|_| self.whole_piece_is_token) {
            Some(id) => out.push(id),
            None => merge::encode_piece(&self.vocab, &self.ranks(&state.shared), piece, out, &mut state.merge),
        }
        state.put_long(piece, h, &out[start..]);
    }
}

impl Tokenizer for FastBpe {
    fn encode(&self, text: &str, out: &mut Vec<u32>) -> std::result::Result<(), String> {
        self.encode_into(text, out);
        Ok(())
    }

    fn eod_id(&self) -> Option<u32> {
        self.eod
    }

    fn vocab_size(&self) -> u64 {
        self.vocab_size
    }

    fn prepare_for_long_job(&self) {
        self.commit_caches();
    }

    fn identity(&self) -> serde_json::Value {
        if let Some(mut id) = self.identity.clone() {
            if let Some(obj) = id.as_object_mut() {
                obj.insert("encoder".into(), "fast_bpe".into());
            }
            return id;
        }
        serde_json::json!({
            "class": "FastBpe",
            "source": self.source,
            "pattern": self.pattern.name(),
            "vocab_size": self.vocab_size,
            "vocab_digest": format!("{:016x}", self.vocab.digest()),
            "whole_piece_is_token": self.whole_piece_is_token,
            "special_tokens_in_text": self.split_specials,
            "eod": self.eod,
        })
    }
}

#[cfg(test)]
mod tests;
