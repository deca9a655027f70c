//! A fast, exact byte-level BPE encoder: ids identical to tiktoken's `encode_ordinary` for the
//! OpenAI families and rank files, and to Hugging Face `tokenizers` for every `tokenizer.json`
//! whose pipeline is made of components it reproduces (see [`hf`]).
//!
//! A text is cut at its added tokens, each stretch between them normalized (NFC, ...) and split
//! into pieces. Per piece: a pre-tokenizer ([`pretok`]: a hand-written scanner for the OpenAI
//! families' patterns, a compiled automaton for any other split regex) finds the piece, one probe of a
//! bounded table that the threads share answers it (the table is seeded with the vocabulary, so it
//! knows every one-token piece, and learns repeated multi-token ones), and only the rest run byte-pair merging
//! ([`merge`]). Nothing allocates per piece once the caches are warm.
//!
//! Special-token strings such as `<|endoftext|>` are ordinary text unless
//! [`FastBpe::with_special_tokens_in_text`] turns them on.

mod added;
mod cache;
#[cfg(target_arch = "x86_64")]
mod cpu;
pub mod encodings;
mod equiv;
mod error;
mod filter;
mod hf;
mod merge;
mod normalize;
mod onig;
mod pairs;
mod pattern;
mod pretok;
mod sentencepiece;
mod shared;
mod stored;
mod table;
pub mod tekken;
mod unicode;
mod vocab;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub use cache::{CacheConfig, Stats};
pub use error::{Error, Result};
pub use hf::Unsupported;
pub use onig::for_fancy_regex;
pub use pattern::Pattern;
use pattern::Scanners;
pub use vocab::TokenList;

use added::{AddedSet, AddedToken, Part};
use cache::State;
use filter::{Filtered, TokenFilter};
use normalize::Normalizer;
use pretok::split::{MarkCursor, Prefix, RegexCursor, SafeCursor, SafeCuts, Splitter};
use pretok::{Cursor, WindowCursor};
use shared::SharedTable;
use table::{pack_at, Ids, Staged, MAX_SHORT};
use vocab::{Merges, Units, Vocab};

use stored::Store;

/// The fast byte-level BPE encoder. Shared by all threads (`Sync`); each thread that encodes
/// borrows a cache from an internal pool, so the number of caches is the peak concurrency.
pub struct FastBpe {
    vocab: Vocab,
    /// The short pieces whose whole encoding is one id (tokens by id, then, with raw spaces,
    /// their written forms), with the id's merge priority hint ([`Vocab::prio_hint`]): the
    /// shared table starts with them.
    seed: Vec<(u128, u32, u64)>,
    /// The keys of the seed's tokens: for a vocabulary merging by ranks, every short token (see
    /// [`filter`]).
    token_filter: TokenFilter,
    /// A piece that is a token encodes to it without merging (tiktoken, `ignore_merges`).
    whole_piece_is_token: bool,
    normalizer: Normalizer,
    prefix: Prefix,
    splitter: Splitter,
    /// Tokens matched in the raw text (special tokens; added tokens with `normalized: false`).
    added: AddedSet,
    /// Added tokens matched in the normalized text.
    added_normalized: AddedSet,
    /// Whether special tokens written in the text are matched (else they are text; added tokens
    /// that are not special are always matched, as `tokenizers` matches them).
    split_specials: bool,
    /// SentencePiece's normalizer (`▁` before the text and for every space) is left undone: the
    /// text is cut where the normalized text would be ([`SafeCuts::new`]), the caches
    /// are keyed by the pieces as written, and only a piece that is merged is normalized. A
    /// piece's encoding is a function of its normalized text, which normalizing a normalized
    /// piece leaves alone, so the first piece is looked up normalized and shares the caches.
    raw_spaces: bool,
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
            .field("pre_tokenizer", &self.splitter.describe())
            .field("vocab_size", &self.vocab_size)
            .finish_non_exhaustive()
    }
}

impl FastBpe {
    fn build(vocab: Vocab, whole_piece_is_token: bool, splitter: Splitter, added: AddedSet, source: String) -> FastBpe {
        let eod = added.id("<|endoftext|>").or_else(|| added.id("<|end_of_text|>"));
        let max_id = vocab.id_bound().max(added.tokens().iter().map(|s| s.id + 1).max().unwrap_or(0));
        let mut bpe = FastBpe {
            vocab,
            seed: Vec::new(),
            token_filter: TokenFilter::new(&[]),
            whole_piece_is_token,
            normalizer: Normalizer::default(),
            prefix: Prefix::None,
            splitter,
            added,
            added_normalized: AddedSet::plain(Vec::new()),
            split_specials: false,
            raw_spaces: false,
            eod,
            vocab_size: u64::from(max_id),
            source,
            cache: CacheConfig::for_threads(std::thread::available_parallelism().map_or(1, |n| n.get())),
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
    /// token encodes to it (tiktoken, `ignore_merges`) or a merge list was proved to merge every
    /// token back whole, else those that BPE merges back whole.
    fn single_token_pieces(&self) -> Vec<(u128, u32, u64)> {
        let mut scratch = merge::MergeScratch::default();
        let mut ids = Vec::new();
        let mut seed = Vec::with_capacity(self.vocab.len());
        for id in 0..self.vocab.id_bound() {
            let t = self.vocab.token(id);
            if t.is_empty() || t.len() > MAX_SHORT {
                continue;
            }
            if !self.whole_piece_is_token && !self.vocab.proven_whole(id) {
                ids.clear();
                merge::encode_piece(&self.vocab, self.vocab.short_table(), t, &mut ids, &mut scratch);
                if ids != [id] {
                    continue;
                }
            }
            seed.push((table::pack(t), id, self.vocab.prio_hint(id)));
        }
        seed
    }

    /// An OpenAI encoding embedded in the binary: `gpt2`, `r50k_base`, `p50k_base`,
    /// `p50k_edit`, `cl100k_base`, `o200k_base`, `o200k_harmony`.
    pub fn from_tiktoken(name: &str) -> Result<FastBpe> {
        let (enc, table) = encodings::embedded(name)?;
        Self::from_ranks(table.tokens.clone(), enc.pattern, enc.specials(), format!("tiktoken:{name}"))
    }

    /// tiktoken-style mergeable ranks `(token bytes, rank = id)` with a split pattern and special
    /// tokens, e.g. from a resolved tokenizer spec. `source` names it in [`FastBpe::identity`].
    pub fn from_ranks(
        ranks: impl Into<TokenList>,
        pattern: Pattern,
        specials: Vec<(String, u32)>,
        source: impl Into<String>,
    ) -> Result<FastBpe> {
        let source = source.into();
        let vocab =
            Vocab::new(ranks, Merges::Ranks).map_err(|e| Error::invalid(format!("tokenizer {source}: {}", e.0)))?;
        Ok(Self::build(vocab, true, Splitter::Scanner(pattern), plain_specials(specials), source))
    }

    /// A Hugging Face `tokenizer.json` (its text). [`Unsupported`] says why a file needs the
    /// `tokenizers` crate instead: the first component of its pipeline the encoder does not
    /// reproduce.
    pub fn from_hf_json(json: &str) -> std::result::Result<FastBpe, Unsupported> {
        Ok(Self::from_hf(hf::prepare(json)?))
    }

    /// [`FastBpe::from_hf_json`] for a file whose SHA-256 is `sha256` (lowercase hex): the
    /// vocabulary an earlier load prepared and stored in `store_dir` is read instead of the file
    /// (`json` is then not called: a `tokenizer.json` is megabytes), and one prepared now is stored
    /// there (see the `stored` module). The error is `json`'s.
    pub fn from_hf_json_stored<'a, E>(
        json: impl FnOnce() -> std::result::Result<&'a str, E>,
        sha256: &str,
        store_dir: &Path,
    ) -> std::result::Result<std::result::Result<FastBpe, Unsupported>, E> {
        let store = Store::in_dir(store_dir.to_path_buf(), sha256, "hf-json");
        Ok(hf::load(json, store)?.map(Self::from_hf))
    }

    /// The encoder of a prepared `tokenizer.json` (see [`hf::load`]).
    fn from_hf(hf: hf::HfBpe) -> FastBpe {
        let (vocab, mut hf) = (hf.vocab, hf.pipeline);
        let mut raw_spaces = false;
        if let (Splitter::Whole, Units::Chars(_)) = (&hf.splitter, &vocab.units) {
            let mark = word_mark(&hf.normalizer, hf.prefix);
            let fuse = matches!(vocab.units, Units::Chars(vocab::Fallback::Unk { fuse: true, .. }));
            raw_spaces = hf.prefix == Prefix::None && is_sentencepiece_escape(&hf.normalizer);
            let cuts = SafeCuts::new(text_tokens(&vocab), mark, fuse, raw_spaces);
            raw_spaces &= cuts.spaces();
            hf.splitter = Splitter::SafeCuts(Arc::new(cuts));
        }
        let (raw, normalized): (Vec<_>, Vec<_>) = hf.added.into_iter().partition(|(t, _)| !t.normalized);
        let (raw_tokens, raw_patterns) = raw.into_iter().unzip();
        let (norm_tokens, norm_patterns) = normalized.into_iter().unzip();
        let mut bpe = Self::build(
            vocab,
            hf.ignore_merges,
            hf.splitter,
            AddedSet::new(raw_tokens, raw_patterns),
            "hf-json".into(),
        );
        bpe.added_normalized = AddedSet::new(norm_tokens, norm_patterns);
        let max_id = bpe.added_normalized.tokens().iter().map(|t| u64::from(t.id) + 1).max().unwrap_or(0);
        bpe.vocab_size = bpe.vocab_size.max(max_id).max(u64::from(hf.vocab_bound));
        bpe.normalizer = hf.normalizer;
        bpe.prefix = hf.prefix;
        bpe.raw_spaces = raw_spaces && bpe.added_normalized.is_empty();
        bpe.seed_written_spaces();
        bpe
    }

    /// A SentencePiece `.model` file's bytes (a BPE model): ids of the `sentencepiece` package's
    /// `encode`. [`Unsupported`] names what it does not read (unigram models, other normalizers).
    pub fn from_sentencepiece(bytes: &[u8], source: impl Into<String>) -> std::result::Result<FastBpe, Unsupported> {
        Ok(Self::from_sp(sentencepiece::load(bytes, None)?, source.into()))
    }

    /// [`FastBpe::from_sentencepiece`] for a file whose SHA-256 is `sha256`, with the prepared
    /// model stored in `store_dir` (see [`FastBpe::from_hf_json_stored`]).
    pub fn from_sentencepiece_stored(
        bytes: &[u8],
        source: impl Into<String>,
        sha256: &str,
        store_dir: &Path,
    ) -> std::result::Result<FastBpe, Unsupported> {
        let store = Store::in_dir(store_dir.to_path_buf(), sha256, "sp-model");
        Ok(Self::from_sp(sentencepiece::load(bytes, store)?, source.into()))
    }

    /// The encoder of a prepared SentencePiece model (see [`sentencepiece::load`]).
    fn from_sp(sp: sentencepiece::SpModel, source: String) -> FastBpe {
        let vocab = sp.vocab;
        let fuse = matches!(vocab.units, Units::Chars(vocab::Fallback::Unk { fuse: true, .. }));
        let raw_spaces = is_sentencepiece_escape(&sp.normalizer) && sp.user_defined.is_empty();
        let cuts = SafeCuts::new(text_tokens(&vocab), Some('▁'), fuse, raw_spaces);
        let raw_spaces = raw_spaces && cuts.spaces();
        let mut bpe =
            Self::build(vocab, false, Splitter::SafeCuts(Arc::new(cuts)), AddedSet::plain(Vec::new()), source);
        bpe.normalizer = sp.normalizer;
        bpe.raw_spaces = raw_spaces;
        bpe.added_normalized = AddedSet::plain(
            sp.user_defined
                .into_iter()
                .map(|(text, id)| AddedToken { normalized: true, special: false, ..AddedToken::plain(text, id) })
                .collect(),
        );
        bpe.eod = sp.eos;
        bpe.vocab_size = bpe.vocab_size.max(u64::from(sp.vocab_size));
        bpe.seed_written_spaces();
        bpe
    }

    /// With raw spaces the caches are keyed by pieces as written (` the`) and the seed by tokens
    /// (`▁the`), so every word would miss once. Seed the written form of the tokens too: when no
    /// token holds a space, a written form normalizes to its token, which a proven vocabulary
    /// merges back whole. (The token filter keeps only the tokens: merging asks for nothing else.)
    fn seed_written_spaces(&mut self) {
        let vocab = &self.vocab;
        if !self.raw_spaces || !vocab.proven_ranks() || (0..vocab.id_bound()).any(|id| vocab.token(id).contains(&b' '))
        {
            return;
        }
        for id in (0..vocab.id_bound()).filter(|&id| vocab.proven_whole(id)) {
            // Raw spaces come with a vocabulary of characters: its tokens are text.
            let Ok(token) = std::str::from_utf8(vocab.token(id)) else { continue };
            if token.contains('▁') {
                let written = token.replace('▁', " ");
                if written.len() <= MAX_SHORT {
                    self.seed.push((table::pack(written.as_bytes()), id, vocab.prio_hint(id)));
                }
            }
        }
    }

    /// Whether `bytes` look like a SentencePiece model (rather than a text file, such as a
    /// tiktoken rank file, which Llama 3 also calls `tokenizer.model`).
    pub fn is_sentencepiece(bytes: &[u8]) -> bool {
        sentencepiece::looks_like_model(bytes)
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

    /// Report `identity` (with `"encoder": "fast_bpe"` added) from [`FastBpe::identity`]: the
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

    /// The split pattern, when it has a hand-written scanner.
    pub fn pattern(&self) -> Option<Pattern> {
        match self.splitter {
            Splitter::Scanner(p) => Some(p),
            _ => None,
        }
    }

    /// How text is split into pieces: a pattern's name (`cl100k`), `regex`, ...
    pub fn pre_tokenizer(&self) -> String {
        self.splitter.describe()
    }

    /// The id of a special or added token.
    pub fn special_token(&self, text: &str) -> Option<u32> {
        self.added.id(text).or_else(|| self.added_normalized.id(text))
    }

    /// The id of a token given as a `tokenizer.json` string (an added token's text, or a
    /// vocabulary entry in GPT-2's byte-to-character spelling).
    pub fn hf_token_id(&self, token: &str) -> Option<u32> {
        self.special_token(token).or_else(|| hf::decode_token(token).and_then(|b| self.vocab.id_of(&b)))
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

    /// Append the ids of `text` to `out`.
    #[inline]
    pub fn encode_into(&self, text: &str, out: &mut Vec<u32>) {
        let mut state = self.take_state();
        self.encode_with_state(text, out, &mut state);
        self.give_state(state);
    }

    /// [`FastBpe::encode_into`] with a cache the caller took.
    fn encode_with_state(&self, text: &str, out: &mut Vec<u32>, state: &mut State) {
        // Special tokens left as text need no search when every added token is special.
        let skip = !self.split_specials;
        let nothing_to_match = self.added.is_empty() || skip && self.added.all_special();
        if !nothing_to_match {
            self.added.split(text, skip, |part| match part {
                Part::Token(id) => out.push(id),
                Part::Text(a, b) => self.encode_stretch(&text[a..b], a == 0, out, state),
            });
        } else {
            self.encode_stretch(text, true, out, state);
        }
    }

    /// A stretch of text between added tokens: normalized, cut at the added tokens matched in
    /// normalized text, prefixed as the pre-tokenizer says, split and merged. `first`: it
    /// starts the text.
    fn encode_stretch(&self, text: &str, first: bool, out: &mut Vec<u32>, state: &mut State) {
        if self.normalizer.is_identity() && self.added_normalized.is_empty() && self.prefix == Prefix::None {
            return self.encode_ordinary(text, out, state);
        }
        if self.raw_spaces {
            return self.encode_raw_spaces(text, out, state);
        }
        let normalized = self.normalizer.apply(text);
        if self.added_normalized.is_empty() {
            return self.encode_prefixed(&normalized, first, out, state);
        }
        self.added_normalized.split(&normalized, !self.split_specials, |part| match part {
            Part::Token(id) => out.push(id),
            Part::Text(a, b) => self.encode_prefixed(&normalized[a..b], first && a == 0, out, state),
        });
    }

    /// [`FastBpe::raw_spaces`]: the first piece normalized (`▁` before it, for its spaces), the
    /// rest as written.
    fn encode_raw_spaces(&self, text: &str, out: &mut Vec<u32>, state: &mut State) {
        let Splitter::SafeCuts(cuts) = &self.splitter else { unreachable!("raw spaces cut by SafeCuts") };
        if text.is_empty() {
            return;
        }
        let end = SafeCursor::new(cuts).next(text.as_bytes(), 0);
        let first = self.normalizer.apply(&text[..end]);
        self.encode_with(WholeCursor, &first, out, state);
        self.encode_ordinary(&text[end..], out, state);
    }

    /// A piece's text as it is merged: with `raw_spaces`, normalized (a space is `▁`).
    #[inline]
    fn merged_text<'a>(&self, piece: &'a [u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
        if !self.raw_spaces || !piece.contains(&b' ') {
            return piece;
        }
        scratch.clear();
        for &b in piece {
            if b == b' ' {
                scratch.extend_from_slice("▁".as_bytes());
            } else {
                scratch.push(b);
            }
        }
        scratch
    }

    fn encode_prefixed(&self, text: &str, first: bool, out: &mut Vec<u32>, state: &mut State) {
        if text.is_empty() {
            return;
        }
        let prefixed = self.prefix.apply(text, first);
        self.encode_ordinary(&prefixed, out, state);
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

    /// From now on, every cache is allocated whole (for long jobs, whose memory is then the same
    /// from their first text to their last), including those created so far.
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
        match &self.splitter {
            Splitter::Scanner(p) => match p.scanner() {
                Scanners::Gpt2(s) => self.encode_with(WindowCursor::new(s), text, out, state),
                Scanners::Cl100k(s) => self.encode_with(WindowCursor::new(s), text, out, state),
                Scanners::O200k(s) => self.encode_with(WindowCursor::new(s), text, out, state),
            },
            Splitter::Regex(a) => self.encode_with(RegexCursor(a), text, out, state),
            Splitter::SafeCuts(cuts) => self.encode_with(SafeCursor::new(cuts), text, out, state),
            Splitter::Marks(mark) => self.encode_with(MarkCursor::every(*mark), text, out, state),
            Splitter::Whole => self.encode_with(WholeCursor, text, out, state),
            Splitter::Steps(_) => self.encode_steps(text, out, state),
        }
    }

    /// A split made of several steps: the pieces are found first, then each run of adjacent
    /// ones is encoded (a step may remove text between pieces).
    #[cold]
    fn encode_steps(&self, text: &str, out: &mut Vec<u32>, state: &mut State) {
        let mut spans = std::mem::take(&mut state.spans);
        self.splitter.spans(text, &mut spans);
        let mut i = 0;
        while i < spans.len() {
            let start = spans[i].0;
            let mut j = i;
            while j + 1 < spans.len() && spans[j + 1].0 == spans[j].1 {
                j += 1;
            }
            let end = spans[j].1;
            let ends = spans[i..=j].iter().map(|s| s.1 - start);
            self.encode_with(Replay(ends), &text[start..end], out, state);
            i = j + 1;
        }
        state.spans = spans;
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
            // Bit `i`: piece `i` is long.
            let mut long = 0u64;
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
                    long |= 1 << i;
                }
                p = e;
            }
            let mut not_hits = 0;
            for i in 0..n {
                let (end, key, h) = (ends[i], keys[i], hashes[i]);
                if key == 0 {
                    // The next long piece's entry is asked for now, its slot having arrived: a
                    // long hit waits for its slot and then its entry, and long pieces come in
                    // runs (indentation, words of non-Latin scripts).
                    long &= long - 1;
                    if long != 0 {
                        state.long.prefetch_entry(hashes[long.trailing_zeros() as usize]);
                    }
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
        drop(staged);
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
        let mut scratch = std::mem::take(&mut state.text);
        let text = self.merged_text(piece, &mut scratch);
        merge::encode_piece(&self.vocab, &self.ranks(&state.shared), text, out, &mut state.merge);
        state.text = scratch;
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
            None => {
                let mut scratch = std::mem::take(&mut state.text);
                let text = self.merged_text(piece, &mut scratch);
                merge::encode_piece(&self.vocab, &self.ranks(&state.shared), text, out, &mut state.merge);
                state.text = scratch;
            }
        }
        state.put_long(piece, h, &out[start..]);
    }
}

/// The character a SentencePiece-style pipeline writes for a space (`▁`): what `Replace(" ",
/// mark)` or `Metaspace` puts in.
fn word_mark(normalizer: &Normalizer, prefix: Prefix) -> Option<char> {
    let replaced = normalizer.steps().iter().find_map(|s| match s {
        normalize::Step::Replace { from, to } if from == " " => unicode::single_char(to),
        _ => None,
    });
    replaced.or(match prefix {
        Prefix::Metaspace { mark, .. } => Some(mark),
        _ => None,
    })
}

/// Whether a normalizer is exactly SentencePiece's escaping: `▁` before the text, and for every
/// space.
fn is_sentencepiece_escape(normalizer: &Normalizer) -> bool {
    matches!(
        normalizer.steps(),
        [normalize::Step::Prepend(p), normalize::Step::Replace { from, to }] if p == "▁" && from == " " && to == "▁"
    )
}

/// The text of every token of a vocabulary of characters.
fn text_tokens(vocab: &Vocab) -> impl Iterator<Item = &str> {
    (0..vocab.id_bound()).filter_map(|id| std::str::from_utf8(vocab.token(id)).ok())
}

/// The special tokens of a rank table, matched as they are written.
fn plain_specials(specials: Vec<(String, u32)>) -> AddedSet {
    AddedSet::plain(specials.into_iter().map(|(t, id)| AddedToken::plain(t, id)).collect())
}

/// One piece: the whole text.
struct WholeCursor;

impl Cursor for WholeCursor {
    #[inline(always)]
    fn next(&mut self, t: &[u8], _pos: usize) -> usize {
        t.len()
    }
}

/// Piece ends found beforehand.
struct Replay<I>(I);

impl<I: Iterator<Item = usize>> Cursor for Replay<I> {
    #[inline(always)]
    fn next(&mut self, t: &[u8], _pos: usize) -> usize {
        self.0.next().unwrap_or(t.len())
    }
}

impl FastBpe {
    /// Append the ids of each of `texts` to `out` and, after each, `out.len()` to `ends`, with
    /// one cache borrowed for them all.
    pub fn encode_each(&self, texts: &[&str], out: &mut Vec<u32>, ends: &mut Vec<u64>) {
        let mut state = self.take_state();
        for text in texts {
            self.encode_with_state(text, out, &mut state);
            ends.push(out.len() as u64);
        }
        self.give_state(state);
    }

    /// The end-of-document id, if the vocabulary has one (or one was set).
    #[inline]
    pub fn eod_id(&self) -> Option<u32> {
        self.eod
    }

    /// Number of ids: above every token, special or not.
    #[inline]
    pub fn vocab_size(&self) -> u64 {
        self.vocab_size
    }

    /// A JSON object identifying the encoder: what its ids depend on.
    pub fn identity(&self) -> serde_json::Value {
        if let Some(mut id) = self.identity.clone() {
            if let Some(obj) = id.as_object_mut() {
                obj.insert("encoder".into(), "fast_bpe".into());
            }
            return id;
        }
        serde_json::json!({
            "class": "FastBpe",
            "source": self.source,
            "pattern": self.splitter.describe(),
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
