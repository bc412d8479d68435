//! Emu's device runtime: the [`opal::device::DeviceHooks`] of `emu` (several
//! devices, one pool each) and `emu2` (one device), reporting their pools' memory
//! statistics, (de)serializing backend metadata, and the host allocator that
//! serves pinned memory for them.
//!
//! Owns: the hooks and pinned host memory. Must not: allocate device memory (the
//! pools in [`crate::pool`] do).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use opal::device::{DeviceHooks, MemoryStats};
use opal::tensor::{Allocator, CpuAllocator};
use opal::{Device, OpalError, Result};

use crate::pool::Pool;

/// The hooks of one emu device type over its pools.
pub struct EmuHooks {
    /// One pool per device index.
    pub pools: &'static [Pool],
    /// How many of the pools are devices.
    pub count: usize,
}

impl EmuHooks {
    fn pool(&self, index: i16) -> Result<&'static Pool> {
        self.pools
            .get(index as usize)
            .filter(|_| (index as usize) < self.count)
            .ok_or_else(|| {
                OpalError::device(format!(
                    "no device {index}: there are {} devices",
                    self.count
                ))
            })
    }
}

impl DeviceHooks for EmuHooks {
    fn device_count(&self) -> usize {
        self.count.min(self.pools.len())
    }

    fn memory_stats(&self, index: i16) -> Result<MemoryStats> {
        let s = self.pool(index)?.snapshot();
        Ok(MemoryStats {
            allocated: s.bytes_in_use,
            reserved: s.bytes_in_use + s.cached_bytes,
            peak_allocated: s.peak_bytes,
        })
    }

    fn reset_peak_memory_stats(&self, index: i16) -> Result<()> {
        self.pool(index)?.reset_peak();
        Ok(())
    }

    fn empty_cache(&self, index: i16) -> Result<()> {
        self.pool(index)?.empty_cache();
        Ok(())
    }

    fn host_allocator(&self) -> Option<&'static dyn Allocator> {
        Some(&PINNED_ALLOCATOR)
    }

    /// Backend metadata goes to files tagged with emu's encoding version; keys
    /// starting with `transient.` stay in memory only.
    fn serialize_backend_meta(&self, key: &str, value: &str) -> Option<String> {
        (!key.starts_with("transient.")).then(|| format!("{META_VERSION}{value}"))
    }

    fn deserialize_backend_meta(&self, key: &str, text: &str) -> Result<String> {
        text.strip_prefix(META_VERSION)
            .map(str::to_string)
            .ok_or_else(|| {
                OpalError::device(format!(
                    "emu cannot read backend metadata '{key}' = '{text}': expected the '{META_VERSION}' encoding"
                ))
            })
    }
}

/// The tag of emu's backend metadata encoding in files.
const META_VERSION: &str = "emu-v1;";

/// Pinned host memory for copies to and from emu: host memory from the CPU
/// allocator, counted, and reported as pinned.
pub struct PinnedAllocator {
    bytes: AtomicU64,
}

/// The pinned host allocator of `emu` and `emu2`.
pub static PINNED_ALLOCATOR: PinnedAllocator = PinnedAllocator {
    bytes: AtomicU64::new(0),
};

impl PinnedAllocator {
    /// Bytes of pinned host memory held by live tensors.
    pub fn bytes_in_use(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

// SAFETY: every block comes from, and goes back to, the built-in `CpuAllocator`
// with the same `device` and `nbytes`, so its promises (alignment, validity until
// deallocation, zero-initialized host memory) carry over unchanged.
unsafe impl Allocator for PinnedAllocator {
    fn allocate(&self, device: Device, nbytes: usize) -> Result<NonNull<u8>> {
        let p = CpuAllocator.allocate(device, nbytes)?;
        self.bytes.fetch_add(nbytes as u64, Ordering::Relaxed);
        Ok(p)
    }

    unsafe fn deallocate(&self, device: Device, ptr: NonNull<u8>, nbytes: usize) {
        // SAFETY: the caller passes a block from `allocate`, i.e. from
        // `CpuAllocator.allocate(device, nbytes)`.
        unsafe { CpuAllocator.deallocate(device, ptr, nbytes) };
        self.bytes.fetch_sub(nbytes as u64, Ordering::Relaxed);
    }

    fn is_pinned(&self) -> bool {
        true
    }
}
