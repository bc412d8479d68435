//! Kernels: [`KernelFunction`] (what is registered), [`Kernel`] (what a typed lookup
//! returns) and the table entries the hot path reads, each owned by its registration
//! ([`OwnedEntry`]) and freed through epoch-based reclamation once unpublished.
//!
//! Owns: kernel representation, type erasure of typed fn pointers, and the
//! lifetime of entries. Must not: compute tables or take locks.

use super::dispatcher::OperatorHandle;
use super::keyset::DispatchKeySet;
use crate::error::Result;
use crate::ivalue::Stack;
use std::any::TypeId;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ptr::NonNull;
use std::sync::Arc;

/// A boxed kernel: takes its arguments from the end of the stack and pushes its
/// returns. Receives the op and the key set the call was dispatched with.
pub type BoxedKernelFn =
    dyn Fn(&OperatorHandle, DispatchKeySet, &mut Stack) -> Result<()> + Send + Sync;

/// Words of inline storage for a typed kernel (fn pointers need one).
const TYPED_WORDS: usize = 2;

pub(crate) enum KernelRepr {
    Typed {
        type_id: TypeId,
        type_name: &'static str,
        bits: [MaybeUninit<usize>; TYPED_WORDS],
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
    pub fn typed<F: Copy + Send + Sync + 'static>(f: F, boxed: Arc<BoxedKernelFn>) -> Self {
        if size_of::<F>() > size_of::<[usize; TYPED_WORDS]>()
            || align_of::<F>() > align_of::<usize>()
        {
            return KernelFunction {
                repr: KernelRepr::Invalid(std::any::type_name::<F>()),
            };
        }
        let mut bits = [MaybeUninit::<usize>::uninit(); TYPED_WORDS];
        // SAFETY: `bits` is large and aligned enough for F (checked above); F is Copy,
        // so a bitwise copy is a valid F, read back only as F (see `KernelEntry::typed`).
        unsafe { bits.as_mut_ptr().cast::<F>().write(f) };
        KernelFunction {
            repr: KernelRepr::Typed {
                type_id: TypeId::of::<F>(),
                type_name: std::any::type_name::<F>(),
                bits,
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
    /// True when `bits` holds a typed fn pointer (of the op's signature type).
    pub(crate) has_typed: bool,
    pub(crate) kind: EntryKind,
    pub(crate) bits: [MaybeUninit<usize>; TYPED_WORDS],
    pub(crate) type_id: Option<TypeId>,
    pub(crate) type_name: &'static str,
    pub(crate) boxed: Option<Arc<BoxedKernelFn>>,
}

// SAFETY: `bits` holds a copy of an `F: Send + Sync` (bound on `KernelFunction::typed`);
// the rest is Send + Sync.
unsafe impl Send for KernelEntry {}
// SAFETY: see Send; entries are immutable after publication.
unsafe impl Sync for KernelEntry {}

pub(crate) static MISSING: KernelEntry = KernelEntry {
    has_typed: false,
    kind: EntryKind::Missing,
    bits: [MaybeUninit::uninit(); TYPED_WORDS],
    type_id: None,
    type_name: "",
    boxed: None,
};

impl KernelEntry {
    /// The entry for `k`. `allow_typed` is false for fallbacks (which serve every op,
    /// so only their boxed form is usable).
    fn new(k: KernelFunction, allow_typed: bool) -> KernelEntry {
        match k.repr {
            KernelRepr::Typed {
                type_id,
                type_name,
                bits,
                boxed,
            } => KernelEntry {
                has_typed: allow_typed,
                kind: EntryKind::Kernel,
                bits,
                type_id: allow_typed.then_some(type_id),
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
            has_typed: false,
            kind: EntryKind::Missing,
            bits: [MaybeUninit::uninit(); TYPED_WORDS],
            type_id: None,
            type_name: "",
            boxed: None,
        }
    }

    /// The typed kernel as `F`.
    ///
    /// # Safety
    /// `self.has_typed` and `F` is the type the entry was made from, i.e.
    /// `TypeId::of::<F>() == self.type_id` (the dispatcher guarantees it: typed entries
    /// in an op's table match the op's signature, and a `TypedOperatorHandle<F>` only
    /// exists when `F` is that signature).
    #[inline(always)]
    pub(crate) unsafe fn typed<F: Copy>(&self) -> F {
        debug_assert!(self.has_typed);
        // SAFETY: per the contract, `bits` holds a valid F written by `KernelFunction::typed`.
        unsafe { self.bits.as_ptr().cast::<F>().read() }
    }
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
    pub(crate) fn new(k: KernelFunction, allow_typed: bool) -> OwnedEntry {
        OwnedEntry(NonNull::from(Box::leak(Box::new(KernelEntry::new(
            k,
            allow_typed,
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
        // SAFETY: readers dereference an entry pointer only while pinned, and only
        // one they loaded from a slot while pinned (`OperatorEntry::slot`). By this
        // function's contract every such load of this pointer precedes the
        // unpublishing stores, hence this defer; epoch reclamation runs the
        // closure only after every thread pinned at that time has unpinned, so no
        // reader holds the entry then. Nothing else refers to the box.
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
