//! The [`Allocator`] trait: how a device type's memory is allocated and freed. The
//! device runtime's hooks hand out host allocators through it, and the tensor
//! module keeps the per-device registry of them (`tensor::storage`).
//!
//! Owns: the trait and its safety contract. Must not: register or choose an
//! allocator (that is the registry in `tensor::storage`).

use crate::device_type::Device;
use crate::error::Result;
use std::ptr::NonNull;

/// Allocates the memory of tensors on one device type. Register one per device type
/// with [`register_allocator`](crate::tensor::register_allocator); CPU and meta have
/// built-in allocators.
///
/// # Safety
///
/// Implementors promise that `allocate(device, n)` returns a pointer valid for reads
/// and writes of `n` bytes, aligned to 64 bytes when `n >= 64` and otherwise to
/// `min(16, largest power of two <= n)`, which keeps every element type aligned
/// (non-null and 64-aligned even for `n == 0`), that stays valid until it is passed to
/// `deallocate` with the same `device` and `n`; and, when [`Allocator::host_accessible`]
/// is true, that those bytes are initialized (e.g. zeroed), because safe Opal code
/// reads them through slices.
pub unsafe trait Allocator: Send + Sync + 'static {
    /// Allocates `nbytes` for `device`.
    fn allocate(&self, device: Device, nbytes: usize) -> Result<NonNull<u8>>;

    /// Frees memory from [`Allocator::allocate`].
    ///
    /// # Safety
    /// `ptr` came from `self.allocate(device, nbytes)` and is not used afterwards.
    unsafe fn deallocate(&self, device: Device, ptr: NonNull<u8>, nbytes: usize);

    /// Whether host code may read and write the memory directly (CPU-addressable).
    /// When false, safe data access (`to_vec`, `read`, printing) is refused.
    fn host_accessible(&self) -> bool {
        true
    }

    /// Whether the memory is pinned (page-locked) host memory from a device's host
    /// allocator (see `opal::device::DeviceHooks::host_allocator`).
    fn is_pinned(&self) -> bool {
        false
    }
}
