//! The harness's global allocator: mimalloc, plus a count of the bytes live and
//! their peak, for `model_<name>_peak_bytes`. Counting is off unless a measure
//! turns it on ([`start`]); off, each allocation pays one relaxed load.
//!
//! Owns: the byte counters. Must not: change what is allocated or where.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};

static ON: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);

/// mimalloc with optional counting.
pub struct Counting;

// SAFETY: every call is forwarded unchanged to mimalloc, which upholds the
// GlobalAlloc contract; the counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { mimalloc::MiMalloc.alloc(l) };
        if ON.load(Relaxed) && !p.is_null() {
            grew(l.size() as i64);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { mimalloc::MiMalloc.alloc_zeroed(l) };
        if ON.load(Relaxed) && !p.is_null() {
            grew(l.size() as i64);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if ON.load(Relaxed) {
            LIVE.fetch_sub(l.size() as i64, Relaxed);
        }
        // SAFETY: `p` came from this allocator with layout `l` (caller's contract).
        unsafe { mimalloc::MiMalloc.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's pointer, layout and size.
        let q = unsafe { mimalloc::MiMalloc.realloc(p, l, new) };
        if ON.load(Relaxed) && !q.is_null() {
            grew(new as i64 - l.size() as i64);
        }
        q
    }
}

fn grew(by: i64) {
    let now = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(now, Relaxed);
}

/// Starts counting from zero: what is freed afterwards but was allocated before
/// counts negative, so the peak is "bytes beyond what was live at the start".
pub fn start() {
    LIVE.store(0, Relaxed);
    PEAK.store(0, Relaxed);
    ON.store(true, Relaxed);
}

/// Stops counting; returns the peak since [`start`] in bytes.
pub fn stop() -> i64 {
    ON.store(false, Relaxed);
    PEAK.load(Relaxed)
}
