//! A global allocator for programs that run compiled kernels on large arrays.
//!
//! The system allocator places a large block 16 bytes into its pages, so a dense operand's
//! rows straddle cache lines: a row of 32 `f32` (128 bytes) then spans three lines instead of
//! two, and SpMM on a graph whose B exceeds the caches moves half as much again from memory
//! (on the development machine 73 ms against 52 ms for the same kernel on a 2^20-row R-MAT
//! graph at 32 features). [`CacheAligned`] aligns every block of at least [`LARGE`] bytes
//! to a cache line, and every block of at least [`HUGE`] bytes to 2 MiB with transparent huge
//! pages requested (`madvise(MADV_HUGEPAGE)` on Linux; fewer TLB misses in a gather, about
//! 5% more there). The `sparsec` command line and the benches install it; a program of
//! its own does so with
//!
//! ```
//! #[global_allocator]
//! static ALLOC: sparsec::alloc::CacheAligned = sparsec::alloc::CacheAligned;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};

/// Size from which a block is aligned to a cache line ([`LINE`]).
pub const LARGE: usize = 4096;

/// Size from which a block is aligned to [`HUGE_PAGE`] and advised to use huge pages.
pub const HUGE: usize = 32 << 20;

/// A cache line, in bytes.
pub const LINE: usize = 64;

/// A transparent huge page on x86-64, in bytes.
pub const HUGE_PAGE: usize = 2 << 20;

/// The system allocator with large blocks aligned to cache lines and huge blocks to huge
/// pages (module documentation).
#[derive(Clone, Copy, Debug, Default)]
pub struct CacheAligned;

/// The layout a request of `l` is served with: the same size, the alignment raised.
fn served(l: Layout) -> Layout {
    let align = match l.size() {
        s if s >= HUGE => HUGE_PAGE,
        s if s >= LARGE => LINE,
        _ => return l,
    };
    l.align_to(align).unwrap_or(l)
}

#[cfg(target_os = "linux")]
fn advise_huge(p: *mut u8, size: usize) {
    unsafe extern "C" {
        fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: std::ffi::c_int) -> std::ffi::c_int;
    }
    const MADV_HUGEPAGE: std::ffi::c_int = 14;
    // Whole huge pages only; a refusal (no THP in this kernel) leaves ordinary pages.
    let len = size & !(HUGE_PAGE - 1);
    if len > 0 {
        // SAFETY: `p` starts a block of at least `len` bytes that this allocator owns.
        unsafe { madvise(p.cast(), len, MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_: *mut u8, _: usize) {}

// SAFETY: every block is allocated and freed by `System` with the layout `served` gives
// its request, which depends only on the request's size and alignment.
unsafe impl GlobalAlloc for CacheAligned {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let s = served(l);
        let p = unsafe { System.alloc(s) };
        if !p.is_null() && s.size() >= HUGE {
            advise_huge(p, s.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let s = served(l);
        let p = unsafe { System.alloc_zeroed(s) };
        if !p.is_null() && s.size() >= HUGE {
            advise_huge(p, s.size());
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, served(l)) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        let Ok(new) = Layout::from_size_align(new_size, l.align()) else { return std::ptr::null_mut() };
        let (old_s, new_s) = (served(l), served(new));
        if old_s.align() == new_s.align() && new_s.size() < HUGE {
            return unsafe { System.realloc(p, old_s, new_size) };
        }
        // The alignment changes (or the block becomes huge): a new block, the contents
        // copied, the old one freed.
        let q = unsafe { self.alloc(new) };
        if !q.is_null() {
            // SAFETY: both blocks hold at least the smaller size and do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(p, q, l.size().min(new_size)) };
            unsafe { self.dealloc(p, l) };
        }
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_start_on_cache_lines_and_huge_ones_on_huge_pages() {
        let a = CacheAligned;
        for (size, align) in [(LARGE, LINE), (LARGE * 3 + 4, LINE), (HUGE, HUGE_PAGE)] {
            let l = Layout::from_size_align(size, 4).unwrap();
            let p = unsafe { a.alloc(l) };
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0, "{size} bytes");
            unsafe { a.dealloc(p, l) };
        }
        // Small blocks keep the system allocator's placement (no alignment asked for).
        assert_eq!(served(Layout::from_size_align(100, 4).unwrap()).align(), 4);
    }

    #[test]
    fn realloc_across_the_thresholds_keeps_the_contents_and_the_alignment() {
        let a = CacheAligned;
        let mut l = Layout::from_size_align(64, 4).unwrap();
        let mut p = unsafe { a.alloc(l) };
        for i in 0..64u8 {
            unsafe { *p.add(i as usize) = i };
        }
        for size in [LARGE + 8, HUGE + 8, LARGE * 2, 32] {
            p = unsafe { a.realloc(p, l, size) };
            assert!(!p.is_null());
            l = Layout::from_size_align(size, 4).unwrap();
            assert_eq!(p as usize % served(l).align(), 0, "{size} bytes");
            for i in 0..32u8 {
                assert_eq!(unsafe { *p.add(i as usize) }, i, "byte {i} after growing to {size}");
            }
        }
        unsafe { a.dealloc(p, l) };
    }
}
