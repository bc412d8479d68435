//! Emu's device runtime: the [`opal::device::DeviceHooks`] of `emu` (several
//! devices, one pool each) and `emu2` (one device), reporting their pools' memory
//! statistics, (de)serializing backend metadata, streams and events over
//! [`crate::queue`], the autocast dtypes, and the host allocator that serves
//! pinned memory for them.
//!
//! Owns: the hooks and pinned host memory. Must not: allocate device memory (the
//! pools in [`crate::pool`] do).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use opal::device::{DeviceEvent, DeviceHooks, MemoryStats};
use opal::tensor::{Allocator, CpuAllocator};
use opal::{DType, Device, DeviceType, OpalError, Result, Stream};

use crate::queue;

use crate::pool::Pool;

/// The hooks of one emu device type over its pools.
pub struct EmuHooks {
    /// One pool per device index.
    pub pools: &'static [Pool],
    /// How many of the pools are devices.
    pub count: usize,
    /// The device type (`PrivateUse1` for emu, `PrivateUse2` for emu2).
    pub ty: DeviceType,
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

    fn new_stream(&self, index: i16) -> Result<i64> {
        Ok(queue::new_stream(Device::new(self.ty, Some(index))))
    }

    fn stream_exists(&self, stream: Stream) -> bool {
        queue::stream_exists(stream)
    }

    fn query_stream(&self, stream: Stream) -> Result<bool> {
        queue::query(stream)
    }

    fn synchronize_stream(&self, stream: Stream) -> Result<()> {
        queue::synchronize(stream)
    }

    fn synchronize_device(&self, index: i16) -> Result<()> {
        queue::synchronize_device(Device::new(self.ty, Some(index)))
    }

    fn create_event(&self, _index: i16, _timing: bool) -> Result<Box<dyn DeviceEvent>> {
        Ok(Box::new(EmuEvent(queue::create_event())))
    }

    /// Emu stands for an accelerator without bfloat16 units: autocast may cast
    /// to float16 only (PyTorch's `get_amp_supported_dtype`).
    fn autocast_dtypes(&self) -> Vec<DType> {
        vec![DType::F16]
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

/// An event of emu's queues (see [`crate::queue`]); destroyed with the handle.
pub struct EmuEvent(u64);

impl DeviceEvent for EmuEvent {
    fn record(&self, stream: Stream) -> Result<()> {
        queue::record(self.0, stream)
    }
    fn block(&self, stream: Stream) -> Result<()> {
        queue::block(self.0, stream)
    }
    fn query(&self) -> Result<bool> {
        Ok(queue::event_query(self.0))
    }
    fn synchronize(&self) -> Result<()> {
        queue::event_synchronize(self.0);
        Ok(())
    }
    fn completed_at(&self) -> Result<std::time::Instant> {
        queue::event_time(self.0)
    }
}

impl Drop for EmuEvent {
    fn drop(&mut self) {
        queue::destroy_event(self.0);
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
