//! The emulated accelerator's memory: one fixed-size arena per device, carved into
//! 64-byte-aligned blocks by a first-fit free list, with counters for allocations
//! and for every byte copied in or out. Like a caching device allocator, freed
//! blocks stay reserved in a cache that serves later requests of the same size;
//! [`Pool::empty_cache`] (or an allocation that would otherwise fail) returns them
//! to the free list. The host never reads it
//! directly: tensors on an emu device are not host-accessible (their allocator says
//! so, and the runtime refuses `to_vec`, printing and CPU kernels on them), and data
//! moves only through the explicit copies in [`crate::device`].
//!
//! Owns: the arena, block bookkeeping and statistics. Must not: know tensors,
//! dtypes or dispatch.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Block alignment (and granularity) in bytes.
pub const ALIGN: usize = 64;

/// Default arena size per device instance (virtual memory; pages are touched only
/// when used). `OPAL_EMU_MEMORY_MB` overrides it.
pub const DEFAULT_CAPACITY: usize = 512 << 20;

/// Counters of one pool.
#[derive(Debug, Default)]
pub struct Stats {
    pub allocations: AtomicU64,
    pub frees: AtomicU64,
    pub bytes_in_use: AtomicU64,
    pub peak_bytes: AtomicU64,
    /// Bytes of freed blocks kept in the cache (reserved = in use + cached).
    pub cached_bytes: AtomicU64,
    /// Bytes copied host -> device.
    pub h2d_bytes: AtomicU64,
    /// Bytes copied device -> host.
    pub d2h_bytes: AtomicU64,
    /// Bytes copied device -> device.
    pub d2d_bytes: AtomicU64,
    /// Device kernels run (native ops).
    pub launches: AtomicU64,
}

/// A plain copy of [`Stats`] at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub allocations: u64,
    pub frees: u64,
    pub bytes_in_use: u64,
    pub peak_bytes: u64,
    pub cached_bytes: u64,
    pub h2d_bytes: u64,
    pub d2h_bytes: u64,
    pub d2d_bytes: u64,
    pub launches: u64,
}

struct Arena {
    base: NonNull<u8>,
    /// Size in bytes.
    cap: usize,
    /// Free blocks `(offset, len)`, sorted by offset, never adjacent.
    free: Mutex<Vec<(usize, usize)>>,
}

// SAFETY: `base` is an owned allocation never freed (the arena lives for the process);
// all bookkeeping is behind the mutex.
unsafe impl Send for Arena {}
// SAFETY: see `Send`.
unsafe impl Sync for Arena {}

/// One device instance's memory.
pub struct Pool {
    name: &'static str,
    capacity: usize,
    arena: OnceLock<Option<Arena>>,
    /// Freed blocks `(offset, len)` still reserved, reused for requests of `len`.
    cache: Mutex<Vec<(usize, usize)>>,
    pub stats: Stats,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    /// A pool named `name` (the device name, for messages) with `capacity` bytes.
    pub const fn new(name: &'static str, capacity: usize) -> Pool {
        Pool {
            name,
            capacity,
            arena: OnceLock::new(),
            cache: Mutex::new(Vec::new()),
            stats: Stats {
                allocations: AtomicU64::new(0),
                frees: AtomicU64::new(0),
                bytes_in_use: AtomicU64::new(0),
                peak_bytes: AtomicU64::new(0),
                cached_bytes: AtomicU64::new(0),
                h2d_bytes: AtomicU64::new(0),
                d2h_bytes: AtomicU64::new(0),
                d2d_bytes: AtomicU64::new(0),
                launches: AtomicU64::new(0),
            },
        }
    }

    /// The arena size in bytes (`OPAL_EMU_MEMORY_MB` when set).
    pub fn capacity(&self) -> usize {
        std::env::var("OPAL_EMU_MEMORY_MB")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .map_or(self.capacity, |mb| mb << 20)
    }

    fn arena(&self) -> Option<&Arena> {
        self.arena
            .get_or_init(|| {
                let cap = self.capacity().max(ALIGN).next_multiple_of(ALIGN);
                let layout = Layout::from_size_align(cap, ALIGN).ok()?;
                // SAFETY: `layout` has a non-zero size.
                let base = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })?;
                Some(Arena {
                    base,
                    cap,
                    free: Mutex::new(vec![(0, cap)]),
                })
            })
            .as_ref()
    }

    /// Allocates `nbytes` (rounded up to [`ALIGN`]); zero bytes get a dangling aligned
    /// pointer.
    pub fn alloc(&self, nbytes: usize) -> Result<NonNull<u8>, String> {
        if nbytes == 0 {
            return NonNull::new(std::ptr::without_provenance_mut(ALIGN))
                .ok_or_else(|| "unreachable: null dangling pointer".to_string());
        }
        let arena = self
            .arena()
            .ok_or_else(|| format!("{}: cannot reserve the device arena", self.name))?;
        let need = nbytes.next_multiple_of(ALIGN);
        let off = match self.take_cached(need) {
            Some(off) => off,
            None => match take_free(arena, need) {
                Some(off) => off,
                None => {
                    // Like a caching allocator under pressure: release the cache, retry.
                    self.empty_cache();
                    take_free(arena, need).ok_or_else(|| {
                        let in_use = self.stats.bytes_in_use.load(Ordering::Relaxed);
                        format!(
                            "{}: out of device memory allocating {nbytes} bytes ({in_use} of {} in use)",
                            self.name,
                            self.capacity()
                        )
                    })?
                }
            },
        };
        self.stats.allocations.fetch_add(1, Ordering::Relaxed);
        let now = self
            .stats
            .bytes_in_use
            .fetch_add(need as u64, Ordering::Relaxed)
            + need as u64;
        self.stats.peak_bytes.fetch_max(now, Ordering::Relaxed);
        // SAFETY: `off + need <= capacity`, inside the arena allocation.
        Ok(unsafe { NonNull::new_unchecked(arena.base.as_ptr().add(off)) })
    }

    /// A cached block of exactly `need` bytes, if any.
    fn take_cached(&self, need: usize) -> Option<usize> {
        let mut cache = lock(&self.cache);
        let i = cache.iter().position(|&(_, len)| len == need)?;
        let (off, _) = cache.swap_remove(i);
        self.stats
            .cached_bytes
            .fetch_sub(need as u64, Ordering::Relaxed);
        Some(off)
    }

    /// Whether `ptr` points into this pool's arena (a block it handed out).
    pub fn contains(&self, ptr: NonNull<u8>) -> bool {
        let Some(Some(arena)) = self.arena.get() else {
            return false;
        };
        let off = (ptr.as_ptr() as usize).wrapping_sub(arena.base.as_ptr() as usize);
        off < arena.cap
    }

    /// Whether the `len` bytes at address `start` lie inside this pool's arena.
    pub fn contains_range(&self, start: usize, len: usize) -> bool {
        let Some(Some(arena)) = self.arena.get() else {
            return false;
        };
        let base = arena.base.as_ptr() as usize;
        start >= base
            && start
                .checked_add(len)
                .is_some_and(|end| end <= base + arena.cap)
    }

    /// Returns every cached block to the free list (reserved drops to in use).
    pub fn empty_cache(&self) {
        let Some(arena) = self.arena() else { return };
        let blocks = std::mem::take(&mut *lock(&self.cache));
        for (off, len) in blocks {
            give_back(arena, off, len);
            self.stats
                .cached_bytes
                .fetch_sub(len as u64, Ordering::Relaxed);
        }
    }

    /// Makes the peak the current allocation.
    pub fn reset_peak(&self) {
        let now = self.stats.bytes_in_use.load(Ordering::Relaxed);
        self.stats.peak_bytes.store(now, Ordering::Relaxed);
    }

    /// Returns a block from [`Pool::alloc`] of `nbytes`.
    pub fn free(&self, ptr: NonNull<u8>, nbytes: usize) {
        if nbytes == 0 {
            return;
        }
        let Some(arena) = self.arena() else { return };
        let need = nbytes.next_multiple_of(ALIGN);
        let off = (ptr.as_ptr() as usize).wrapping_sub(arena.base.as_ptr() as usize);
        lock(&self.cache).push((off, need));
        self.stats
            .cached_bytes
            .fetch_add(need as u64, Ordering::Relaxed);
        self.stats.frees.fetch_add(1, Ordering::Relaxed);
        self.stats
            .bytes_in_use
            .fetch_sub(need as u64, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> StatsSnapshot {
        let s = &self.stats;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatsSnapshot {
            allocations: g(&s.allocations),
            frees: g(&s.frees),
            bytes_in_use: g(&s.bytes_in_use),
            peak_bytes: g(&s.peak_bytes),
            cached_bytes: g(&s.cached_bytes),
            h2d_bytes: g(&s.h2d_bytes),
            d2h_bytes: g(&s.d2h_bytes),
            d2d_bytes: g(&s.d2d_bytes),
            launches: g(&s.launches),
        }
    }

    /// The device name this pool serves.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// Takes `need` bytes from the first free block large enough.
fn take_free(arena: &Arena, need: usize) -> Option<usize> {
    let mut free = lock(&arena.free);
    let i = free.iter().position(|&(_, len)| len >= need)?;
    let (off, len) = free[i];
    if len == need {
        free.remove(i);
    } else {
        free[i] = (off + need, len - need);
    }
    Some(off)
}

/// Returns the block `(off, len)` to the free list, merging it with its neighbours.
fn give_back(arena: &Arena, off: usize, len: usize) {
    let mut free = lock(&arena.free);
    let i = free.partition_point(|&(o, _)| o < off);
    free.insert(i, (off, len));
    // Merge with the next, then the previous block.
    if i + 1 < free.len() && free[i].0 + free[i].1 == free[i + 1].0 {
        free[i].1 += free[i + 1].1;
        free.remove(i + 1);
    }
    if i > 0 && free[i - 1].0 + free[i - 1].1 == free[i].0 {
        free[i - 1].1 += free[i].1;
        free.remove(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_reuses_and_merges() {
        let p = Pool::new("t", 1024);
        let a = p.alloc(100).unwrap();
        let b = p.alloc(64).unwrap();
        let c = p.alloc(1).unwrap();
        assert_eq!(b.as_ptr() as usize - a.as_ptr() as usize, 128);
        assert_eq!(c.as_ptr() as usize - b.as_ptr() as usize, 64);
        p.free(b, 64);
        let d = p.alloc(10).unwrap();
        assert_eq!(d, b, "first fit reuses the hole");
        p.free(a, 100);
        p.free(d, 10);
        p.free(c, 1);
        assert_eq!(p.snapshot().bytes_in_use, 0);
        // Everything merged back: the whole arena is one block again.
        let big = p.alloc(1024).unwrap();
        assert_eq!(big, a);
        assert!(p.alloc(1).unwrap_err().contains("out of device memory"));
    }
}
