//! Tensor handles: [`Tensor`] over an [`OpalTensor`] the host counts, with its
//! metadata and borrowed data; [`DType`] and [`Device`] as the ABI codes them.
//!
//! Owns: the plugin-side view of tensors. Must not: free host memory itself (it
//! releases handles).

use crate::abi::OpalTensorInfo;
use crate::abi::{device_type as dt, dtype as dc, OpalHostApi, OpalTensor, OpalTensorArg};
use crate::{check, host, tensor_info, Error, Result};

/// Element types (PyTorch's numbering, [`crate::abi::dtype`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DType {
    /// bool
    Bool,
    /// uint8
    U8,
    /// int8
    I8,
    /// int16
    I16,
    /// int32
    I32,
    /// int64
    I64,
    /// float16
    F16,
    /// bfloat16
    BF16,
    /// float32
    F32,
    /// float64
    F64,
    /// complex64
    C64,
    /// complex128
    C128,
}

impl DType {
    /// The ABI code.
    #[inline]
    pub fn code(self) -> i32 {
        match self {
            DType::Bool => dc::BOOL,
            DType::U8 => dc::U8,
            DType::I8 => dc::I8,
            DType::I16 => dc::I16,
            DType::I32 => dc::I32,
            DType::I64 => dc::I64,
            DType::F16 => dc::F16,
            DType::BF16 => dc::BF16,
            DType::F32 => dc::F32,
            DType::F64 => dc::F64,
            DType::C64 => dc::C64,
            DType::C128 => dc::C128,
        }
    }

    /// The dtype of an ABI code.
    #[inline]
    pub fn from_code(c: i64) -> Result<DType> {
        Ok(match i32::try_from(c).unwrap_or(-1) {
            dc::BOOL => DType::Bool,
            dc::U8 => DType::U8,
            dc::I8 => DType::I8,
            dc::I16 => DType::I16,
            dc::I32 => DType::I32,
            dc::I64 => DType::I64,
            dc::F16 => DType::F16,
            dc::BF16 => DType::BF16,
            dc::F32 => DType::F32,
            dc::F64 => DType::F64,
            dc::C64 => DType::C64,
            dc::C128 => DType::C128,
            _ => return Err(Error::msg(format!("unknown dtype code {c}"))),
        })
    }
}

/// Device types a plugin sees.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// The host CPU.
    Cpu,
    /// Shapes only.
    Meta,
    /// PrivateUse1.
    PrivateUse1,
    /// PrivateUse2.
    PrivateUse2,
    /// PrivateUse3.
    PrivateUse3,
}

/// A device: a kind and an optional index.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// The kind.
    pub kind: DeviceKind,
    /// The index, if any.
    pub index: Option<i32>,
}

impl Device {
    /// The host CPU.
    pub const CPU: Device = Device {
        kind: DeviceKind::Cpu,
        index: None,
    };

    /// The ABI code of the kind.
    #[inline]
    pub fn code(self) -> i32 {
        match self.kind {
            DeviceKind::Cpu => dt::CPU,
            DeviceKind::Meta => dt::META,
            DeviceKind::PrivateUse1 => dt::PRIVATE_USE1,
            DeviceKind::PrivateUse2 => dt::PRIVATE_USE2,
            DeviceKind::PrivateUse3 => dt::PRIVATE_USE3,
        }
    }

    /// The device of an ABI code and index (negative: none).
    #[inline]
    pub fn from_code(c: i64, index: i64) -> Result<Device> {
        let kind = match i32::try_from(c).unwrap_or(-1) {
            dt::CPU => DeviceKind::Cpu,
            dt::META => DeviceKind::Meta,
            dt::PRIVATE_USE1 => DeviceKind::PrivateUse1,
            dt::PRIVATE_USE2 => DeviceKind::PrivateUse2,
            dt::PRIVATE_USE3 => DeviceKind::PrivateUse3,
            _ => return Err(Error::msg(format!("unknown device type code {c}"))),
        };
        Ok(Device {
            kind,
            index: (index >= 0).then_some(index as i32),
        })
    }
}

/// A tensor handle. Owned handles are released on drop; borrowed ones (kernel
/// arguments) are valid only during the kernel call; [`Tensor::clone`] makes an
/// owned handle to the same tensor.
pub struct Tensor {
    h: OpalTensor,
    owned: bool,
    info: OpalTensorInfo,
}

impl Tensor {
    /// Wraps a handle, reading its metadata.
    pub(crate) fn from_handle(h: OpalTensor, owned: bool) -> Result<Tensor> {
        if h.0.is_null() {
            return Err(Error::msg("null tensor handle"));
        }
        let t = Tensor {
            h,
            owned,
            info: tensor_info(h).inspect_err(|_| {
                if owned {
                    release(h);
                }
            })?,
        };
        Ok(t)
    }

    /// A borrowed tensor from a typed entry's argument (handle and metadata from
    /// the host, no call back to it).
    #[inline]
    pub(crate) fn from_arg(a: Option<&OpalTensorArg>) -> Result<Tensor> {
        #[cold]
        #[inline(never)]
        fn bad(a: Option<&OpalTensorArg>) -> Error {
            match a {
                None => Error::msg("null tensor argument"),
                Some(a) => Error::msg(format!(
                    "bad tensor argument (handle {:?}, info of {} bytes)",
                    a.handle.0, a.info.size
                )),
            }
        }
        let Some(a) = a.filter(|a| {
            !a.handle.0.is_null() && a.info.size >= std::mem::size_of::<OpalTensorInfo>()
        }) else {
            return Err(bad(a));
        };
        Ok(Tensor {
            h: a.handle,
            owned: false,
            info: a.info,
        })
    }

    /// The raw handle (still owned by `self`).
    #[inline]
    pub fn handle(&self) -> OpalTensor {
        self.h
    }

    /// Gives the handle up as an owned one (retaining a borrowed handle).
    #[inline]
    pub(crate) fn into_owned_handle(self) -> Result<OpalTensor> {
        // A kernel's result is nearly always a tensor it made (owned): that stays
        // inline, the retain of a returned argument does not.
        #[cold]
        #[inline(never)]
        fn retain(h: OpalTensor) -> Result<OpalTensor> {
            // SAFETY: `h` is live during the call that lent it.
            let r = unsafe { (host()?.tensor_retain)(h) };
            if r.0.is_null() {
                return Err(Error::msg("the host could not retain a tensor"));
            }
            Ok(r)
        }
        let h = if self.owned { self.h } else { retain(self.h)? };
        std::mem::forget(self);
        Ok(h)
    }

    /// A new uninitialised contiguous tensor on `device`, from that device's
    /// allocator (the plugin's own for its device).
    #[inline]
    pub fn empty(sizes: &[i64], dtype: DType, device: Device) -> Result<Tensor> {
        let api = host()?;
        let mut h = OpalTensor(std::ptr::null_mut());
        let (p, n, d, k, i) = (
            sizes.as_ptr(),
            sizes.len(),
            dtype.code(),
            device.code(),
            device.index.unwrap_or(-1),
        );
        let end =
            std::mem::offset_of!(OpalHostApi, tensor_empty_info) + std::mem::size_of::<usize>();
        if !crate::abi::has_field(api.size, end) {
            // A 1.0 host: the tensor, then its metadata.
            // SAFETY: `sizes` readable for the call, `h` writable.
            let st = unsafe { (api.tensor_empty)(p, n, d, k, i, &mut h) };
            // SAFETY: a host status, consumed once.
            unsafe { check(st) }?;
            return Tensor::from_handle(h, true);
        }
        // Filled in place: the host writes the handle and metadata straight into
        // the result (not owned until the call succeeded, so a failure drops nothing).
        let mut t = Tensor {
            h,
            owned: false,
            info: OpalTensorInfo::blank(),
        };
        // SAFETY: `sizes` readable for the call, `t.h` and `t.info` writable, and
        // the host's table covers the field.
        let st = unsafe { (api.tensor_empty_info)(p, n, d, k, i, &mut t.h, &mut t.info) };
        // SAFETY: a host status, consumed once.
        unsafe { check(st) }?;
        t.owned = true;
        Ok(t)
    }

    /// True for a defined tensor.
    #[inline]
    pub fn is_defined(&self) -> bool {
        self.info.defined != 0
    }

    /// Sizes.
    #[inline]
    pub fn sizes(&self) -> &[i64] {
        if self.info.ndim == 0 {
            return &[];
        }
        // SAFETY: the host's info arrays live as long as the handle and its geometry,
        // which outlive `&self` (see OpalTensorInfo).
        unsafe { std::slice::from_raw_parts(self.info.sizes, self.info.ndim) }
    }

    /// Strides in elements.
    #[inline]
    pub fn strides(&self) -> &[i64] {
        if self.info.ndim == 0 {
            return &[];
        }
        // SAFETY: as in `sizes`.
        unsafe { std::slice::from_raw_parts(self.info.strides, self.info.ndim) }
    }

    /// Number of elements.
    #[inline]
    pub fn numel(&self) -> i64 {
        self.sizes().iter().product()
    }

    /// The dtype.
    #[inline]
    pub fn dtype(&self) -> Result<DType> {
        DType::from_code(i64::from(self.info.dtype))
    }

    /// The device.
    #[inline]
    pub fn device(&self) -> Result<Device> {
        Device::from_code(
            i64::from(self.info.device_type),
            i64::from(self.info.device_index),
        )
    }

    /// Bytes per element.
    #[inline]
    pub fn element_size(&self) -> usize {
        self.info.element_size
    }

    /// True when row-major contiguous.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.contiguous_numel().is_some()
    }

    /// The number of elements when the tensor is row-major contiguous, from one
    /// pass over its dimensions (a kernel's argument checks run on every call).
    #[inline]
    fn contiguous_numel(&self) -> Option<i64> {
        let mut n = 1i64;
        for (&size, &stride) in self.sizes().iter().zip(self.strides()).rev() {
            if size != 1 && stride != n {
                return None;
            }
            n = n.wrapping_mul(size);
        }
        Some(n)
    }

    /// The address of the first element (after the storage offset) in the device's
    /// memory, or null for empty and meta tensors. Valid while the handle lives
    /// and inside the kernel call that got or made it: arguments are held by the
    /// call (read-only unless the schema marks them written), and a tensor the
    /// plugin just made is its own until returned.
    #[inline]
    pub fn data_ptr(&self) -> *mut u8 {
        self.info.data.cast()
    }

    /// The elements as a slice of `T`, for a contiguous tensor of `dtype`.
    ///
    /// # Safety
    /// `T` matches the dtype, the memory is addressable by this code (CPU tensors,
    /// or the plugin's own device memory when that is host memory), and no one
    /// writes the tensor while the slice lives (true for a kernel's input arguments
    /// during the kernel).
    #[inline]
    pub unsafe fn as_slice<T>(&self) -> Result<&[T]> {
        let Some(n) = self
            .contiguous_numel()
            .filter(|_| self.info.element_size == std::mem::size_of::<T>())
        else {
            return Err(Error::msg(
                "as_slice needs a contiguous tensor of a matching element size",
            ));
        };
        let n = n as usize;
        if n == 0 {
            return Ok(&[]);
        }
        if self.info.data.is_null() {
            return Err(Error::msg("the tensor has no data (meta)"));
        }
        // SAFETY: contiguous, `n` elements of `T` at `data`, not written meanwhile.
        Ok(unsafe { std::slice::from_raw_parts(self.info.data.cast::<T>(), n) })
    }
}

fn release(h: OpalTensor) {
    if let Ok(api) = host() {
        // SAFETY: `h` is an owned handle, released once.
        unsafe { (api.tensor_release)(h) };
    }
}

impl Clone for Tensor {
    /// A new owned handle to the same tensor.
    fn clone(&self) -> Tensor {
        let r = host()
            // SAFETY: `self.h` is live.
            .map(|api| unsafe { (api.tensor_retain)(self.h) })
            .unwrap_or(OpalTensor(std::ptr::null_mut()));
        Tensor {
            h: r,
            owned: !r.0.is_null(),
            info: self.info,
        }
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        if self.owned {
            release(self.h);
        }
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor(sizes={:?}, dtype={:?}, device={:?})",
            self.sizes(),
            self.dtype(),
            self.device()
        )
    }
}
