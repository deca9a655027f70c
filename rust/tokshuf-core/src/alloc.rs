//! A global allocator that takes large blocks straight from the OS.
//!
//! The streaming jobs pass megabyte-sized buffers between threads (line batches, token batches,
//! run buffers), each a little different in size. glibc's malloc raises its mmap threshold the
//! first time such a block is freed, after which they come from per-thread heaps that fragment:
//! the RSS of a `preprocess` crept up by ~15% between a 200 MB and a 2 GB input. Mapping every
//! block of [`LARGE`] bytes or more and unmapping it when freed keeps the RSS flat (what a fixed
//! `M_MMAP_THRESHOLD` does, without changing the malloc settings of the Python process). Growing
//! such a block is an `mremap`, which moves pages instead of copying bytes.
//!
//! Freed blocks are kept for reuse, up to a fixed number and size ([`CACHE_BLOCKS`],
//! [`CACHE_BYTES`]): a pipeline that frees a batch buffer and maps the next one would otherwise
//! pay a page fault (and the kernel's zeroing) for every 4 KiB of every batch, about a tenth of a
//! `preprocess` run's CPU time. Sizes are rounded up to one of four classes per power of two, so
//! buffers of similar sizes share blocks; the cache holds whole blocks only, so it cannot
//! fragment. A block not taken again within [`CACHE_BLOCKS`] later frees is unmapped: a long run
//! meets more and more one-off sizes (a long document's buffers), and without an age limit they
//! filled the cache to its cap, adding ~24 MB to the RSS of a 2 GB `preprocess` that a 200 MB
//! one never reached.
//!
//! The extension module installs it; small blocks go to the system allocator unchanged.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of at least this many bytes are mapped.
pub const LARGE: usize = 256 << 10;

const PAGE: usize = 4096;

/// At most this many freed blocks are kept for reuse: a kept block is unmapped once this many
/// blocks were freed after it.
pub const CACHE_BLOCKS: usize = 16;
/// At most this many bytes of freed blocks are kept for reuse.
pub const CACHE_BYTES: usize = 32 << 20;
/// Larger blocks are never kept (unmapped when freed). The ids of an `encode_batch_numpy` call of
/// a thousand web documents (4-5 MB, handed to numpy and freed by Python after use) fit: at 4 MiB
/// they were mapped and faulted in afresh at every call, ~9% of tokenizing's time.
const CACHE_MAX_BLOCK: usize = 16 << 20;

/// The mapped length of a block of `size` bytes: rounded up to a multiple of a quarter of the
/// power of two below it (under 25% more address space, and the pages past `size` are never
/// touched by the block's owner).
#[inline]
fn class(size: usize) -> usize {
    let step = (size.next_power_of_two() / 8).max(PAGE);
    size.div_ceil(step) * step
}

/// A freed block: its address, mapped length, and when it was freed (see `Cache::frees`).
#[derive(Clone, Copy)]
struct Block {
    addr: usize,
    len: usize,
    freed: u64,
}

/// Freed blocks kept for reuse, oldest first.
struct Cache {
    blocks: [Block; CACHE_BLOCKS],
    n: usize,
    bytes: usize,
    /// Blocks offered to the cache so far: its clock.
    frees: u64,
}

/// Only ever `try_lock`ed: a thread that finds it busy maps or unmaps directly, so no thread
/// waits on it, and a child forked while another thread held it (a DataLoader worker) is not
/// deadlocked, it just maps directly from then on.
static CACHE: std::sync::Mutex<Cache> = std::sync::Mutex::new(Cache {
    blocks: [Block { addr: 0, len: 0, freed: 0 }; CACHE_BLOCKS],
    n: 0,
    bytes: 0,
    frees: 0,
});

impl Cache {
    fn remove(&mut self, i: usize) -> Block {
        let b = self.blocks[i];
        self.blocks.copy_within(i + 1..self.n, i);
        self.n -= 1;
        self.bytes -= b.len;
        b
    }

    /// Unmap the oldest block.
    fn drop_oldest(&mut self) {
        let b = self.remove(0);
        // SAFETY: a cached block is mapped and owned by the cache alone.
        unsafe { os::unmap(b.addr as *mut u8, b.len) };
    }
}

/// A cached block made `len` mapped bytes long: the one of the nearest length between half and
/// twice `len` (the most recently freed among equals), its tail unmapped if it is longer, its
/// mapping extended if it is shorter. Batches of similar but unequal sizes (a thousand documents'
/// ids) then reuse each other's resident pages instead of faulting in fresh ones; the pages a
/// shorter block gains are faulted in only if they are written.
fn take_cached(len: usize) -> Option<*mut u8> {
    let mut c = CACHE.try_lock().ok()?;
    let fits = |b: &Block| b.len >= len / 2 && b.len <= len.saturating_mul(2);
    let (i, _) =
        c.blocks[..c.n].iter().enumerate().rev().filter(|(_, b)| fits(b)).min_by_key(|(_, b)| b.len.abs_diff(len))?;
    let b = c.remove(i);
    drop(c);
    let p = b.addr as *mut u8;
    if b.len == len {
        return Some(p);
    }
    if b.len > len {
        // SAFETY: the block is mapped and now owned here; its tail past `len` (a multiple of the
        // page size, as every class is) is not used again.
        unsafe { os::unmap(p.add(len), b.len - len) };
        return Some(p);
    }
    // SAFETY: a mapped block of `b.len` bytes, owned here; on failure it is still mapped.
    let q = unsafe { os::remap(p, b.len, len) };
    if q.is_null() {
        // SAFETY: as above; nobody else holds it.
        unsafe { os::unmap(p, b.len) };
        return None;
    }
    Some(q)
}

/// Keep the block `p` of `len` mapped bytes for reuse, unmapping the ones too old and, if the
/// cache is full, the oldest (a block nobody asked for again is not worth its memory); false if
/// it is not kept.
fn keep(p: *mut u8, len: usize) -> bool {
    if len > CACHE_MAX_BLOCK {
        return false;
    }
    let Ok(mut c) = CACHE.try_lock() else { return false };
    c.frees += 1;
    let now = c.frees;
    let too_old = |b: &Block| now - b.freed >= CACHE_BLOCKS as u64;
    while c.n > 0 && (too_old(&c.blocks[0]) || c.n == CACHE_BLOCKS || c.bytes + len > CACHE_BYTES) {
        c.drop_oldest();
    }
    let n = c.n;
    c.blocks[n] = Block { addr: p as usize, len, freed: now };
    c.n += 1;
    c.bytes += len;
    true
}

/// Free a block of `len` mapped bytes: into the cache, or back to the OS.
///
/// # Safety
/// `p` is a live block of `len` mapped bytes, not used afterwards.
unsafe fn free_block(p: *mut u8, len: usize) {
    if !keep(p, len) {
        // SAFETY: the caller's contract.
        unsafe { os::unmap(p, len) }
    }
}

/// Large blocks from `mmap`, the rest from [`System`] (see the module docs). Linux only: other
/// systems use [`System`] for everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct LargeFromOs;

#[inline]
fn mapped(layout: Layout) -> bool {
    cfg!(target_os = "linux") && layout.size() >= LARGE && layout.align() <= PAGE
}

#[cfg(target_os = "linux")]
mod os {
    use std::ptr::null_mut;

    pub fn map(size: usize) -> *mut u8 {
        // SAFETY: an anonymous private mapping at an address the kernel picks.
        let p = unsafe {
            libc::mmap(
                null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            null_mut()
        } else {
            p.cast()
        }
    }

    /// # Safety
    /// `p` and `size` are those of a live block from [`map`] or [`remap`].
    pub unsafe fn unmap(p: *mut u8, size: usize) {
        // SAFETY: the caller's contract; the block is not used afterwards.
        unsafe { libc::munmap(p.cast(), size) };
    }

    /// # Safety
    /// As for [`unmap`].
    pub unsafe fn remap(p: *mut u8, size: usize, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract; the kernel moves the pages if it must.
        let q = unsafe { libc::mremap(p.cast(), size, new_size, libc::MREMAP_MAYMOVE) };
        if q == libc::MAP_FAILED {
            null_mut()
        } else {
            q.cast()
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    pub fn map(_: usize) -> *mut u8 {
        unreachable!("large blocks are mapped on Linux only")
    }
    pub unsafe fn unmap(_: *mut u8, _: usize) {
        unreachable!("large blocks are mapped on Linux only")
    }
    pub unsafe fn remap(_: *mut u8, _: usize, _: usize) -> *mut u8 {
        unreachable!("large blocks are mapped on Linux only")
    }
}

// SAFETY: every block is returned by the allocator that made it: `mapped` depends only on the
// layout, which the caller passes back unchanged to `dealloc` and `realloc`, and so does the
// mapped length (`class` of the size); mapped blocks are page-aligned, which satisfies any
// alignment `mapped` accepts; `alloc_zeroed` returns fresh (zero) mappings or cleared blocks.
unsafe impl GlobalAlloc for LargeFromOs {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            let len = class(layout.size());
            take_cached(len).unwrap_or_else(|| os::map(len))
        } else {
            // SAFETY: the caller's contract (non-zero size) is passed on.
            unsafe { System.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            let len = class(layout.size());
            match take_cached(len) {
                Some(p) => {
                    // SAFETY: a cached block of `len` bytes, now owned by the caller. Clearing
                    // resident pages costs less than faulting in fresh ones, which the kernel
                    // clears as well.
                    unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
                    p
                }
                None => os::map(len),
            }
        } else {
            // SAFETY: as in `alloc`.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if mapped(layout) {
            // SAFETY: a mapped block of this class (see the impl's comment).
            unsafe { free_block(ptr, class(layout.size())) }
        } else {
            // SAFETY: a block of `System` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees a valid layout of `new_size` with the same alignment.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (mapped(layout), mapped(new_layout)) {
            // SAFETY: a `System` block with this layout, resized by `System`.
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            (true, true) => {
                let (old_len, new_len) = (class(layout.size()), class(new_size));
                if old_len == new_len {
                    return ptr;
                }
                // A cached block near the new class costs a copy of resident bytes (and the faults
                // of the pages it lacks, if it is shorter); growing the mapping would fault in
                // (and the kernel clear) every new page.
                let q = match take_cached(new_len) {
                    Some(q) => q,
                    None => {
                        // SAFETY: a mapped block of `old_len` bytes.
                        let q = unsafe { os::remap(ptr, old_len, new_len) };
                        if !q.is_null() {
                            return q;
                        }
                        // The kernel moves only a block that is one mapping of one kind; advice on
                        // part of it (huge pages for a merge's nodes) splits it. Copy it into a
                        // fresh one instead.
                        os::map(new_len)
                    }
                };
                if !q.is_null() {
                    // SAFETY: both blocks are live, distinct and at least this long; the old one
                    // is not used afterwards.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
                        free_block(ptr, old_len);
                    }
                }
                q
            }
            _ => {
                // SAFETY: `new_layout` has a non-zero size (the caller's contract).
                let new = unsafe { self.alloc(new_layout) };
                if !new.is_null() {
                    // SAFETY: both blocks are live, distinct and at least this long; the old one
                    // is freed with its own layout.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                new
            }
        }
    }
}

/// An empty vector with room for `n` items, or an error naming `what` and the size when the
/// machine cannot give that much (a size from a user's request: never an abort).
pub fn try_with_capacity<T>(n: usize, what: &str) -> crate::error::Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        let bytes = (n as u128) * std::mem::size_of::<T>() as u128;
        crate::error::Error::invalid(format!(
            "{what} would hold {n} entries ({:.1} GB), more than this machine can allocate; ask for fewer \
             samples or a shorter sequence_length",
            bytes as f64 / 1e9
        ))
    })?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests share the cache, and a block may serve any size near its own: each runs alone.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn empty_cache() {
        let mut c = CACHE.lock().unwrap();
        while c.n > 0 {
            c.drop_oldest();
        }
    }

    fn filled(a: &LargeFromOs, size: usize, align: usize) -> (*mut u8, Layout) {
        let layout = Layout::from_size_align(size, align).unwrap();
        // SAFETY: non-zero size.
        let p = unsafe { a.alloc(layout) };
        assert!(!p.is_null() && (p as usize).is_multiple_of(align));
        for i in 0..size {
            // SAFETY: in bounds of the block.
            unsafe { *p.add(i) = (i % 251) as u8 };
        }
        (p, layout)
    }

    fn check(p: *mut u8, n: usize) {
        for i in 0..n {
            // SAFETY: in bounds of the block.
            assert_eq!(unsafe { *p.add(i) }, (i % 251) as u8, "byte {i}");
        }
    }

    #[test]
    fn realloc_keeps_the_bytes_across_the_threshold_both_ways() {
        let _serial = serial();
        let a = LargeFromOs;
        let sizes = [100, LARGE - 1, LARGE, LARGE + 1, 3 * LARGE + 17, 40 << 20];
        for &from in &sizes {
            for &to in &sizes {
                for align in [1, 8, 64, 4096, 8192] {
                    let (p, layout) = filled(&a, from, align);
                    // SAFETY: a live block of `layout`, non-zero new size.
                    let q = unsafe { a.realloc(p, layout, to) };
                    assert!(!q.is_null() && (q as usize).is_multiple_of(align), "{from} -> {to}, align {align}");
                    check(q, from.min(to));
                    // SAFETY: the block `realloc` returned, with its new layout.
                    unsafe { a.dealloc(q, Layout::from_size_align(to, align).unwrap()) };
                }
            }
        }
    }

    /// A block whose middle was advised to use huge pages is two or three mappings of
    /// different kinds, which `mremap` refuses to move: growing it must still succeed (the
    /// merge of a long piece advises its nodes so, and a block is reused once freed).
    #[test]
    #[cfg(target_os = "linux")]
    fn realloc_grows_a_block_split_by_advice() {
        let _serial = serial();
        empty_cache();
        let a = LargeFromOs;
        let (p, layout) = filled(&a, 8 << 20, 8);
        // SAFETY: the whole huge pages inside the live block.
        let advised = unsafe {
            let from = (p as usize).next_multiple_of(2 << 20);
            libc::madvise(from as *mut libc::c_void, 4 << 20, libc::MADV_HUGEPAGE)
        };
        assert_eq!(advised, 0, "the kernel takes huge-page advice");
        // SAFETY: a live block of `layout`, non-zero new size; freed with its new layout.
        unsafe {
            let q = a.realloc(p, layout, 24 << 20);
            assert!(!q.is_null(), "a split block grows");
            check(q, 8 << 20);
            a.dealloc(q, Layout::from_size_align(24 << 20, 8).unwrap());
        }
    }

    #[test]
    fn classes_cover_the_size_with_a_quarter_step_at_most() {
        for size in [LARGE, LARGE + 1, 300_000, 1 << 20, (1 << 20) + 1, 1_114_112, 40 << 20] {
            let c = class(size);
            assert!(c >= size && c.is_multiple_of(PAGE) && c - size < size.next_power_of_two() / 8, "{size} -> {c}");
            assert_eq!(class(c), c, "a class is its own class");
        }
        assert_eq!(class(1_114_112), 1_310_720);
    }

    #[test]
    fn zeroed_blocks_are_zero_and_freed_ones_are_reused_and_cleared() {
        let _serial = serial();
        let a = LargeFromOs;
        // The second: the ids of a thousand web documents (4-5 MB).
        for size in [(2 << 20) + (600 << 10), (4 << 20) + (700 << 10)] {
            let layout = Layout::from_size_align(size, 64).unwrap();
            // SAFETY: non-zero size; each block is written within bounds and freed with its layout.
            unsafe {
                let p = a.alloc(layout);
                std::ptr::write_bytes(p, 0xab, layout.size());
                a.dealloc(p, layout);
                let q = a.alloc_zeroed(layout);
                assert_eq!(q, p, "the freed block is reused");
                assert!(std::slice::from_raw_parts(q, layout.size()).iter().all(|&b| b == 0));
                a.dealloc(q, layout);
            }
        }
        for size in [10, LARGE, 5 << 20] {
            let layout = Layout::from_size_align(size, 16).unwrap();
            // SAFETY: non-zero size; read within the block, then freed with its layout.
            unsafe {
                let p = a.alloc_zeroed(layout);
                assert!(std::slice::from_raw_parts(p, size).iter().all(|&b| b == 0));
                a.dealloc(p, layout);
            }
        }
    }

    #[test]
    fn a_block_serves_nearby_sizes_with_its_resident_pages() {
        let _serial = serial();
        empty_cache();
        let a = LargeFromOs;
        let mid = Layout::from_size_align(5 << 20, 64).unwrap();
        let smaller = Layout::from_size_align((3 << 20) + (100 << 10), 64).unwrap();
        let larger = Layout::from_size_align(6 << 20, 64).unwrap();
        // SAFETY: each block is written within its layout's bounds and freed with that layout.
        unsafe {
            let p = a.alloc(mid);
            std::ptr::write_bytes(p, 1, mid.size());
            a.dealloc(p, mid);
            let q = a.alloc(smaller);
            assert_eq!(q, p, "a larger freed block serves a smaller size");
            std::ptr::write_bytes(q, 2, smaller.size());
            a.dealloc(q, smaller);
            let r = a.alloc(larger);
            std::ptr::write_bytes(r, 3, larger.size());
            assert!(std::slice::from_raw_parts(r, larger.size()).iter().all(|&b| b == 3));
            a.dealloc(r, larger);
            let c = CACHE.lock().unwrap();
            assert_eq!(
                (c.n, c.blocks[0].len),
                (1, class(larger.size())),
                "the smaller block was grown, not a new one mapped"
            );
        }
        // A block more than twice as long as the size is left alone.
        let tiny = Layout::from_size_align(LARGE, 64).unwrap();
        // SAFETY: as above.
        unsafe {
            let t = a.alloc(tiny);
            a.dealloc(t, tiny);
        }
        let c = CACHE.lock().unwrap();
        assert_eq!((c.n, c.blocks[0].len), (2, class(larger.size())));
    }

    #[test]
    fn the_cache_is_bounded() {
        let _serial = serial();
        let a = LargeFromOs;
        let layout = Layout::from_size_align(3 << 20 | 777, 8).unwrap();
        // SAFETY: blocks allocated and freed with the same layout.
        unsafe {
            let blocks: Vec<*mut u8> = (0..2 * CACHE_BLOCKS).map(|_| a.alloc(layout)).collect();
            for &p in &blocks {
                a.dealloc(p, layout);
            }
        }
        let c = CACHE.lock().unwrap();
        assert!(c.n <= CACHE_BLOCKS && c.bytes <= CACHE_BYTES);
        assert_eq!(c.blocks[..c.n].iter().map(|b| b.len).sum::<usize>(), c.bytes);
        assert!(c.blocks[..c.n].iter().all(|b| c.frees - b.freed < CACHE_BLOCKS as u64));
    }

    #[test]
    fn a_block_not_asked_for_again_leaves_the_cache() {
        let _serial = serial();
        let a = LargeFromOs;
        // Sizes more than twice apart, so that neither block serves the other.
        let once = Layout::from_size_align(300 << 10, 8).unwrap();
        let other = Layout::from_size_align((1 << 20) + (900 << 10), 8).unwrap();
        let cached = |layout: Layout| {
            let c = CACHE.lock().unwrap();
            c.blocks[..c.n].iter().any(|b| b.len == class(layout.size()))
        };
        // SAFETY: blocks allocated and freed with the same layout.
        unsafe {
            a.dealloc(a.alloc(once), once);
            let start = CACHE.lock().unwrap().frees;
            while CACHE.lock().unwrap().frees < start + CACHE_BLOCKS as u64 {
                a.dealloc(a.alloc(other), other);
            }
        }
        assert!(!cached(once), "unmapped after {CACHE_BLOCKS} later frees");
    }

    #[test]
    fn vectors_grow_and_shrink_through_it() {
        let _serial = serial();
        let a = LargeFromOs;
        let layout = Layout::array::<u64>(1).unwrap();
        // SAFETY: a 1-element block grown and shrunk with the layouts of its current size.
        unsafe {
            let mut p = a.alloc(layout).cast::<u64>();
            let mut cap = 1usize;
            for n in 0..2_000_000u64 {
                if n as usize == cap {
                    p = a.realloc(p.cast(), Layout::array::<u64>(cap).unwrap(), cap * 16).cast();
                    cap *= 2;
                }
                *p.add(n as usize) = n * 3;
            }
            assert!((0..2_000_000u64).all(|n| *p.add(n as usize) == n * 3));
            p = a.realloc(p.cast(), Layout::array::<u64>(cap).unwrap(), 80).cast();
            assert!((0..10u64).all(|n| *p.add(n as usize) == n * 3));
            a.dealloc(p.cast(), Layout::array::<u64>(10).unwrap());
        }
    }
}
