//! Moving a tensor's values to and from contiguous host buffers: what a
//! collective on a non-contiguous tensor, on a dtype that travels widened (f16,
//! bf16, bool), or on a device without its own communicator goes through.
//!
//! A device tensor is read and written through the device's registered transfer
//! (the one its CPU fallback uses), which runs on the device's current stream:
//! reading waits for the kernels queued before it, writing is queued before the
//! kernels that follow. So staged collectives are ordered with the device's work
//! without a device-wide synchronize.
//!
//! Owns: host staging. Must not: call an engine.

use opal::autograd::NoGradGuard;
use opal::tensor::KernelAccess;
use opal::{DType, DeviceType, OpalError, Result, Tensor};

/// True when `t` can be an engine buffer as it is: a contiguous CPU tensor of
/// dtype `dtype`.
pub(crate) fn usable_in_place(t: &Tensor, dtype: DType) -> bool {
    t.device().device_type() == DeviceType::Cpu && t.is_contiguous() && t.dtype() == dtype
}

/// `t`'s values as a contiguous CPU tensor of `dtype` (`t` itself when it already
/// is one).
pub(crate) fn to_host(t: &Tensor, dtype: DType) -> Result<Tensor> {
    let _ng = NoGradGuard::new();
    let host = if t.device().device_type() == DeviceType::Cpu {
        t.clone()
    } else {
        opal::fallback::transfer(t.device().device_type())?.to_cpu(t)?
    };
    let host = if host.dtype() == dtype {
        host
    } else {
        host.to_dtype(dtype)?
    };
    if host.is_contiguous() {
        Ok(host)
    } else {
        opal::ops::contiguous(&host)
    }
}

/// A new contiguous CPU tensor of `sizes` and `dtype`.
pub(crate) fn host_empty(sizes: &[i64], dtype: DType) -> Result<Tensor> {
    Tensor::empty(sizes, dtype, opal::Device::cpu())
}

/// Writes `src` (a contiguous CPU tensor with `dst`'s number of elements, any
/// dtype) into `dst` (any device, strides and dtype), converting the dtype.
pub(crate) fn write_back(src: &Tensor, dst: &Tensor) -> Result<()> {
    let _ng = NoGradGuard::new();
    let src = if src.dtype() == dst.dtype() {
        src.clone()
    } else {
        src.to_dtype(dst.dtype())?
    };
    let src = if src.sizes() == dst.sizes() {
        src
    } else {
        opal::ops::reshape(&src, dst.sizes())?
    };
    if dst.device().device_type() != DeviceType::Cpu {
        return opal::fallback::transfer(dst.device().device_type())?.from_cpu(&src, dst);
    }
    if src.is_same(dst) {
        return Ok(());
    }
    let bytes = src.to_bytes()?;
    scatter_bytes(dst, &bytes)
}

/// Writes `bytes` (the elements in logical order) into the CPU tensor `dst`.
fn scatter_bytes(dst: &Tensor, bytes: &[u8]) -> Result<()> {
    let es = dst.element_size();
    let n = dst.numel() as usize;
    if bytes.len() != n * es {
        return Err(OpalError::msg(format!(
            "distributed: {} bytes for a tensor of {n} elements of {es} bytes",
            bytes.len()
        )));
    }
    if n == 0 {
        return Ok(());
    }
    let (sizes, strides) = (dst.sizes().to_vec(), dst.strides().to_vec());
    KernelAccess::scoped([], [dst], |_, [base]| {
        let mut idx = vec![0i64; sizes.len()];
        for k in 0..n {
            let off: i64 = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
            // SAFETY: `base` is `dst`'s first element, borrowed exclusively by this
            // access; `idx` is a valid index of `dst`'s sizes, so `off` stays inside
            // the view (checked when the view was made); `bytes` has `n * es` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr().add(k * es),
                    base.offset(off as isize * es as isize),
                    es,
                );
            }
            for d in (0..sizes.len()).rev() {
                idx[d] += 1;
                if idx[d] < sizes[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        Ok(())
    })
}
