//! Kernels: [`KernelFunction`] (what is registered), [`Kernel`] (what a typed lookup
//! returns) and the table entries the hot path reads, each owned by its registration
//! ([`OwnedEntry`]) and freed through epoch-based reclamation once unpublished.
//!
//! A typed kernel's value (a fn pointer) is also kept in a [`TypedCells`] cell: a
//! leaked, immutable copy, one per distinct value registered for the op (equal values
//! share a cell), that is never freed. Tables publish the cell's address next to the
//! entry, so the typed hot path reads the fn pointer without touching the entry and
//! needs no epoch pin (see `table`).
//!
//! Owns: kernel representation, type erasure of typed fn pointers, and the
//! lifetime of entries. Must not: compute tables or take locks.

use super::dispatcher::OperatorHandle;
use crate::error::Result;
use crate::ivalue::Stack;
use crate::keys::DispatchKeySet;
use std::any::{Any, TypeId};
use std::mem::{align_of, size_of};
use std::ptr::NonNull;
use std::sync::Arc;

/// A boxed kernel: takes its arguments from the end of the stack and pushes its
/// returns. Receives the op and the key set the call was dispatched with.
pub type BoxedKernelFn =
    dyn Fn(&OperatorHandle, DispatchKeySet, &mut Stack) -> Result<()> + Send + Sync;

/// Words a typed kernel may take (fn pointers need one); bigger values are refused
/// as not fn pointers.
const TYPED_WORDS: usize = 2;

/// One op's typed-kernel cells: leaked (`'static`, never freed), immutable copies of
/// the typed kernel values registered for it, at most one per distinct value (by
/// `Eq`). Lives in the op's state, under its lock.
pub(crate) type TypedCells = Vec<&'static (dyn Any + Send + Sync)>;

/// Finds or makes the cell holding the typed kernel's value; returns its address.
type InternFn = Box<dyn FnOnce(&mut TypedCells) -> *const () + Send + Sync>;

pub(crate) enum KernelRepr {
    Typed {
        type_id: TypeId,
        type_name: &'static str,
        intern: InternFn,
        boxed: Arc<BoxedKernelFn>,
    },
    Boxed(Arc<BoxedKernelFn>),
    Fallthrough,
    /// A typed value that is not a plain function pointer (rejected at registration).
    Invalid(&'static str),
}

/// A kernel to register: typed (with its boxed adapter), boxed, or fallthrough.
pub struct KernelFunction {
    pub(crate) repr: KernelRepr,
}

impl KernelFunction {
    /// A typed kernel `f` (a fn-pointer type
    /// `fn(DispatchKeySet, <args>) -> Result<<returns>>`) with the boxed adapter that
    /// serves boxed calls. Registration checks `F` against the op's signature.
    ///
    /// Registering keeps an immutable copy of `f` for the rest of the process, shared
    /// by every registration of an equal (`==`) value for the same op: fn pointers
    /// are a handful of words per distinct kernel, so register/drop cycles do not grow.
    pub fn typed<F: Copy + Eq + Send + Sync + 'static>(f: F, boxed: Arc<BoxedKernelFn>) -> Self {
        if size_of::<F>() > size_of::<[usize; TYPED_WORDS]>()
            || align_of::<F>() > align_of::<usize>()
        {
            return KernelFunction {
                repr: KernelRepr::Invalid(std::any::type_name::<F>()),
            };
        }
        let intern = move |cells: &mut TypedCells| -> *const () {
            let found = cells
                .iter()
                .find_map(|c| c.downcast_ref::<F>().filter(|c| **c == f));
            let cell: &'static F = found.unwrap_or_else(|| {
                let c: &'static F = Box::leak(Box::new(f));
                cells.push(c);
                c
            });
            (cell as *const F).cast()
        };
        KernelFunction {
            repr: KernelRepr::Typed {
                type_id: TypeId::of::<F>(),
                type_name: std::any::type_name::<F>(),
                intern: Box::new(intern),
                boxed,
            },
        }
    }

    /// A boxed kernel (also serves typed calls through the generated adapters).
    pub fn boxed(b: Arc<BoxedKernelFn>) -> Self {
        KernelFunction {
            repr: KernelRepr::Boxed(b),
        }
    }

    /// A boxed kernel from a closure.
    pub fn from_boxed_fn(
        f: impl Fn(&OperatorHandle, DispatchKeySet, &mut Stack) -> Result<()> + Send + Sync + 'static,
    ) -> Self {
        KernelFunction::boxed(Arc::new(f))
    }

    /// A fallthrough: the key is skipped and dispatch continues with the next lower key.
    pub fn fallthrough() -> Self {
        KernelFunction {
            repr: KernelRepr::Fallthrough,
        }
    }

    /// True for fallthrough kernels.
    pub fn is_fallthrough(&self) -> bool {
        matches!(self.repr, KernelRepr::Fallthrough)
    }

    /// The typed kernel's `TypeId` and Rust type name, when typed.
    pub fn typed_signature(&self) -> Option<(TypeId, &'static str)> {
        match &self.repr {
            KernelRepr::Typed {
                type_id, type_name, ..
            } => Some((*type_id, type_name)),
            _ => None,
        }
    }
}

/// A kernel found by [`super::TypedOperatorHandle::lookup`]: call `Typed` directly,
/// or box the arguments for `Boxed`.
pub enum Kernel<'a, F> {
    /// The typed kernel.
    Typed(F),
    /// The op has a boxed kernel for the call (e.g. a backend fallback): calling this
    /// with the looked-up op's handle, the same key set and the boxed arguments runs
    /// it ([`super::OperatorHandle::redispatch_boxed`]). It holds no kernel itself,
    /// so a registration dropped meanwhile can be freed safely.
    Boxed(&'a BoxedKernelFn),
}

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum EntryKind {
    Kernel,
    Fallthrough,
    Missing,
}

/// A table entry: immutable once made. Tables point at it while its registration
/// is live; readers dereference such a pointer only inside an epoch guard (see
/// [`OwnedEntry::retire`]).
pub(crate) struct KernelEntry {
    /// The typed kernel's cell (a `&'static F` of the type `type_id` names, see
    /// [`TypedCells`]), or null when the entry has no typed kernel.
    pub(crate) typed_cell: *const (),
    pub(crate) kind: EntryKind,
    pub(crate) type_id: Option<TypeId>,
    pub(crate) type_name: &'static str,
    pub(crate) boxed: Option<Arc<BoxedKernelFn>>,
}

// SAFETY: `typed_cell` points at an immutable `'static` `F: Send + Sync` (bound on
// `KernelFunction::typed`); the rest is Send + Sync.
unsafe impl Send for KernelEntry {}
// SAFETY: see Send; entries are immutable after publication.
unsafe impl Sync for KernelEntry {}

pub(crate) static MISSING: KernelEntry = KernelEntry {
    typed_cell: std::ptr::null(),
    kind: EntryKind::Missing,
    type_id: None,
    type_name: "",
    boxed: None,
};

impl KernelEntry {
    /// The entry for `k`. `cells` (the op's) is None for fallbacks (which serve every
    /// op, so only their boxed form is usable).
    fn new(k: KernelFunction, cells: Option<&mut TypedCells>) -> KernelEntry {
        match k.repr {
            KernelRepr::Typed {
                type_id,
                type_name,
                intern,
                boxed,
            } => KernelEntry {
                type_id: cells.is_some().then_some(type_id),
                typed_cell: cells.map_or(std::ptr::null(), intern),
                kind: EntryKind::Kernel,
                type_name,
                boxed: Some(boxed),
            },
            KernelRepr::Boxed(b) => KernelEntry {
                boxed: Some(b),
                kind: EntryKind::Kernel,
                ..KernelEntry::empty()
            },
            KernelRepr::Fallthrough | KernelRepr::Invalid(_) => KernelEntry {
                kind: EntryKind::Fallthrough,
                ..KernelEntry::empty()
            },
        }
    }

    fn empty() -> KernelEntry {
        KernelEntry {
            typed_cell: std::ptr::null(),
            kind: EntryKind::Missing,
            type_id: None,
            type_name: "",
            boxed: None,
        }
    }

    /// True when the entry has a typed kernel (`typed_cell` is set).
    pub(crate) fn has_typed(&self) -> bool {
        !self.typed_cell.is_null()
    }
}

/// The typed kernel held by a typed cell.
///
/// # Safety
/// `cell` is a non-null [`KernelEntry::typed_cell`] and `F` is the type the entry
/// was made from, i.e. `TypeId::of::<F>() == entry.type_id` (the dispatcher
/// guarantees it for cells in an op's table: typed entries there match the op's
/// signature, and a `TypedOperatorHandle<F>` only exists when `F` is that signature).
#[inline(always)]
pub(crate) unsafe fn read_typed_cell<F: Copy>(cell: *const ()) -> F {
    // SAFETY: per the contract, `cell` is the address of a `&'static F` that
    // `KernelFunction::typed` leaked (`Box::leak`): aligned, initialized, never
    // written again and never freed, so a plain read of it is valid from any thread
    // that got the address through an acquire load of the store that published it.
    unsafe { cell.cast::<F>().read() }
}

/// The owner of one registration's entry: a `Box<KernelEntry>` that tables may point
/// at. It is freed only by [`OwnedEntry::retire`]; dropped any other way it leaks,
/// which is safe.
pub(crate) struct OwnedEntry(NonNull<KernelEntry>);

// SAFETY: an `OwnedEntry` is a uniquely owned box of a `Send + Sync` `KernelEntry`.
unsafe impl Send for OwnedEntry {}
// SAFETY: see Send; the entry is immutable.
unsafe impl Sync for OwnedEntry {}

/// A raw entry pointer moved into the deferred destructor.
struct Retired(NonNull<KernelEntry>);
// SAFETY: the destructor that owns it runs on whichever thread collects garbage;
// the entry is `Send`.
unsafe impl Send for Retired {}

impl OwnedEntry {
    /// A new entry for `k` (see [`KernelEntry::new`]).
    pub(crate) fn new(k: KernelFunction, cells: Option<&mut TypedCells>) -> OwnedEntry {
        OwnedEntry(NonNull::from(Box::leak(Box::new(KernelEntry::new(
            k, cells,
        )))))
    }

    /// The entry; valid as long as `self`.
    pub(crate) fn get(&self) -> &KernelEntry {
        // SAFETY: the pointer is a live box owned by `self`; only `retire`, which
        // consumes `self`, frees it.
        unsafe { self.0.as_ref() }
    }

    /// The pointer tables publish.
    pub(crate) fn as_ptr(&self) -> *mut KernelEntry {
        self.0.as_ptr()
    }

    /// Frees the entry once no reader can still be using it.
    ///
    /// # Safety
    /// No table slot and no fallback slot holds this entry's pointer, and none will
    /// again: every store that unpublished it happened before this call.
    pub(crate) unsafe fn retire(self) {
        let p = Retired(self.0);
        let guard = crossbeam_epoch::pin();
        // Readers dereference an entry pointer only while pinned, and only one they
        // loaded from a slot while pinned (`OperatorEntry::slot`). By this function's
        // contract every such load of this pointer precedes the unpublishing stores,
        // hence this defer; epoch reclamation runs the closure only after every
        // thread pinned at that time has unpinned, so no reader holds the entry then.
        // SAFETY: nothing else refers to the box, and no reader can outlive the defer.
        unsafe {
            guard.defer_unchecked(move || {
                let p = p;
                drop(Box::from_raw(p.0.as_ptr()));
            });
        }
        // Hand the garbage to the global queue now, so a register/drop loop on one
        // thread frees as it goes instead of batching per thread.
        guard.flush();
    }
}
