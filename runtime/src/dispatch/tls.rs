//! Thread-local include/exclude key sets with RAII guards, the process-global key
//! set, and [`dispatch_keyset`], which combines them with a call's argument keys.
//!
//! Owns: the TLS and global key-set state. Must not: know about operators; the
//! dispatcher reads these sets through [`dispatch_keyset`] only.
//!
//! The key set of a call is `(argument keys ∪ TLS include ∪ global) − TLS exclude`.
//! The global set always contains `BackendSelect`, so a factory op (no tensor
//! arguments) dispatches to its `BackendSelect` kernel (factory ops without one error,
//! because `BackendSelect`'s default fallback is a fallthrough). Guards restore the previous state on drop, so they
//! nest; they are `!Send` (they restore the TLS of the thread that made them).

use crate::keys::DispatchKey;
use crate::keys::DispatchKeySet;
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    static INCLUDED: Cell<u64> = const { Cell::new(0) };
    static EXCLUDED: Cell<u64> = const { Cell::new(0) };
}

static GLOBAL: AtomicU64 =
    AtomicU64::new(DispatchKeySet::from_key(DispatchKey::BackendSelect).bits());

/// `(arg_keys ∪ TLS include ∪ global) − TLS exclude`. An empty `arg_keys` means a
/// factory op: `BackendSelect` is always in the global set.
#[inline]
pub fn dispatch_keyset(arg_keys: DispatchKeySet) -> DispatchKeySet {
    let inc = INCLUDED.with(Cell::get);
    let exc = EXCLUDED.with(Cell::get);
    let g = GLOBAL.load(Ordering::Relaxed);
    DispatchKeySet::from_bits_retain((arg_keys.bits() | inc | g) & !exc)
}

/// This thread's included keys.
pub fn tls_included() -> DispatchKeySet {
    DispatchKeySet::from_bits_retain(INCLUDED.with(Cell::get))
}

/// This thread's excluded keys.
pub fn tls_excluded() -> DispatchKeySet {
    DispatchKeySet::from_bits_retain(EXCLUDED.with(Cell::get))
}

/// The process-global key set (always holds `BackendSelect`).
pub fn global_keyset() -> DispatchKeySet {
    DispatchKeySet::from_bits_retain(GLOBAL.load(Ordering::Relaxed))
}

/// Adds keys to the global set (e.g. a mode that applies to every thread).
pub fn global_include(ks: DispatchKeySet) {
    GLOBAL.fetch_or(ks.bits(), Ordering::Relaxed);
}

/// Removes keys from the global set; `BackendSelect` always stays.
pub fn global_remove(ks: DispatchKeySet) {
    let keep = DispatchKeySet::from_key(DispatchKey::BackendSelect).bits();
    GLOBAL.fetch_and(!(ks.bits() & !keep), Ordering::Relaxed);
}

/// A guard type that adds keys to one of this thread's sets (`$set`) while it
/// lives and restores the set when it drops; not `Send` (the set is per thread).
macro_rules! key_set_guard {
    ($(#[$doc:meta])* $name:ident, $set:ident, $must_use:literal, $new_doc:literal) => {
        $(#[$doc])*
        #[must_use = $must_use]
        pub struct $name {
            prev: u64,
            _not_send: PhantomData<*const ()>,
        }

        impl $name {
            #[doc = $new_doc]
            pub fn new(ks: impl Into<DispatchKeySet>) -> Self {
                let ks = ks.into();
                let prev = $set.with(|c| c.replace(c.get() | ks.bits()));
                $name {
                    prev,
                    _not_send: PhantomData,
                }
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                $set.with(|c| c.set(self.prev));
            }
        }
    };
}

key_set_guard!(
    /// While alive, adds keys to this thread's include set. Restores on drop.
    IncludeGuard,
    INCLUDED,
    "the keys are included only while the guard lives",
    "Includes `ks` on this thread until the guard drops."
);

key_set_guard!(
    /// While alive, adds keys to this thread's exclude set (e.g. an autograd kernel
    /// excluding autograd keys below itself). Restores on drop.
    ExcludeGuard,
    EXCLUDED,
    "the keys are excluded only while the guard lives",
    "Excludes `ks` on this thread until the guard drops."
);

/// Replaces this thread's exclude set by `f(current)`; returns the previous set, for
/// [`restore_excluded`]. (Grad mode both adds and removes the autograd keys.)
pub(crate) fn update_excluded(f: impl FnOnce(u64) -> u64) -> u64 {
    EXCLUDED
        .try_with(|c| c.replace(f(c.get())))
        .unwrap_or_default()
}

/// Restores an exclude set returned by [`update_excluded`].
pub(crate) fn restore_excluded(prev: u64) {
    let _ = EXCLUDED.try_with(|c| c.set(prev));
}

/// Replaces this thread's include set by `f(current)`; returns the previous set
/// (autocast guards both add and remove their key).
pub(crate) fn update_included(f: impl FnOnce(u64) -> u64) -> u64 {
    INCLUDED
        .try_with(|c| c.replace(f(c.get())))
        .unwrap_or_default()
}
