//! [`Storage`] (a refcounted handle to a [`StorageBuf`], a byte buffer on one
//! device), the per-device registry of [`Allocator`]s (the trait is the device
//! runtime's), and the per-storage borrow state that makes
//! kernel data access race-free (see the `tensor` module docs).
//!
//! Owns: memory ownership and the borrow flag. Must not: know about sizes/strides or
//! dtypes (that is `Tensor`), or about dispatch.

use super::hold::{acquire_guard, release_guard, Grant};
use crate::device::{Device, DeviceType};
use crate::dtype::DType;
use crate::error::{ErrorKind, OpalError, Result};
use std::alloc::Layout;
use std::cell::UnsafeCell;
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

pub use crate::device_runtime::Allocator;

/// The dangling, 64-aligned pointer used for zero-byte allocations.
fn dangling64() -> NonNull<u8> {
    // 64 is non-zero, so `NonNull::new` cannot fail; fall back to `dangling()` anyway
    // rather than panicking.
    NonNull::new(std::ptr::without_provenance_mut(64)).unwrap_or(NonNull::dangling())
}

/// Layout for a CPU block of `nbytes` (> 0): 64-aligned for large blocks; small blocks
/// use the largest power of two `<= nbytes` (capped at 16) so the system allocator
/// takes its fast `malloc` path, while every element stays aligned (element sizes are
/// powers of two dividing `nbytes`).
fn cpu_layout(nbytes: usize) -> Result<Layout> {
    let align = if nbytes >= 64 {
        64
    } else {
        (1usize << (usize::BITS - 1 - nbytes.leading_zeros())).min(16)
    };
    Layout::from_size_align(nbytes, align).map_err(|_| {
        ErrorKind::Alloc {
            nbytes,
            device: "cpu".into(),
        }
        .into()
    })
}

/// Largest block served from a padded allocation (see [`padded_layout`]): with its
/// 64 bytes of padding it stays within the size classes that the system allocator
/// serves from per-thread caches (glibc: up to 1032 bytes).
const PADDED_MAX: usize = 960;

/// Layout of the allocation behind a padded block of `nbytes`: 64 bytes longer and
/// only 16-aligned, so it takes the system allocator's fast path, where a 64-aligned
/// layout takes `posix_memalign` (about 1,400 instructions in glibc once the heap is
/// fragmented: the small tensors of a training step's SGD update and layer norms
/// paid that on every call). The block starts at the first 64-aligned address at
/// least one byte in; that byte holds the block's distance from the allocation's
/// start (16, 32, 48 or 64).
fn padded_layout(nbytes: usize) -> Result<Layout> {
    Layout::from_size_align(nbytes + 64, 16).map_err(|_| {
        ErrorKind::Alloc {
            nbytes,
            device: "cpu".into(),
        }
        .into()
    })
}

/// The built-in host allocator (zero-initialized memory).
pub struct CpuAllocator;

// SAFETY: memory comes from the global allocator with `cpu_layout`, which meets the
// alignment promise, or (64..=PADDED_MAX bytes) is the 64-aligned block inside a
// `padded_layout` allocation, which `deallocate` finds again from the offset byte
// before it; it is zeroed before being returned; zero-size requests get a
// 64-aligned dangling pointer that is never freed.
unsafe impl Allocator for CpuAllocator {
    fn allocate(&self, device: Device, nbytes: usize) -> Result<NonNull<u8>> {
        if nbytes == 0 {
            return Ok(dangling64());
        }
        if (64..=PADDED_MAX).contains(&nbytes) {
            let layout = padded_layout(nbytes)?;
            // SAFETY: layout has non-zero size.
            let base = unsafe { std::alloc::alloc(layout) };
            if base.is_null() {
                return Err(ErrorKind::Alloc {
                    nbytes,
                    device: device.to_string(),
                }
                .into());
            }
            // `base` is 16-aligned, so the distance is 16, 32, 48 or 64.
            let offset = 64 - base.addr() % 64;
            // SAFETY: offset <= 64, so the block `offset..offset + nbytes` and the
            // byte before it lie inside the `nbytes + 64` bytes just allocated.
            unsafe {
                let block = base.add(offset);
                block.sub(1).write(offset as u8);
                std::ptr::write_bytes(block, 0, nbytes);
                return Ok(NonNull::new_unchecked(block));
            }
        }
        let layout = cpu_layout(nbytes)?;
        // Small blocks: malloc + memset is faster than calloc; large blocks: calloc
        // gets pre-zeroed pages from the OS.
        let p = if nbytes < 4096 {
            // SAFETY: layout has non-zero size.
            let p = unsafe { std::alloc::alloc(layout) };
            if !p.is_null() {
                // SAFETY: p is valid for nbytes writes (just allocated).
                unsafe { std::ptr::write_bytes(p, 0, nbytes) };
            }
            p
        } else {
            // SAFETY: layout has non-zero size.
            unsafe { std::alloc::alloc_zeroed(layout) }
        };
        NonNull::new(p).ok_or_else(|| {
            ErrorKind::Alloc {
                nbytes,
                device: device.to_string(),
            }
            .into()
        })
    }

    unsafe fn deallocate(&self, _device: Device, ptr: NonNull<u8>, nbytes: usize) {
        if nbytes == 0 {
            return;
        }
        if (64..=PADDED_MAX).contains(&nbytes) {
            if let Ok(layout) = padded_layout(nbytes) {
                // SAFETY: `ptr` is a padded block from `allocate(nbytes)`: the byte
                // before it holds its distance from the start of the allocation made
                // with exactly this layout.
                unsafe {
                    let offset = usize::from(ptr.as_ptr().sub(1).read());
                    std::alloc::dealloc(ptr.as_ptr().sub(offset), layout);
                }
            }
            return;
        }
        if let Ok(layout) = cpu_layout(nbytes) {
            // SAFETY: the caller passes a pointer from `allocate(nbytes)`, which used
            // exactly this layout.
            unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) }
        }
    }
}

/// The built-in meta allocator: no memory at all (meta tensors have no data).
pub struct MetaAllocator;

// SAFETY: `host_accessible` is false, so nothing ever reads or writes through the
// returned dangling pointer; it is aligned and non-null as promised.
unsafe impl Allocator for MetaAllocator {
    fn allocate(&self, _device: Device, _nbytes: usize) -> Result<NonNull<u8>> {
        Ok(dangling64())
    }
    unsafe fn deallocate(&self, _device: Device, _ptr: NonNull<u8>, _nbytes: usize) {}
    fn host_accessible(&self) -> bool {
        false
    }
}

static CPU_ALLOCATOR: CpuAllocator = CpuAllocator;
static META_ALLOCATOR: MetaAllocator = MetaAllocator;

/// Registered allocators: a leaked `Box<&'static dyn Allocator>` per device type, or
/// null for the built-in default. Entries are never freed, so readers need no lock.
static ALLOCATORS: [AtomicPtr<&'static dyn Allocator>; DeviceType::COUNT] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; DeviceType::COUNT];

/// Makes `alloc` the allocator of new tensors on `device` (e.g. an out-of-tree
/// backend's device memory for `DeviceType::PrivateUse1`). Existing storages keep the
/// allocator they came from. Replacing an allocator is allowed (latest wins).
pub fn register_allocator(device: DeviceType, alloc: &'static dyn Allocator) {
    let boxed = Box::into_raw(Box::new(alloc));
    // The previous box is leaked on purpose: a concurrent reader may still hold it.
    ALLOCATORS[device as usize].store(boxed, Ordering::Release);
}

/// The allocator for new tensors on `device`.
#[inline]
pub fn allocator(device: DeviceType) -> Result<&'static dyn Allocator> {
    let p = ALLOCATORS[device as usize].load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: non-null entries are leaked boxes from `register_allocator`, never freed.
        return Ok(unsafe { *p });
    }
    match device {
        DeviceType::Cpu => Ok(&CPU_ALLOCATOR),
        DeviceType::Meta => Ok(&META_ALLOCATOR),
        d => Err(OpalError::device(format!(
            "no allocator registered for device type '{d}' (register one with opal::tensor::register_allocator)"
        ))),
    }
}

/// Borrow-state value meaning "exclusively borrowed".
const WRITER: u32 = u32::MAX;

/// The buffer of a storage: bytes on one device, their allocator, and the borrow
/// state. Reached through [`crate::Tensor::storage`] or a [`Storage`] handle.
///
/// Movable: tiny CPU buffers live in `inline` and are addressed through it (a null
/// `data` means "inline"), so a `StorageBuf` can sit inside the tensor that owns it
/// (one allocation per fresh tensor) without self-references.
pub struct StorageBuf {
    /// Start of a heap buffer, or null for the inline buffer. Atomic because a (rare,
    /// exclusively borrowed) resize replaces it while other threads may read it.
    data: AtomicPtr<u8>,
    nbytes: AtomicUsize,
    device: Device,
    allocator: &'static dyn Allocator,
    /// The allocator's `host_accessible`, asked once: every data access checks it.
    host_accessible: bool,
    /// 0: free; n: n shared borrows; `WRITER`: one exclusive borrow.
    borrow: AtomicU32,
    /// Bumped when an operator call is granted write access (`hold`): autograd
    /// compares it with the value at save time to refuse a backward pass over data
    /// an in-place op changed since. Shared by all views, as the data is.
    version: AtomicU64,
    /// Whether the tensors over this storage are `Bool` ([`CLASS_BOOL`]), of other
    /// dtypes ([`CLASS_OTHER`]) or not known yet (0). The two never share a storage:
    /// a byte written through a `u8` view could be 2, which no kernel may read as a
    /// `bool`.
    dtype_class: AtomicU8,
    /// Small-buffer optimization: tiny tensors of the built-in CPU allocator keep
    /// their bytes here, saving an allocation.
    inline: InlineBuf,
    /// Metadata a backend attached (`Tensor::set_backend_meta`), shared by views.
    backend_meta: crate::device_runtime::backend_meta::MetaSlot,
}

/// [`StorageBuf::dtype_class`]: bool tensors.
const CLASS_BOOL: u8 = 1;
/// [`StorageBuf::dtype_class`]: tensors of every other dtype.
const CLASS_OTHER: u8 = 2;

/// Bytes a storage keeps inline (4 f64, 8 f32).
const INLINE_BYTES: usize = 32;

/// 16-aligned inline bytes (every element type's alignment is at most 8).
#[repr(C, align(16))]
struct InlineBuf(UnsafeCell<[u8; INLINE_BYTES]>);

// SAFETY: the bytes (heap or inline) are only accessed under the borrow protocol
// (`borrow`), or through raw pointers whose dereference is the caller's `unsafe`
// responsibility; all other fields are atomics or immutable (the backend metadata slot is an
// atomic pointer whose map is only read or replaced under a global lock).
unsafe impl Sync for StorageBuf {}
// SAFETY: see Sync; the buffer owns its bytes and may be freed from any thread.
unsafe impl Send for StorageBuf {}

impl StorageBuf {
    /// A zeroed buffer of `nbytes` on `device` from the device's allocator (inline
    /// for tiny buffers of the built-in CPU allocator).
    #[inline]
    pub(crate) fn alloc(nbytes: usize, device: Device) -> Result<StorageBuf> {
        // A buffer always lives on a concrete device: `emu` means the current one.
        let device = crate::device_runtime::resolve(device);
        let (data, allocator) = StorageBuf::alloc_data(nbytes, device)?;
        Ok(StorageBuf::with_ptr(data, nbytes, device, allocator))
    }

    /// The data pointer (null: the inline buffer) and allocator for a buffer of
    /// `nbytes` on `device`; [`StorageBuf::with_ptr`] makes the buffer from them.
    /// Split from `alloc` so that a tensor can build its buffer in place.
    #[inline]
    pub(crate) fn alloc_data(
        nbytes: usize,
        device: Device,
    ) -> Result<(*mut u8, &'static dyn Allocator)> {
        // `emu:7` with two emu devices is an error here, before any allocator runs.
        crate::device_runtime::check_device(device)?;
        let custom_cpu = !ALLOCATORS[DeviceType::Cpu as usize]
            .load(Ordering::Relaxed)
            .is_null();
        if nbytes <= INLINE_BYTES && device.is_cpu() && !custom_cpu {
            return Ok((std::ptr::null_mut(), &CPU_ALLOCATOR));
        }
        let a = allocator(device.device_type())?;
        let p = a.allocate(device, nbytes)?;
        Ok((p.as_ptr(), a))
    }

    pub(crate) fn alloc_with(
        nbytes: usize,
        device: Device,
        allocator: &'static dyn Allocator,
    ) -> Result<StorageBuf> {
        let device = crate::device_runtime::resolve(device);
        crate::device_runtime::check_device(device)?;
        let p = allocator.allocate(device, nbytes)?;
        Ok(StorageBuf::with_ptr(p.as_ptr(), nbytes, device, allocator))
    }

    /// A zero-byte buffer without host data on `device`, from the built-in meta
    /// allocator whatever allocator is registered (the undefined tensor's storage:
    /// every data access through it is refused, and it never allocates).
    pub(crate) fn no_data(device: Device) -> StorageBuf {
        StorageBuf::with_ptr(dangling64().as_ptr(), 0, device, &META_ALLOCATOR)
    }

    #[inline]
    pub(crate) fn with_ptr(
        data: *mut u8,
        nbytes: usize,
        device: Device,
        allocator: &'static dyn Allocator,
    ) -> StorageBuf {
        StorageBuf {
            data: AtomicPtr::new(data),
            nbytes: AtomicUsize::new(nbytes),
            device,
            allocator,
            // Null data is the inline buffer, which only the built-in CPU allocator
            // hands out (`alloc_data`): host memory, known without the virtual call.
            host_accessible: data.is_null() || allocator.host_accessible(),
            borrow: AtomicU32::new(0),
            version: AtomicU64::new(0),
            dtype_class: AtomicU8::new(0),
            inline: InlineBuf(UnsafeCell::new([0; INLINE_BYTES])),
            backend_meta: crate::device_runtime::backend_meta::MetaSlot::new(),
        }
    }

    /// How many operator calls have written this storage (see `version`).
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Records one more write by an operator call.
    #[inline]
    pub(crate) fn bump_version(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    #[inline]
    fn inline_ptr(&self) -> *mut u8 {
        self.inline.0.get().cast()
    }

    /// Records that a tensor of `dtype` is laid over this storage: `false` when that
    /// would mix `Bool` with another dtype over one storage (see `dtype_class`).
    #[inline]
    pub(crate) fn claim_dtype(&self, dtype: DType) -> bool {
        let class = if dtype == DType::Bool {
            CLASS_BOOL
        } else {
            CLASS_OTHER
        };
        match self
            .dtype_class
            .compare_exchange(0, class, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(existing) => existing == class,
        }
    }

    /// [`StorageBuf::claim_dtype`] for a buffer nobody else can see yet.
    #[inline]
    pub(crate) fn set_dtype(&self, dtype: DType) {
        let class = if dtype == DType::Bool {
            CLASS_BOOL
        } else {
            CLASS_OTHER
        };
        self.dtype_class.store(class, Ordering::Relaxed);
    }

    /// Size in bytes.
    #[inline]
    pub fn nbytes(&self) -> usize {
        self.nbytes.load(Ordering::Acquire)
    }

    /// The device.
    #[inline]
    pub fn device(&self) -> Device {
        self.device
    }

    /// Whether host code may access the bytes (false for meta and true device memory).
    #[inline]
    pub fn is_host_accessible(&self) -> bool {
        self.host_accessible
    }

    /// The backend metadata slot (see `Tensor::backend_meta`).
    #[inline]
    pub(crate) fn backend_meta(&self) -> &crate::device_runtime::backend_meta::MetaSlot {
        &self.backend_meta
    }

    /// Whether the bytes are pinned host memory (their allocator says so).
    #[inline]
    pub fn is_pinned(&self) -> bool {
        self.allocator.is_pinned()
    }

    /// Start of the buffer. Dereferencing it is `unsafe`: hold a borrow (tensor
    /// `read`/`write` guards or [`crate::tensor::KernelAccess`]) while doing so.
    #[inline]
    pub fn data_ptr(&self) -> *mut u8 {
        let p = self.data.load(Ordering::Acquire);
        if p.is_null() {
            self.inline_ptr()
        } else {
            p
        }
    }

    /// Grows the buffer to at least `nbytes` (keeping the bytes, zeroing the rest),
    /// in place so every view sees it. Needs the storage to be unborrowed (or held
    /// exclusively by the op of this thread that calls it).
    pub fn grow(&self, nbytes: usize) -> Result<()> {
        if nbytes <= self.nbytes() {
            return Ok(());
        }
        let guard = StorageBorrow::acquire(self, true)?;
        self.grow_borrowed(nbytes, &guard)
    }

    /// [`StorageBuf::grow`] under an exclusive borrow the caller already holds.
    pub(crate) fn grow_borrowed(&self, nbytes: usize, guard: &StorageBorrow<'_>) -> Result<()> {
        debug_assert!(std::ptr::eq(guard.s, self) && guard.exclusive);
        // Re-read under the exclusive borrow: another resize may have grown it meanwhile.
        let old = self.nbytes.load(Ordering::Acquire);
        if nbytes <= old {
            return Ok(());
        }
        let new = self.allocator.allocate(self.device, nbytes)?;
        let old_heap = self.data.load(Ordering::Acquire);
        let old_ptr = self.data_ptr();
        if self.allocator.host_accessible() && old > 0 {
            // SAFETY: both buffers are valid for `old` bytes (old: the live buffer of
            // `old` bytes; new: `nbytes > old`), distinct, and we hold the exclusive
            // borrow so nobody else accesses them.
            unsafe { std::ptr::copy_nonoverlapping(old_ptr, new.as_ptr(), old) };
        }
        self.data.store(new.as_ptr(), Ordering::Release);
        self.nbytes.store(nbytes, Ordering::Release);
        if let Some(p) = NonNull::new(old_heap) {
            // SAFETY: a non-null `data` was this allocator's allocation of `old` bytes;
            // it is unreachable now (replaced above) and no borrow is outstanding.
            unsafe { self.allocator.deallocate(self.device, p, old) };
        }
        Ok(())
    }
}

impl Drop for StorageBuf {
    fn drop(&mut self) {
        if let Some(p) = NonNull::new(*self.data.get_mut()) {
            // SAFETY: a non-null `data` with `nbytes` is the live allocation made by
            // `self.allocator` for `self.device`; nothing uses it after drop.
            unsafe {
                self.allocator
                    .deallocate(self.device, p, *self.nbytes.get_mut())
            }
        }
    }
}

impl fmt::Debug for StorageBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Storage(nbytes={}, device='{}')",
            self.nbytes(),
            self.device()
        )
    }
}

#[derive(Clone)]
enum Handle {
    /// A standalone buffer.
    Heap(Arc<StorageBuf>),
    /// The buffer owned inline by a tensor (its first tensor); the handle keeps that
    /// tensor's block alive.
    InTensor(super::pool::ImplRc<super::TensorImpl>),
}

/// A refcounted handle to a byte buffer on one device (schema type `Storage`);
/// `Clone` shares it. Views of a tensor share one storage. Derefs to [`StorageBuf`]
/// (`nbytes`, `device`, `data_ptr`, `grow`, ...).
#[derive(Clone)]
pub struct Storage {
    handle: Handle,
}

impl std::ops::Deref for Storage {
    type Target = StorageBuf;
    #[inline]
    fn deref(&self) -> &StorageBuf {
        match &self.handle {
            Handle::Heap(b) => b,
            Handle::InTensor(t) => t.storage_buf(),
        }
    }
}

impl Storage {
    /// Allocates `nbytes` on `device` with the device's registered allocator.
    pub fn new(nbytes: usize, device: Device) -> Result<Storage> {
        Ok(Storage {
            handle: Handle::Heap(Arc::new(StorageBuf::alloc(nbytes, device)?)),
        })
    }

    /// Allocates `nbytes` on `device` with a specific allocator.
    pub fn with_allocator(
        nbytes: usize,
        device: Device,
        allocator: &'static dyn Allocator,
    ) -> Result<Storage> {
        Ok(Storage {
            handle: Handle::Heap(Arc::new(StorageBuf::alloc_with(nbytes, device, allocator)?)),
        })
    }

    /// The handle for the buffer a tensor owns inline.
    pub(crate) fn in_tensor(t: super::pool::ImplRc<super::TensorImpl>) -> Storage {
        Storage {
            handle: Handle::InTensor(t),
        }
    }

    /// True when both handles share one buffer.
    #[inline]
    pub fn ptr_eq(&self, other: &Storage) -> bool {
        std::ptr::eq::<StorageBuf>(&**self, &**other)
    }
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Storage(nbytes={}, device='{}')",
            self.nbytes(),
            self.device()
        )
    }
}

/// An acquired guard borrow of one storage, released on drop (see `hold` for the
/// two levels of borrowing). Not `Send`: a virtual grant is counted in this
/// thread's op holds and must be released here.
pub(crate) struct StorageBorrow<'a> {
    s: &'a StorageBuf,
    exclusive: bool,
    grant: Grant,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl<'a> StorageBorrow<'a> {
    /// Tries to borrow `s` shared or exclusively; never blocks.
    #[inline]
    pub(crate) fn acquire(s: &'a StorageBuf, exclusive: bool) -> Result<Self> {
        match acquire_guard(s, exclusive) {
            Some(grant) => Ok(StorageBorrow {
                s,
                exclusive,
                grant,
                _not_send: std::marker::PhantomData,
            }),
            None => Err(borrow_error(exclusive)),
        }
    }
}

impl Drop for StorageBorrow<'_> {
    #[inline]
    fn drop(&mut self) {
        release_guard(self.s, self.exclusive, self.grant)
    }
}

#[inline]
pub(crate) fn try_acquire(s: &StorageBuf, exclusive: bool) -> bool {
    if exclusive {
        s.borrow
            .compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    } else {
        let mut cur = s.borrow.load(Ordering::Relaxed);
        loop {
            if cur >= WRITER - 1 {
                return false; // written, or the reader count would overflow
            }
            match s
                .borrow
                .compare_exchange_weak(cur, cur + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(c) => cur = c,
            }
        }
    }
}

#[inline]
pub(crate) fn release(s: &StorageBuf, exclusive: bool) {
    if exclusive {
        s.borrow.store(0, Ordering::Release);
    } else {
        s.borrow.fetch_sub(1, Ordering::Release);
    }
}

#[cold]
pub(crate) fn borrow_error(exclusive: bool) -> OpalError {
    ErrorKind::BorrowConflict(if exclusive {
        "cannot write a tensor whose storage is being read or written elsewhere".into()
    } else {
        "cannot read a tensor whose storage is being written elsewhere".into()
    })
    .into()
}
