//! The pretoken → ids tables of the encoding threads, with a memory cap.
//!
//! Short pieces (≤ 15 bytes) are looked up in one packed-key [`SharedTable`], shared by all the
//! threads of an encoder, that answers both kinds of piece: it is seeded with every vocabulary
//! token that encodes to itself, and it learns the encodings of the multi-token pieces met so
//! far. One probe, usually one cache line, answers a piece either way. Once three quarters of its
//! slots are taken it learns no more, and each thread keeps what it merges next in its own
//! smaller [`SlotTable`], wiped when full: the memory stays fixed, the frequent pieces (met
//! first) stay known, and no per-entry bookkeeping is needed (as LRU would). Longer pieces go to
//! each thread's [`LongCache`], wiped when full.
//!
//! Seeding touches nearly every page of the shared table's slots; its arena and each thread's
//! tables become resident as they fill, up to the budget. For a long job (`State::commit` and
//! `SharedTable::commit`, through `Tokenizer::prepare_for_long_job`) all of it is made resident
//! at the start: the footprint is then the same after 1 MB of text as after 100 GB, so the job's
//! peak RSS does not grow with its input.

use std::sync::Arc;

use super::merge::MergeScratch;
use super::shared::{Reserved, SharedTable};
use super::table::{commit_vec, Ids, SlotTable};

/// Memory budget of an encoder's caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Slots of the shared short-piece table (32 bytes each). Raised to twice the seed (the
    /// vocabulary's short tokens, e.g. 2^19 slots for o200k) when smaller.
    pub short_slots: usize,
    /// Ids stored out of line in the shared table, for short pieces of more than three tokens.
    pub short_arena_ids: usize,
    /// Slots of each thread's own short-piece table, which learns what the shared one has no
    /// room for (its arena holds as many ids).
    pub thread_slots: usize,
    /// Bytes of keys and ids each thread holds for long pieces.
    pub long_bytes: usize,
    /// Longest piece (bytes) worth caching.
    pub long_max_piece: usize,
}

impl Default for CacheConfig {
    /// A 36 MiB shared table (32 MiB of slots, a 4 MiB arena), and about 16 MiB per thread (its
    /// own table and the long-piece cache). On a 200 MB corpus of code the shared table learns
    /// every piece; 2^21 slots at half load were no faster, being twice as large for the CPU
    /// caches.
    fn default() -> Self {
        CacheConfig {
            short_slots: 1 << 20,
            short_arena_ids: 1 << 20,
            thread_slots: 1 << 16,
            long_bytes: 6 << 20,
            long_max_piece: 512,
        }
    }
}

/// What one encoder's caches may hold, whatever its number of threads.
const TOTAL_CAP: usize = 768 << 20;

impl CacheConfig {
    /// A config whose total for one thread stays within `bytes` (at least a few KiB; the seed
    /// may need more).
    pub fn with_budget(bytes: usize) -> CacheConfig {
        let bytes = bytes.max(64 << 10);
        // 2/3 to the shared table, the rest split between its arena, the thread's own table and
        // the long cache.
        let slots = (bytes * 2 / 3 / 32).next_power_of_two() / 2;
        let rest = bytes.saturating_sub(slots * 32);
        CacheConfig {
            short_slots: slots.max(16),
            short_arena_ids: rest / 12,
            thread_slots: (slots / 16).max(16),
            long_bytes: rest / 9,
            long_max_piece: 512,
        }
    }

    /// The default, with each thread's part scaled down so that `threads` threads together stay
    /// under about 768 MiB.
    pub fn for_threads(threads: usize) -> CacheConfig {
        let default = CacheConfig::default();
        if default.total(threads) <= TOTAL_CAP {
            return default;
        }
        let share = TOTAL_CAP.saturating_sub(default.shared_bytes()) / threads.max(1);
        CacheConfig {
            thread_slots: ((share / 2 / 36).next_power_of_two() / 2).clamp(16, default.thread_slots),
            long_bytes: (share / 2 / 3).clamp(4 << 10, default.long_bytes),
            ..default
        }
    }

    /// The bytes of the shared table.
    pub fn shared_bytes(&self) -> usize {
        self.short_slots.next_power_of_two() * 32 + self.short_arena_ids.next_power_of_two() * 4
    }

    /// The bytes each thread adds: its own table and arena, and the long cache (its arena,
    /// reserved at the cap, and less than twice as much in slots).
    pub fn thread_bytes(&self) -> usize {
        self.thread_slots.next_power_of_two() * 36 + self.long_bytes * 3
    }

    /// The bytes the caches of `threads` threads hold together.
    pub fn total(&self, threads: usize) -> usize {
        self.shared_bytes() + threads * self.thread_bytes()
    }
}

/// The shared table of `cfg`, seeded with `seed`: short pieces (packed keys) that encode to one
/// id, lowest ids (the most frequent) first, so that they take their home slots, each with its
/// merge priority hint (see [`crate::merge::RankTable`]).
pub(crate) fn seeded_table(cfg: &CacheConfig, seed: &[(u128, u32, u64)]) -> SharedTable {
    // At most half of the slots seeded, so there is always a quarter to learn.
    let table = SharedTable::new(cfg.short_slots.max(seed.len() * 2), cfg.short_arena_ids);
    let mut reserved = Reserved::default();
    // The slots are random lines of a table of tens of megabytes: each is asked for a few
    // inserts ahead, so that their misses overlap.
    const AHEAD: usize = 16;
    for (i, &(key, id, hint)) in seed.iter().enumerate() {
        if let Some(&(next, ..)) = seed.get(i + AHEAD) {
            table.prefetch_hashed(crate::table::hash(next));
        }
        table.insert_tagged(key, id, hint, &mut reserved);
    }
    table.give_back(reserved);
    table
}

/// Everything one encoding thread reuses between calls.
pub(crate) struct State {
    /// The encoder's table, shared by all its threads.
    pub shared: Arc<SharedTable>,
    /// Slots of `shared` reserved for this thread's inserts (given back when dropped).
    reserved: Reserved,
    /// This thread's table for what `shared` has no room for.
    pub own: SlotTable,
    /// Entries of `own` that start a new generation.
    own_limit: usize,
    pub long: LongCache,
    pub merge: MergeScratch,
    cfg: CacheConfig,
    pub stats: Stats,
    /// The thread that used it last.
    pub owner: Option<std::thread::ThreadId>,
    /// Piece spans of a split made of several steps (reused).
    pub spans: Vec<(usize, usize)>,
    /// A piece's text as it is merged, when that differs from the piece (reused).
    pub text: Vec<u8>,
}

/// Counters of one thread's cache.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Pieces answered by the caches (vocabulary tokens included).
    pub hits: u64,
    /// Pieces merged.
    pub misses: u64,
    /// Times a table was full and started over.
    pub wipes: u64,
}

impl Drop for State {
    fn drop(&mut self) {
        self.shared.give_back(std::mem::take(&mut self.reserved));
    }
}

impl State {
    /// A thread's cache over the encoder's `shared` table.
    pub fn new(cfg: CacheConfig, shared: Arc<SharedTable>) -> State {
        let own = SlotTable::with_slots(cfg.thread_slots);
        State {
            own_limit: own.capacity() / 4 * 3,
            own,
            shared,
            reserved: Reserved::default(),
            long: LongCache::new(cfg.long_bytes),
            merge: MergeScratch::default(),
            cfg,
            stats: Stats::default(),
            owner: None,
            spans: Vec::new(),
            text: Vec::new(),
        }
    }

    /// Allocate and touch this thread's budget now (keeping the entries): from here on the
    /// cache neither allocates nor grows. (The shared table is committed by its encoder.)
    pub fn commit(&mut self) {
        self.own.commit(self.cfg.thread_slots);
        self.long.commit();
    }

    /// Prefetch the home slot of the short piece with hash `h`.
    #[inline(always)]
    pub fn prefetch_short(&self, h: u64) {
        self.shared.prefetch_hashed(h);
    }

    /// Append the ids of the short piece `key` (hash `h`) to `out`; false if it is not known.
    /// (The caller counts the hits in [`Stats::hits`].)
    #[inline(always)]
    pub fn get_short(&self, key: u128, h: u64, out: &mut impl Ids) -> bool {
        self.shared.emit_hashed(key, h, out) || (self.own.len() > 0 && self.own.emit_hashed(key, h, out))
    }

    /// Cache `ids` as the encoding of the short piece `key`: in the shared table while it has
    /// room, else in this thread's, which starts over when it is full.
    #[inline]
    pub fn put_short(&mut self, key: u128, ids: &[u32]) {
        if self.shared.insert_reserved(key, ids, &mut self.reserved) {
            return;
        }
        let arena = self.cfg.thread_slots;
        if self.own.len() >= self.own_limit || (ids.len() > 3 && self.own.arena_len() + ids.len() > arena) {
            self.own.clear();
            self.stats.wipes += 1;
        }
        if ids.len() <= 3 || ids.len() <= arena {
            self.own.insert(key, ids);
        }
    }

    /// Cache `ids` as the encoding of the long `piece` (hash `h`, see [`hash_bytes`]).
    #[inline]
    pub fn put_long(&mut self, piece: &[u8], h: u64, ids: &[u32]) {
        if piece.len() <= self.cfg.long_max_piece && self.long.put(piece, h, ids) {
            self.stats.wipes += 1;
        }
    }
}

/// Where a long piece's entry starts in [`LongCache::data`], and its sizes.
#[derive(Clone, Copy)]
struct LongSlot {
    hash: u64,
    at: u32,
    key_len: u32,
    val_len: u32,
}

/// Long piece -> ids, wiped when `cap_bytes` is reached. An entry is the ids followed by the
/// piece's bytes (padded to a whole id), so a hit reads one region: with the keys and the ids
/// in two arenas, a hit waited for two cache misses, one after the other.
pub(crate) struct LongCache {
    slots: Vec<Option<LongSlot>>,
    data: Vec<u32>,
    len: usize,
    cap_bytes: usize,
}

/// The hash [`LongCache`] files `b` under (at least 8 bytes: the last word overlaps the one
/// before it instead of a byte at a time).
#[inline]
pub(crate) fn hash_bytes(b: &[u8]) -> u64 {
    debug_assert!(b.len() >= 8);
    let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let mix = |h: u64, w: u64| (h.rotate_left(23) ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut h: u64 = 0x243f_6a88_85a3_08d3 ^ b.len() as u64;
    let mut i = 0;
    while i + 8 < b.len() {
        h = mix(h, word(i));
        i += 8;
    }
    h = mix(h, word(b.len() - 8));
    h ^ (h >> 31)
}

/// Ids taken by `n` bytes of key.
fn key_words(n: usize) -> usize {
    n.div_ceil(4)
}

/// The bytes of `words`.
fn as_bytes(words: &[u32]) -> &[u8] {
    // SAFETY: initialized memory read as bytes (no alignment needed), covering exactly `words`.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), std::mem::size_of_val(words)) }
}

impl LongCache {
    fn new(cap_bytes: usize) -> LongCache {
        // One slot per ~64 bytes of budget, at most half full.
        let n = (cap_bytes / 32).clamp(16, 1 << 20).next_power_of_two();
        LongCache { slots: vec![None; n], data: Vec::new(), len: 0, cap_bytes }
    }

    /// The arena may take the whole budget, so it is reserved at the cap and never reallocates
    /// again.
    fn commit(&mut self) {
        commit_vec(&mut self.data, self.cap_bytes / 4);
    }

    /// The entry of `slot`: its ids and its key's bytes.
    #[inline(always)]
    fn entry(&self, slot: LongSlot) -> (&[u32], &[u8]) {
        let (at, ids) = (slot.at as usize, slot.val_len as usize);
        let words = &self.data[at..at + ids + key_words(slot.key_len as usize)];
        (&words[..ids], &as_bytes(&words[ids..])[..slot.key_len as usize])
    }

    fn slot_of(&self, h: u64, piece: &[u8]) -> (usize, bool) {
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            match self.slots[i] {
                None => return (i, false),
                Some(s) => {
                    if s.hash == h && self.entry(s).1 == piece {
                        return (i, true);
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Prefetch the home slot of a piece with hash `h` (see [`hash_bytes`]).
    #[inline(always)]
    pub fn prefetch(&self, h: u64) {
        if let Some(slot) = self.slots.get(h as usize & (self.slots.len() - 1)) {
            crate::table::prefetch(slot);
        }
    }

    /// Prefetch the entry of the piece with hash `h` if its home slot, read now, holds it.
    #[inline(always)]
    pub fn prefetch_entry(&self, h: u64) {
        if let Some(Some(s)) = self.slots.get(h as usize & (self.slots.len() - 1)) {
            if s.hash == h {
                if let Some(x) = self.data.get(s.at as usize) {
                    crate::table::prefetch(x);
                }
            }
        }
    }

    /// The ids cached for `piece`, whose [`hash_bytes`] is `h`.
    pub fn get(&self, piece: &[u8], h: u64) -> Option<&[u32]> {
        let (i, found) = self.slot_of(h, piece);
        found.then(|| self.entry(self.slots[i].expect("found")).0)
    }

    /// Insert `piece` (hash `h`); returns whether the cache was wiped to make room.
    fn put(&mut self, piece: &[u8], h: u64, ids: &[u32]) -> bool {
        let need = ids.len() + key_words(piece.len());
        let mut wiped = false;
        if (self.len + 1) * 2 > self.slots.len() || (self.data.len() + need) * 4 > self.cap_bytes {
            self.slots.fill(None);
            self.data.clear();
            self.len = 0;
            wiped = true;
            if need * 4 > self.cap_bytes {
                return wiped;
            }
        }
        let (i, found) = self.slot_of(h, piece);
        if found {
            return wiped;
        }
        self.slots[i] = Some(LongSlot {
            hash: h,
            at: self.data.len() as u32,
            key_len: piece.len() as u32,
            val_len: ids.len() as u32,
        });
        self.data.extend_from_slice(ids);
        self.data.extend(piece.chunks(4).map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(w)
        }));
        self.len += 1;
        wiped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_cache_wipes_at_its_cap() {
        let mut c = LongCache::new(1000);
        let piece = [7u8; 100];
        assert!(!c.put(&piece, hash_bytes(&piece), &[1, 2, 3]));
        assert_eq!(c.get(&piece, hash_bytes(&piece)), Some(&[1, 2, 3][..]));
        let mut wipes = 0;
        for i in 0..20u8 {
            let mut p = piece;
            p[0] = 100 + i;
            wipes += usize::from(c.put(&p, hash_bytes(&p), &[u32::from(i)]));
            assert_eq!(c.get(&p, hash_bytes(&p)), Some(&[u32::from(i)][..]));
            assert!(c.data.len() * 4 <= 1000);
        }
        assert!(wipes > 0);
        // Too large to ever fit: not stored.
        let huge = [1u8; 2000];
        c.put(&huge, hash_bytes(&huge), &[1]);
        assert_eq!(c.get(&huge, hash_bytes(&huge)), None);
    }

    #[test]
    fn long_entries_tell_apart_pieces_that_pad_alike_or_share_a_hash() {
        let mut c = LongCache::new(1 << 16);
        // Every length around the 4-byte padding, each piece also one zero byte longer, all
        // filed under one hash: only the bytes and the length tell them apart.
        let pieces: Vec<Vec<u8>> = (16..=41usize)
            .flat_map(|n| {
                let p: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
                let mut longer = p.clone();
                longer.push(0);
                [p, longer]
            })
            .collect();
        for (i, p) in pieces.iter().enumerate() {
            let ids: Vec<u32> = (0..=i as u32 % 9).map(|k| k * 1000 + i as u32).collect();
            assert!(!c.put(p, 7, &ids));
        }
        for (i, p) in pieces.iter().enumerate() {
            let ids: Vec<u32> = (0..=i as u32 % 9).map(|k| k * 1000 + i as u32).collect();
            assert_eq!(c.get(p, 7), Some(&ids[..]), "piece {i}");
            assert_eq!(c.get(p, hash_bytes(p)), None, "filed under 7 only");
        }
        let mut other = pieces[0].clone();
        other[3] ^= 1;
        assert_eq!(c.get(&other, 7), None);
    }

    use super::super::table::{hash, pack};

    fn shared(cfg: &CacheConfig, pieces: &[&[u8]]) -> Arc<SharedTable> {
        let seed: Vec<(u128, u32, u64)> = pieces.iter().enumerate().map(|(i, p)| (pack(p), i as u32, 0)).collect();
        Arc::new(seeded_table(cfg, &seed))
    }

    fn lookup(state: &mut State, piece: &[u8]) -> Option<Vec<u32>> {
        let mut out = Vec::new();
        state.get_short(pack(piece), hash(pack(piece)), &mut out).then_some(out)
    }

    const TINY: CacheConfig =
        CacheConfig { short_slots: 16, short_arena_ids: 100, thread_slots: 16, long_bytes: 4096, long_max_piece: 512 };

    #[test]
    fn a_full_shared_table_keeps_what_it_knows_and_threads_learn_the_rest() {
        let table = shared(&TINY, &[b"a", b"bc", b"def"]);
        assert_eq!(table.capacity(), 16);
        let mut state = State::new(TINY, Arc::clone(&table));
        for (i, p) in [&b"a"[..], b"bc", b"def"].into_iter().enumerate() {
            assert_eq!(lookup(&mut state, p), Some(vec![i as u32]));
        }
        assert_eq!(lookup(&mut state, b"xyz"), None);
        for i in 0..200u32 {
            state.put_short(pack(format!("p{i}").as_bytes()), &[i, i + 1]);
            assert_eq!(lookup(&mut state, format!("p{i}").as_bytes()), Some(vec![i, i + 1]));
            assert!(state.own.len() <= state.own_limit);
        }
        // The first nine learned entries filled the shared table to three quarters; the thread's
        // own table took the rest, starting over when full.
        assert_eq!(table.len(), 12);
        assert!(state.stats.wipes > 10, "{:?}", state.stats);
        assert_eq!(lookup(&mut state, b"p0"), Some(vec![0, 1]), "the shared table keeps what it learned");
        assert_eq!(lookup(&mut state, b"p100"), None, "a thread's own entries are wiped");
        assert_eq!(lookup(&mut state, b"def"), Some(vec![2]), "the seed is kept");
        // Another thread's cache sees the shared entries, not this one's own.
        let mut other = State::new(TINY, table);
        assert_eq!(lookup(&mut other, b"p8"), Some(vec![8, 9]));
        assert_eq!(lookup(&mut other, b"p199"), None);
    }

    #[test]
    fn the_table_has_room_beyond_its_seed() {
        let pieces: Vec<Vec<u8>> = (0..100u32).map(|i| i.to_le_bytes().to_vec()).collect();
        let refs: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        let cfg =
            CacheConfig { short_slots: 16, short_arena_ids: 8, thread_slots: 16, long_bytes: 256, long_max_piece: 64 };
        let table = shared(&cfg, &refs);
        assert_eq!((table.capacity(), table.len()), (256, 100));
        // At least a quarter of the slots to learn: the limit is 192.
        for i in 0..92u32 {
            assert!(table.insert(pack(format!("x{i}").as_bytes()), &[1, 2]));
        }
        assert!(!table.insert(pack(b"one more"), &[1, 2]));
        assert_eq!(shared(&CacheConfig { short_slots: 1024, ..cfg }, &refs).capacity(), 1024);
    }

    #[test]
    fn a_committed_cache_never_allocates_again() {
        let table = shared(&TINY, &[b"x"]);
        let mut state = State::new(CacheConfig { thread_slots: 64, ..TINY }, table);
        state.put_short(pack(b"kept"), &[1, 2, 3, 4]);
        state.commit();
        assert_eq!(lookup(&mut state, b"kept"), Some(vec![1, 2, 3, 4]), "entries survive");
        let addresses = |s: &State| (s.own.arena_ptr(), s.long.data.as_ptr() as usize);
        let before = addresses(&state);
        for i in 0..2000u32 {
            let piece = format!("piece number {i:05}, long enough");
            let ids: Vec<u32> = (0..(i % 7)).collect();
            state.put_short(pack(&piece.as_bytes()[..10 + (i % 5) as usize]), &ids);
            state.put_long(piece.as_bytes(), hash_bytes(piece.as_bytes()), &ids);
            assert_eq!(addresses(&state), before);
        }
        assert!(state.stats.wipes > 10, "{:?}", state.stats);
    }

    #[test]
    fn a_cache_is_small_until_a_long_job_commits_it() {
        let cfg = CacheConfig::default();
        let mut state = State::new(cfg, shared(&TINY, &[b"x"]));
        let sizes = |s: &State| (s.own.arena_capacity(), s.long.data.capacity() * 4);
        assert_eq!(sizes(&state), (0, 0));
        state.commit();
        assert_eq!(sizes(&state), (cfg.thread_slots, cfg.long_bytes));
    }

    #[test]
    fn many_threads_share_a_bounded_budget() {
        assert_eq!(CacheConfig::for_threads(2), CacheConfig::default());
        for threads in [16, 64, 256] {
            let cfg = CacheConfig::for_threads(threads);
            assert!(cfg.total(threads) <= 768 << 20, "{threads}: {cfg:?}");
            assert_eq!((cfg.short_slots, cfg.short_arena_ids), (1 << 20, 1 << 20), "one table, whatever the threads");
            let default = CacheConfig::default();
            assert!(cfg.thread_slots <= default.thread_slots && cfg.long_bytes <= default.long_bytes, "{cfg:?}");
        }
    }

    #[test]
    fn budget_is_respected() {
        for bytes in [64 << 10, 1 << 20, 24 << 20, 1 << 30] {
            let cfg = CacheConfig::with_budget(bytes);
            assert!(cfg.total(1) <= bytes * 2, "{cfg:?} for {bytes}");
        }
    }
}
