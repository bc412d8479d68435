//! [`Tensor`]: a refcounted handle to sizes/strides/offset over a shared [`Storage`],
//! with a dtype, a device and a dispatch key set computed once at creation.
//!
//! Owns: tensor metadata, construction, views, resizing, data access and the
//! text layout of printing (submodules `storage`, `meta`, `create`, `access`,
//! `display`), the tensor API over the device runtime (`device_api`: backend
//! metadata, pinned memory), what lower layers read from operands (`operands`:
//! key sets, result dtypes), the op-call interface (`hold`, `checks`: what every
//! operator call holds and checks), and the slot for autograd's per-tensor state
//! (`AutogradState`, which autograd implements). Must not: dispatch or call
//! operators (ops live in `ops` and backends; `Tensor::to` and `Display`, which
//! copy through `_to_copy`, are the `transfer` module's), know kernels, or name
//! autograd's types, op definitions or stacks (docs/design.md, "Module layers";
//! `runtime/tests/module_deps.rs` checks the imports).
//!
//! # Aliasing and thread-safety model
//!
//! `Tensor` is `Send + Sync` and `Clone` is a refcount bump; views share a storage.
//! Kernels mutate through shared handles (`&Tensor` for in-place and `out=`), so Rust's
//! `&mut` cannot express who may write. Instead every storage carries an atomic
//! **borrow state** (free / `n` readers / one writer), and all safe data access goes
//! through guards that acquire it:
//!
//! * [`Tensor::read`] / [`Tensor::write`] give typed slices and element access while
//!   holding a shared / exclusive borrow of the tensor's storage;
//! * [`KernelAccess::new`]`(reads, writes)` borrows the storages of all a kernel's
//!   inputs and outputs at once, **deduplicated by storage** (an input that shares
//!   storage with an output is borrowed once, exclusively), and hands out raw pointers
//!   — dereferencing them is `unsafe` and the kernel handles the aliasing it asked for;
//! * `to_vec`, `item` and printing take a shared borrow internally.
//!
//! Borrowing never blocks: a conflicting borrow (another thread writing a storage this
//! call reads, or reading/writing one this call writes) fails with
//! [`ErrorKind::BorrowConflict`] instead of racing. Two
//! calls that only read a tensor run concurrently. A borrow costs one uncontended
//! atomic compare-exchange per distinct storage and one store/`fetch_sub` to release.
//!
//! **Operator calls hold their arguments** ([`with_op_holds`], called by every
//! generated entry point and by boxed calls): the storages of a call's tensor
//! arguments stay borrowed (shared for inputs, exclusive for `(a!)` arguments)
//! from before its kernel runs until it returns. Guards inside the call borrow on
//! top of that (see `hold`). So a kernel, whatever accessor it uses, sees one
//! consistent geometry and data that no other thread writes for its whole run, or
//! the call fails with a borrow conflict before the kernel starts.
//!
//! Metadata (sizes, strides, offset) only changes through [`Tensor::resize_`] and
//! [`Tensor::set_geometry_`] (the in-place view ops), and both take the storage's
//! exclusive borrow, so geometry never changes under a running kernel. They publish
//! a new metadata block atomically and keep superseded blocks alive until the
//! tensor is dropped, so `&[i64]` from [`Tensor::sizes`] stays valid while its
//! `&Tensor` lives.
//!
//! [`Tensor::data_ptr`] returns a raw pointer without borrowing; only dereference it
//! while holding a guard or inside an operator call that holds the tensor.
//!
//! # Undefined tensors
//!
//! [`Tensor::undefined`] is PyTorch's undefined tensor: "no tensor" where a `Tensor`
//! is expected, e.g. a gradient that a backward op's `output_mask` did not request.
//! Every undefined handle shares one process-wide sentinel block, so making one is a
//! refcount bump. Its dispatch key set is empty, which is what
//! [`Tensor::is_defined`] tests and why an op called with only undefined tensors
//! fails with the dispatcher's "no kernel" error. So that no accessor needs a branch
//! (they are on every kernel's path), the sentinel is laid out like an empty 1-d
//! tensor on `meta` with no data: accessors return harmless values and every data
//! access is an error that says the tensor is undefined; the ones that would change
//! the shared sentinel ([`Tensor::resize_`], [`Tensor::set_geometry_`],
//! [`Tensor::as_strided`]) refuse it.
//! Boxed, it is `IValue::None` (see `ivalue`).
//!
//! # Memory layout
//!
//! A tensor made by `empty`/`from_slice`/... is one heap block: metadata (up to 5
//! dimensions inline), its [`StorageBuf`] and, for CPU buffers of at most 32 bytes,
//! the data itself. Its views hold a [`Storage`] handle that keeps that block alive;
//! `Storage::new` makes standalone buffers. Memory comes from the allocator
//! registered for the device type ([`register_allocator`]); the built-in CPU
//! allocator zero-fills, so safe reads never see uninitialized bytes.

#![warn(missing_docs)]

mod access;
mod checks;
mod create;
mod device_api;
mod display;
mod hold;
mod meta;
mod operands;
mod pool;
pub mod storage;

pub use access::{KernelAccess, Pod, TensorRead, TensorWrite};
pub use checks::{
    check_no_overlap, internal_overlap, is_non_overlapping_and_dense, overlap, DeviceRule,
    OpChecks, Overlap,
};
pub use hold::{with_op_holds, with_op_holds_dyn, OpArg};
pub use operands::TensorKeys;
pub use storage::{
    allocator, register_allocator, Allocator, CpuAllocator, MetaAllocator, Storage, StorageBuf,
};

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{ErrorKind, OpalError, Result};
use crate::keys::{DispatchKey, DispatchKeySet};
use crate::types::Layout;
use meta::Meta;
use pool::{block_layout, BlockCache, ImplRc, Pooled};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::OnceLock;
use storage::StorageBorrow;

/// Where a tensor's bytes live: in the tensor itself (a fresh tensor: one allocation
/// for metadata and buffer) or behind a shared [`Storage`] handle (views, tensors
/// made from a storage).
pub(crate) enum StorageSlot {
    Own(StorageBuf),
    Shared(Storage),
}

pub(crate) struct TensorImpl {
    storage: StorageSlot,
    /// Metadata at creation.
    meta: Meta,
    /// Null, or a leaked `Box<Meta>` published by `publish_meta` that replaces `meta`;
    /// superseded blocks hang off its `prev` chain and are freed with the tensor.
    meta_override: AtomicPtr<Meta>,
    dtype: DType,
    device: Device,
    /// Bits of the tensor's [`DispatchKeySet`]: its device's keys, plus the device's
    /// autograd key once it takes part in autograd (set by `crate::autograd`, hence
    /// atomic; a relaxed load costs what a plain one does).
    key_set: AtomicU64,
    /// Autograd state (`requires_grad`, `.grad`, `grad_fn`), made on first need:
    /// tensors that never see autograd pay for an empty slot. Opaque here (see
    /// [`AutogradState`]).
    autograd: OnceLock<Box<dyn AutogradState>>,
    wrapped_number: bool,
    /// Set only inside [`Tensor::fill_unshared`]: the tensor is a result being
    /// written that nothing outside its kernel can reach, so [`KernelAccess`] need not
    /// borrow its storage. Relaxed loads and stores: only the filling thread ever
    /// sees it set.
    unshared: AtomicBool,
}

// SAFETY: the raw pointers in `meta_override` and the `prev` chain are owned boxes only freed in
// `Drop` (exclusive access); everything else is Send + Sync.
unsafe impl Send for TensorImpl {}
// SAFETY: see `Send`; shared access only reads the boxes through atomics.
unsafe impl Sync for TensorImpl {}

impl TensorImpl {
    #[inline]
    pub(crate) fn storage_buf(&self) -> &StorageBuf {
        match &self.storage {
            StorageSlot::Own(b) => b,
            StorageSlot::Shared(s) => s,
        }
    }
}

impl Pooled for TensorImpl {
    #[inline]
    fn with_cache<R>(f: impl FnOnce(&BlockCache) -> R) -> Option<R> {
        thread_local! {
            static CACHE: BlockCache = const { BlockCache::new(block_layout::<TensorImpl>()) };
        }
        CACHE.try_with(f).ok()
    }
}

impl Drop for TensorImpl {
    fn drop(&mut self) {
        let mut p = *self.meta_override.get_mut();
        while !p.is_null() {
            // SAFETY: every block of the chain came from `Box::into_raw` in `publish_meta`,
            // appears once in the chain, and no reader remains (`&mut self`).
            let b = unsafe { Box::from_raw(p) };
            p = b.prev;
        }
    }
}

/// A tensor handle. `Clone` is a refcount bump (shares metadata and data); views
/// made with [`Tensor::as_strided`] share the storage. `Send + Sync`; see the module
/// docs for the aliasing model.
#[derive(Clone)]
pub struct Tensor {
    inner: ImplRc<TensorImpl>,
}

impl Drop for Tensor {
    #[inline(always)]
    fn drop(&mut self) {
        // A tensor in autograd may be kept alive only by its own `grad_fn` (which
        // saved it for backward): a cycle that the last user handle breaks.
        if let Some(m) = self.autograd_state() {
            m.on_handle_drop(self);
        }
    }
}

/// What a tensor keeps for autograd, opaque to this module: the tensor stores it,
/// has it made on first need, and tells it when a handle drops. `crate::autograd`
/// implements it for its per-tensor state and reaches that type through
/// [`AutogradState::as_any`]. The interface lives here so that the tensor never
/// names autograd's types (autograd is built on tensors, not the other way).
pub(crate) trait AutogradState: Send + Sync + 'static {
    /// Called as a handle of `t` drops (before its count goes down).
    fn on_handle_drop(&self, t: &Tensor);
    /// The state as `Any`, for its implementor to downcast to its own type.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// The key set of a tensor on `device`: its backend key and `ADInplaceOrView`
/// (which falls through unless something is registered there). The device's
/// autograd key joins only when the tensor takes part in autograd
/// ([`autograd_keys_for_device`]), so ops on plain tensors never visit an autograd
/// kernel.
#[inline]
pub(crate) fn keys_for_device(device: Device) -> DispatchKeySet {
    DispatchKeySet::from_key(device.backend_key()).add(DispatchKey::ADInplaceOrView)
}

/// The autograd key of `device`'s backend, as a set (empty when it has none).
#[inline]
pub(crate) fn autograd_keys_for_device(device: Device) -> DispatchKeySet {
    device
        .backend_key()
        .autograd_key()
        .map_or(DispatchKeySet::empty(), DispatchKeySet::from_key)
}

impl Tensor {
    #[inline]
    fn from_parts(storage: StorageSlot, meta: Meta, dtype: DType, wrapped_number: bool) -> Tensor {
        let device = match &storage {
            StorageSlot::Own(b) => {
                b.set_dtype(dtype);
                b.device()
            }
            // Checked by the callers that lay a tensor over a shared storage.
            StorageSlot::Shared(s) => s.device(),
        };
        Tensor {
            inner: ImplRc::new(TensorImpl {
                storage,
                meta,
                meta_override: AtomicPtr::new(std::ptr::null_mut()),
                dtype,
                device,
                key_set: AtomicU64::new(keys_for_device(device).bits()),
                autograd: OnceLock::new(),
                wrapped_number,
                unshared: AtomicBool::new(false),
            }),
        }
    }

    #[inline]
    fn meta(&self) -> &Meta {
        let p = self.inner.meta_override.load(Ordering::Acquire);
        if p.is_null() {
            &self.inner.meta
        } else {
            // SAFETY: non-null overrides are boxes from `publish_meta` that are only freed
            // when the TensorImpl drops, which cannot happen while `&self` is alive.
            unsafe { &*p }
        }
    }

    /// PyTorch's undefined tensor (see the module docs): what an op returns for an
    /// output it was asked not to compute. Cheap: a refcount bump on one shared
    /// sentinel, never an allocation. Also [`Tensor::default`].
    ///
    /// What its accessors give (none panics):
    ///
    /// | accessor | undefined tensor |
    /// |---|---|
    /// | [`is_defined`](Tensor::is_defined) | `false` |
    /// | [`key_set`](Tensor::key_set) | empty (ops dispatch as if it were absent) |
    /// | [`sizes`](Tensor::sizes) / [`strides`](Tensor::strides) / [`dim`](Tensor::dim) | `[0]` / `[1]` / `1` |
    /// | [`numel`](Tensor::numel) / [`storage_offset`](Tensor::storage_offset) | `0` / `0` |
    /// | [`is_contiguous`](Tensor::is_contiguous) / [`is_wrapped_number`](Tensor::is_wrapped_number) | `true` / `false` |
    /// | [`dtype`](Tensor::dtype) / [`element_size`](Tensor::element_size) | `F32` / `4` (placeholders: PyTorch has no dtype there) |
    /// | [`device`](Tensor::device) | `meta` (no data anywhere; placeholder like `dtype`) |
    /// | [`storage`](Tensor::storage) | 0 bytes on `meta` |
    /// | [`is_same`](Tensor::is_same) / `==` | `true` between any two undefined tensors (like PyTorch) |
    /// | `data_ptr`, `read`, `write`, `to_vec`, `to_bytes`, `item`, `get` | `Err` saying the tensor is undefined |
    /// | [`resize_`](Tensor::resize_), [`set_geometry_`](Tensor::set_geometry_), [`as_strided`](Tensor::as_strided) | `Err` (they would change or alias the shared sentinel) |
    /// | `Display` / `Debug` | `tensor(undefined)` |
    pub fn undefined() -> Tensor {
        static SENTINEL: OnceLock<Tensor> = OnceLock::new();
        // The static keeps one handle forever, so the block is never freed or
        // recycled into a tensor cache.
        SENTINEL
            .get_or_init(|| Tensor {
                inner: ImplRc::new(TensorImpl {
                    storage: StorageSlot::Own(StorageBuf::no_data(Device::meta())),
                    meta: Meta::empty_1d(),
                    meta_override: AtomicPtr::new(std::ptr::null_mut()),
                    dtype: DType::F32,
                    device: Device::meta(),
                    key_set: AtomicU64::new(0),
                    autograd: OnceLock::new(),
                    wrapped_number: false,
                    unshared: AtomicBool::new(false),
                }),
            })
            .clone()
    }

    /// False for [`Tensor::undefined`], true for every other tensor. (Every tensor
    /// made from a device has its backend key, so the empty key set marks the
    /// sentinel: no pointer comparison with a global.)
    #[inline]
    pub fn is_defined(&self) -> bool {
        self.inner.key_set.load(Ordering::Relaxed) != 0
    }

    /// A new contiguous tensor of `sizes` (zero-filled on host devices).
    #[inline]
    pub fn empty(sizes: &[i64], dtype: DType, device: Device) -> Result<Tensor> {
        // A tensor always carries a concrete device: `emu` means the current one.
        let device = crate::device_runtime::resolve(device);
        let numel = Meta::numel_of(sizes)?;
        // Contiguous at offset 0: exactly numel elements (numel is non-negative).
        let nbytes = (numel as usize)
            .checked_mul(dtype.size())
            .ok_or_else(|| OpalError::shape("tensor byte size overflows"))?;
        let (data, allocator) = StorageBuf::alloc_data(nbytes, device)?;
        // Written field by field into the block: see `ImplRc::new_in_place`.
        // SAFETY: every field of the `TensorImpl` is written (the pointer is a
        // fresh, aligned block from `new_in_place`).
        let inner = unsafe {
            ImplRc::new_in_place(|p: *mut TensorImpl| {
                use std::ptr::addr_of_mut;
                addr_of_mut!((*p).storage).write(StorageSlot::Own(StorageBuf::with_ptr(
                    data, nbytes, device, allocator,
                )));
                Meta::init_contiguous(addr_of_mut!((*p).meta), sizes, numel);
                addr_of_mut!((*p).meta_override).write(AtomicPtr::new(std::ptr::null_mut()));
                addr_of_mut!((*p).dtype).write(dtype);
                addr_of_mut!((*p).device).write(device);
                addr_of_mut!((*p).key_set).write(AtomicU64::new(keys_for_device(device).bits()));
                addr_of_mut!((*p).autograd).write(OnceLock::new());
                addr_of_mut!((*p).wrapped_number).write(false);
                addr_of_mut!((*p).unshared).write(AtomicBool::new(false));
            })
        };
        inner.storage_buf().set_dtype(dtype);
        Ok(Tensor { inner })
    }

    /// A new tensor with explicit strides (non-negative), backed by just enough storage.
    pub fn empty_strided(
        sizes: &[i64],
        strides: &[i64],
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        let meta = Meta::strided(sizes, strides, 0)?;
        let nbytes = meta.required_bytes(dtype)?;
        let storage = StorageBuf::alloc(nbytes, device)?;
        Ok(Tensor::from_parts(
            StorageSlot::Own(storage),
            meta,
            dtype,
            false,
        ))
    }

    /// A tensor over an existing storage (checked to be large enough).
    pub fn from_storage(
        storage: Storage,
        sizes: &[i64],
        strides: &[i64],
        offset: i64,
        dtype: DType,
    ) -> Result<Tensor> {
        let meta = Meta::strided(sizes, strides, offset)?;
        meta.check_fits(dtype, storage.nbytes())?;
        if !storage.claim_dtype(dtype) {
            return Err(OpalError::msg(format!(
                "from_storage: a {dtype} tensor cannot share a storage with tensors of \
                 another dtype when either is bool (a bool's byte must stay 0 or 1)"
            )));
        }
        let t = Tensor::from_parts(StorageSlot::Shared(storage), meta, dtype, false);
        t.check_bool_bytes()?;
        Ok(t)
    }

    /// A view of the same storage with new sizes, strides and storage offset.
    pub fn as_strided(&self, sizes: &[i64], strides: &[i64], offset: i64) -> Result<Tensor> {
        if !self.is_defined() {
            // A view would be a defined meta tensor over the sentinel's storage.
            return Err(undefined_error("as_strided"));
        }
        let meta = Meta::strided(sizes, strides, offset)?;
        meta.check_fits(self.dtype(), self.storage().nbytes())?;
        Ok(Tensor::from_parts(
            StorageSlot::Shared(self.storage_handle()),
            meta,
            self.dtype(),
            false,
        ))
    }

    /// Resizes in place to `sizes` with contiguous strides (the `out=` rule): same
    /// sizes is a no-op; the storage grows (in place, seen by all views) when too
    /// small. Takes the storage's exclusive borrow (a borrow-conflict `Err` while
    /// another thread uses it), as every geometry change does.
    pub fn resize_(&self, sizes: &[i64]) -> Result<()> {
        if !self.is_defined() {
            // Every undefined handle shares the sentinel: resizing one resizes all.
            return Err(undefined_error("resize_"));
        }
        // Geometry changes take the exclusive borrow, so no kernel can be reading
        // this tensor's geometry or data meanwhile (see `hold`).
        let guard = StorageBorrow::acquire(self.storage(), true)?;
        if self.sizes() == sizes && self.is_contiguous() {
            return Ok(());
        }
        let meta = Meta::contiguous(sizes, self.storage_offset())?;
        let need = meta.required_bytes(self.dtype())?;
        self.storage().grow_borrowed(need, &guard)?;
        self.publish_meta(meta);
        Ok(())
    }

    /// Gives this tensor new sizes and strides over the same storage, keeping its
    /// storage offset: the primitive behind the in-place view ops (`transpose_`,
    /// `t_`, `squeeze_.dim`, `unsqueeze_`), which must change the geometry of `self`
    /// itself rather than return a new view. Every handle (clone) of this tensor sees
    /// the change; views made from it earlier keep their own geometry.
    ///
    /// Validated like [`Tensor::as_strided`]: as many strides as sizes, no negative
    /// size or stride, and the new geometry must fit in the storage (it never grows).
    /// Errors name `set_geometry_`; an undefined tensor is refused. Unchanged
    /// geometry is a no-op.
    ///
    /// Takes the storage's exclusive borrow, like a write: while any operator call
    /// or guard uses the tensor (or a view sharing its storage) on another thread,
    /// this is a borrow-conflict `Err`, so a running kernel never sees its geometry
    /// change. Each change keeps the superseded metadata block alive until the
    /// tensor drops (a reader may still hold `&[i64]` from [`Tensor::sizes`]), so
    /// changing the geometry of one long-lived tensor in a loop grows its memory by
    /// one block per call.
    pub fn set_geometry_(&self, sizes: &[i64], strides: &[i64]) -> Result<()> {
        const OP: &str = "set_geometry_";
        if !self.is_defined() {
            // Every undefined handle shares the sentinel: restriding one restrides all.
            return Err(undefined_error(OP));
        }
        let named = |e: OpalError| match e.kind() {
            ErrorKind::Shape(m) => OpalError::shape(format!("{OP}: {m}")),
            ErrorKind::BorrowConflict(m) => ErrorKind::BorrowConflict(format!("{OP}: {m}")).into(),
            _ => e,
        };
        // Like a write: no kernel may be using the current geometry meanwhile.
        let _guard = StorageBorrow::acquire(self.storage(), true).map_err(named)?;
        if self.sizes() == sizes && self.strides() == strides {
            return Ok(());
        }
        let meta = Meta::strided(sizes, strides, self.storage_offset()).map_err(named)?;
        meta.check_fits(self.dtype(), self.storage().nbytes())
            .map_err(named)?;
        self.publish_meta(meta);
        Ok(())
    }

    /// Makes `meta` this tensor's metadata, for every handle at once. Lock-free:
    /// concurrent publishers each land, the last one wins.
    fn publish_meta(&self, meta: Meta) {
        let new = Box::into_raw(Box::new(meta));
        let slot = &self.inner.meta_override;
        let mut cur = slot.load(Ordering::Acquire);
        loop {
            // Readers may still hold `&Meta` into `cur`: chain it, free it on drop.
            // SAFETY: `new` is our unpublished box.
            unsafe { (*new).prev = cur };
            match slot.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(c) => cur = c,
            }
        }
    }

    /// Sizes, one per dimension.
    #[inline]
    pub fn sizes(&self) -> &[i64] {
        self.meta().sizes()
    }

    /// Strides in elements, one per dimension.
    #[inline]
    pub fn strides(&self) -> &[i64] {
        self.meta().strides()
    }

    /// Offset of the first element in the storage, in elements.
    #[inline]
    pub fn storage_offset(&self) -> i64 {
        self.meta().offset
    }

    /// Sizes, strides, storage offset and element count from one read of the
    /// geometry: the plugin bridge fills an ABI tensor info per argument on every
    /// call, and each accessor on its own reloads the geometry pointer.
    #[inline]
    pub(crate) fn geometry(&self) -> (&[i64], &[i64], i64, i64) {
        let m = self.meta();
        (m.sizes(), m.strides(), m.offset, m.numel)
    }

    /// Number of dimensions.
    #[inline]
    pub fn dim(&self) -> usize {
        self.meta().sizes().len()
    }

    /// Number of elements.
    #[inline]
    pub fn numel(&self) -> i64 {
        self.meta().numel
    }

    /// Element type.
    #[inline]
    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    /// Device.
    #[inline]
    pub fn device(&self) -> Device {
        self.inner.device
    }

    /// Layout (always `Strided` for now).
    #[inline]
    pub fn layout(&self) -> Layout {
        Layout::Strided
    }

    /// True when the elements are dense in row-major order.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.meta().contiguous
    }

    /// The dispatch keys of this tensor: its device's, plus its autograd key once it
    /// requires grad or has a `grad_fn`.
    #[inline]
    pub fn key_set(&self) -> DispatchKeySet {
        DispatchKeySet::from_bits_retain(self.inner.key_set.load(Ordering::Relaxed))
    }

    /// Adds `keys` to this tensor's key set (autograd's, when it joins a graph).
    #[inline]
    pub(crate) fn add_keys(&self, keys: DispatchKeySet) {
        self.inner.key_set.fetch_or(keys.bits(), Ordering::Relaxed);
    }

    /// The tensor's autograd state, if it was ever given one.
    #[inline]
    pub(crate) fn autograd_state(&self) -> Option<&dyn AutogradState> {
        self.inner.autograd.get().map(|b| &**b)
    }

    /// The tensor's autograd state, made by `init` on first use.
    pub(crate) fn autograd_state_or_init(
        &self,
        init: impl FnOnce() -> Box<dyn AutogradState>,
    ) -> &dyn AutogradState {
        &**self.inner.autograd.get_or_init(init)
    }

    /// The storage buffer (shared with views): `nbytes`, `device`, `data_ptr`, ...
    #[inline]
    pub fn storage(&self) -> &StorageBuf {
        self.inner.storage_buf()
    }

    /// An owned handle to the storage (keeps it alive; `Storage` schema arguments).
    pub fn storage_handle(&self) -> Storage {
        match &self.inner.storage {
            StorageSlot::Own(_) => Storage::in_tensor(self.inner.clone()),
            StorageSlot::Shared(s) => s.clone(),
        }
    }

    /// Bytes per element.
    #[inline]
    pub fn element_size(&self) -> usize {
        self.dtype().size()
    }

    /// Runs `fill(self)` with the storage borrow of this tensor waived for
    /// [`KernelAccess`], when this handle is the tensor's only one and the tensor owns
    /// its storage (no views, no clones); otherwise `fill` runs with the usual
    /// borrowing. For kernels writing a result they just created: the borrow exists
    /// to catch other threads touching a storage a kernel writes, and a fresh result
    /// is reachable by nobody else, so its locked compare-exchange is pure cost (one
    /// of the few that a small op pays).
    ///
    /// # Safety
    /// While `fill` runs, no other thread may access the tensor, its clones or its
    /// views: hand worker threads raw pointers or slices instead. (Accesses on the
    /// calling thread are not checked against each other meanwhile either, as with
    /// raw pointers.)
    #[inline]
    pub unsafe fn fill_unshared<R>(&mut self, fill: impl FnOnce(&Tensor) -> R) -> R {
        let waive = matches!(self.inner.storage, StorageSlot::Own(_)) && self.inner.is_unique();
        if !waive {
            return fill(self);
        }
        self.inner.unshared.store(true, Ordering::Relaxed);
        // Cleared on every exit, unwinding included, before anyone else can see it.
        struct Clear<'t>(&'t AtomicBool);
        impl Drop for Clear<'_> {
            #[inline]
            fn drop(&mut self) {
                self.0.store(false, Ordering::Relaxed);
            }
        }
        let _clear = Clear(&self.inner.unshared);
        fill(self)
    }

    /// Inside [`Tensor::fill_unshared`] (when it waived the borrow).
    #[inline]
    pub(crate) fn is_unshared(&self) -> bool {
        self.inner.unshared.load(Ordering::Relaxed)
    }

    /// True for a zero-dim tensor made from a Python-style number (takes part in
    /// `result_type` like a scalar; see [`Tensor::wrapped_number`]).
    #[inline]
    pub fn is_wrapped_number(&self) -> bool {
        self.inner.wrapped_number
    }

    /// True when the tensor's bytes live in its own block (a fresh tensor), so
    /// views and storage handles of it keep this tensor's block alive.
    #[inline]
    pub(crate) fn owns_storage(&self) -> bool {
        matches!(self.inner.storage, StorageSlot::Own(_))
    }

    /// How many handles share this tensor (a snapshot).
    #[inline]
    pub(crate) fn handle_count(&self) -> usize {
        ImplRc::strong_count(&self.inner)
    }

    /// An identity of the tensor (not the storage), valid while this handle lives.
    #[inline]
    pub(crate) fn impl_addr(&self) -> usize {
        ImplRc::addr(&self.inner)
    }

    /// True when both handles are the same tensor (not just the same storage).
    #[inline]
    pub fn is_same(&self, other: &Tensor) -> bool {
        ImplRc::ptr_eq(&self.inner, &other.inner)
    }

    /// True when both tensors share a storage (e.g. one is a view of the other).
    #[inline]
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        std::ptr::eq(self.storage(), other.storage())
    }

    /// Raw pointer to the first element (after the offset), checking `T`'s dtype and
    /// that the device has host-visible data (meta has none). Dereferencing it is
    /// `unsafe`; hold a [`KernelAccess`] (or `read`/`write` guard) meanwhile.
    #[inline]
    pub fn data_ptr<T: crate::Element>(&self) -> Result<*mut T> {
        if T::DTYPE != self.dtype() {
            return Err(access::dtype_error(self, T::DTYPE));
        }
        Ok(self.raw_data_ptr()?.cast())
    }

    /// Raw byte pointer to the first element (after the offset); unchecked dtype.
    /// Errors on devices without host-visible data.
    #[inline]
    pub fn raw_data_ptr(&self) -> Result<*mut u8> {
        access::element_ptr(self, self.storage())
    }
}

impl Default for Tensor {
    /// [`Tensor::undefined`], as PyTorch's default-constructed `Tensor`.
    fn default() -> Tensor {
        Tensor::undefined()
    }
}

/// The error of an operation that needs a defined tensor (`what` names it).
#[cold]
#[inline(never)]
pub(crate) fn undefined_error(what: &str) -> OpalError {
    OpalError::msg(format!(
        "{what}: the tensor is undefined (it stands for no tensor, e.g. an output that \
         output_mask did not request, and has no data, shape or device; check \
         Tensor::is_defined)"
    ))
}

impl PartialEq for Tensor {
    /// Identity (same tensor handle), like PyTorch's `is`; compare values with
    /// `to_vec`.
    fn eq(&self, other: &Self) -> bool {
        self.is_same(other)
    }
}

/// `dim` wrapped into `0..ndim` (negative dims count from the end); a zero-dim
/// tensor accepts `0` and `-1`, as PyTorch treats scalars as one-dimensional for
/// dim arguments. Otherwise a shape error naming `op` and the valid range.
pub fn wrap_dim(op: &str, dim: i64, ndim: usize) -> Result<usize> {
    let n = ndim.max(1) as i64;
    if dim < -n || dim >= n {
        return Err(OpalError::shape(format!(
            "{op}: dimension out of range (expected to be in range of [{}, {}], but got {dim})",
            -n,
            n - 1
        )));
    }
    Ok(if dim < 0 { dim + n } else { dim } as usize)
}
