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
//! The extension module installs it; small blocks go to the system allocator unchanged.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of at least this many bytes are mapped.
pub const LARGE: usize = 256 << 10;

const PAGE: usize = 4096;

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
// layout, which the caller passes back unchanged to `dealloc` and `realloc`; mapped blocks are
// page-aligned, which satisfies any alignment `mapped` accepts, and zero-filled.
unsafe impl GlobalAlloc for LargeFromOs {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            os::map(layout.size())
        } else {
            // SAFETY: the caller's contract (non-zero size) is passed on.
            unsafe { System.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            os::map(layout.size())
        } else {
            // SAFETY: as in `alloc`.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if mapped(layout) {
            // SAFETY: a mapped block of this size (see the impl's comment).
            unsafe { os::unmap(ptr, layout.size()) }
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
            // SAFETY: a mapped block of `layout.size()` bytes.
            (true, true) => unsafe { os::remap(ptr, layout.size(), new_size) },
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

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(a: &LargeFromOs, size: usize, align: usize) -> (*mut u8, Layout) {
        let layout = Layout::from_size_align(size, align).unwrap();
        // SAFETY: non-zero size.
        let p = unsafe { a.alloc(layout) };
        assert!(!p.is_null() && p as usize % align == 0);
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
        let a = LargeFromOs;
        let sizes = [100, LARGE - 1, LARGE, LARGE + 1, 3 * LARGE + 17, 40 << 20];
        for &from in &sizes {
            for &to in &sizes {
                for align in [1, 8, 64, 4096, 8192] {
                    let (p, layout) = filled(&a, from, align);
                    // SAFETY: a live block of `layout`, non-zero new size.
                    let q = unsafe { a.realloc(p, layout, to) };
                    assert!(!q.is_null() && q as usize % align == 0, "{from} -> {to}, align {align}");
                    check(q, from.min(to));
                    // SAFETY: the block `realloc` returned, with its new layout.
                    unsafe { a.dealloc(q, Layout::from_size_align(to, align).unwrap()) };
                }
            }
        }
    }

    #[test]
    fn zeroed_blocks_are_zero() {
        let a = LargeFromOs;
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
    fn vectors_grow_and_shrink_through_it() {
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
