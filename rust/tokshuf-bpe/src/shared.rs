//! The short-piece table that all the encoding threads of one encoder share.
//!
//! One table instead of one per thread: the vocabulary it is seeded with is held once, what one
//! thread learns the others hit, and two threads together keep half as many megabytes hot in
//! the cache they share. It is insert-only: a slot, once published, never changes, so a reader
//! needs no lock, only an acquire load of the word that publishes it. When three quarters of the
//! slots are taken it learns no more (when its arena is full, no more pieces of over three
//! tokens); each thread's own small table takes the rest (see [`super::cache::State`]).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::merge::RankTable;
use super::table::{hash, Ids, Slots, Zeroed, ARENA, MAX_SHORT};

/// Set in every taken slot's length word, so that it is never 0.
const TAKEN: u32 = 1 << 30;

/// A key (`k[0]` its low half, `k[1]` its high one: never 0, as it holds the key's length) and
/// its value: `v[0]` the first two ids (or, with `ARENA`, where they start in the arena; or, for
/// one id, the id and the low half of its tag), `v[1]` the third id (or the tag's high half) and
/// the length word `n | TAKEN | ARENA`. A thread takes a free slot with one compare-and-swap of
/// `v[1]` (0 when free), writes the rest, and publishes the slot by storing `k[1]` last; readers
/// see a slot only once `k[1]` is set, and then all of it.
#[repr(C, align(32))]
struct Slot {
    k: [AtomicU64; 2],
    v: [AtomicU64; 2],
}

// SAFETY: atomic integers, for which zero bytes are the value 0.
unsafe impl Zeroed for Slot {
    const ZERO: Slot = Slot { k: [AtomicU64::new(0), AtomicU64::new(0)], v: [AtomicU64::new(0), AtomicU64::new(0)] };
}

/// Slots a thread reserves at a time: the shared count then changes once every this many
/// inserts, not at each one (two threads inserting at every miss would pass its cache line back
/// and forth between their cores).
const RESERVE: usize = 64;

/// Slots of a [`SharedTable`] that one thread has reserved and not taken yet (see
/// [`SharedTable::give_back`]).
#[derive(Debug, Default)]
pub(crate) struct Reserved(usize);

pub(crate) struct SharedTable {
    slots: Slots<Slot>,
    mask: usize,
    /// Ids of values of more than three ids.
    arena: Slots<AtomicU32>,
    /// Entries beyond which nothing more is learned (three quarters of the slots).
    limit: usize,
    /// Written by every insert, so kept off the line that every lookup reads.
    counts: Counts,
}

#[repr(align(64))]
struct Counts {
    /// Slots taken or reserved.
    len: AtomicUsize,
    arena_used: AtomicUsize,
}

impl SharedTable {
    /// A table of `slots` slots (a power of two, at least 16) and `arena_ids` arena ids.
    pub fn new(slots: usize, arena_ids: usize) -> SharedTable {
        let n = slots.max(16).next_power_of_two();
        SharedTable {
            slots: Slots::zeroed(n),
            mask: n - 1,
            arena: Slots::zeroed(arena_ids.max(16).next_power_of_two()),
            limit: n / 4 * 3,
            counts: Counts { len: AtomicUsize::new(0), arena_used: AtomicUsize::new(0) },
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.counts.len.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Make every page resident now (see `State::commit`). An atomic no-op write per page
    /// commits it without racing the threads that may be using the table.
    pub fn commit(&self) {
        for i in (0..self.slots.len()).step_by(4096 / std::mem::size_of::<Slot>()) {
            self.slots.get(i).k[0].fetch_or(0, Ordering::Relaxed);
        }
        for i in (0..self.arena.len()).step_by(4096 / 4) {
            self.arena.get(i).fetch_or(0, Ordering::Relaxed);
        }
    }

    #[inline(always)]
    pub fn prefetch_hashed(&self, h: u64) {
        self.slots.prefetch(h as usize);
    }

    /// The published slot holding `key` (with its [`hash`] `h`), and its `v[1]`. A slot still
    /// being written is passed over.
    #[inline(always)]
    fn find(&self, key: u128, h: u64) -> Option<(&Slot, u64)> {
        let (lo, hi) = (key as u64, (key >> 64) as u64);
        // `Slots::get` masks the index.
        let mut i = h as usize;
        loop {
            let s = self.slots.get(i);
            // The acquire load makes the rest of a published slot visible.
            let k1 = s.k[1].load(Ordering::Acquire);
            if k1 == 0 {
                // Free, or still being written (then its key may be this one, or lie beyond).
                if s.v[1].load(Ordering::Relaxed) == 0 {
                    return None;
                }
                i = i.wrapping_add(1);
                continue;
            }
            if k1 == hi && s.k[0].load(Ordering::Relaxed) == lo {
                return Some((s, s.v[1].load(Ordering::Relaxed)));
            }
            i = i.wrapping_add(1);
        }
    }

    /// Append the ids stored under `key` (with its [`hash`]) to `out`; false if there are none.
    #[inline(always)]
    pub fn emit_hashed(&self, key: u128, h: u64, out: &mut impl Ids) -> bool {
        let Some((s, v1)) = self.find(key, h) else { return false };
        let n = (v1 >> 32) as u32 & !TAKEN;
        let v0 = s.v[0].load(Ordering::Relaxed);
        if n & ARENA == 0 {
            out.push3([v0 as u32, (v0 >> 32) as u32, v1 as u32], n as usize);
        } else {
            let start = v0 as usize;
            let ids = (start..start + (n & !ARENA) as usize).map(|i| self.arena.get(i).load(Ordering::Relaxed));
            out.vec().extend(ids);
        }
        true
    }

    /// The id stored under `key` (with its [`hash`]) if it holds exactly one, and the tag it was
    /// seeded with (0 if none, see [`SharedTable::insert_tagged`]).
    #[inline(always)]
    pub fn get_single(&self, key: u128, h: u64) -> Option<(u32, u64)> {
        // An arena value has the ARENA bit set, so it is never 1.
        let (s, v1) = self.find(key, h)?;
        let v0 = s.v[0].load(Ordering::Relaxed);
        ((v1 >> 32) as u32 & !TAKEN == 1).then_some((v0 as u32, v0 >> 32 | v1 << 32))
    }

    /// The ids stored under `key`.
    #[cfg(test)]
    pub fn get(&self, key: u128) -> Option<Vec<u32>> {
        let mut out = Vec::new();
        self.emit_hashed(key, hash(key), &mut out).then_some(out)
    }

    /// Store `ids` (at most 15) under `key` unless the table is full (then false: the caller
    /// keeps them elsewhere). A key is stored once; as an encoding is a function of its piece,
    /// threads that store the same key at once store the same ids, and a second slot that one
    /// of them may take for it is only a wasted slot.
    #[cfg(test)]
    pub fn insert(&self, key: u128, ids: &[u32]) -> bool {
        let mut reserved = Reserved::default();
        let stored = self.insert_reserved(key, ids, &mut reserved);
        self.give_back(reserved);
        stored
    }

    /// [`SharedTable::insert`], taking the slot from the ones this thread has `reserved` (and
    /// reserving more when there are none left).
    pub fn insert_reserved(&self, key: u128, ids: &[u32], reserved: &mut Reserved) -> bool {
        debug_assert!(key >> 64 != 0 && ids.len() <= MAX_SHORT);
        if !self.reserve(reserved) {
            return false;
        }
        let unreserve = |reserved: &mut Reserved, stored: bool| {
            reserved.0 += 1;
            stored
        };
        let (v0, v1) = match ids {
            [] => (0, 0),
            [a] => (u64::from(*a), 0),
            [a, b] => (u64::from(*a) | u64::from(*b) << 32, 0),
            [a, b, c] => (u64::from(*a) | u64::from(*b) << 32, u64::from(*c)),
            _ => {
                // Checked first, so that a full arena stops growing its count.
                if self.counts.arena_used.load(Ordering::Relaxed) + ids.len() > self.arena.len() {
                    return unreserve(reserved, false);
                }
                let start = self.counts.arena_used.fetch_add(ids.len(), Ordering::Relaxed);
                if start + ids.len() > self.arena.len() {
                    return unreserve(reserved, false);
                }
                for (k, &id) in ids.iter().enumerate() {
                    self.arena.get(start + k).store(id, Ordering::Relaxed);
                }
                (start as u64, 0)
            }
        };
        let n = ids.len() as u32 | if ids.len() > 3 { ARENA } else { 0 };
        self.publish(key, v0, v1 | u64::from(n | TAKEN) << 32, reserved)
    }

    /// Store the one id `id` under `key` with a `tag` that [`SharedTable::get_single`] returns
    /// beside it, in the halves of the slot's words that a one-id value leaves unused (0 means
    /// none, as for what is learned rather than seeded).
    pub fn insert_tagged(&self, key: u128, id: u32, tag: u64, reserved: &mut Reserved) -> bool {
        if !self.reserve(reserved) {
            return false;
        }
        let (v0, v1) = (u64::from(id) | tag << 32, (tag >> 32) | u64::from(1 | TAKEN) << 32);
        self.publish(key, v0, v1, reserved)
    }

    /// Write a value into a free slot of `key`'s probe, taken from the `reserved` ones (one of
    /// which the caller counted as used).
    fn publish(&self, key: u128, v0: u64, v1: u64, reserved: &mut Reserved) -> bool {
        let (lo, hi) = (key as u64, (key >> 64) as u64);
        let mut i = hash(key) as usize & self.mask;
        loop {
            let s = self.slots.get(i);
            if s.v[1].compare_exchange(0, v1, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                s.k[0].store(lo, Ordering::Relaxed);
                s.v[0].store(v0, Ordering::Relaxed);
                // Publishes the slot: everything written above is seen by whoever sees this.
                s.k[1].store(hi, Ordering::Release);
                return true;
            }
            // Taken: by this key once published (a slot still being written is passed over).
            if s.k[1].load(Ordering::Acquire) == hi && s.k[0].load(Ordering::Relaxed) == lo {
                reserved.0 += 1;
                return true;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Count one of the `reserved` slots as used, reserving more when there are none left; false
    /// if the table is full. A slot is reserved before it is taken, so that however many threads
    /// insert at once, no more than `limit` slots are ever taken: a quarter stay free, which ends
    /// every probe.
    fn reserve(&self, reserved: &mut Reserved) -> bool {
        if reserved.0 == 0 {
            if self.counts.len.load(Ordering::Relaxed) >= self.limit {
                return false;
            }
            let before = self.counts.len.fetch_add(RESERVE, Ordering::Relaxed);
            let got = self.limit.saturating_sub(before).min(RESERVE);
            if got < RESERVE {
                self.counts.len.fetch_sub(RESERVE - got, Ordering::Relaxed);
            }
            if got == 0 {
                return false;
            }
            reserved.0 = got;
        }
        reserved.0 -= 1;
        true
    }

    /// Give back the slots a thread reserved and did not take.
    pub fn give_back(&self, reserved: Reserved) {
        if reserved.0 > 0 {
            self.counts.len.fetch_sub(reserved.0, Ordering::Relaxed);
        }
    }
}

/// The ranks of short tokens when merging: the table is seeded with every one of them for a
/// tiktoken vocabulary.
impl RankTable for SharedTable {
    #[inline(always)]
    fn prefetch_hashed(&self, _: u128, h: u64) {
        SharedTable::prefetch_hashed(self, h);
    }
    /// Slot 0 when not `held`: a line that such prefetches keep cached.
    #[inline(always)]
    fn prefetch_if(&self, _: u128, h: u64, held: bool) {
        self.slots.prefetch(h as usize & usize::from(held).wrapping_neg());
    }
    #[inline(always)]
    fn rank_hashed(&self, key: u128, h: u64) -> Option<(u32, u64)> {
        self.get_single(key, h)
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::pack;
    use super::*;

    fn key(i: u32) -> u128 {
        pack(format!("k{i}").as_bytes())
    }

    fn value(i: u32) -> Vec<u32> {
        (0..i % 16).map(|k| i * 100 + k).collect()
    }

    #[test]
    fn stores_every_length_and_stops_learning_when_full() {
        let t = SharedTable::new(64, 40);
        for i in 0..16 {
            assert!(t.insert(key(i), &value(i)) || i > 3, "inline values always fit");
        }
        for i in 0..16 {
            if let Some(ids) = t.get(key(i)) {
                assert_eq!(ids, value(i), "{i}");
                assert_eq!(t.get_single(key(i), hash(key(i))).map(|r| r.0), (ids.len() == 1).then(|| ids[0]));
            } else {
                assert!(i > 3, "only arena values may have found no room");
            }
        }
        assert_eq!(t.get(pack(b"absent")), None);
        // Inline values up to the limit, three quarters of the slots.
        let mut stored = t.len();
        for i in 16..200 {
            if t.insert(key(i * 16), &[i]) {
                stored += 1;
            }
        }
        assert_eq!((stored, t.len()), (48, 48));
        assert!(!t.insert(pack(b"late"), &[1]));
        // A key stored twice is stored once.
        let t = SharedTable::new(64, 40);
        assert!(t.insert(key(1), &[5]) && t.insert(key(1), &[5]));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn a_seeded_id_keeps_its_tag_and_a_learned_one_has_none() {
        let t = SharedTable::new(64, 40);
        let mut reserved = Reserved::default();
        assert!(t.insert_tagged(key(1), 7, 42, &mut reserved));
        t.give_back(reserved);
        assert!(t.insert(key(2), &[8]));
        assert_eq!(t.get_single(key(1), hash(key(1))), Some((7, 42)));
        assert_eq!(t.get_single(key(2), hash(key(2))), Some((8, 0)));
        // What a hit emits is the id alone.
        assert_eq!(t.get(key(1)), Some(vec![7]));
    }

    #[test]
    fn threads_storing_at_once_lose_nothing() {
        let t = SharedTable::new(1 << 12, 1 << 16);
        std::thread::scope(|s| {
            for th in 0..4u32 {
                let t = &t;
                s.spawn(move || {
                    // Overlapping ranges: the same keys from several threads at once.
                    for i in th * 200..th * 200 + 1000 {
                        assert!(t.insert(key(i), &value(i)));
                        assert_eq!(t.get(key(i)), Some(value(i)));
                    }
                });
            }
        });
        for i in 0..1600 {
            assert_eq!(t.get(key(i)), Some(value(i)), "{i}");
        }
        assert!(t.len() >= 1600 && t.len() < 1700, "{}", t.len());
    }

    #[test]
    fn many_threads_never_fill_a_small_table() {
        // More threads than the table's free quarter: every probe must still end.
        let t = SharedTable::new(16, 64);
        let stored: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8u32)
                .map(|th| {
                    let t = &t;
                    s.spawn(move || (0..200).filter(|&i| t.insert(key(th * 1000 + i), &[i])).count())
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!((stored, t.len()), (12, 12));
        assert_eq!(t.get(pack(b"absent")), None);
    }

    #[test]
    fn threads_reserving_slots_never_take_more_than_the_limit() {
        // As the encoding threads insert: each keeps its reservation between inserts.
        for slots in [16, 256, 1 << 12] {
            let t = SharedTable::new(slots, 1 << 12);
            let stored: usize = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4u32)
                    .map(|th| {
                        let t = &t;
                        s.spawn(move || {
                            let mut reserved = Reserved::default();
                            let n = (0..2000)
                                .filter(|&i| t.insert_reserved(key(th * 10_000 + i), &[i], &mut reserved))
                                .count();
                            t.give_back(reserved);
                            n
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).sum()
            });
            // Never past the limit; short of it by at most what a thread that ran out of keys
            // still held; nothing counted once the reservations are given back.
            let limit = slots / 4 * 3;
            assert!(stored <= limit && stored + 4 * RESERVE >= limit, "{stored} of {limit}");
            assert_eq!(t.len(), stored);
        }
    }
}
