//! Backend metadata: an opaque string map a backend attaches to a tensor
//! ([`Tensor::set_backend_meta`]), kept with the tensor's storage so that views and
//! handle clones share it (as PyTorch's shallow copies share a `BackendMeta`), and
//! saved into a safetensors file's `__metadata__` through the device's
//! [`super::DeviceHooks::serialize_backend_meta`] (see `crate::serialize`).
//!
//! Owns: the per-storage slot and the tensor API. Must not: interpret the values
//! (only the backend's hooks do).

use crate::error::{OpalError, Result};
use crate::tensor::Tensor;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// A backend's metadata of one tensor: keys to values, both opaque to Opal.
pub type BackendMeta = BTreeMap<String, String>;

/// The slot in each storage: none until a backend sets something. Replaced as a
/// whole on every change, so readers clone an `Arc` and never see a half update.
pub(crate) struct MetaSlot(Mutex<Option<Arc<BackendMeta>>>);

impl MetaSlot {
    pub(crate) const fn new() -> MetaSlot {
        MetaSlot(Mutex::new(None))
    }

    fn get(&self) -> Option<Arc<BackendMeta>> {
        // Every write replaces the whole value, so a poisoned lock still holds one.
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn update(&self, f: impl FnOnce(&mut BackendMeta)) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut map = slot.as_deref().cloned().unwrap_or_default();
        f(&mut map);
        *slot = (!map.is_empty()).then(|| Arc::new(map));
    }
}

impl Tensor {
    /// The backend metadata of this tensor (empty when none was set). Views and
    /// handle clones share it; copies (`to`, `_to_copy`, `clone` ops) start empty.
    pub fn backend_meta(&self) -> BackendMeta {
        self.storage()
            .backend_meta()
            .get()
            .map(|m| (*m).clone())
            .unwrap_or_default()
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
