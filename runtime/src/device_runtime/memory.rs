//! Device memory through the runtime: allocation statistics, peak reset and cache
//! release for any device, dispatched to its [`DeviceHooks`]; and pinned host memory
//! ([`Tensor::pin_memory`], [`Tensor::is_pinned`]) from a device's host allocator.
//!
//! Owns: the runtime-level memory API. Must not: keep statistics itself (the
//! backends' allocators do).

use super::{check_device, hooks, resolve, DeviceHooks, MemoryStats};
use crate::device::{Device, DeviceType};
use crate::error::{OpalError, Result};
use crate::tensor::{Storage, Tensor};

/// The hooks and resolved, validated index of `device` (no index: the current one).
fn target(device: Device) -> Result<(&'static dyn DeviceHooks, i16)> {
    let d = resolve(device);
    let h = hooks(d.device_type())?;
    check_device(d)?;
    Ok((h, d.index().unwrap_or(0)))
}

/// Adds the device to a backend's error, so every message names it.
fn named<T>(device: Device, r: Result<T>) -> Result<T> {
    r.map_err(|e| OpalError::device(format!("{device}: {e}")))
}

/// The memory counters of `device` (no index: this thread's current device).
pub fn memory_stats(device: Device) -> Result<MemoryStats> {
    let (h, i) = target(device)?;
    named(device, h.memory_stats(i))
}

/// Bytes held by live tensors on `device`.
pub fn memory_allocated(device: Device) -> Result<u64> {
    memory_stats(device).map(|s| s.allocated)
}

/// Bytes `device`'s allocator holds (allocated plus cached).
pub fn memory_reserved(device: Device) -> Result<u64> {
    memory_stats(device).map(|s| s.reserved)
}

/// The peak of [`memory_allocated`] since start or [`reset_peak_memory_stats`].
pub fn max_memory_allocated(device: Device) -> Result<u64> {
    memory_stats(device).map(|s| s.peak_allocated)
}

/// Makes `device`'s peak its current allocation.
pub fn reset_peak_memory_stats(device: Device) -> Result<()> {
    let (h, i) = target(device)?;
    named(device, h.reset_peak_memory_stats(i))
}

/// Returns `device`'s cached, unused memory (reserved drops to allocated).
pub fn empty_cache(device: Device) -> Result<()> {
    let (h, i) = target(device)?;
    named(device, h.empty_cache(i))
}

impl Tensor {
    /// A copy of this CPU tensor in pinned host memory of the process's accelerator
    /// ([`super::accelerator`]); the tensor itself when already pinned.
    pub fn pin_memory(&self) -> Result<Tensor> {
        let ty = super::accelerator().ok_or_else(|| {
            OpalError::device(format!(
                "pin_memory: no accelerator is registered (device runtimes: {})",
                names(&super::registered_device_types())
            ))
        })?;
        self.pin_memory_for(ty)
    }

    /// A copy of this CPU tensor in pinned host memory from `ty`'s host allocator
    /// ([`DeviceHooks::host_allocator`]); the tensor itself when already pinned.
    pub fn pin_memory_for(&self, ty: DeviceType) -> Result<Tensor> {
        if !self.device().is_cpu() {
            return Err(OpalError::device(format!(
                "pin_memory: only cpu tensors can be pinned, got a tensor on '{}'",
                self.device()
            )));
        }
        if self.is_pinned() {
            return Ok(self.clone());
        }
        let alloc = hooks(ty)?.host_allocator().ok_or_else(|| {
            OpalError::device(format!(
                "pin_memory: '{ty}' has no host allocator for pinned memory"
            ))
        })?;
        let bytes = self.to_bytes()?;
        let storage = Storage::with_allocator(bytes.len(), Device::cpu(), alloc)?;
        let strides = contiguous_strides(self.sizes());
        let t = Tensor::from_storage(storage, self.sizes(), &strides, 0, self.dtype())?;
        let p = t.raw_data_ptr()?;
        // SAFETY: `t` is new and unshared, contiguous over exactly `bytes.len()` bytes
        // of host-accessible storage (a host allocator's memory); the source is a
        // separate Vec.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
        Ok(t)
    }

    /// Whether this tensor's memory is pinned host memory.
    pub fn is_pinned(&self) -> bool {
        self.is_defined() && self.storage().is_pinned()
    }
}

pub(crate) use crate::rules::contiguous_strides;

fn names(types: &[DeviceType]) -> String {
    types
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}
