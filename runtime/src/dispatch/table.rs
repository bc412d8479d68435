//! Per-operator state: registrations, and the dispatch table computed from them —
//! one published entry pointer and one typed-kernel word per runtime key, plus a mask
//! of non-fallthrough keys.
//!
//! Owns: the precedence rules and lock-free publication. Must not: know about typed
//! signatures beyond `TypeId`s, or about TLS.
//!
//! # Precedence (per runtime key `k`)
//!
//! 1. a kernel registered for `k` itself;
//! 2. for backend keys: `CompositeExplicitAutogradNonFunctional`, then
//!    `CompositeExplicitAutograd`;
//! 3. `CompositeImplicitAutogradNestedTensor` (nested keys), then
//!    `CompositeImplicitAutograd` (backend keys, and autograd keys whose backends
//!    have no kernel of their own — direct or `CompositeExplicitAutograd*` — because a
//!    backend kernel means autograd must not decompose);
//! 4. for autograd keys: the `Autograd` alias;
//! 5. the backend fallback for `k` (possibly a fallthrough);
//! 6. missing (an error naming the op, key, device and registered keys).
//!
//! Several registrations for the same (op, key): the latest wins and dropping it
//! restores the previous one (a stack, like PyTorch's override-with-warning policy,
//! without the warning).
//!
//! # Publication and reclamation
//!
//! Entries are immutable [`KernelEntry`]s owned by their registration (an
//! [`OwnedEntry`] in the op's or the dispatcher's registration list). A recompute
//! (under the op's mutex) stores each slot and its typed word, then the mask.
//!
//! The typed hot path ([`OperatorEntry::typed_word`]) takes no pin and no lock: it
//! loads the mask, picks the highest key of the call, and loads that key's typed
//! word: the address of the slot entry's typed cell (see `kernel`), or null when the
//! entry is boxed-only, a fallthrough or missing. Typed cells are leaked and never
//! written after they are made, so the word needs no reclamation: whatever value a
//! reader loads (the latest, or an older one racing with a recompute) is the whole
//! address of a live cell holding a kernel that was registered for this op and
//! picked for that key at some point, of the op's signature type (typed entries are
//! checked against it, and an op has typed handles only once defined, see
//! `Dispatcher::def`). A word is a single atomic, so it is never torn. A null word
//! sends the lookup to the slow path below, which also handles a fallthrough seen
//! through a stale mask.
//!
//! Everything else (boxed calls, boxed-only kernels, fallthrough skips, errors, the
//! dump) pins an epoch (`crossbeam_epoch::pin`: no lock, no waiting), loads the mask,
//! picks the highest key, loads that slot, and copies out what it needs (a clone of
//! the boxed kernel's `Arc`, the typed cell's address) before unpinning: it sees an
//! old or a new entry; a fallthrough seen through a stale mask is skipped.
//!
//! Deregistration removes the registration from its list, recomputes the slots that
//! could point at its entry, and only then retires the entry
//! ([`OwnedEntry::retire`]): it is freed after every reader pinned at that moment
//! has unpinned. The invariant that makes this sound: *a slot only ever receives a
//! pointer to an entry whose registration is still in its list*. Kernel entries are
//! published only into their own op's slots, under that op's lock, from its list;
//! fallback entries are read from the dispatcher's fallback slots under an op's lock,
//! and `Dispatcher::publish_fallback` recomputes every op (each under its lock) after
//! replacing a fallback slot and before a removed fallback is retired, so a recompute
//! that read the old pointer is always followed by one that drops it.

use super::kernel::{EntryKind, KernelEntry, OwnedEntry, TypedCells, MISSING};
use super::opdef::OpDef;
use crate::error::{ErrorKind, OpalError};
use crate::keys::DispatchKey;
use crate::keys::DispatchKeySet;
use crossbeam_epoch::Guard;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// One registration: (key it was registered for, id, entry).
pub(crate) type Reg = (DispatchKey, u64, OwnedEntry);

/// Removes the registration `id` from `regs`; the caller retires its entry once the
/// tables no longer point at it.
pub(crate) fn take_reg(regs: &mut Vec<Reg>, id: u64) -> Option<OwnedEntry> {
    let at = regs.iter().position(|r| r.1 == id)?;
    Some(regs.remove(at).2)
}

pub(crate) struct OpState {
    /// In registration order; the last one per key wins.
    pub(crate) regs: Vec<Reg>,
    /// The typed kernels ever registered for this op (never shrinks; see `kernel`).
    pub(crate) typed_cells: TypedCells,
}

pub(crate) struct OperatorEntry {
    pub(crate) name: &'static str,
    pub(crate) def: OnceLock<&'static OpDef>,
    /// Rust type name of the signature, once a typed handle or kernel matched it.
    pub(crate) sig_name: OnceLock<&'static str>,
    pub(crate) mask: AtomicU64,
    pub(crate) slots: [AtomicPtr<KernelEntry>; 64],
    /// Per runtime key: `typed_cell` of the entry last stored in `slots` (null when it
    /// has none). Read without a pin (module docs).
    pub(crate) typed: [AtomicPtr<()>; 64],
    pub(crate) state: Mutex<OpState>,
}

#[inline]
pub(crate) fn entry_ptr(e: &KernelEntry) -> *mut KernelEntry {
    // Never written through: entries are immutable.
    e as *const KernelEntry as *mut KernelEntry
}

impl OperatorEntry {
    pub(crate) fn new(name: &str) -> &'static OperatorEntry {
        Box::leak(Box::new(OperatorEntry {
            name: Box::leak(name.to_string().into_boxed_str()),
            def: OnceLock::new(),
            sig_name: OnceLock::new(),
            mask: AtomicU64::new(0),
            slots: [const { AtomicPtr::new(std::ptr::null_mut()) }; 64],
            typed: [const { AtomicPtr::new(std::ptr::null_mut()) }; 64],
            state: Mutex::new(OpState {
                regs: Vec::new(),
                typed_cells: Vec::new(),
            }),
        }))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, OpState> {
        // Registration code does not panic while holding the lock; if something did,
        // the state is still a consistent list, so keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry for the runtime key at `bit` (MISSING before the first recompute),
    /// valid while `guard` is pinned.
    #[inline(always)]
    pub(crate) fn slot<'g>(&self, bit: u32, _guard: &'g Guard) -> &'g KernelEntry {
        let p = self.slots[bit as usize].load(Ordering::Acquire);
        if p.is_null() {
            &MISSING
        } else {
            // SAFETY: a non-null slot points at MISSING or at an entry whose
            // registration was live when it was stored (module docs); such an entry
            // is retired only after it was unpublished, and freed only after every
            // thread pinned then (as this one is, by `_guard`, since before this
            // load) has unpinned.
            unsafe { &*p }
        }
    }

    /// Recomputes every slot and the mask from `st` and the backend `fallbacks`.
    pub(crate) fn recompute(&self, st: &OpState, fallbacks: &[AtomicPtr<KernelEntry>; 64]) {
        self.recompute_keys(st, fallbacks, DispatchKeySet::all());
    }

    /// Recomputes the slots of `keys` (and their mask bits). Callers hold the op's
    /// lock (`st` is its guarded state), which serializes mask updates.
    pub(crate) fn recompute_keys(
        &self,
        st: &OpState,
        fallbacks: &[AtomicPtr<KernelEntry>; 64],
        keys: DispatchKeySet,
    ) {
        let latest = |k: DispatchKey| st.regs.iter().rev().find(|r| r.0 == k).map(|r| r.2.get());
        let direct_keys = st
            .regs
            .iter()
            .filter(|r| r.0.is_runtime())
            .fold(DispatchKeySet::empty(), |s, r| s.add(r.0));
        let ceanf = latest(DispatchKey::CompositeExplicitAutogradNonFunctional);
        let cea = latest(DispatchKey::CompositeExplicitAutograd);
        let cia = latest(DispatchKey::CompositeImplicitAutograd);
        let cia_nested = latest(DispatchKey::CompositeImplicitAutogradNestedTensor);
        let autograd = latest(DispatchKey::Autograd);
        let ceanf_keys = DispatchKey::CompositeExplicitAutogradNonFunctional.alias_expansion();
        let cia_nested_keys = DispatchKey::CompositeImplicitAutogradNestedTensor.alias_expansion();
        // An autograd key decomposes through CIA only when its backends have no kernel
        // of their own (direct, or the composite-explicit ones that cover every backend).
        let has_backend_kernel = |k: DispatchKey| {
            cea.is_some() || ceanf.is_some() || !(k.backends_of_autograd() & direct_keys).is_empty()
        };
        let pick = |k: DispatchKey| -> Option<&KernelEntry> {
            if let Some(e) = latest(k) {
                return Some(e);
            }
            if k.is_backend() {
                if let Some(e) = ceanf.filter(|_| ceanf_keys.has(k)).or(cea) {
                    return Some(e);
                }
            }
            if let Some(e) = cia_nested.filter(|_| cia_nested_keys.has(k)) {
                return Some(e);
            }
            if k.is_backend() || (k.is_autograd() && !has_backend_kernel(k)) {
                if let Some(e) = cia {
                    return Some(e);
                }
            }
            if k.is_autograd() {
                if let Some(e) = autograd {
                    return Some(e);
                }
            }
            let p = fallbacks[k as usize].load(Ordering::Acquire);
            // SAFETY: a fallback slot points at the entry of a fallback registration
            // that is still listed, or did until `publish_fallback` replaced it; in
            // that case its recompute of this op waits for this op's lock, held by
            // our caller, and the entry is retired only after it (module docs).
            (!p.is_null()).then(|| unsafe { &*p })
        };
        let mut mask = self.mask.load(Ordering::Relaxed) & !keys.bits();
        for &k in DispatchKey::RUNTIME.iter().filter(|k| keys.has(**k)) {
            let e = pick(k).unwrap_or(&MISSING);
            self.slots[k as usize].store(entry_ptr(e), Ordering::Release);
            // Never written through: cells are immutable.
            self.typed[k as usize].store(e.typed_cell.cast_mut(), Ordering::Release);
            if e.kind != EntryKind::Fallthrough {
                mask |= 1u64 << (k as u32);
            }
        }
        self.mask.store(mask, Ordering::Release);
    }

    /// Keys (runtime and alias) with a kernel registered for this op, in key order.
    pub(crate) fn registered_keys(&self) -> Vec<DispatchKey> {
        let st = self.lock();
        let mut ks: Vec<DispatchKey> = st
            .regs
            .iter()
            .filter(|r| r.2.get().kind == EntryKind::Kernel)
            .map(|r| r.0)
            .collect();
        ks.sort();
        ks.dedup();
        ks
    }

    /// The error for a call with key set `ks` that found no kernel at `key`.
    #[cold]
    #[inline(never)]
    pub(crate) fn no_kernel(&self, key: Option<DispatchKey>, ks: DispatchKeySet) -> OpalError {
        // With no key given, every key of the call fell through. Name its backend
        // key: the others (BackendSelect, ...) only fall through to it. With none
        // (no argument is a defined tensor: an undefined tensor has no keys) the
        // call has no key and no device to name.
        let key = key
            .or(ks.backends().highest())
            .unwrap_or(DispatchKey::Undefined);
        let dev = key.device_type();
        ErrorKind::NoKernel {
            op: self.name.to_string(),
            key,
            device: dev.map_or_else(|| "undefined".to_string(), |d| d.name().to_string()),
            available: self
                .registered_keys()
                .iter()
                .map(|k| k.name().to_string())
                .collect(),
        }
        .into()
    }

    /// The typed hot path: the typed word of the highest key of `ks` that the mask
    /// shows (the address of a typed cell, see the module docs), or null when that
    /// key's entry has no typed kernel or `ks` shows no key (the caller then
    /// resolves under a pin). No pin, no lock, no dereference.
    #[inline(always)]
    pub(crate) fn typed_word(&self, ks: DispatchKeySet) -> *const () {
        let m = ks.bits() & self.mask.load(Ordering::Acquire);
        if m == 0 {
            return std::ptr::null();
        }
        let bit = 63 - m.leading_zeros();
        self.typed[bit as usize].load(Ordering::Acquire)
    }

    /// Finds the entry a call with `ks` runs: highest non-fallthrough key. Returns
    /// the key and entry (valid while `guard` is pinned), or the error.
    #[inline(always)]
    pub(crate) fn resolve<'g>(
        &self,
        ks: DispatchKeySet,
        guard: &'g Guard,
    ) -> Result<(u32, &'g KernelEntry), OpalError> {
        let mut m = ks.bits() & self.mask.load(Ordering::Acquire);
        loop {
            if m == 0 {
                return Err(self.no_kernel(None, ks));
            }
            let bit = 63 - m.leading_zeros();
            let e = self.slot(bit, guard);
            match e.kind {
                EntryKind::Kernel => return Ok((bit, e)),
                // A stale mask can show a key that became a fallthrough: skip it.
                EntryKind::Fallthrough => m &= !(1u64 << bit),
                EntryKind::Missing => return Err(self.no_kernel(DispatchKey::from_bit(bit), ks)),
            }
        }
    }

    /// A human-readable table: one line per runtime key with a non-missing entry.
    pub(crate) fn dump(&self) -> String {
        let mut out = String::new();
        let guard = crossbeam_epoch::pin();
        for &k in DispatchKey::RUNTIME {
            let e = self.slot(k as u32, &guard);
            let what = match e.kind {
                EntryKind::Missing => continue,
                EntryKind::Fallthrough => "fallthrough".to_string(),
                EntryKind::Kernel if e.has_typed() => format!("typed {}", e.type_name),
                EntryKind::Kernel => "boxed".to_string(),
            };
            out.push_str(&format!("{k}: {what}\n"));
        }
        out
    }
}
