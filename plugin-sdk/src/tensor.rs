//! Tensor handles: [`Tensor`] over an [`OpalTensor`] the host counts, with its
//! metadata and borrowed data; [`DType`] and [`Device`] as the ABI codes them.
//!
//! Owns: the plugin-side view of tensors. Must not: free host memory itself (it
//! releases handles).

use crate::abi::{device_type as dt, dtype as dc, OpalHostApi, OpalTensor, OpalTensorArg};
use crate::abi::{OpalTensorInfo, TENSOR_INFO_SIZE_1_0};

/// This ABI's info size: a host's info this long has every field the SDK reads.
const INFO_SIZE: usize = std::mem::size_of::<OpalTensorInfo>();
use crate::{check, host, tensor_info, Error, Result};
use std::mem::MaybeUninit;

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
        #[cold]
        #[inline(never)]
        fn unknown(c: i64) -> Error {
            Error::msg(format!("unknown dtype code {c}"))
        }
        const fn of_code(c: i32) -> Option<DType> {
            Some(match c {
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
                _ => return None,
            })
        }
        // Indexed by code (kernels check their arguments' dtypes on every call,
        // and a lookup is shorter than the match); every code is below 16.
        const BY_CODE: [Option<DType>; 16] = {
            let mut t = [None; 16];
            let mut i = 0;
            while i < t.len() {
                t[i] = of_code(i as i32);
                i += 1;
            }
            t
        };
        match usize::try_from(c).ok().and_then(|i| BY_CODE.get(i)) {
            Some(Some(d)) => Ok(*d),
            _ => Err(unknown(c)),
        }
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
    /// The host's metadata, with the 1.3 fields (`numel`, `contiguous`) always
    /// valid: computed by [`complete`] when an older host left them out.
    info: OpalTensorInfo,
}

/// Fills the 1.3 fields of `info` from its sizes and strides when the host that
/// filled it is older (its `size` does not cover them), as a 1.3 host would, so
/// that the accessors read them alike from every host.
#[inline]
pub(crate) fn complete(info: &mut OpalTensorInfo) {
    #[cold]
    #[inline(never)]
    fn derive(info: &mut OpalTensorInfo) {
        let (numel, contiguous) = if info.defined == 0 {
            (0, false)
        } else {
            let (sizes, strides) = (sizes_of(info), strides_of(info));
            let mut n = 1i64;
            let mut contiguous = true;
            for (&size, &stride) in sizes.iter().zip(strides).rev() {
                if size != 1 && stride != n {
                    contiguous = false;
                }
                n = n.wrapping_mul(size);
            }
            (n, contiguous || n == 0)
        };
        info.numel = numel;
        info.contiguous = i32::from(contiguous);
        info.reserved = 0;
    }
    let end = std::mem::offset_of!(OpalTensorInfo, contiguous) + std::mem::size_of::<i32>();
    if !crate::abi::has_field(info.size, end) {
        derive(info);
    }
}

/// The sizes of a host's info.
#[inline]
fn sizes_of(info: &OpalTensorInfo) -> &[i64] {
    if info.ndim == 0 {
        return &[];
    }
    // SAFETY: the host's info arrays live as long as the handle and its geometry,
    // which outlive the info's borrow (see OpalTensorInfo).
    unsafe { std::slice::from_raw_parts(info.sizes, info.ndim) }
}

/// The strides of a host's info.
#[inline]
fn strides_of(info: &OpalTensorInfo) -> &[i64] {
    if info.ndim == 0 {
        return &[];
    }
    // SAFETY: as in `sizes_of`.
    unsafe { std::slice::from_raw_parts(info.strides, info.ndim) }
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
    /// the host, no call back to it). An older host's info is shorter than this
    /// ABI's: only its `size` bytes are read, and [`complete`] adds the rest.
    ///
    /// # Safety
    /// `a` is null or a host's argument valid for the call: a handle and an info
    /// whose first `size` bytes (its `size` field) are readable.
    #[inline(always)]
    pub(crate) unsafe fn from_arg(a: *const OpalTensorArg) -> Result<Tensor> {
        /// Every other case: an error, or `a`'s info (of an older host) completed
        /// in `buf`.
        ///
        /// # Safety
        /// As for `from_arg`.
        #[cold]
        #[inline(never)]
        unsafe fn other(
            a: *const OpalTensorArg,
            buf: &mut MaybeUninit<OpalTensorInfo>,
        ) -> Result<*const OpalTensorInfo> {
            if a.is_null() {
                return Err(Error::msg("null tensor argument"));
            }
            // SAFETY: per the contract the handle and the info's `size` are
            // readable (read in place: no reference to a struct an older host
            // made shorter).
            let (h, size) = unsafe { ((*a).handle, (*a).info.size) };
            if h.0.is_null() || size < TENSOR_INFO_SIZE_1_0 {
                return Err(Error::msg(format!(
                    "bad tensor argument (handle {:?}, info of {size} bytes)",
                    h.0
                )));
            }
            let info = buf.write(OpalTensorInfo::blank());
            // SAFETY: the host's info holds the 1.0 layout (checked above), and
            // `info` is larger. The copy brings the host's `size`, which
            // `complete` reads.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    std::ptr::addr_of!((*a).info).cast::<u8>(),
                    (info as *mut OpalTensorInfo).cast::<u8>(),
                    TENSOR_INFO_SIZE_1_0,
                )
            };
            complete(info);
            Ok(info)
        }
        // A current host's argument is tested first (one comparison of `size`);
        // either way the info is then copied once, from where it is, straight
        // into the tensor.
        let mut buf = MaybeUninit::uninit();
        // SAFETY: per the contract, a non-null `a` has a readable handle and `size`.
        let info =
            if a.is_null() || unsafe { (*a).handle.0.is_null() || (*a).info.size < INFO_SIZE } {
                // SAFETY: forwarded.
                unsafe { other(a, &mut buf) }?
            } else {
                // SAFETY: non-null.
                unsafe { std::ptr::addr_of!((*a).info) }
            };
        // SAFETY: `a` is a valid argument (checked), `info` a whole info: the
        // host's (of this ABI's size) or `buf`.
        Ok(unsafe {
            Tensor {
                h: (*a).handle,
                owned: false,
                info: info.read(),
            }
        })
    }

    /// The raw handle (still owned by `self`).
    #[inline]
    pub fn handle(&self) -> OpalTensor {
        self.h
    }

    /// A borrowed tensor of handle `h`, which the host lent for the current call
    /// (a raw kernel's argument), with its metadata from the host.
    ///
    /// # Safety
    /// `h` is a handle the host lent for a call that has not returned.
    pub unsafe fn borrowed(h: OpalTensor) -> Result<Tensor> {
        Tensor::from_handle(h, false)
    }

    /// Gives the handle up as an owned one, which the caller must hand to the host
    /// (a kernel's return) or release (`tensor_release`) exactly once; a borrowed
    /// handle is retained first.
    pub fn into_raw(self) -> Result<OpalTensor> {
        self.into_owned_handle()
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
        complete(&mut t.info);
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
        sizes_of(&self.info)
    }

    /// Strides in elements.
    #[inline]
    pub fn strides(&self) -> &[i64] {
        strides_of(&self.info)
    }

    /// Number of elements (0 for an undefined tensor).
    #[inline]
    pub fn numel(&self) -> i64 {
        self.info.numel
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

    /// True when row-major contiguous: every dimension of size other than 1 has
    /// the stride of the product of the sizes after it; a tensor without elements
    /// is contiguous, an undefined one is not (the host's answer, ABI 1.3).
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.info.contiguous != 0
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
        // As an unsigned number, a negative count (a malformed info) is above the
        // bound too, so one comparison refuses both.
        let most = isize::MAX as u64 / std::mem::size_of::<T>().max(1) as u64;
        let n = self.info.numel as u64;
        if self.info.contiguous == 0
            || self.info.element_size != std::mem::size_of::<T>()
            || n > most
        {
            return Err(Error::msg(
                "as_slice needs a contiguous tensor of a matching element size",
            ));
        }
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
    // Inline: a kernel's borrowed arguments then drop to nothing.
    #[inline]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{device_type, dtype};

    /// A host's argument for an f32 CPU tensor of `sizes`/`strides` over `data`,
    /// filled as a 1.3 host fills it.
    fn arg(sizes: &[i64], strides: &[i64], data: &mut [f32]) -> OpalTensorArg {
        let mut n = 1i64;
        let mut contiguous = true;
        for (&s, &st) in sizes.iter().zip(strides).rev() {
            contiguous &= s == 1 || st == n;
            n *= s;
        }
        OpalTensorArg {
            handle: OpalTensor(std::ptr::NonNull::<u8>::dangling().as_ptr().cast()),
            info: OpalTensorInfo {
                ndim: sizes.len(),
                sizes: sizes.as_ptr(),
                strides: strides.as_ptr(),
                dtype: dtype::F32,
                device_type: device_type::CPU,
                defined: 1,
                data: if n == 0 {
                    std::ptr::null_mut()
                } else {
                    data.as_mut_ptr().cast()
                },
                element_size: 4,
                numel: n,
                contiguous: i32::from(contiguous || n == 0),
                ..OpalTensorInfo::blank()
            },
        }
    }

    /// What the kernel-facing accessors answer.
    fn answers(t: &Tensor) -> (i64, bool, std::result::Result<Vec<f32>, String>) {
        // SAFETY: f32 host memory nobody writes during the test.
        let s = unsafe { t.as_slice::<f32>() };
        (
            t.numel(),
            t.is_contiguous(),
            s.map(<[f32]>::to_vec).map_err(|e| e.message),
        )
    }

    /// ABI 1.3: the SDK reads the element count and contiguity from a 1.3
    /// host's info; from an older host's shorter info (a `size` that does not
    /// cover them) it reads only the 1.0 layout and walks the dimensions, with
    /// the same answers, whatever lies past the host's struct.
    #[test]
    fn a_short_info_takes_the_walk_and_gives_the_same_answers() {
        let mut data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let cases: [(&[i64], &[i64]); 7] = [
            (&[2, 3], &[3, 1]),
            (&[3, 2], &[1, 3]),
            (&[1, 6], &[99, 1]),
            (&[6, 1], &[1, 7]),
            (&[2, 0], &[1, 1]),
            (&[], &[]),
            (&[6], &[1]),
        ];
        for (sizes, strides) in cases {
            let full = arg(sizes, strides, &mut data);
            let mut short = full;
            short.info.size = TENSOR_INFO_SIZE_1_0;
            // What an older host never wrote: garbage the walk must not read.
            short.info.numel = -5;
            short.info.contiguous = i32::from(full.info.contiguous == 0);
            // SAFETY: both are valid arguments for the test's duration.
            let (a, b) = unsafe { (Tensor::from_arg(&full), Tensor::from_arg(&short)) };
            let (a, b) = (a.unwrap(), b.unwrap());
            assert_eq!(
                answers(&a),
                answers(&b),
                "sizes {sizes:?} strides {strides:?}"
            );
            assert_eq!(a.numel(), full.info.numel);
            assert_eq!(a.is_contiguous(), full.info.contiguous != 0);
        }
        // An undefined tensor from an older host: no elements, not contiguous.
        let mut short = arg(&[], &[], &mut data);
        short.info = OpalTensorInfo {
            size: TENSOR_INFO_SIZE_1_0,
            numel: 7,
            contiguous: 1,
            ..OpalTensorInfo::blank()
        };
        // SAFETY: a valid argument for the test's duration.
        let t = unsafe { Tensor::from_arg(&short) }.unwrap();
        assert_eq!((t.numel(), t.is_contiguous()), (0, false));
    }

    /// Every dtype's code maps back to it (the lookup table covers them all);
    /// other codes are errors.
    #[test]
    fn dtype_codes_round_trip() {
        use DType::*;
        for d in [Bool, U8, I8, I16, I32, I64, F16, BF16, F32, F64, C64, C128] {
            assert_eq!(DType::from_code(i64::from(d.code())), Ok(d));
        }
        for c in [-1, 8, 12, 16, i64::MAX] {
            assert!(DType::from_code(c).is_err(), "{c}");
        }
    }

    /// Malformed arguments are refused: null, a null handle, an info shorter
    /// than the 1.0 layout, and (by `as_slice`) a negative element count.
    #[test]
    fn malformed_arguments_are_refused() {
        let mut data = [1.0f32];
        let good = arg(&[1], &[1], &mut data);
        // SAFETY: null is allowed.
        assert!(unsafe { Tensor::from_arg(std::ptr::null()) }.is_err());
        let mut a = good;
        a.handle = OpalTensor(std::ptr::null_mut());
        // SAFETY: a valid argument but for its handle.
        assert!(unsafe { Tensor::from_arg(&a) }.is_err());
        let mut a = good;
        a.info.size = TENSOR_INFO_SIZE_1_0 - 8;
        // SAFETY: readable for its whole size.
        let e = unsafe { Tensor::from_arg(&a) }.unwrap_err().message;
        assert!(e.contains("bad tensor argument"), "{e}");
        let mut a = good;
        a.info.numel = -1;
        // SAFETY: a valid argument for the test's duration.
        let t = unsafe { Tensor::from_arg(&a) }.unwrap();
        // SAFETY: as in `answers`.
        assert!(unsafe { t.as_slice::<f32>() }.is_err());
    }
}
