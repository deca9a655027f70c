//! The pretoken → ids cache of one encoding thread, with a memory cap.
//!
//! Short pieces (≤ 15 bytes) go to packed-key [`SlotTable`]s, in two generations: when the active
//! table is half full it becomes the old one and the previous old one is wiped and reused; a hit
//! in the old table is copied to the active one. Pieces in use survive a wipe, the memory stays
//! fixed, and no per-entry bookkeeping is needed (as LRU would). Longer pieces go to
//! [`LongCache`], wiped when full. Vocabulary tokens never reach these caches: the encoder looks
//! them up in the shared vocabulary table first.
//!
//! A cache grows as it fills, up to its budget, so a few calls cost a few pages. For a long job
//! ([`State::commit`], through `Tokenizer::prepare_for_long_job`) all of it is made resident at
//! the start: its footprint is then the same after 1 MB of text as after 100 GB, so the job's
//! peak RSS does not grow with its input.

use super::merge::MergeScratch;
use super::table::{commit_vec, SlotTable, MAX_SHORT};

/// Memory budget of one thread's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Slots of each of the two short-piece tables (32 bytes each; a generation ends at half load).
    pub short_slots: usize,
    /// Ids stored out of line for short pieces of more than three tokens.
    pub short_arena_ids: usize,
    /// Bytes of keys and ids held for long pieces.
    pub long_bytes: usize,
    /// Longest piece (bytes) worth caching.
    pub long_max_piece: usize,
}

impl Default for CacheConfig {
    /// About 52 MiB per thread (two 16 MiB tables with their arenas, and the long-piece cache).
    fn default() -> Self {
        CacheConfig { short_slots: 1 << 19, short_arena_ids: 1 << 18, long_bytes: 6 << 20, long_max_piece: 512 }
    }
}

impl CacheConfig {
    /// A config whose total stays within `bytes` (at least a few KiB).
    pub fn with_budget(bytes: usize) -> CacheConfig {
        let bytes = bytes.max(64 << 10);
        // 2/3 to the short tables, the rest split between their arenas and the long cache.
        let slots = (bytes / 3 / 32).next_power_of_two() / 2;
        let rest = bytes.saturating_sub(2 * slots * 32);
        CacheConfig { short_slots: slots.max(16), short_arena_ids: rest / 8, long_bytes: rest / 2, long_max_piece: 512 }
    }

    /// The default, scaled down so that `threads` caches together stay under about 768 MiB.
    pub fn for_threads(threads: usize) -> CacheConfig {
        let default = CacheConfig::default();
        let share = (768usize << 20) / threads.max(1);
        if share >= default.budget() {
            default
        } else {
            CacheConfig::with_budget(share)
        }
    }

    /// The bytes one thread's cache holds (all committed when it is created).
    pub fn budget(&self) -> usize {
        // The long cache: its two arenas, each reserved at the cap, and about as much in slots.
        2 * (self.short_slots.next_power_of_two() * 32 + self.short_arena_ids * 4) + self.long_bytes * 3
    }
}

/// Everything one encoding thread reuses between calls.
pub(crate) struct State {
    pub short: SlotTable,
    old: SlotTable,
    pub long: LongCache,
    pub merge: MergeScratch,
    cfg: CacheConfig,
    /// Cache statistics (hits on the vocabulary table are not counted).
    pub stats: Stats,
}

/// Counters of one thread's cache.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub hits: u64,
    pub misses: u64,
    pub wipes: u64,
}

impl State {
    pub fn new(cfg: CacheConfig) -> State {
        State {
            short: SlotTable::with_slots(cfg.short_slots),
            old: SlotTable::with_slots(cfg.short_slots),
            long: LongCache::new(cfg.long_bytes),
            merge: MergeScratch::default(),
            cfg,
            stats: Stats::default(),
        }
    }

    /// Allocate and touch the whole budget now (keeping the entries): from here on the cache
    /// neither allocates nor grows.
    pub fn commit(&mut self) {
        self.short.commit(self.cfg.short_arena_ids);
        self.old.commit(self.cfg.short_arena_ids);
        self.long.commit();
    }

    /// Prefetch the slots of the short piece with hash `h` in both generations.
    #[inline(always)]
    pub fn prefetch_short(&self, h: u64) {
        self.short.prefetch_hashed(h);
        self.old.prefetch_hashed(h);
    }

    /// Append the cached ids of the short piece `key` (hash `h`) to `out`; false on a miss.
    #[inline(always)]
    pub fn get_short(&mut self, key: u128, h: u64, out: &mut Vec<u32>) -> bool {
        if let Some(ids) = self.short.get_hashed(key, h) {
            out.extend_from_slice(ids);
        } else if let Some(ids) = self.old.get_hashed(key, h) {
            // A piece of at most 15 bytes has at most 15 ids.
            let mut buf = [0u32; MAX_SHORT];
            let n = ids.len();
            buf[..n].copy_from_slice(ids);
            out.extend_from_slice(&buf[..n]);
            self.put_short(key, &buf[..n]);
        } else {
            return false;
        }
        self.stats.hits += 1;
        true
    }

    /// Cache `ids` as the encoding of the short piece `key`, starting a new generation if the
    /// active table is full.
    #[inline]
    pub fn put_short(&mut self, key: u128, ids: &[u32]) {
        if self.short.len() * 2 >= self.short.capacity()
            || (ids.len() > 3 && self.short.arena_len() + ids.len() > self.cfg.short_arena_ids)
        {
            std::mem::swap(&mut self.short, &mut self.old);
            self.short.clear();
            self.stats.wipes += 1;
        }
        if ids.len() <= 3 || ids.len() <= self.cfg.short_arena_ids {
            self.short.insert(key, ids);
        }
    }

    /// Cache `ids` as the encoding of the long `piece`.
    #[inline]
    pub fn put_long(&mut self, piece: &[u8], ids: &[u32]) {
        if piece.len() <= self.cfg.long_max_piece && self.long.put(piece, ids) {
            self.stats.wipes += 1;
        }
    }
}

#[derive(Clone, Copy)]
struct LongSlot {
    hash: u64,
    key: u32,
    key_len: u32,
    val: u32,
    val_len: u32,
}

/// Long piece → ids, keys and values in two arenas, wiped when `cap_bytes` is reached.
pub(crate) struct LongCache {
    slots: Vec<Option<LongSlot>>,
    keys: Vec<u8>,
    vals: Vec<u32>,
    len: usize,
    cap_bytes: usize,
}

fn hash_bytes(b: &[u8]) -> u64 {
    let mut h: u64 = 0x243f_6a88_85a3_08d3 ^ b.len() as u64;
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        h = (h.rotate_left(23) ^ u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    for &x in chunks.remainder() {
        h = (h.rotate_left(8) ^ u64::from(x)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    h ^ (h >> 31)
}

impl LongCache {
    fn new(cap_bytes: usize) -> LongCache {
        // One slot per ~64 bytes of budget, at most half full.
        let n = (cap_bytes / 32).clamp(16, 1 << 20).next_power_of_two();
        LongCache { slots: vec![None; n], keys: Vec::new(), vals: Vec::new(), len: 0, cap_bytes }
    }

    /// Either arena may take the whole budget (`put` keeps their sum within it), so each is
    /// reserved at the cap and never reallocates again.
    fn commit(&mut self) {
        commit_vec(&mut self.keys, self.cap_bytes);
        commit_vec(&mut self.vals, self.cap_bytes / 4);
    }

    fn slot_of(&self, h: u64, piece: &[u8]) -> (usize, bool) {
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            match self.slots[i] {
                None => return (i, false),
                Some(s) => {
                    if s.hash == h && &self.keys[s.key as usize..(s.key + s.key_len) as usize] == piece {
                        return (i, true);
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    pub fn get(&self, piece: &[u8]) -> Option<&[u32]> {
        let (i, found) = self.slot_of(hash_bytes(piece), piece);
        found.then(|| {
            let s = self.slots[i].expect("found");
            &self.vals[s.val as usize..(s.val + s.val_len) as usize]
        })
    }

    /// Insert; returns whether the cache was wiped to make room.
    fn put(&mut self, piece: &[u8], ids: &[u32]) -> bool {
        let need = piece.len() + ids.len() * 4;
        let mut wiped = false;
        if (self.len + 1) * 2 > self.slots.len() || self.keys.len() + self.vals.len() * 4 + need > self.cap_bytes {
            self.slots.fill(None);
            self.keys.clear();
            self.vals.clear();
            self.len = 0;
            wiped = true;
            if need > self.cap_bytes {
                return wiped;
            }
        }
        let h = hash_bytes(piece);
        let (i, found) = self.slot_of(h, piece);
        if found {
            return wiped;
        }
        self.slots[i] = Some(LongSlot {
            hash: h,
            key: self.keys.len() as u32,
            key_len: piece.len() as u32,
            val: self.vals.len() as u32,
            val_len: ids.len() as u32,
        });
        self.keys.extend_from_slice(piece);
        self.vals.extend_from_slice(ids);
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
        assert!(!c.put(&piece, &[1, 2, 3]));
        assert_eq!(c.get(&piece), Some(&[1, 2, 3][..]));
        let mut wipes = 0;
        for i in 0..20u8 {
            let mut p = piece;
            p[0] = 100 + i;
            wipes += usize::from(c.put(&p, &[u32::from(i)]));
            assert_eq!(c.get(&p), Some(&[u32::from(i)][..]));
            assert!(c.keys.len() + c.vals.len() * 4 <= 1000);
        }
        assert!(wipes > 0);
        // Too large to ever fit: not stored.
        let huge = [1u8; 2000];
        c.put(&huge, &[1]);
        assert_eq!(c.get(&huge), None);
    }

    #[test]
    fn a_committed_cache_never_allocates_again() {
        let cfg = CacheConfig { short_slots: 64, short_arena_ids: 100, long_bytes: 4096, long_max_piece: 512 };
        let mut state = State::new(cfg);
        state.put_short(super::super::table::pack(b"kept"), &[1, 2, 3, 4]);
        state.commit();
        let mut out = Vec::new();
        let key = super::super::table::pack(b"kept");
        assert!(state.get_short(key, super::super::table::hash(key), &mut out), "entries survive");
        assert_eq!(out, [1, 2, 3, 4]);
        let addresses = |s: &State| {
            (s.short.arena_ptr(), s.old.arena_ptr(), s.long.keys.as_ptr() as usize, s.long.vals.as_ptr() as usize)
        };
        let (short, old, keys, vals) = addresses(&state);
        let mut seen = std::collections::HashSet::new();
        for i in 0..2000u32 {
            let piece = format!("piece number {i:05}, long enough");
            let ids: Vec<u32> = (0..(i % 7)).collect();
            state.put_short(super::super::table::pack(&piece.as_bytes()[..10 + (i % 5) as usize]), &ids);
            state.put_long(piece.as_bytes(), &ids);
            seen.insert((state.short.arena_ptr(), state.old.arena_ptr()));
        }
        assert!(state.stats.wipes > 10, "{:?}", state.stats);
        // The two generations swap, but no buffer is ever reallocated.
        let (a, b, k, v) = addresses(&state);
        assert_eq!(seen, [(short, old), (old, short)].into_iter().collect());
        assert!([(a, b), (b, a)].contains(&(short, old)));
        assert_eq!((k, v), (keys, vals));
    }

    #[test]
    fn a_cache_is_small_until_a_long_job_commits_it() {
        let cfg = CacheConfig::default();
        let mut state = State::new(cfg);
        let sizes = |s: &State| (s.short.arena_capacity(), s.old.arena_capacity(), s.long.keys.capacity());
        assert_eq!(sizes(&state), (0, 0, 0));
        state.commit();
        assert_eq!(sizes(&state), (cfg.short_arena_ids, cfg.short_arena_ids, cfg.long_bytes));
    }

    #[test]
    fn many_threads_share_a_bounded_budget() {
        assert_eq!(CacheConfig::for_threads(2), CacheConfig::default());
        for threads in [16, 64, 256] {
            let cfg = CacheConfig::for_threads(threads);
            assert!(cfg.budget() * threads <= 2 * (768 << 20), "{threads}: {cfg:?}");
        }
    }

    #[test]
    fn budget_is_respected() {
        for bytes in [64 << 10, 1 << 20, 24 << 20, 1 << 30] {
            let cfg = CacheConfig::with_budget(bytes);
            assert!(cfg.budget() <= bytes * 2, "{cfg:?} for {bytes}");
        }
    }
}
