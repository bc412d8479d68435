//! Device memory through the runtime: allocation statistics, peak reset and cache
//! release for any device, dispatched to its [`DeviceHooks`]. (Pinned host memory,
//! `Tensor::pin_memory`, is the tensor module's, from a device's host allocator.)
//!
//! Owns: the runtime-level memory API. Must not: keep statistics itself (the
//! backends' allocators do).

use super::{check_device, hooks, resolve, DeviceHooks, MemoryStats};
use crate::device_type::Device;
use crate::error::{OpalError, Result};

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
