//! Backend metadata: an opaque string map a backend attaches to a tensor
//! (`Tensor::set_backend_meta`, in the tensor module), kept with the tensor's storage so that views and
//! handle clones share it (as PyTorch's shallow copies share a `BackendMeta`), and
//! saved into a safetensors file's `__metadata__` through the device's
//! [`super::DeviceHooks::serialize_backend_meta`] (see `crate::serialize`).
//!
//! Owns: the per-storage slot. Must not: interpret the values
//! (only the backend's hooks do).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A backend's metadata of one tensor: keys to values, both opaque to Opal.
pub type BackendMeta = BTreeMap<String, String>;

/// The slot in each storage: null until a backend sets something, else a leaked
/// `Box` of the map. One pointer, so tensors without metadata pay one store when
/// made and one load when dropped. Every change replaces the whole map.
pub(crate) struct MetaSlot(AtomicPtr<BackendMeta>);

/// Held by every access that dereferences or replaces a slot's map (rare: backend
/// metadata is set and read outside hot paths), so a replaced map is freed only
/// when no reader can be looking at it.
static META_LOCK: Mutex<()> = Mutex::new(());

fn meta_lock() -> MutexGuard<'static, ()> {
    // The lock guards no data of its own, so a poisoned one is as good.
    META_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

impl MetaSlot {
    pub(crate) const fn new() -> MetaSlot {
        MetaSlot(AtomicPtr::new(std::ptr::null_mut()))
    }

    pub(crate) fn get(&self) -> BackendMeta {
        let _held = meta_lock();
        let p = self.0.load(Ordering::Acquire);
        if p.is_null() {
            return BackendMeta::new();
        }
        // SAFETY: a non-null pointer is a live `Box` from `update`; maps are freed
        // only by `update` under `META_LOCK` (held here) or by `drop` with
        // exclusive access (impossible while `&self` exists).
        unsafe { (*p).clone() }
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut BackendMeta)) {
        let _held = meta_lock();
        let old = self.0.load(Ordering::Acquire);
        let mut map = if old.is_null() {
            BackendMeta::new()
        } else {
            // SAFETY: as in `get`; we hold `META_LOCK`.
            unsafe { (*old).clone() }
        };
        f(&mut map);
        let new = if map.is_empty() {
            std::ptr::null_mut()
        } else {
            Box::into_raw(Box::new(map))
        };
        self.0.store(new, Ordering::Release);
        if !old.is_null() {
            // SAFETY: `old` came from `Box::into_raw`, the slot no longer holds it, and
            // readers dereference only under `META_LOCK`, which we hold: none can be
            // looking at it, and none can find it afterwards.
            drop(unsafe { Box::from_raw(old) });
        }
    }
}

impl Drop for MetaSlot {
    fn drop(&mut self) {
        let p = *self.0.get_mut();
        if !p.is_null() {
            // SAFETY: `p` came from `Box::into_raw` in `update`, and `&mut self` means
            // no reader holds it.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}
