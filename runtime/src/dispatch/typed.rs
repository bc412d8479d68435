//! The typed (unboxed) fast path: [`OpSlot`] (a static cache of one op's typed
//! handle) and [`TypedOperatorHandle::lookup`].
//!
//! Owns: the lock-free lookup. Must not: allocate, lock or touch the registry on the
//! hot path (only `OpSlot::get`'s first call does).
//!
//! A typed lookup is: one acquire load of the op's non-fallthrough mask, `and` with
//! the call's key set, a leading-zero count, one acquire load of that key's typed
//! word, and a read of the fn pointer from the never-freed cell it points at — no
//! epoch pin, no lock, no access to the (reclaimable) table entry (see `table`).
//! Only when the word is null (a boxed-only kernel, a fallthrough seen through a stale
//! mask, or no kernel) does the lookup resolve the entry under an epoch pin.

use super::dispatcher::{run_boxed, Dispatcher, OperatorHandle};
use super::kernel::{read_typed_cell, BoxedKernelFn, Kernel};
use super::opdef::OpDef;
use crate::error::Result;
use crate::keys::DispatchKeySet;
use std::marker::PhantomData;
use std::sync::OnceLock;

/// A typed handle to one op whose typed kernels have the fn-pointer type `F`.
/// Only constructible when `F` matches the op's signature.
pub struct TypedOperatorHandle<F> {
    op: OperatorHandle,
    _sig: PhantomData<fn() -> F>,
}

impl<F> Clone for TypedOperatorHandle<F> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<F> Copy for TypedOperatorHandle<F> {}

impl<F: Copy + 'static> TypedOperatorHandle<F> {
    /// Callers guarantee `F` is the op's signature type (see `OperatorHandle::typed`).
    pub(crate) fn new(op: OperatorHandle) -> Self {
        TypedOperatorHandle {
            op,
            _sig: PhantomData,
        }
    }

    /// The untyped handle (for boxed calls and introspection).
    #[inline]
    pub fn handle(&self) -> &OperatorHandle {
        &self.op
    }

    /// The kernel for a call dispatched with `ks` (highest non-fallthrough key). The
    /// error names the op, the key, its device and the keys that have kernels.
    #[inline(always)]
    pub fn lookup(&self, ks: DispatchKeySet) -> Result<Kernel<'static, F>> {
        let cell = self.op.entry.typed_word(ks);
        if !cell.is_null() {
            // A non-null typed word is the `typed_cell` of an entry stored in this op's
            // table (`table` module docs); typed entries there were checked at
            // registration to have the op's signature TypeId (or the def was refused),
            // and this handle exists only for F with that TypeId (`OperatorHandle::typed`).
            // SAFETY: so `cell` is a published, never-freed cell holding an `F`.
            let kernel = unsafe { read_typed_cell::<F>(cell) };
            return Ok(Kernel::Typed(kernel));
        }
        self.lookup_slow(ks)
    }

    /// The lookup when the typed word is null: resolves the entry under an epoch pin
    /// (skipping fallthroughs a stale mask showed).
    #[inline(never)]
    fn lookup_slow(&self, ks: DispatchKeySet) -> Result<Kernel<'static, F>> {
        static RUN_BOXED: &BoxedKernelFn = &run_boxed;
        let guard = crossbeam_epoch::pin();
        let (_, e) = self.op.entry.resolve(ks, &guard)?;
        if e.has_typed() {
            // SAFETY: as in `lookup`: the entry is in this op's table, so its typed
            // cell holds an F (the cell itself is never freed, so the pin is not
            // needed for it).
            Ok(Kernel::Typed(unsafe { read_typed_cell::<F>(e.typed_cell) }))
        } else if e.boxed.is_some() {
            Ok(Kernel::Boxed(RUN_BOXED))
        } else {
            Err(self.op.entry.no_kernel(None, ks))
        }
    }
}

/// Typed access to one op, resolved once and cached in a `static`:
///
/// ```ignore
/// static OP: OpSlot<Sig> = OpSlot::new(&DEF);
/// let op = OP.get()?;               // defines the op on first use; checks the TypeId
/// match op.lookup(ks)? { Kernel::Typed(f) => f(ks, a, b), Kernel::Boxed(k) => ... }
/// ```
pub struct OpSlot<F> {
    def: &'static OpDef,
    cell: OnceLock<TypedOperatorHandle<F>>,
}

impl<F: Copy + 'static> OpSlot<F> {
    /// A slot for `def` (usable in a `static`).
    pub const fn new(def: &'static OpDef) -> Self {
        OpSlot {
            def,
            cell: OnceLock::new(),
        }
    }

    /// The typed handle; the first call defines the op in the global dispatcher and
    /// checks that `F` is its signature. Failures are not cached (a later call retries).
    #[inline(always)]
    pub fn get(&self) -> Result<&TypedOperatorHandle<F>> {
        match self.cell.get() {
            Some(h) => Ok(h),
            None => self.init(),
        }
    }

    #[cold]
    #[inline(never)]
    fn init(&self) -> Result<&TypedOperatorHandle<F>> {
        let h = Dispatcher::global().def(self.def)?.typed::<F>()?;
        Ok(self.cell.get_or_init(|| h))
    }

    /// The definition.
    pub fn def(&self) -> &'static OpDef {
        self.def
    }
}
