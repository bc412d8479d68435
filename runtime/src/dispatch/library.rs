//! [`Library`]: a group of registrations for one namespace (and usually one key),
//! like `TORCH_LIBRARY` / `TORCH_LIBRARY_IMPL`. Dropping it deregisters everything;
//! [`Library::leak`] keeps it forever.
//!
//! Owns: grouping of `RegistrationHandle`s. Must not: bypass the dispatcher.

use super::dispatcher::{Dispatcher, OperatorHandle, RegistrationHandle};
use super::kernel::KernelFunction;
use super::opdef::OpDef;
use crate::error::{OpalError, Result};
use crate::keys::DispatchKey;

/// Registrations for one namespace and (optionally) one dispatch key.
#[must_use = "dropping a Library deregisters its kernels; call .leak() to keep them"]
pub struct Library {
    ns: String,
    key: Option<DispatchKey>,
    handles: Vec<RegistrationHandle>,
}

impl Library {
    /// An implementation library: kernels of namespace `ns` for `key`
    /// (`TORCH_LIBRARY_IMPL(ns, key, m)`).
    pub fn new(ns: &str, key: DispatchKey) -> Self {
        Library {
            ns: ns.to_string(),
            key: Some(key),
            handles: Vec::new(),
        }
    }

    /// A definition library for `ns` without a default key (`TORCH_LIBRARY(ns, m)`);
    /// use [`Library::impl_for`] for kernels.
    pub fn fragment(ns: &str) -> Self {
        Library {
            ns: ns.to_string(),
            key: None,
            handles: Vec::new(),
        }
    }

    fn qualify(&self, name: &str) -> String {
        if name.contains("::") {
            name.to_string()
        } else {
            format!("{}::{}", self.ns, name)
        }
    }

    /// Defines an op (definitions are permanent; see `Dispatcher::def`).
    pub fn def(&mut self, def: &'static OpDef) -> Result<OperatorHandle> {
        if def.namespace() != self.ns {
            return Err(OpalError::msg(format!(
                "library for namespace '{}' cannot define '{}'",
                self.ns, def.name
            )));
        }
        Dispatcher::global().def(def)
    }

    /// Registers `k` for `name` (`add.Tensor` or `aten::add.Tensor`) at the library's key.
    pub fn impl_(&mut self, name: &str, k: KernelFunction) -> Result<&mut Self> {
        let key = self.key.ok_or_else(|| {
            OpalError::msg(format!(
                "library '{}' has no dispatch key; use impl_for",
                self.ns
            ))
        })?;
        self.impl_for(name, key, k)
    }

    /// Registers `k` for `name` at `key`.
    pub fn impl_for(
        &mut self,
        name: &str,
        key: DispatchKey,
        k: KernelFunction,
    ) -> Result<&mut Self> {
        let h = Dispatcher::global().register_impl(&self.qualify(name), key, k)?;
        self.handles.push(h);
        Ok(self)
    }

    /// Registers a backend fallback for the library's key.
    pub fn fallback(&mut self, k: KernelFunction) -> Result<&mut Self> {
        let key = self.key.ok_or_else(|| {
            OpalError::msg(format!(
                "library '{}' has no dispatch key for a fallback",
                self.ns
            ))
        })?;
        let h = Dispatcher::global().register_fallback(key, k)?;
        self.handles.push(h);
        Ok(self)
    }

    /// Number of live registrations.
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// Keeps every registration forever.
    pub fn leak(self) {
        for h in self.handles {
            h.leak();
        }
    }
}
