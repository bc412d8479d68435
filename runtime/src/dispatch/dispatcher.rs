//! The [`Dispatcher`]: the registry of operators, kernels and backend fallbacks;
//! [`OperatorHandle`] (one op), [`RegistrationHandle`] (deregisters on drop), and
//! boxed calling.
//!
//! Owns: registration bookkeeping and boxed dispatch. Must not: do anything on the
//! typed hot path (that reads published tables through `typed`), or hold a lock while
//! calling a kernel.

use super::holds::with_stack_holds;
use super::kernel::{KernelEntry, KernelFunction, KernelRepr, OwnedEntry};
use super::opdef::OpDef;
use super::table::{take_reg, OperatorEntry, Reg};
use super::tls::dispatch_keyset;
use super::typed::TypedOperatorHandle;
use crate::error::{ErrorKind, OpalError, Result};
use crate::ivalue::Stack;
use crate::keys::DispatchKey;
use crate::keys::DispatchKeySet;
use crate::tensor::OpChecks;
use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The process-wide operator registry. All methods take `&self` and are thread-safe.
pub struct Dispatcher {
    ops: Mutex<HashMap<String, &'static OperatorEntry>>,
    /// Published backend fallback per runtime key (null: none).
    fallbacks: [AtomicPtr<KernelEntry>; 64],
    /// Fallback registrations (key, id, entry), last per key wins. Owns the entries
    /// `fallbacks` points at.
    fallback_regs: Mutex<Vec<Reg>>,
    next_id: AtomicU64,
    /// Registrations the runtime makes when the dispatcher is created (composite and
    /// generated autograd kernels) that failed, as one message; reported by
    /// [`Dispatcher::startup_result`], which defining the operators checks first.
    startup_error: OnceLock<String>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while these locks are held; if it did, the data is still a
    // consistent map/list, so recover instead of propagating the poison.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Dispatcher {
    /// The global dispatcher. On first use it registers fallthrough fallbacks for
    /// every non-backend runtime key (`BackendSelect`, `ADInplaceOrView`, autograd,
    /// autocast, ...), so those keys are skipped unless something is registered there.
    pub fn global() -> &'static Dispatcher {
        static GLOBAL: OnceLock<Dispatcher> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let d = Dispatcher {
                ops: Mutex::new(HashMap::new()),
                fallbacks: [const { AtomicPtr::new(std::ptr::null_mut()) }; 64],
                fallback_regs: Mutex::new(Vec::new()),
                next_id: AtomicU64::new(1),
                startup_error: OnceLock::new(),
            };
            {
                let mut regs = lock(&d.fallback_regs);
                for &k in DispatchKey::RUNTIME.iter().filter(|k| !k.is_backend()) {
                    let e = OwnedEntry::new(KernelFunction::fallthrough(), None);
                    d.fallbacks[k as usize].store(e.as_ptr(), Ordering::Release);
                    regs.push((k, 0, e));
                }
            }
            // The runtime's own kernels (composites, autograd), before any op is
            // defined or called, so they need no init call.
            if let Err(e) = crate::startup::register_runtime_kernels(&d) {
                let _ = d.startup_error.set(e.to_string());
            }
            d
        })
    }

    /// `Err` naming what failed if a registration the runtime makes when the
    /// dispatcher is created did not succeed (a composite kernel whose signature
    /// differs from its op's, say); `Ok` otherwise.
    pub fn startup_result(&self) -> Result<()> {
        match self.startup_error.get() {
            Some(e) => Err(OpalError::msg(format!(
                "the runtime's own registrations failed when the dispatcher was created: {e}"
            ))),
            None => Ok(()),
        }
    }

    fn entry(&self, name: &str) -> &'static OperatorEntry {
        let mut ops = lock(&self.ops);
        if let Some(e) = ops.get(name) {
            return e;
        }
        let e = OperatorEntry::new(name);
        e.recompute(&e.lock(), &self.fallbacks);
        ops.insert(name.to_string(), e);
        e
    }

    /// Defines an operator (idempotent for the same `def`, or an identical schema and
    /// signature). Kernels registered before the definition are checked against its
    /// signature now.
    pub fn def(&self, def: &'static OpDef) -> Result<OperatorHandle> {
        let e = self.entry(def.name);
        let st = e.lock();
        if let Some(old) = e.def.get() {
            if std::ptr::eq(*old, def)
                || (old.schema == def.schema && (old.signature)() == (def.signature)())
            {
                return Ok(OperatorHandle { entry: e });
            }
            return Err(ErrorKind::ConflictingDef {
                op: def.name.to_string(),
                existing: old.schema.to_string(),
                new: def.schema.to_string(),
            }
            .into());
        }
        let sig = (def.signature)();
        for r in st.regs.iter() {
            if r.2.get().type_id.is_some_and(|t| t != sig) {
                return Err(signature_error(e, def, r.2.get().type_name));
            }
        }
        // Set under the op lock, so registrations see either no def (and are checked
        // here) or the def (and check themselves).
        let _ = e.def.set(def);
        Ok(OperatorHandle { entry: e })
    }

    /// The defined operator `name` (`ns::op.overload`), if any.
    pub fn find(&self, name: &str) -> Option<OperatorHandle> {
        let e = *lock(&self.ops).get(name)?;
        e.def.get().map(|_| OperatorHandle { entry: e })
    }

    /// Every defined operator's name, sorted.
    pub fn op_names(&self) -> Vec<String> {
        let ops = lock(&self.ops);
        let mut v: Vec<String> = ops
            .values()
            .filter(|e| e.def.get().is_some())
            .map(|e| e.name.to_string())
            .collect();
        v.sort();
        v
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers `k` for `op` at `key` (a runtime or alias key). The op may be defined
    /// later. A typed kernel must match the op's signature. Duplicates stack: the
    /// latest registration wins; dropping its handle restores the previous one.
    pub fn register_impl(
        &self,
        op: &str,
        key: DispatchKey,
        k: KernelFunction,
    ) -> Result<RegistrationHandle> {
        if key == DispatchKey::Undefined {
            return Err(OpalError::msg(format!(
                "cannot register a kernel for '{op}' at key Undefined"
            )));
        }
        if !op.contains("::") {
            return Err(OpalError::msg(format!(
                "operator name '{op}' needs a namespace (e.g. 'aten::{op}')"
            )));
        }
        if let KernelRepr::Invalid(t) = k.repr {
            return Err(OpalError::msg(format!(
                "typed kernel for '{op}' must be a plain fn pointer, got `{t}`"
            )));
        }
        let e = self.entry(op);
        let mut st = e.lock();
        if let (Some(def), Some((tid, tname))) = (e.def.get(), k.typed_signature()) {
            if tid != (def.signature)() {
                return Err(signature_error(e, def, tname));
            }
            let _ = e.sig_name.set(tname);
        }
        let id = self.next_id();
        let entry = OwnedEntry::new(k, Some(&mut st.typed_cells));
        st.regs.push((key, id, entry));
        e.recompute(&st, &self.fallbacks);
        Ok(RegistrationHandle {
            kind: RegKind::Impl { op: e, key, id },
        })
    }

    /// Registers a backend fallback for the runtime key `key`: it serves every op
    /// without a kernel there (a boxed kernel; a typed kernel's boxed adapter is used).
    /// Same stacking policy as kernels.
    pub fn register_fallback(
        &self,
        key: DispatchKey,
        k: KernelFunction,
    ) -> Result<RegistrationHandle> {
        if !key.is_runtime() {
            return Err(OpalError::msg(format!(
                "fallbacks are registered for runtime keys, not {key}"
            )));
        }
        let id = self.next_id();
        let mut regs = lock(&self.fallback_regs);
        regs.push((key, id, OwnedEntry::new(k, None)));
        self.publish_fallback(&regs, key);
        Ok(RegistrationHandle {
            kind: RegKind::Fallback { key, id },
        })
    }

    /// Publishes the latest fallback for `key` and recomputes that key's slot of every
    /// op, each under its lock. Called with `fallback_regs` locked (`regs`); when it
    /// returns, no slot points at a fallback entry no longer in `regs`.
    fn publish_fallback(&self, regs: &[Reg], key: DispatchKey) {
        let p = regs
            .iter()
            .rev()
            .find(|r| r.0 == key)
            .map_or(std::ptr::null_mut(), |r| r.2.as_ptr());
        self.fallbacks[key as usize].store(p, Ordering::Release);
        let ops: Vec<&'static OperatorEntry> = lock(&self.ops).values().copied().collect();
        // Only this key's slot can change.
        let keys = DispatchKeySet::from_key(key);
        for e in ops {
            e.recompute_keys(&e.lock(), &self.fallbacks, keys);
        }
    }

    fn deregister(&self, kind: &RegKind) {
        match *kind {
            RegKind::Impl { op, id, .. } => {
                let removed = {
                    let mut st = op.lock();
                    let removed = take_reg(&mut st.regs, id);
                    op.recompute(&st, &self.fallbacks);
                    removed
                };
                // Retired with no lock held: retiring may run other entries' deferred
                // destructors, and a kernel's captured state may deregister on drop.
                if let Some(e) = removed {
                    // SAFETY: only this op's slots ever point at its own
                    // registrations' entries, and they were just recomputed, under
                    // the op's lock, from a list without this one.
                    unsafe { e.retire() };
                }
            }
            RegKind::Fallback { key, id } => {
                let removed = {
                    let mut regs = lock(&self.fallback_regs);
                    let removed = take_reg(&mut regs, id);
                    self.publish_fallback(&regs, key);
                    removed
                };
                if let Some(e) = removed {
                    // SAFETY: `publish_fallback` replaced the fallback slot and then
                    // recomputed every op's slot for `key` (see its docs and the
                    // `table` module docs), so nothing points at the entry any more.
                    unsafe { e.retire() };
                }
            }
            RegKind::None => {}
        }
    }

    /// Calls `op` by name with the arguments on `stack` (schema order); the key set is
    /// computed from the tensors among them. Returns are pushed on the stack.
    pub fn call_boxed(&self, op: &str, stack: &mut Stack) -> Result<()> {
        let h = self
            .find(op)
            .ok_or_else(|| OpalError::from(ErrorKind::UnknownOp(op.to_string())))?;
        h.call_boxed(stack)
    }
}

/// A Rust type name without module paths or elided lifetimes:
/// `fn(DispatchKeySet, &Tensor) -> Result<i64, OpalError>`.
pub(crate) fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut ident = String::new();
    let mut chars = full.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            ident.push(c);
        } else if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            ident.clear(); // a path segment: drop it
        } else {
            out.push_str(&ident);
            ident.clear();
            out.push(c);
        }
    }
    out.push_str(&ident);
    out.replace("&'_ ", "&")
}

#[cold]
fn signature_error(e: &OperatorEntry, def: &OpDef, kernel: &str) -> OpalError {
    ErrorKind::SignatureMismatch {
        op: def.name.to_string(),
        schema: def.schema.to_string(),
        kernel: short_type_name(kernel),
        expected: e.sig_name.get().map_or_else(
            || "fn(DispatchKeySet, <schema arguments>) -> Result<<returns>>".to_string(),
            |s| short_type_name(s),
        ),
    }
    .into()
}

/// One operator, defined (or at least named) in the dispatcher. `Copy`; valid forever.
#[derive(Copy, Clone)]
pub struct OperatorHandle {
    pub(crate) entry: &'static OperatorEntry,
}

impl OperatorHandle {
    /// Qualified name (`aten::add.Tensor`).
    pub fn name(&self) -> &'static str {
        self.entry.name
    }

    /// The definition, when defined.
    pub fn def(&self) -> Option<&'static OpDef> {
        self.entry.def.get().copied()
    }

    /// The schema text, when defined.
    pub fn schema(&self) -> Option<&'static str> {
        self.def().map(|d| d.schema)
    }

    /// A typed handle for the fn-pointer type `F`, checked against the signature.
    pub fn typed<F: Copy + 'static>(&self) -> Result<TypedOperatorHandle<F>> {
        let def = self
            .def()
            .ok_or_else(|| OpalError::from(ErrorKind::UnknownOp(self.name().to_string())))?;
        if TypeId::of::<F>() != (def.signature)() {
            return Err(signature_error(self.entry, def, std::any::type_name::<F>()));
        }
        let _ = self.entry.sig_name.set(std::any::type_name::<F>());
        Ok(TypedOperatorHandle::new(*self))
    }

    /// Keys (runtime and alias) with a kernel registered, in priority order.
    pub fn registered_keys(&self) -> Vec<DispatchKey> {
        self.entry.registered_keys()
    }

    /// True when a kernel (not a fallthrough) is registered for exactly `key`.
    pub fn has_kernel_for(&self, key: DispatchKey) -> bool {
        self.registered_keys().contains(&key)
    }

    /// The computed table, one line per key (`CPU: typed fn(..)`), for debugging.
    pub fn dump_table(&self) -> String {
        self.entry.dump()
    }

    /// The key a call with `ks` would run at (after fallthroughs), or the error.
    pub fn resolve_key(&self, ks: DispatchKeySet) -> Result<DispatchKey> {
        let (bit, _) = self.entry.resolve(ks, &crossbeam_epoch::pin())?;
        Ok(DispatchKey::from_bit(bit).unwrap_or(DispatchKey::Undefined))
    }

    /// Boxed call: the key set comes from the tensors among the last
    /// `def.args.len()` stack values, plus TLS and global keys.
    pub fn call_boxed(&self, stack: &mut Stack) -> Result<()> {
        let n = self.def().map_or(0, |d| d.args.len());
        if stack.len() < n {
            return Err(OpalError::boxed(format!(
                "'{}' takes {n} arguments, the stack has {}",
                self.name(),
                stack.len()
            )));
        }
        let arg_keys = stack[stack.len() - n..]
            .iter()
            .fold(DispatchKeySet::empty(), |s, v| s | v.tensor_keys());
        self.redispatch_boxed(dispatch_keyset(arg_keys), stack)
    }

    /// Boxed call with an explicit key set (no TLS/global recomputation): what a kernel
    /// uses to redispatch, with `ks.below(its_key)`.
    ///
    /// The storages of the tensor arguments are held for the call (see
    /// `dispatch::with_stack_holds`); the checks of the op (device rule, overlap)
    /// run in the generated boxed adapter of a typed kernel.
    pub fn redispatch_boxed(&self, ks: DispatchKeySet, stack: &mut Stack) -> Result<()> {
        // The kernel is cloned out of the entry under the epoch guard, so it stays
        // alive for the call even if its registration is dropped meanwhile, and the
        // guard is not held while the kernel runs.
        let k = {
            let guard = crossbeam_epoch::pin();
            let (_, e) = self.entry.resolve(ks, &guard)?;
            e.boxed.clone()
        };
        let Some(b) = k else {
            return Err(self.entry.no_kernel(None, ks));
        };
        let args = self.def().map_or(&[][..], |d| d.args);
        with_stack_holds(self.name(), args, OpChecks::NONE, stack, |stack| {
            b(self, ks, stack)
        })
    }
}

impl fmt::Debug for OperatorHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OperatorHandle({})", self.name())
    }
}

enum RegKind {
    Impl {
        op: &'static OperatorEntry,
        #[allow(dead_code)]
        key: DispatchKey,
        id: u64,
    },
    Fallback {
        key: DispatchKey,
        id: u64,
    },
    None,
}

/// Keeps a registration alive; dropping it deregisters (the table is recomputed).
#[must_use = "dropping the handle deregisters immediately; call .leak() to keep it forever"]
pub struct RegistrationHandle {
    kind: RegKind,
}

impl RegistrationHandle {
    /// Keeps the registration forever.
    pub fn leak(mut self) {
        self.kind = RegKind::None;
    }
}

impl Drop for RegistrationHandle {
    fn drop(&mut self) {
        // A leaked handle must not touch the global dispatcher: it may be dropped while
        // that dispatcher is still being created (registrations made during its
        // initialization), and re-entering its initialization would deadlock.
        if matches!(self.kind, RegKind::None) {
            return;
        }
        Dispatcher::global().deregister(&self.kind);
    }
}

impl fmt::Debug for RegistrationHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            RegKind::Impl { op, key, id } => {
                write!(f, "RegistrationHandle({} @ {key}, #{id})", op.name)
            }
            RegKind::Fallback { key, id } => {
                write!(f, "RegistrationHandle(fallback @ {key}, #{id})")
            }
            RegKind::None => write!(f, "RegistrationHandle(leaked)"),
        }
    }
}

/// What [`super::Kernel::Boxed`] holds: runs the op's boxed kernel for `ks` (resolved
/// again, so the lookup hands out no reference into a table entry).
pub(crate) fn run_boxed(op: &OperatorHandle, ks: DispatchKeySet, stack: &mut Stack) -> Result<()> {
    op.redispatch_boxed(ks, stack)
}
