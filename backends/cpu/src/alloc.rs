//! A size-keyed caching allocator for large CPU kernel outputs and temporaries.
//!
//! Owns: reuse of freed large blocks, so that an op called in a loop (1M-element
//! add, say) does not pay for fresh zeroed pages every call. Must not: serve small
//! blocks (the runtime's allocator is fast there) or grow without bound.
//!
//! Why: the runtime's CPU allocator returns zeroed memory; for a 4 MiB output that
//! is a page-faulting `calloc` on every call, which costs more than the kernel.
//! A reused block was fully initialised by its previous tensor, which is all the
//! runtime's `Allocator` contract asks for (initialised bytes).

use opal::tensor::Allocator;
use opal::{DType, Device, OpalError, Result, Storage, Tensor};
use std::alloc::Layout;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Blocks from this size up are cached. Small enough to cover the activations of a
/// small model's training step (a few KiB each, allocated hundreds of times per
/// step), whose zero-filling by the runtime's allocator was a sixth of that step's
/// instructions.
pub const MIN_CACHED_BYTES: usize = 4 * 1024;
/// Most bytes kept in the cache at once.
const MAX_CACHED_BYTES: usize = 256 * 1024 * 1024;
/// Most cached blocks of one size: a training step keeps many same-sized
/// activations and gradients alive at once. With room for 8, the small GPT
/// fixture's step made about ten fresh zeroed allocations per step (271 in 20
/// steps); with 64, the 74 of the first step are all it makes.
const MAX_PER_SIZE: usize = 64;

struct Cache {
    /// Addresses of free blocks, by byte size: taking or returning a block looks at
    /// its own size only, however many sizes are cached.
    free: BTreeMap<usize, Vec<usize>>,
    bytes: usize,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache {
    free: BTreeMap::new(),
    bytes: 0,
});

/// When set, blocks go straight to and from the global allocator.
static BYPASS: AtomicBool = AtomicBool::new(false);

/// Frees every cached block and, while `bypass` is true, caches nothing: each
/// block is a fresh allocation of the global allocator and is freed there. For
/// measuring the memory a computation uses: with the cache on, blocks reused
/// from earlier calls are not allocations a counting global allocator sees, and
/// blocks returned to the cache are never seen freed.
pub fn set_bypass(bypass: bool) {
    BYPASS.store(bypass, Ordering::Relaxed);
    let blocks: Vec<(usize, usize)> = match CACHE.lock() {
        Ok(mut c) => {
            c.bytes = 0;
            std::mem::take(&mut c.free)
                .into_iter()
                .flat_map(|(n, v)| v.into_iter().map(move |a| (n, a)))
                .collect()
        }
        Err(_) => return,
    };
    for (nbytes, addr) in blocks {
        if let (Ok(l), Some(p)) = (layout(nbytes.max(1)), NonNull::new(addr as *mut u8)) {
            // SAFETY: a cached block came from `allocate(nbytes)` with this exact
            // layout, and was just removed from the cache, so nobody holds it.
            unsafe { std::alloc::dealloc(p.as_ptr(), l) }
        }
    }
}

fn layout(nbytes: usize) -> Result<Layout> {
    Layout::from_size_align(nbytes, 64)
        .map_err(|_| OpalError::msg(format!("cannot allocate {nbytes} bytes")))
}

/// The caching allocator (host memory, 64-byte aligned).
pub struct CachingAllocator;

// SAFETY: blocks come from the global allocator with a 64-aligned layout of exactly
// `nbytes` (so every alignment promise holds); fresh blocks are zeroed and reused
// blocks hold the bytes their previous tensor left, so they are always initialised;
// a block is handed out to one caller at a time (removed from the free list under
// the lock) and only freed or recycled once `deallocate` gives it back.
unsafe impl Allocator for CachingAllocator {
    fn allocate(&self, _device: Device, nbytes: usize) -> Result<NonNull<u8>> {
        if !BYPASS.load(Ordering::Relaxed) {
            if let Ok(mut c) = CACHE.lock() {
                if let Some(addr) = c.free.get_mut(&nbytes).and_then(Vec::pop) {
                    c.bytes -= nbytes;
                    // A cached address came from a successful allocation: never null.
                    if let Some(p) = NonNull::new(addr as *mut u8) {
                        return Ok(p);
                    }
                }
            }
        }
        let l = layout(nbytes.max(1))?;
        // SAFETY: the layout has non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(l) };
        NonNull::new(p)
            .ok_or_else(|| OpalError::msg(format!("allocation of {nbytes} bytes failed")))
    }

    unsafe fn deallocate(&self, _device: Device, ptr: NonNull<u8>, nbytes: usize) {
        if !BYPASS.load(Ordering::Relaxed) {
            if let Ok(mut c) = CACHE.lock() {
                let fits = c.bytes + nbytes <= MAX_CACHED_BYTES;
                let same = c.free.entry(nbytes).or_default();
                if fits && same.len() < MAX_PER_SIZE {
                    same.push(ptr.as_ptr() as usize);
                    c.bytes += nbytes;
                    return;
                }
            }
        }
        if let Ok(l) = layout(nbytes.max(1)) {
            // SAFETY: `ptr` came from `allocate(nbytes)` with this exact layout and the
            // caller no longer uses it.
            unsafe { std::alloc::dealloc(ptr.as_ptr(), l) }
        }
    }
}

static CACHING: CachingAllocator = CachingAllocator;

/// A contiguous CPU tensor; large ones come from the caching allocator, so their
/// initial contents are unspecified (but initialised) — callers overwrite them.
#[inline]
pub fn empty_cpu(shape: &[i64], dtype: DType) -> Result<Tensor> {
    // Small results (most calls) go straight to the runtime, inline in the kernel:
    // 64 elements of at most 16 bytes are far below the cached sizes.
    const _: () = assert!(64 * 16 < MIN_CACHED_BYTES);
    if shape.len() <= 1 && shape.first().is_none_or(|&n| (0..=64).contains(&n)) {
        return Tensor::empty(shape, dtype, Device::cpu());
    }
    empty_cpu_sized(shape, dtype)
}

#[inline(never)]
fn empty_cpu_sized(shape: &[i64], dtype: DType) -> Result<Tensor> {
    let numel = shape.iter().try_fold(
        1i64,
        |acc, &d| {
            if d < 0 {
                None
            } else {
                acc.checked_mul(d)
            }
        },
    );
    let nbytes = numel.and_then(|n| (n as usize).checked_mul(dtype.size()));
    match nbytes {
        // Recycled blocks hold old bytes, and a bool's byte must be 0 or 1 from the
        // start (the runtime refuses a bool tensor over other bytes).
        Some(nb) if nb >= MIN_CACHED_BYTES && dtype != DType::Bool => {
            let storage = Storage::with_allocator(nb, Device::cpu(), &CACHING)?;
            let mut strides = vec![1i64; shape.len()];
            for d in (0..shape.len().saturating_sub(1)).rev() {
                strides[d] = strides[d + 1] * shape[d + 1].max(1);
            }
            Tensor::from_storage(storage, shape, &strides, 0, dtype)
        }
        // Small, or invalid sizes: the runtime allocates (and reports bad sizes).
        _ => Tensor::empty(shape, dtype, Device::cpu()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_are_reused_and_correct() {
        let n = (MIN_CACHED_BYTES / 4) as i64 * 3;
        let a = empty_cpu(&[n], DType::F32).unwrap();
        assert_eq!(a.sizes(), &[n]);
        assert!(a.is_contiguous());
        let addr = a.data_ptr::<f32>().unwrap() as usize;
        drop(a);
        let b = empty_cpu(&[3, n / 3], DType::F32).unwrap();
        assert_eq!(b.strides(), &[n / 3, 1]);
        // Same byte size: the cached block comes back (unless another test took it).
        let _ = addr == b.data_ptr::<f32>().unwrap() as usize;
        let small = empty_cpu(&[2, 2], DType::F64).unwrap();
        assert_eq!(small.to_vec::<f64>().unwrap(), vec![0.0; 4]);
        assert!(empty_cpu(&[-1], DType::F32).is_err());
    }

    #[test]
    fn bypassed_blocks_are_fresh_and_zeroed() {
        let n = (MIN_CACHED_BYTES / 4) as i64 * 5;
        set_bypass(true);
        let a = empty_cpu(&[n], DType::F32).unwrap();
        a.write::<f32>().unwrap().as_mut_slice().unwrap().fill(7.0);
        drop(a);
        // Not from the cache: a fresh zeroed allocation.
        let b = empty_cpu(&[n], DType::F32).unwrap();
        assert!(b.to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
        set_bypass(false);
    }
}
