//! The tensor API over the device runtime: backend metadata
//! ([`Tensor::set_backend_meta`], kept in the storage's slot) and pinned host
//! memory ([`Tensor::pin_memory`], from a device's host allocator).
//!
//! Owns: those tensor methods. Must not: interpret backend metadata values (only
//! the backend's hooks do) or keep memory statistics (the backends' allocators do).

use super::meta::contiguous_strides_into;
use super::{Storage, Tensor};
use crate::device_runtime;
use crate::device_runtime::backend_meta::BackendMeta;
use crate::device_type::{Device, DeviceType};
use crate::error::{OpalError, Result};
use std::collections::BTreeMap;

impl Tensor {
    /// The backend metadata of this tensor (empty when none was set). Views and
    /// handle clones share it; copies (`to`, `_to_copy`, `clone` ops) start empty.
    pub fn backend_meta(&self) -> BackendMeta {
        self.storage().backend_meta().get()
    }

    /// Sets one backend metadata entry. Keys are non-empty and contain no `/`
    /// (files store entries as `tensor/key`); the undefined tensor takes none.
    pub fn set_backend_meta(&self, key: &str, value: &str) -> Result<()> {
        if !self.is_defined() {
            return Err(OpalError::msg(format!(
                "set_backend_meta('{key}'): the tensor is undefined"
            )));
        }
        if key.is_empty() || key.contains('/') {
            return Err(OpalError::msg(format!(
                "set_backend_meta: invalid key '{key}' on a '{}' tensor: keys are non-empty and contain no '/'",
                self.device()
            )));
        }
        self.storage().backend_meta().update(|m| {
            m.insert(key.to_string(), value.to_string());
        });
        Ok(())
    }

    /// Removes every backend metadata entry of this tensor (and its views).
    pub fn clear_backend_meta(&self) {
        if self.is_defined() {
            self.storage().backend_meta().update(BTreeMap::clear);
        }
    }
}

impl Tensor {
    /// A copy of this CPU tensor in pinned host memory of the process's accelerator
    /// ([`crate::device::accelerator`]); the tensor itself when already pinned.
    pub fn pin_memory(&self) -> Result<Tensor> {
        let ty = device_runtime::accelerator().ok_or_else(|| {
            OpalError::device(format!(
                "pin_memory: no accelerator is registered (device runtimes: {})",
                names(&device_runtime::registered_device_types())
            ))
        })?;
        self.pin_memory_for(ty)
    }

    /// A copy of this CPU tensor in pinned host memory from `ty`'s host allocator
    /// ([`crate::device::DeviceHooks::host_allocator`]); the tensor itself when already pinned.
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
        let alloc = device_runtime::hooks(ty)?.host_allocator().ok_or_else(|| {
            OpalError::device(format!(
                "pin_memory: '{ty}' has no host allocator for pinned memory"
            ))
        })?;
        let bytes = self.to_bytes()?;
        let storage = Storage::with_allocator(bytes.len(), Device::cpu(), alloc)?;
        let mut strides = vec![0; self.sizes().len()];
        contiguous_strides_into(self.sizes(), &mut strides);
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

fn names(types: &[DeviceType]) -> String {
    types
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}
