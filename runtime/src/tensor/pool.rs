//! [`ImplRc`]: the refcounted pointer behind [`Tensor`](super::Tensor), with a small
//! per-thread cache of freed blocks.
//!
//! Owns: allocation, reference counting and recycling of tensor blocks. Must not:
//! know what a tensor block holds beyond dropping it.
//!
//! Why not `std::sync::Arc`: creating and dropping a small tensor is one heap
//! allocation and one free, and on the machines we measure on those two calls cost
//! more than everything else `Tensor::empty` does. Ops that return fresh tensors
//! in a loop (the common case) free one block and allocate the next on the same
//! thread, so a short per-thread free list turns both into a few loads and stores.
//! The reference count follows `Arc`'s protocol (relaxed increment, release
//! decrement, acquire fence before dropping the value).

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicUsize, Ordering};

/// Blocks kept per thread; beyond it freed blocks go back to the global allocator.
const CACHED_BLOCKS: usize = 32;

/// Past this many references we abort rather than risk an overflowing count (as
/// `Arc` does; only reachable by leaking handles on purpose).
const MAX_REFCOUNT: usize = isize::MAX as usize;

#[repr(C)]
struct RcBox<T> {
    strong: AtomicUsize,
    value: T,
}

/// A shared, thread-safe, reference-counted pointer to a `T` whose blocks are
/// recycled through a per-thread cache (one cache per `T` layout size class is not
/// needed: the runtime uses it for tensor blocks only).
pub(crate) struct ImplRc<T: Pooled> {
    ptr: NonNull<RcBox<T>>,
    _owns: PhantomData<RcBox<T>>,
}

// SAFETY: like `Arc<T>`: shared references to `T` cross threads, and the last
// handle (on any thread) drops `T`, so `T` must be `Send + Sync`.
unsafe impl<T: Pooled + Send + Sync> Send for ImplRc<T> {}
// SAFETY: see `Send`.
unsafe impl<T: Pooled + Send + Sync> Sync for ImplRc<T> {}

/// Types that have a per-thread block cache.
pub(crate) trait Pooled: Sized + 'static {
    /// The calling thread's cache for blocks of this type.
    fn with_cache<R>(f: impl FnOnce(&BlockCache) -> R) -> Option<R>;
}

/// A fixed-capacity stack of free blocks of one layout, owned by one thread.
pub(crate) struct BlockCache {
    len: Cell<usize>,
    blocks: UnsafeCell<[*mut u8; CACHED_BLOCKS]>,
    layout: Layout,
}

impl BlockCache {
    /// An empty cache for blocks of `layout`.
    pub(crate) const fn new(layout: Layout) -> BlockCache {
        BlockCache {
            len: Cell::new(0),
            blocks: UnsafeCell::new([std::ptr::null_mut(); CACHED_BLOCKS]),
            layout,
        }
    }

    #[inline]
    fn take(&self) -> Option<*mut u8> {
        let n = self.len.get();
        if n == 0 {
            return None;
        }
        self.len.set(n - 1);
        // SAFETY: the cache belongs to this thread and no reference into `blocks`
        // outlives this call; `n - 1 < CACHED_BLOCKS`.
        Some(unsafe { (*self.blocks.get())[n - 1] })
    }

    /// Keeps `p` (a block of `layout`) or returns it when full.
    #[inline]
    fn put(&self, p: *mut u8) -> Result<(), *mut u8> {
        let n = self.len.get();
        if n == CACHED_BLOCKS {
            return Err(p);
        }
        // SAFETY: as in `take`; `n < CACHED_BLOCKS`.
        unsafe { (*self.blocks.get())[n] = p };
        self.len.set(n + 1);
        Ok(())
    }
}

impl Drop for BlockCache {
    fn drop(&mut self) {
        let n = self.len.get();
        for &p in &self.blocks.get_mut()[..n] {
            // SAFETY: every cached pointer came from `alloc(self.layout)` and is
            // owned by the cache alone.
            unsafe { dealloc(p, self.layout) };
        }
    }
}

/// The layout of the blocks `ImplRc<T>` allocates (for [`BlockCache::new`]).
pub(crate) const fn block_layout<T>() -> Layout {
    Layout::new::<RcBox<T>>()
}

impl<T: Pooled> ImplRc<T> {
    /// Moves `value` into a fresh block with a count of one. (For large `T` built
    /// just before, [`ImplRc::new_in_place`] avoids the stack copy.)
    #[inline]
    pub(crate) fn new(value: T) -> ImplRc<T> {
        // SAFETY: `write` initialises the whole value.
        unsafe { Self::new_in_place(|p| p.write(value)) }
    }

    /// Takes a block and has `init` write the value into it, field by field if it
    /// likes: building a large `T` on the stack and copying it over costs more
    /// than the rest of creating it (the copy's wide loads stall on the fields'
    /// fresh narrow stores).
    ///
    /// # Safety
    /// `init` must leave the `T` behind the pointer fully initialised. (If it
    /// panics, the block leaks.)
    #[inline(always)]
    pub(crate) unsafe fn new_in_place(init: impl FnOnce(*mut T)) -> ImplRc<T> {
        let layout = Layout::new::<RcBox<T>>();
        let raw = T::with_cache(|c| {
            debug_assert_eq!(c.layout, layout, "a cache for another block layout");
            c.take()
        })
        .flatten()
        .unwrap_or_else(|| {
            // SAFETY: `RcBox<T>` has a non-zero size (it holds a counter).
            let p = unsafe { alloc(layout) };
            if p.is_null() {
                handle_alloc_error(layout)
            }
            p
        })
        .cast::<RcBox<T>>();
        // SAFETY: `raw` is a non-null, suitably aligned, unused block of
        // `RcBox<T>`'s layout (fresh or recycled); the counter is written here and
        // the value by `init` (the caller's promise).
        unsafe {
            std::ptr::addr_of_mut!((*raw).strong).write(AtomicUsize::new(1));
            init(std::ptr::addr_of_mut!((*raw).value));
            ImplRc {
                ptr: NonNull::new_unchecked(raw),
                _owns: PhantomData,
            }
        }
    }

    /// True when this is the only handle to its block. With `&mut self` the answer
    /// cannot change until the borrow ends: new handles are only cloned from existing
    /// ones, and there are none besides this one.
    #[inline]
    pub(crate) fn is_unique(&mut self) -> bool {
        self.inner().strong.load(Ordering::Acquire) == 1
    }

    /// How many handles share the block (a snapshot: other threads may change it).
    #[inline]
    pub(crate) fn strong_count(a: &ImplRc<T>) -> usize {
        a.inner().strong.load(Ordering::Acquire)
    }

    /// The block's address: an identity, valid while this handle lives (blocks are
    /// recycled once freed).
    #[inline]
    pub(crate) fn addr(a: &ImplRc<T>) -> usize {
        a.ptr.as_ptr() as usize
    }

    /// True when both handles point to the same block.
    #[inline]
    pub(crate) fn ptr_eq(a: &ImplRc<T>, b: &ImplRc<T>) -> bool {
        a.ptr == b.ptr
    }

    #[inline]
    fn inner(&self) -> &RcBox<T> {
        // SAFETY: the block stays initialised while any handle (`self`) exists.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: Pooled> Deref for ImplRc<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.inner().value
    }
}

impl<T: Pooled> Clone for ImplRc<T> {
    #[inline]
    fn clone(&self) -> ImplRc<T> {
        // Relaxed: a new handle is made from an existing one, which already
        // synchronises with whoever created the value.
        if self.inner().strong.fetch_add(1, Ordering::Relaxed) > MAX_REFCOUNT {
            std::process::abort();
        }
        ImplRc {
            ptr: self.ptr,
            _owns: PhantomData,
        }
    }
}

impl<T: Pooled> Drop for ImplRc<T> {
    #[inline]
    fn drop(&mut self) {
        // A count of one seen here means this is the only handle: new handles are
        // only made from existing ones, and `&mut self` rules out borrows of this
        // one. The acquire load orders the other (former) handles' drops before
        // ours, as the fence below does on the shared path. Skipping the locked
        // decrement matters: most tensors die unshared (an op's temporaries and
        // results), and the decrement costs as much as the rest of the drop.
        if self.inner().strong.load(Ordering::Acquire) != 1 {
            if self.inner().strong.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            // Every other handle's writes happen before the value is dropped.
            fence(Ordering::Acquire);
        }
        let raw = self.ptr.as_ptr();
        // SAFETY: this was the last handle: nobody else can reach the block. The
        // value is dropped exactly once, then the (now uninitialised) block is
        // recycled or freed with the layout it was allocated with.
        unsafe {
            std::ptr::drop_in_place(std::ptr::addr_of_mut!((*raw).value));
            let block = raw.cast::<u8>();
            let kept = T::with_cache(|c| c.put(block)).unwrap_or(Err(block));
            if let Err(block) = kept {
                dealloc(block, Layout::new::<RcBox<T>>());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static DROPS: AtomicUsize = AtomicUsize::new(0);

    struct Probe(u64);
    impl Drop for Probe {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    impl Pooled for Probe {
        fn with_cache<R>(f: impl FnOnce(&BlockCache) -> R) -> Option<R> {
            thread_local! {
                static CACHE: BlockCache = const { BlockCache::new(block_layout::<Probe>()) };
            }
            CACHE.try_with(f).ok()
        }
    }

    #[test]
    fn counts_drop_once_and_blocks_are_reused() {
        let before = DROPS.load(Ordering::SeqCst);
        let a = ImplRc::new(Probe(7));
        let b = a.clone();
        assert!(ImplRc::ptr_eq(&a, &b));
        assert_eq!(b.0, 7);
        let first = a.ptr;
        drop(a);
        assert_eq!(DROPS.load(Ordering::SeqCst), before);
        drop(b);
        assert_eq!(DROPS.load(Ordering::SeqCst), before + 1);
        // The freed block is the next one handed out on this thread.
        let c = ImplRc::new(Probe(8));
        assert_eq!(c.ptr, first);
        assert_eq!(c.0, 8);
    }

    #[test]
    fn handles_cross_threads_and_the_cache_overflows_to_the_allocator() {
        let many: Vec<ImplRc<Probe>> = (0..3 * CACHED_BLOCKS as u64)
            .map(|i| ImplRc::new(Probe(i)))
            .collect();
        let sum = std::thread::spawn(move || {
            let s: u64 = many.iter().map(|p| p.0).sum();
            drop(many);
            s
        })
        .join()
        .unwrap();
        let n = 3 * CACHED_BLOCKS as u64;
        assert_eq!(sum, n * (n - 1) / 2);
    }
}
