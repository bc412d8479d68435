//! Safe, race-free data access: typed read/write guards for one tensor and
//! [`KernelAccess`], which borrows every storage a kernel touches at once.
//!
//! Owns: acquiring/releasing storage borrows around data access. Must not: compute
//! anything (kernels do) or allocate on the common path.

use super::hold::{acquire_guard, op_holds_shared, release_guard, Grant};
use super::meta::{Meta, StridedOffsets};
use super::storage::{borrow_error, StorageBorrow, StorageBuf};
use super::{undefined_error, Tensor};
use crate::dtype::{Complex, DType, Element};
use crate::error::{ErrorKind, OpalError, Result};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;

/// Element types for which every bit pattern is a valid value, so storage bytes may
/// be viewed as `&[T]` (all elements except `bool`, whose bytes must be 0 or 1).
pub trait Pod: Element {}
impl Pod for u8 {}
impl Pod for i8 {}
impl Pod for i16 {}
impl Pod for i32 {}
impl Pod for i64 {}
impl Pod for half::f16 {}
impl Pod for half::bf16 {}
impl Pod for f32 {}
impl Pod for f64 {}
impl Pod for Complex<f32> {}
impl Pod for Complex<f64> {}

/// Loads an element. `bool` is read as a byte and compared with 0, so a stray byte
/// value written by a kernel cannot produce an invalid `bool`.
///
/// # Safety
/// `p` is valid for reading `size_of::<T>()` bytes and aligned for `T`.
#[inline]
pub(crate) unsafe fn load<T: Element>(p: *const T) -> T {
    if T::DTYPE == DType::Bool {
        // SAFETY: bool has size 1; the caller guarantees p is readable. The read
        // byte is converted through a Scalar, which is valid for any byte value.
        let b = unsafe { p.cast::<u8>().read() };
        T::from_scalar(&crate::Scalar::Bool(b != 0))
    } else {
        // SAFETY: the caller guarantees validity; T is plain data (not bool).
        unsafe { p.read() }
    }
}

fn check_access<T: Element>(t: &Tensor) -> Result<()> {
    if T::DTYPE != t.dtype() {
        return Err(dtype_error(t, T::DTYPE));
    }
    if !t.storage().is_host_accessible() {
        return Err(no_host_data(t));
    }
    Ok(())
}

/// The error of accessing `t` as `expected` elements when its dtype differs. An
/// undefined tensor's dtype is a placeholder, so it gets the undefined error instead
/// (checked here, off the fast path, rather than before every access).
#[cold]
#[inline(never)]
pub(super) fn dtype_error(t: &Tensor, expected: DType) -> OpalError {
    if !t.is_defined() {
        return undefined_error("data access");
    }
    ErrorKind::DTypeMismatch {
        expected,
        actual: t.dtype(),
    }
    .into()
}

/// The error of accessing the data of `t`, whose storage is not host-accessible
/// (meta, device memory, or the undefined tensor, which has none).
#[cold]
#[inline(never)]
fn no_host_data(t: &Tensor) -> OpalError {
    if !t.is_defined() {
        return undefined_error("data access");
    }
    OpalError::device(format!(
        "tensors on device '{}' have no host-accessible data",
        t.device()
    ))
}

/// Address of `t`'s first element in its storage `s` (which the caller looked up).
#[inline]
pub(super) fn element_ptr(t: &Tensor, s: &StorageBuf) -> Result<*mut u8> {
    if !s.is_host_accessible() {
        return Err(no_host_data(t));
    }
    let off = t.storage_offset() as usize * t.element_size();
    Ok(s.data_ptr().wrapping_add(off))
}

fn flat_offset(meta: &Meta, index: &[i64]) -> Option<i64> {
    if index.len() != meta.sizes().len() {
        return None;
    }
    let mut off = 0;
    for ((&i, &s), &st) in index.iter().zip(meta.sizes()).zip(meta.strides()) {
        let i = if i < 0 { i + s } else { i };
        if i < 0 || i >= s {
            return None;
        }
        off += i * st;
    }
    Some(off)
}

/// Shared (read) access to one tensor's elements of type `T`; holds a shared borrow
/// of the storage until dropped. Made by [`Tensor::read`].
pub struct TensorRead<'a, T: Element> {
    meta: &'a Meta,
    ptr: *const T,
    _borrow: StorageBorrow<'a>,
}

/// Exclusive (write) access to one tensor's elements of type `T`; holds an exclusive
/// borrow of the storage until dropped. Made by [`Tensor::write`].
pub struct TensorWrite<'a, T: Element> {
    meta: &'a Meta,
    ptr: *mut T,
    _borrow: StorageBorrow<'a>,
}

macro_rules! shared_reads {
    () => {
        /// Sizes of the viewed tensor.
        pub fn sizes(&self) -> &[i64] {
            self.meta.sizes()
        }

        /// Number of elements.
        pub fn numel(&self) -> usize {
            self.meta.numel as usize
        }

        /// The elements as a slice, when the tensor is contiguous.
        pub fn as_slice(&self) -> Option<&[T]>
        where
            T: Pod,
        {
            if !self.meta.contiguous {
                return None;
            }
            // SAFETY: contiguous => elements 0..numel are in bounds of the storage
            // (checked at creation), T is Pod, and the borrow we hold excludes writers
            // (or, for TensorWrite, this &self excludes our own &mut use).
            Some(unsafe { std::slice::from_raw_parts(self.ptr, self.numel()) })
        }

        /// The element at `index` (negative indices count from the end).
        pub fn get(&self, index: &[i64]) -> Option<T> {
            let off = flat_offset(self.meta, index)?;
            // SAFETY: off is a valid element offset (bounds checked); borrow held.
            Some(unsafe { load(self.ptr.offset(off as isize)) })
        }

        /// The elements in logical (row-major) order.
        pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
            let p = self.ptr;
            StridedOffsets::new(self.meta.sizes(), self.meta.strides(), self.meta.numel)
                // SAFETY: every yielded offset is a valid element; borrow held.
                .map(move |o| unsafe { load(p.offset(o as isize)) })
        }

        /// The elements in logical order, copied.
        pub fn to_vec(&self) -> Vec<T> {
            self.iter().collect()
        }
    };
}

impl<T: Element> TensorRead<'_, T> {
    shared_reads!();
}

impl<T: Element> TensorWrite<'_, T> {
    shared_reads!();

    /// The elements as a mutable slice, when the tensor is contiguous.
    pub fn as_mut_slice(&mut self) -> Option<&mut [T]>
    where
        T: Pod,
    {
        if !self.meta.contiguous {
            return None;
        }
        // SAFETY: in bounds (checked at creation), T is Pod, and we hold the exclusive
        // borrow; `&mut self` prevents overlapping slices from this guard.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.numel()) })
    }

    /// Sets the element at `index`; false when out of bounds.
    pub fn set(&mut self, index: &[i64], v: T) -> bool {
        match flat_offset(self.meta, index) {
            Some(off) => {
                // SAFETY: valid element offset; exclusive borrow held.
                unsafe { self.ptr.offset(off as isize).write(v) };
                true
            }
            None => false,
        }
    }

    /// Writes `v` to every element.
    pub fn fill(&mut self, v: T) {
        let p = self.ptr;
        for o in StridedOffsets::new(self.meta.sizes(), self.meta.strides(), self.meta.numel) {
            // SAFETY: valid element offset; exclusive borrow held.
            unsafe { p.offset(o as isize).write(v) };
        }
    }

    /// Copies `src` into the elements in logical order; `src.len()` must be `numel`.
    pub fn copy_from(&mut self, src: &[T]) -> Result<()> {
        if src.len() != self.numel() {
            return Err(OpalError::shape(format!(
                "copy_from: {} values for {} elements",
                src.len(),
                self.numel()
            )));
        }
        let p = self.ptr;
        let offs = StridedOffsets::new(self.meta.sizes(), self.meta.strides(), self.meta.numel);
        for (o, v) in offs.zip(src) {
            // SAFETY: valid element offset; exclusive borrow held.
            unsafe { p.offset(o as isize).write(*v) };
        }
        Ok(())
    }
}

impl Tensor {
    /// Shared access to the elements as `T` (dtype checked). Fails with a borrow
    /// conflict while another handle writes this storage.
    pub fn read<T: Element>(&self) -> Result<TensorRead<'_, T>> {
        check_access::<T>(self)?;
        let borrow = StorageBorrow::acquire(self.storage(), false)?;
        Ok(TensorRead {
            meta: self.meta(),
            ptr: self.raw_data_ptr()?.cast(),
            _borrow: borrow,
        })
    }

    /// Exclusive access to the elements as `T` (dtype checked). Fails with a borrow
    /// conflict while any other handle reads or writes this storage.
    pub fn write<T: Element>(&self) -> Result<TensorWrite<'_, T>> {
        check_access::<T>(self)?;
        let borrow = StorageBorrow::acquire(self.storage(), true)?;
        Ok(TensorWrite {
            meta: self.meta(),
            ptr: self.raw_data_ptr()?.cast(),
            _borrow: borrow,
        })
    }
}

const INLINE_HELD: usize = 4;

/// Borrows of all storages a kernel touches, deduplicated: each distinct storage is
/// borrowed once, exclusively when any of its tensors is written. Released on drop.
///
/// ```
/// use opal::{Tensor, tensor::KernelAccess};
/// let a = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
/// let out = Tensor::from_slice(&[0.0f32, 0.0], &[2]).unwrap();
/// {
///     let acc = KernelAccess::new(&[&a], &[&out]).unwrap();
///     let (pa, po) = (acc.read_ptr::<f32>(&a).unwrap(), acc.write_ptr::<f32>(&out).unwrap());
///     // SAFETY: both storages are borrowed by `acc`; 2 contiguous elements each.
///     unsafe { for i in 0..2 { *po.add(i) = *pa.add(i) * 2.0; } }
/// }
/// assert_eq!(out.to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
/// ```
///
/// Kernels with a fixed number of operands can take the borrows and the element
/// addresses in one step with [`KernelAccess::with_ptrs`].
///
/// Inside an operator call (see [`crate::tensor::with_op_holds`]), a read of a
/// storage the call already holds shared takes no borrow of its own: no thread can
/// write it until the call returns. Its address is therefore valid to dereference
/// while the access lives *and* the operator call that made it runs (a kernel's
/// accesses never outlive its call).
pub struct KernelAccess<'a> {
    /// Held storages as tagged addresses ([`Held`]); the first `len` are in use.
    inline: [Held; INLINE_HELD],
    len: usize,
    /// Entries past the inline slots. `ManuallyDrop` so that dropping an access
    /// with nothing held (most kernel calls) is one inline test, with no drop glue
    /// for the vector: [`KernelAccess::release_and_free`] drops it.
    spill: ManuallyDrop<Vec<Held>>,
    _life: PhantomData<&'a Tensor>,
    /// Not `Send` (see the `Sync` impl).
    _not_send: PhantomData<*const ()>,
}

/// A held storage: its address with bit 0 set when held exclusively and bit 1 set
/// when the borrow was granted virtually (against an exclusive op hold of this
/// thread, see `hold`). One word instead of an address and two flags keeps
/// [`KernelAccess`], which every kernel call builds and returns by value, small.
/// (`StorageBuf` is aligned to at least 4, so the two low bits of its address are
/// free.)
#[derive(Copy, Clone, PartialEq)]
struct Held(usize);

const _: () = assert!(std::mem::align_of::<StorageBuf>() >= 4);

impl Held {
    const NONE: Held = Held(0);

    #[inline]
    fn new(s: &StorageBuf, exclusive: bool) -> Held {
        Held(s as *const StorageBuf as usize | exclusive as usize)
    }

    #[inline]
    fn addr(self) -> usize {
        self.0 & !3
    }

    #[inline]
    fn grant(self) -> Grant {
        if self.0 & 2 == 2 {
            Grant::Virtual
        } else {
            Grant::Atomic
        }
    }

    #[inline]
    fn exclusive(self) -> bool {
        self.0 & 1 == 1
    }

    #[inline]
    fn granted(self, g: Grant) -> Held {
        match g {
            Grant::Atomic => self,
            Grant::Virtual => Held(self.0 | 2),
        }
    }

    /// The storage.
    ///
    /// # Safety
    /// The entry was made from a storage that is still alive (a `&'a Tensor`'s).
    #[inline]
    unsafe fn storage<'s>(self) -> &'s StorageBuf {
        // SAFETY: forwarded to the caller.
        unsafe { &*(self.addr() as *const StorageBuf) }
    }
}

impl<'a> KernelAccess<'a> {
    /// Borrows the storages of `reads` (shared) and `writes` (exclusive). An input
    /// sharing storage with an output is borrowed once, exclusively. Never blocks:
    /// on a conflict, releases what it took and returns a borrow-conflict error.
    #[inline]
    pub fn new(reads: &[&'a Tensor], writes: &[&'a Tensor]) -> Result<Self> {
        let mut acc = KernelAccess::empty();
        acc.take_all(reads, writes)?;
        Ok(acc)
    }

    /// Notes and borrows every storage of `reads` and `writes` (see [`Self::new`]).
    #[inline]
    fn take_all(&mut self, reads: &[&'a Tensor], writes: &[&'a Tensor]) -> Result<()> {
        // Writes first, so a storage that is both read and written is marked exclusive.
        for t in writes {
            self.note(t.storage(), true);
        }
        for t in reads {
            let s = t.storage();
            if !op_holds_shared(s) {
                self.note(s, false);
            }
        }
        self.acquire_all()
    }

    /// [`KernelAccess::new`] for a fixed number of operands, also returning the
    /// address of each operand's first element (`reads`' in order, then `writes'`),
    /// so a kernel needs no per-tensor lookups. The addresses are only valid to
    /// dereference while the returned access lives.
    #[inline(always)]
    pub fn with_ptrs<const R: usize, const W: usize>(
        reads: [&'a Tensor; R],
        writes: [&'a Tensor; W],
    ) -> Result<(Self, [*const u8; R], [*mut u8; W])> {
        let mut acc = KernelAccess::empty();
        let (rp, wp) = acc.take_ptrs(reads, writes)?;
        Ok((acc, rp, wp))
    }

    /// [`KernelAccess::with_ptrs`] scoped to `body`, which gets the element
    /// addresses and runs while the borrows are held; they are released when it
    /// returns or unwinds. The access stays in this frame instead of being returned
    /// by value, which is what a one-element kernel call notices.
    #[inline(always)]
    pub fn scoped<const R: usize, const W: usize, T>(
        reads: [&'a Tensor; R],
        writes: [&'a Tensor; W],
        body: impl FnOnce([*const u8; R], [*mut u8; W]) -> Result<T>,
    ) -> Result<T> {
        let mut acc = KernelAccess::empty();
        let (rp, wp) = acc.take_ptrs(reads, writes)?;
        body(rp, wp)
    }

    #[inline(always)]
    fn empty() -> Self {
        KernelAccess {
            inline: [Held::NONE; INLINE_HELD],
            len: 0,
            spill: ManuallyDrop::new(Vec::new()),
            _life: PhantomData,
            _not_send: PhantomData,
        }
    }

    /// Borrows `reads` and `writes` into this (empty) access and returns their
    /// element addresses.
    #[inline(always)]
    fn take_ptrs<const R: usize, const W: usize>(
        &mut self,
        reads: [&'a Tensor; R],
        writes: [&'a Tensor; W],
    ) -> Result<([*const u8; R], [*mut u8; W])> {
        if R + W > INLINE_HELD {
            self.take_all(&reads, &writes)?;
            let mut rp = [std::ptr::null(); R];
            for (p, t) in rp.iter_mut().zip(reads) {
                *p = t.raw_data_ptr()?.cast_const();
            }
            let mut wp = [std::ptr::null_mut(); W];
            for (p, t) in wp.iter_mut().zip(writes) {
                *p = t.raw_data_ptr()?;
            }
            return Ok((rp, wp));
        }
        // Few operands (every element-wise kernel): each storage is looked up once,
        // for both its borrow entry and the element address, with no spill list.
        // A result inside `Tensor::fill_unshared` is reachable from this thread only,
        // so it needs no borrow (see that method's contract).
        for t in writes {
            if !t.is_unshared() {
                self.note_inline(t.storage(), true);
            }
        }
        for t in reads {
            let s = t.storage();
            if !t.is_unshared() && !op_holds_shared(s) {
                self.note_inline(s, false);
            }
        }
        if self.len != 0 {
            // Nothing noted (a fresh result, inputs the op holds): no call at all.
            self.acquire_all()?;
        }
        // Addresses only once borrowed: a storage can be regrown (moving its bytes)
        // until then.
        let mut wp = [std::ptr::null_mut(); W];
        for (p, t) in wp.iter_mut().zip(writes) {
            *p = element_ptr(t, t.storage())?;
        }
        let mut rp = [std::ptr::null(); R];
        for (p, t) in rp.iter_mut().zip(reads) {
            *p = element_ptr(t, t.storage())?.cast_const();
        }
        Ok((rp, wp))
    }

    /// `note` when the operands are known to fit the inline slots.
    #[inline]
    fn note_inline(&mut self, s: &StorageBuf, exclusive: bool) {
        let h = Held::new(s, exclusive);
        for e in &mut self.inline[..self.len] {
            if e.addr() == h.addr() {
                e.0 |= h.0;
                return;
            }
        }
        self.inline[self.len] = h;
        self.len += 1;
    }

    /// Acquires every noted storage; on a conflict releases the ones taken.
    #[inline]
    fn acquire_all(&mut self) -> Result<()> {
        for i in 0..self.len {
            let h = self.inline[i];
            // SAFETY: the entry comes from a `&'a Tensor`'s storage, alive for 'a.
            match acquire_guard(unsafe { h.storage() }, h.exclusive()) {
                Some(g) => self.inline[i] = h.granted(g),
                None => {
                    self.len = i;
                    self.spill.clear();
                    return Err(self.abandon(h.exclusive()));
                }
            }
        }
        for i in 0..self.spill.len() {
            let h = self.spill[i];
            // SAFETY: as above.
            match acquire_guard(unsafe { h.storage() }, h.exclusive()) {
                Some(g) => self.spill[i] = h.granted(g),
                None => {
                    self.spill.truncate(i);
                    return Err(self.abandon(h.exclusive()));
                }
            }
        }
        Ok(())
    }

    /// Releases what was acquired (every entry left) after a failed acquisition.
    #[cold]
    fn abandon(&mut self, exclusive: bool) -> OpalError {
        self.release_all();
        self.len = 0;
        self.spill.clear();
        borrow_error(exclusive)
    }

    #[inline]
    fn release_all(&self) {
        for &h in &self.inline[..self.len] {
            // SAFETY: every entry was acquired and its storage outlives 'a.
            release_guard(unsafe { h.storage() }, h.exclusive(), h.grant());
        }
        if !self.spill.is_empty() {
            for &h in self.spill.iter() {
                // SAFETY: as above.
                release_guard(unsafe { h.storage() }, h.exclusive(), h.grant());
            }
        }
    }

    #[inline]
    fn note(&mut self, s: &StorageBuf, exclusive: bool) {
        // The spill list is only used once the inline slots are full.
        if self.len < INLINE_HELD {
            return self.note_inline(s, exclusive);
        }
        let h = Held::new(s, exclusive);
        match self
            .inline
            .iter_mut()
            .chain(self.spill.iter_mut())
            .find(|e| e.addr() == h.addr())
        {
            Some(e) => e.0 |= h.0,
            None => self.spill.push(h),
        }
    }

    #[inline]
    fn held(&self, t: &Tensor) -> Option<bool> {
        let p = Held::new(t.storage(), false).addr();
        self.inline[..self.len]
            .iter()
            .chain(self.spill.iter())
            .find(|e| e.addr() == p)
            .map(|e| e.exclusive())
    }

    /// Pointer to `t`'s first element for reading; `t`'s storage must be held.
    #[inline]
    pub fn read_ptr<T: Element>(&self, t: &Tensor) -> Result<*const T> {
        match self.held(t) {
            Some(_) => Ok(t.data_ptr::<T>()?.cast_const()),
            None if op_holds_shared(t.storage()) => Ok(t.data_ptr::<T>()?.cast_const()),
            None => Err(OpalError::msg(
                "KernelAccess::read_ptr: tensor's storage is not borrowed by this access",
            )),
        }
    }

    /// Pointer to `t`'s first element for writing; `t`'s storage must be held
    /// exclusively.
    #[inline]
    pub fn write_ptr<T: Element>(&self, t: &Tensor) -> Result<*mut T> {
        match self.held(t) {
            Some(true) => t.data_ptr::<T>(),
            _ => Err(OpalError::msg(
                "KernelAccess::write_ptr: tensor's storage is not borrowed for writing by this access",
            )),
        }
    }
}

impl Drop for KernelAccess<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // Entries in `spill` imply a full inline list, so `len == 0` with no spill
        // capacity means nothing is held and nothing is allocated.
        if self.len != 0 || self.spill.capacity() != 0 {
            self.release_and_free();
        }
    }
}

impl KernelAccess<'_> {
    #[inline(never)]
    fn release_and_free(&mut self) {
        self.release_all();
        // SAFETY: called once, from `drop`; `spill` is not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.spill) };
    }
}

// SAFETY: shared access only reads the entry list and the (Sync) storages.
// Not `Send`: a virtual grant is counted in this thread's op holds (see `hold`) and
// must be released on this thread (the `_not_send` marker).
unsafe impl Sync for KernelAccess<'_> {}
