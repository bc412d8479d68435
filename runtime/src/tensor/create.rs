//! Tensors from Rust data and data back out: `from_slice`, `from_vec`, `from_bytes`,
//! `scalar_tensor`, `to_vec`, `to_bytes`, `item`.
//!
//! Owns: host <-> tensor copies. Must not: dispatch (these are runtime helpers, not
//! ops; they work on host-accessible devices).

use super::meta::{Meta, StridedOffsets};
use super::storage::StorageBorrow;
use super::Tensor;
use crate::device::Device;
use crate::dtype::{scalar_from_bytes, scalar_to_bytes, DType, Element};
use crate::error::{OpalError, Result};
use crate::scalar::Scalar;

fn check_len(len: usize, shape: &[i64]) -> Result<()> {
    let meta = Meta::contiguous(shape, 0)?;
    if meta.numel as usize != len {
        return Err(OpalError::shape(format!(
            "{len} values do not fill shape {shape:?} ({} elements)",
            meta.numel
        )));
    }
    Ok(())
}

/// An empty host `Vec` with room for `n` elements of `elem_size` bytes, or an error
/// naming `op` and the bytes (where `Vec::with_capacity` would abort the process).
fn host_vec<T>(n: usize, elem_size: usize, op: &str) -> Result<Vec<T>> {
    let bytes = n as u128 * elem_size as u128;
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| OpalError::msg(format!("{op}: cannot allocate {bytes} bytes on cpu")))?;
    Ok(v)
}

impl Tensor {
    /// A CPU tensor of `shape` holding a copy of `data` (row-major).
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor> {
        check_len(data.len(), shape)?;
        let t = Tensor::empty(shape, T::DTYPE, Device::cpu())?;
        {
            let p = t.data_ptr::<T>()?;
            // SAFETY: `t` is new and unshared (no other handle can borrow it), contiguous
            // with exactly data.len() elements; source and destination are distinct.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        }
        Ok(t)
    }

    /// A CPU tensor of `shape` holding `data` (row-major).
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[i64]) -> Result<Tensor> {
        Tensor::from_slice(&data, shape)
    }

    /// A CPU tensor of `shape` and `dtype` from raw native-endian bytes. `Bool` bytes
    /// must be 0 or 1.
    pub fn from_bytes(bytes: &[u8], shape: &[i64], dtype: DType) -> Result<Tensor> {
        if !bytes.len().is_multiple_of(dtype.size()) {
            return Err(OpalError::shape(format!(
                "{} bytes are not a whole number of {dtype} elements",
                bytes.len()
            )));
        }
        check_len(bytes.len() / dtype.size(), shape)?;
        if dtype == DType::Bool && bytes.iter().any(|b| *b > 1) {
            return Err(OpalError::msg("bool tensor bytes must be 0 or 1"));
        }
        let t = Tensor::empty(shape, dtype, Device::cpu())?;
        let p = t.raw_data_ptr()?;
        // SAFETY: `t` is new and unshared, with exactly bytes.len() bytes of storage.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
        Ok(t)
    }

    /// Refuses a `Bool` view whose storage holds a byte other than 0 or 1 anywhere in
    /// the range the view spans: kernels read bool elements as Rust `bool`, for which
    /// any other byte is undefined behaviour (`!2` is 3). Called where a tensor is
    /// laid over an existing storage ([`Tensor::from_storage`]); other dtypes pass.
    pub(super) fn check_bool_bytes(&self) -> Result<()> {
        if self.dtype() != DType::Bool || !self.storage().is_host_accessible() {
            return Ok(());
        }
        let meta = self.meta();
        let (start, end) = (meta.offset as usize, meta.required_elements()? as usize);
        if end <= start {
            return Ok(());
        }
        let _b = StorageBorrow::acquire(self.storage(), false)?;
        let base = self.storage().data_ptr();
        // SAFETY: `end` bytes fit the storage (checked when the view was made; a bool
        // is one byte), and the shared borrow excludes writers while we read.
        let bytes = unsafe { std::slice::from_raw_parts(base.add(start), end - start) };
        if let Some(b) = bytes.iter().find(|&&b| b > 1) {
            return Err(OpalError::msg(format!(
                "from_storage: a bool tensor's bytes must be 0 or 1, but its storage holds {b}"
            )));
        }
        Ok(())
    }

    /// A zero-dim tensor holding `s` converted to `dtype`, on `device` (host-accessible
    /// devices only; meta gives an uninitialised-free empty meta tensor).
    pub fn scalar_tensor(s: &Scalar, dtype: DType, device: Device) -> Result<Tensor> {
        let t = Tensor::empty(&[], dtype, device)?;
        if t.storage().is_host_accessible() {
            let p = t.raw_data_ptr()?;
            // SAFETY: `t` is new and unshared with dtype.size() bytes of storage.
            let out = unsafe { std::slice::from_raw_parts_mut(p, dtype.size()) };
            scalar_to_bytes(s, dtype, out)?;
        }
        Ok(t)
    }

    /// A zero-dim CPU tensor of the scalar's own dtype (`Int -> I64`, `Float -> F64`,
    /// ...).
    pub fn from_scalar(s: impl Into<Scalar>) -> Result<Tensor> {
        let s = s.into();
        Tensor::scalar_tensor(&s, s.dtype(), Device::cpu())
    }

    /// A "wrapped number": a zero-dim CPU tensor for a Python-style number passed
    /// where a tensor is expected; it takes part in type promotion like a scalar.
    pub fn wrapped_number(s: &Scalar) -> Result<Tensor> {
        let t = Tensor::scalar_tensor(s, s.dtype(), Device::cpu())?;
        let storage = t.storage_handle();
        Ok(Tensor::from_parts(
            super::StorageSlot::Shared(storage),
            Meta::contiguous(&[], 0)?,
            s.dtype(),
            true,
        ))
    }

    /// The elements as a `Vec<T>` in logical order (`T` must match the dtype). A
    /// result too large for memory (a huge expanded view, say) is an error naming
    /// the bytes, not an abort.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let r = self.read::<T>()?;
        let mut v = host_vec(r.numel(), std::mem::size_of::<T>(), "to_vec")?;
        v.extend(r.iter());
        Ok(v)
    }

    /// The elements' raw native-endian bytes in logical order.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        // Borrow before loading the data pointer: a (borrow-excluded) resize may
        // replace it until then.
        let _b = StorageBorrow::acquire(self.storage(), false)?;
        let base = self.raw_data_ptr()?;
        let es = self.element_size();
        let mut out = host_vec(self.numel() as usize, es, "to_bytes")?;
        for o in StridedOffsets::new(self.sizes(), self.strides(), self.numel()) {
            // SAFETY: each offset is a valid element of this view (checked at view
            // creation) and the shared borrow excludes writers.
            let src =
                unsafe { std::slice::from_raw_parts(base.offset(o as isize * es as isize), es) };
            out.extend_from_slice(src);
        }
        Ok(out)
    }

    /// The value of a one-element tensor as a [`Scalar`].
    pub fn item(&self) -> Result<Scalar> {
        if !self.is_defined() {
            // Not "0 elements": the undefined tensor's sizes are placeholders.
            return Err(super::undefined_error("item"));
        }
        if self.numel() != 1 {
            return Err(OpalError::msg(format!(
                "a Tensor with {} elements cannot be converted to Scalar",
                self.numel()
            )));
        }
        let bytes = self.to_bytes()?;
        scalar_from_bytes(self.dtype(), &bytes)
    }

    /// The element at `index` as a [`Scalar`] (negative indices count from the end).
    pub fn get(&self, index: &[i64]) -> Result<Scalar> {
        if !self.is_defined() {
            // Not "out of bounds for size [0]": its sizes are placeholders.
            return Err(super::undefined_error("get"));
        }
        let bad = || {
            OpalError::shape(format!(
                "index {index:?} is out of bounds for size {:?}",
                self.sizes()
            ))
        };
        if index.len() != self.dim() {
            return Err(bad());
        }
        let mut off = 0i64;
        for ((&i, &s), &st) in index.iter().zip(self.sizes()).zip(self.strides()) {
            let i = if i < 0 { i + s } else { i };
            if i < 0 || i >= s {
                return Err(bad());
            }
            off += i * st;
        }
        let es = self.element_size();
        // Borrow before loading the data pointer: a (borrow-excluded) resize may
        // replace it until then.
        let _b = StorageBorrow::acquire(self.storage(), false)?;
        let base = self.raw_data_ptr()?;
        // SAFETY: `off` is a valid element offset of this view; shared borrow held.
        let src =
            unsafe { std::slice::from_raw_parts(base.offset(off as isize * es as isize), es) };
        scalar_from_bytes(self.dtype(), src)
    }
}
