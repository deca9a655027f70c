//! Open-addressing tables keyed by short byte strings packed into a `u128`.
//!
//! A key holds up to [`MAX_SHORT`] bytes in its low bytes and the length in its top byte, so
//! comparing keys is one 128-bit compare and the empty slot is the all-zero key. A slot is 32
//! bytes (two per cache line) and carries up to three ids inline; longer values live in an arena.

/// Longest byte string that packs into a key.
pub(crate) const MAX_SHORT: usize = 15;

/// Pack `bytes` (1..=15 of them) into a key.
#[inline(always)]
pub(crate) fn pack(b: &[u8]) -> u128 {
    debug_assert!(!b.is_empty() && b.len() <= MAX_SHORT);
    // Two overlapping loads instead of a variable-length copy (overlapping bytes are equal).
    let n = b.len();
    let v = if n >= 8 {
        let lo = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        let hi = u64::from_le_bytes(b[n - 8..].try_into().expect("8 bytes"));
        u128::from(lo) | u128::from(hi) << (8 * (n - 8))
    } else if n >= 4 {
        let lo = u32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
        let hi = u32::from_le_bytes(b[n - 4..].try_into().expect("4 bytes"));
        u128::from(lo) | u128::from(hi) << (8 * (n - 4))
    } else {
        u128::from(b[0]) | u128::from(b[n / 2]) << (8 * (n / 2)) | u128::from(b[n - 1]) << (8 * (n - 1))
    };
    v | (n as u128) << 120
}

/// `KEEP[n]` keeps the low `n` bytes (a table: variable 128-bit shifts are slow).
pub(crate) const KEEP: [u128; 16] = {
    let mut k = [0u128; 16];
    let mut n = 1;
    while n < 16 {
        k[n] = (1u128 << (8 * n)) - 1;
        n += 1;
    }
    k
};

/// Pack `t[pos..pos + len]` (`len` in 1..=15), reading 16 bytes at once when the text allows.
#[inline(always)]
pub(crate) fn pack_at(t: &[u8], pos: usize, len: usize) -> u128 {
    debug_assert!((1..=MAX_SHORT).contains(&len));
    match t.get(pos..pos + 16) {
        Some(w) => {
            let v = u128::from_le_bytes(w.try_into().expect("16 bytes"));
            (v & KEEP[len]) | ((len as u128) << 120)
        }
        None => pack(&t[pos..pos + len]),
    }
}

/// The hash every table probes `key` with (compute once, use for all tables).
#[inline(always)]
pub(crate) fn hash(key: u128) -> u64 {
    let lo = key as u64;
    let hi = (key >> 64) as u64;
    let h = (lo ^ hi.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 29)
}

/// Value flag: the ids are in the arena at `ids[0]`, `n & !ARENA` of them.
pub(crate) const ARENA: u32 = 1 << 31;

#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Slot {
    key: u128,
    ids: [u32; 3],
    n: u32,
}

const EMPTY: Slot = Slot { key: 0, ids: [0; 3], n: 0 };

/// Types whose all-zero bit pattern is a valid (empty) value.
///
/// # Safety
/// Implementors must be valid when every byte is zero, and `ZERO` must be that value.
pub(crate) unsafe trait Zeroed {
    const ZERO: Self;
}

// SAFETY: plain integers and arrays of them.
unsafe impl Zeroed for Slot {
    const ZERO: Slot = EMPTY;
}
// SAFETY: an integer.
unsafe impl Zeroed for u64 {
    const ZERO: u64 = 0;
}
// SAFETY: an atomic integer, whose zero bytes are the value 0.
unsafe impl Zeroed for std::sync::atomic::AtomicU32 {
    const ZERO: Self = std::sync::atomic::AtomicU32::new(0);
}

/// Zeroed slot memory. Large tables are anonymous maps advised to use transparent huge pages:
/// lookups hit random slots of a multi-megabyte table, and with 4 KiB pages nearly every one
/// would also miss the TLB.
pub(crate) struct Slots<T: Zeroed> {
    ptr: std::ptr::NonNull<T>,
    /// The length (a power of two) minus one.
    mask: usize,
    _owner: Owner<T>,
}

enum Owner<T> {
    Heap(#[allow(dead_code)] Box<[T]>),
    Map(#[allow(dead_code)] memmap2::MmapMut),
}

// SAFETY: `Slots` owns its memory (through `_owner`) like a `Box<[T]>` does.
unsafe impl<T: Zeroed + Send> Send for Slots<T> {}
// SAFETY: `&self` methods only hand out `&T`, so sharing `Slots<T>` is sharing `T`s.
unsafe impl<T: Zeroed + Sync> Sync for Slots<T> {}

const HUGE_PAGE: usize = 2 << 20;

/// Ask the kernel to back the whole huge pages within `buf` with transparent huge pages; a
/// kernel without them ignores it. For memory read at random, far beyond the TLB's reach.
pub(crate) fn advise_huge_pages<T>(buf: &mut [T]) {
    #[cfg(target_os = "linux")]
    {
        let start = buf.as_mut_ptr() as usize;
        let end = start + std::mem::size_of_val(buf);
        let (from, to) = (start.next_multiple_of(HUGE_PAGE), end / HUGE_PAGE * HUGE_PAGE);
        if from < to {
            // SAFETY: advice on memory `buf` holds; it changes no contents.
            unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

impl<T: Zeroed> Slots<T> {
    pub(crate) fn zeroed(len: usize) -> Slots<T> {
        debug_assert!(len.is_power_of_two());
        let bytes = len * std::mem::size_of::<T>();
        if bytes >= HUGE_PAGE {
            if let Ok(mut map) = memmap2::MmapMut::map_anon(bytes + HUGE_PAGE) {
                let base = map.as_ptr() as usize;
                let offset = base.next_multiple_of(HUGE_PAGE) - base;
                advise_huge_pages(&mut map[offset..offset + bytes]);
                // SAFETY: `offset + bytes` is within the map, which is page-aligned (so the
                // pointer is aligned for `T`) and zero-filled (valid for `T: Zeroed`).
                let ptr = unsafe { std::ptr::NonNull::new_unchecked(map.as_ptr().add(offset) as *mut T) };
                return Slots { ptr, mask: len - 1, _owner: Owner::Map(map) };
            }
        }
        let mut heap: Box<[T]> = (0..len).map(|_| T::ZERO).collect();
        let ptr = std::ptr::NonNull::new(heap.as_mut_ptr()).expect("non-null");
        Slots { ptr, mask: len - 1, _owner: Owner::Heap(heap) }
    }

    pub(crate) fn len(&self) -> usize {
        self.mask + 1
    }

    /// Slot `i` modulo the length: any `i` will do (callers need not mask it).
    #[inline(always)]
    pub(crate) fn get(&self, i: usize) -> &T {
        // SAFETY: the length is a power of two, so the masked index is in bounds; the memory
        // lives as long as `self`.
        unsafe { &*self.ptr.as_ptr().add(i & self.mask) }
    }

    #[inline(always)]
    fn get_mut(&mut self, i: usize) -> &mut T {
        // SAFETY: as in `get`; `&mut self` gives exclusive access.
        unsafe { &mut *self.ptr.as_ptr().add(i & self.mask) }
    }

    /// Make every page of the slots resident now rather than on first use, so that the
    /// table's footprint is what it will be for the rest of the job.
    fn commit(&mut self) {
        let bytes = self.len() * std::mem::size_of::<T>();
        let base = self.ptr.as_ptr().cast::<u8>();
        for offset in (0..bytes).step_by(4096) {
            // SAFETY: `offset < bytes`, within the allocation; a byte is rewritten with its own
            // value, so the contents are unchanged.
            unsafe { std::ptr::write_volatile(base.add(offset), std::ptr::read_volatile(base.add(offset))) };
        }
    }

    fn fill_zero(&mut self) {
        for i in 0..self.len() {
            *self.get_mut(i) = T::ZERO;
        }
    }

    /// Prefetch slot `i` modulo the length.
    #[inline(always)]
    pub(crate) fn prefetch(&self, i: usize) {
        prefetch(self.get(i));
    }
}

/// Ask for the cache line of `x`.
#[inline(always)]
pub(crate) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a reference to a live value; prefetching never faults or writes.
    unsafe {
        std::arch::x86_64::_mm_prefetch(std::ptr::from_ref(x).cast::<i8>(), std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// Reserve room for `n` elements in `v` and touch it, so that its pages are resident before
/// they are needed: a cache whose memory is committed up front keeps a long job's peak RSS flat
/// instead of creeping up as the cache fills.
pub(crate) fn commit_vec<T: Copy + Default>(v: &mut Vec<T>, n: usize) {
    v.reserve(n.saturating_sub(v.len()));
    for x in v.spare_capacity_mut() {
        x.write(T::default());
    }
}

/// Where a table appends the ids it finds: the output, or a [`Staged`] writer into it.
pub(crate) trait Ids {
    /// Append the first `n` (≤ 3) of `ids`.
    fn push3(&mut self, ids: [u32; 3], n: usize);
    /// The output, with everything pushed before part of it.
    fn vec(&mut self) -> &mut Vec<u32>;
}

impl Ids for Vec<u32> {
    #[inline(always)]
    fn push3(&mut self, ids: [u32; 3], n: usize) {
        debug_assert!(n <= 3);
        // All three ids are copied whatever their number: a fixed-size copy, not a call to
        // memcpy, and no branch on the length.
        self.reserve(3);
        // SAFETY: `reserve` made room for 3 more ids; the first `n` (≤ 3) of them are the value,
        // so only those become part of the vector.
        unsafe {
            let len = self.len();
            self.as_mut_ptr().add(len).cast::<[u32; 3]>().write_unaligned(ids);
            self.set_len(len + n.min(3));
        }
    }

    #[inline(always)]
    fn vec(&mut self) -> &mut Vec<u32> {
        self
    }
}

/// Ids written straight into `out`'s spare room, with the write position, the end of the room
/// and the buffer's address kept in the encoding loop's registers: a `Vec`'s length and capacity
/// are reloaded from memory after every lookup (each reads the shared table with an acquire load,
/// which the compiler may not move them across), and gathering the ids on the stack first cost a
/// copy of every id. `out`'s own length is brought up to date by [`Ids::vec`] and on drop.
pub(crate) struct Staged<'a> {
    out: &'a mut Vec<u32>,
    ptr: *mut u32,
    len: usize,
    /// The room's end; 0 after [`Ids::vec`] handed `out` over, which makes the next push take
    /// the position from `out` again.
    cap: usize,
}

impl<'a> Staged<'a> {
    /// Room taken at a time.
    const ROOM: usize = 192;

    pub fn new(out: &'a mut Vec<u32>) -> Self {
        let ptr = out.as_mut_ptr();
        Staged { out, ptr, len: 0, cap: 0 }
    }

    /// Bring `out` up to date, make room for [`Staged::ROOM`] more ids, and take its position.
    #[cold]
    #[inline(never)]
    fn refill(&mut self) {
        self.sync();
        self.out.reserve(Self::ROOM);
        (self.ptr, self.len, self.cap) = (self.out.as_mut_ptr(), self.out.len(), self.out.capacity());
    }

    #[inline(always)]
    fn sync(&mut self) {
        if self.cap != 0 {
            // SAFETY: the ids up to `len` were written by `push3` within `out`'s capacity.
            unsafe { self.out.set_len(self.len) };
        }
        self.cap = 0;
    }
}

/// What was pushed stays in `out` however the writer goes away, an early return included.
impl Drop for Staged<'_> {
    fn drop(&mut self) {
        self.sync();
    }
}

impl Ids for Staged<'_> {
    #[inline(always)]
    fn push3(&mut self, ids: [u32; 3], n: usize) {
        debug_assert!(n <= 3);
        if self.len + 3 > self.cap {
            self.refill();
        }
        // SAFETY: `refill` left room for at least 3 more ids past `len` (`ptr`, `len` and `cap`
        // are `out`'s since); only the first `n` become part of it.
        unsafe { self.ptr.add(self.len).cast::<[u32; 3]>().write_unaligned(ids) };
        self.len += n.min(3);
    }

    #[inline(always)]
    fn vec(&mut self) -> &mut Vec<u32> {
        self.sync();
        self.out
    }
}

/// Packed key → one id, for read-mostly sets such as a vocabulary: 8-byte slots (a 32-bit
/// fingerprint of the hash and the id) and the keys in a separate array by id. The slots of a
/// 200k-token vocabulary take 4 MiB instead of 16, and the keys of the frequent tokens (low
/// ranks) sit together, so the lookups of common pieces stay in cache.
pub(crate) struct KeyIndex {
    slots: Slots<u64>,
    mask: usize,
    keys: Vec<u128>,
    len: usize,
}

#[inline(always)]
fn tag(h: u64) -> u64 {
    ((h >> 32) | 1) << 32
}

impl KeyIndex {
    /// An index for up to `entries` keys with ids below `id_bound` (load at most 1/2).
    pub fn new(entries: usize, id_bound: u32) -> KeyIndex {
        let n = entries.saturating_mul(2).max(16).next_power_of_two();
        KeyIndex { slots: Slots::zeroed(n), mask: n - 1, keys: vec![0; id_bound as usize], len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Add `key` → `id` (`id` below the bound given to [`new`](Self::new); keys are distinct).
    pub fn insert(&mut self, key: u128, id: u32) {
        debug_assert!(self.get_one(key).is_none() && (self.len + 1) * 2 <= self.mask + 1);
        let h = hash(key);
        let mut i = h as usize & self.mask;
        while *self.slots.get(i) != 0 {
            i = (i + 1) & self.mask;
        }
        *self.slots.get_mut(i) = tag(h) | u64::from(id);
        self.keys[id as usize] = key;
        self.len += 1;
    }

    #[inline(always)]
    pub fn prefetch_hashed(&self, h: u64) {
        self.slots.prefetch(h as usize);
    }

    #[inline(always)]
    pub fn get_one(&self, key: u128) -> Option<u32> {
        self.get_one_hashed(key, hash(key))
    }

    /// The id of `key`, given its [`hash`].
    #[inline(always)]
    pub fn get_one_hashed(&self, key: u128, h: u64) -> Option<u32> {
        let t = tag(h);
        let mut i = h as usize & self.mask;
        loop {
            let e = *self.slots.get(i);
            if e == 0 {
                return None;
            }
            if e & !0xffff_ffff == t {
                let id = e as u32;
                if self.keys.get(id as usize) == Some(&key) {
                    return Some(id);
                }
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// A packed-key → ids table with linear probing and a fixed number of slots.
pub(crate) struct SlotTable {
    slots: Slots<Slot>,
    mask: usize,
    len: usize,
    arena: Vec<u32>,
}

impl SlotTable {
    /// A table of `slots` slots (rounded up to a power of two, at least 16).
    pub fn with_slots(slots: usize) -> Self {
        let n = slots.max(16).next_power_of_two();
        SlotTable { slots: Slots::zeroed(n), mask: n - 1, len: 0, arena: Vec::new() }
    }

    /// Reserve `arena_ids` ids of arena and make the table's memory resident now (see
    /// [`commit_vec`]); the entries are kept.
    pub fn commit(&mut self, arena_ids: usize) {
        self.slots.commit();
        commit_vec(&mut self.arena, arena_ids);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    pub fn arena_len(&self) -> usize {
        self.arena.len()
    }

    #[cfg(test)]
    pub fn slots_ptr(&self) -> usize {
        self.slots.ptr.as_ptr() as usize
    }

    #[cfg(test)]
    pub fn arena_ptr(&self) -> usize {
        self.arena.as_ptr() as usize
    }

    #[cfg(test)]
    pub fn arena_capacity(&self) -> usize {
        self.arena.capacity()
    }

    /// The ids stored under `key`.
    #[cfg(test)]
    pub fn get(&self, key: u128) -> Option<Vec<u32>> {
        let mut out = Vec::new();
        self.emit_hashed(key, hash(key), &mut out).then_some(out)
    }

    /// Append the ids stored under `key` (with its [`hash`]) to `out`; false if there are none.
    #[inline(always)]
    pub fn emit_hashed(&self, key: u128, h: u64, out: &mut impl Ids) -> bool {
        // `Slots::get` masks the index.
        let mut i = h as usize;
        loop {
            let s = self.slots.get(i);
            if s.key == key {
                if s.n & ARENA == 0 {
                    out.push3(s.ids, s.n as usize);
                } else {
                    let out = out.vec();
                    let (start, n) = (s.ids[0] as usize, (s.n & !ARENA) as usize);
                    match self.arena.get(start..start + MAX_SHORT + 1) {
                        // Four fixed-size copies of four ids rather than a call to memcpy (a
                        // short piece has at most 15 ids; the arena has more after all but its
                        // last entries).
                        Some(src) => {
                            out.reserve(MAX_SHORT + 1);
                            // SAFETY: room for 16 more ids was reserved and `src` has 16; only
                            // the first `n` (≤ 15) become part of the vector.
                            unsafe {
                                let len = out.len();
                                let dst = out.as_mut_ptr().add(len).cast::<[u32; 4]>();
                                for k in 0..4 {
                                    dst.add(k).write_unaligned(src.as_ptr().cast::<[u32; 4]>().add(k).read_unaligned());
                                }
                                out.set_len(len + n);
                            }
                        }
                        None => out.extend_from_slice(&self.arena[start..start + n]),
                    }
                }
                return true;
            }
            if s.key == 0 {
                return false;
            }
            i = i.wrapping_add(1);
        }
    }

    /// The single id stored under `key`, if it holds exactly one.
    #[cfg(test)]
    pub fn get_one(&self, key: u128) -> Option<u32> {
        self.get(key).filter(|v| v.len() == 1).map(|v| v[0])
    }

    /// Store `ids` under `key` (replacing any value). The caller keeps the load at most 1/2.
    pub fn insert(&mut self, key: u128, ids: &[u32]) {
        debug_assert!(key != 0 && self.len < self.slots.len());
        let mut i = hash(key) as usize & self.mask;
        loop {
            let k = self.slots.get(i).key;
            if k == 0 || k == key {
                break;
            }
            i = (i + 1) & self.mask;
        }
        let s = self.slots.get_mut(i);
        if s.key == 0 {
            self.len += 1;
        }
        s.key = key;
        if ids.len() <= 3 {
            s.ids[..ids.len()].copy_from_slice(ids);
            s.n = ids.len() as u32;
        } else {
            s.ids[0] = self.arena.len() as u32;
            s.n = ids.len() as u32 | ARENA;
            self.arena.extend_from_slice(ids);
        }
    }

    /// Forget every entry, keeping the allocation.
    pub fn clear(&mut self) {
        if self.len > 0 {
            self.slots.fill_zero();
        }
        self.len = 0;
        self.arena.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_is_injective_on_length_and_bytes() {
        for n in 1..=MAX_SHORT {
            let bytes: Vec<u8> = (1..=n as u8).collect();
            let mut expected = [0u8; 16];
            expected[..n].copy_from_slice(&bytes);
            expected[15] = n as u8;
            assert_eq!(pack(&bytes), u128::from_le_bytes(expected), "length {n}");
        }
        assert_ne!(pack(b"a"), pack(b"a\0"));
        assert_ne!(pack(b"\0"), 0);
        let text = b"hello world, 0123456789abcdef";
        for pos in 0..text.len() {
            for len in 1..=MAX_SHORT.min(text.len() - pos) {
                assert_eq!(pack_at(text, pos, len), pack(&text[pos..pos + len]));
            }
        }
    }

    #[test]
    fn insert_get_arena_clear() {
        let mut t = SlotTable::with_slots(16);
        t.insert(pack(b"ab"), &[7]);
        t.insert(pack(b"abc"), &[1, 2, 3, 4, 5]);
        t.insert(pack(b"x"), &[]);
        assert_eq!(t.get(pack(b"ab")), Some(vec![7]));
        assert_eq!(t.get_one(pack(b"ab")), Some(7));
        assert_eq!(t.get(pack(b"abc")), Some(vec![1, 2, 3, 4, 5]));
        assert_eq!(t.get_one(pack(b"abc")), None);
        assert_eq!(t.get(pack(b"x")), Some(vec![]));
        assert_eq!(t.get(pack(b"abd")), None);
        t.insert(pack(b"ab"), &[8, 9]);
        assert_eq!(t.get(pack(b"ab")), Some(vec![8, 9]));
        assert_eq!(t.len(), 3);
        t.clear();
        assert_eq!(t.get(pack(b"ab")), None);
        assert_eq!(t.len(), 0);
    }

    /// A table holding a value of every length 0..=15 (ids `100 n ..`) under `k{n}`.
    fn every_length() -> (SlotTable, Vec<Vec<u32>>) {
        let mut t = SlotTable::with_slots(64);
        let values: Vec<Vec<u32>> = (0..=15u32).map(|n| (100 * n..100 * n + n).collect()).collect();
        for (i, v) in values.iter().enumerate() {
            t.insert(pack(format!("k{i}").as_bytes()), v);
        }
        (t, values)
    }

    #[test]
    fn emit_appends_exactly_the_stored_ids() {
        let (t, values) = every_length();
        // Every length, inline (≤ 3) or in the arena, the last entries included (they have
        // fewer than 16 ids after them).
        for (i, v) in values.iter().enumerate() {
            let key = pack(format!("k{i}").as_bytes());
            let mut out = vec![7, 8];
            assert!(t.emit_hashed(key, hash(key), &mut out));
            assert_eq!(out[..2], [7, 8]);
            assert_eq!(out[2..], v[..], "length {i}");
        }
        let mut out = vec![1];
        assert!(!t.emit_hashed(pack(b"absent"), hash(pack(b"absent")), &mut out));
        assert_eq!(out, [1]);
    }

    #[test]
    fn staged_ids_reach_the_output_in_order() {
        let (t, values) = every_length();
        // Runs of inline values long enough to fill the stage several times, arena values and
        // direct appends (as a cache miss makes) in between.
        let (mut out, mut expected) = (vec![9], vec![9]);
        let mut staged = Staged::new(&mut out);
        for step in 0..2000usize {
            let i = match step % 97 {
                0 => 12,
                k => k % 4,
            };
            let key = pack(format!("k{i}").as_bytes());
            assert!(t.emit_hashed(key, hash(key), &mut staged));
            expected.extend_from_slice(&values[i]);
            if step % 331 == 5 {
                staged.vec().extend_from_slice(&[1, 2, 3, 4, 5]);
                expected.extend_from_slice(&[1, 2, 3, 4, 5]);
            }
        }
        drop(staged);
        assert_eq!(out, expected);
    }

    #[test]
    fn key_index_finds_every_key_and_rejects_others() {
        let mut t = KeyIndex::new(5000, 5000);
        for i in 0u32..5000 {
            t.insert(pack(&(i * 7).to_le_bytes()), i);
        }
        assert_eq!(t.len(), 5000);
        for i in 0u32..5000 {
            assert_eq!(t.get_one(pack(&(i * 7).to_le_bytes())), Some(i));
            assert_eq!(t.get_one(pack(&(i * 7 + 1).to_le_bytes())), None);
        }
    }

    #[test]
    fn survives_collisions_at_half_load() {
        let mut t = SlotTable::with_slots(1024);
        for i in 0u32..512 {
            t.insert(pack(&i.to_le_bytes()), &[i]);
        }
        for i in 0u32..512 {
            assert_eq!(t.get_one(pack(&i.to_le_bytes())), Some(i));
        }
        assert_eq!(t.get(pack(&1000u32.to_le_bytes())), None);
    }
}
