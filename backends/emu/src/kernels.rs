//! Emu's native kernels: the implementation of the generated `EmuKernels` trait
//! (see `emu.yaml`), computing on device memory through [`super::device`]. Cases a
//! kernel does not handle natively (dtype mixes, dtypes it does not compute in) are
//! handed to the CPU through the generated `fallback` helpers.
//!
//! This file is written once against the schemas `emu.yaml` lists or pins, and is
//! compiled unchanged against evolved native YAMLs by the evolution tests, so it
//! names the generated code and the device layer only as `super::generated` and
//! `super::device`.
//!
//! Owns: the kernels. Must not: register anything (the generated `register` does)
//! or read emu memory from the host.

use opal::autograd;
use opal::dispatch::{DispatchKey, DispatchKeySet};
use opal::{DType, Device, Layout, MemoryFormat, OpalError, Result, Scalar, Tensor};
use opal_meta::kernels::factory::scalar_default_dtype;

use super::device::{self, Binary};
use super::generated::{fallback, EmuKernels};

/// The `emu` backend's kernels.
pub struct Emu;

/// `_to_copy` between host and emu devices, and between emu devices, converting
/// the dtype on the device when asked.
pub fn to_copy(src: &Tensor, dtype: Option<DType>, to: Option<Device>) -> Result<Tensor> {
    let dt = dtype.unwrap_or(src.dtype());
    let target = to.unwrap_or(src.device());
    let src_emu = device::pool_of(src.device()).is_ok();
    let dst_emu = device::pool_of(target).is_ok();
    if src_emu && dst_emu {
        let dst = Tensor::empty(src.sizes(), dt, target)?;
        device::copy_device(src, &dst)?;
        Ok(dst)
    } else if src_emu && target.is_cpu() {
        if dt == src.dtype() {
            device::copy_to_host(src)
        } else {
            let tmp = Tensor::empty(src.sizes(), dt, src.device())?;
            device::copy_device(src, &tmp)?;
            device::copy_to_host(&tmp)
        }
    } else if dst_emu && src.device().is_cpu() {
        let tmp = Tensor::empty(src.sizes(), src.dtype(), target)?;
        device::copy_from_host(src, &tmp)?;
        if dt == src.dtype() {
            Ok(tmp)
        } else {
            let dst = Tensor::empty(src.sizes(), dt, target)?;
            device::copy_device(&tmp, &dst)?;
            Ok(dst)
        }
    } else {
        Err(OpalError::device(format!(
            "emu _to_copy: cannot copy from '{}' to '{target}'",
            src.device()
        )))
    }
}

/// `zeros` and `ones`: the integer `value`, in the default dtype unless given.
fn filled_with_int(
    size: &[i64],
    value: i64,
    dtype: Option<DType>,
    on: Option<Device>,
) -> Result<Tensor> {
    let dtype = dtype.unwrap_or_else(opal::dtype::default_dtype);
    full(size, &Scalar::Int(value), Some(dtype), on)
}

/// A new emu tensor of `size` filled with `value`.
pub fn full(
    size: &[i64],
    value: &Scalar,
    dtype: Option<DType>,
    on: Option<Device>,
) -> Result<Tensor> {
    let device = on.ok_or_else(|| OpalError::device("emu factory called without a device"))?;
    let t = Tensor::empty(
        size,
        dtype.unwrap_or_else(|| scalar_default_dtype(value)),
        device,
    )?;
    device::fill(&t, value)?;
    Ok(t)
}

/// `out = self (op) other` natively, or through the CPU when the kernel cannot.
fn binary_out(op: Binary, a: &Tensor, b: &Tensor, alpha: &Scalar, out: &Tensor) -> Result<bool> {
    device::binary(op, a, b, alpha, out)
}

impl EmuKernels for Emu {
    fn add_out(
        ks: DispatchKeySet,
        self_: &Tensor,
        other: &Tensor,
        alpha: &Scalar,
        out: &Tensor,
    ) -> Result<Tensor> {
        if binary_out(Binary::Add, self_, other, alpha, out)? {
            return Ok(out.clone());
        }
        fallback::add_out(ks, self_, other, alpha, out)
    }

    fn sub_out(
        ks: DispatchKeySet,
        self_: &Tensor,
        other: &Tensor,
        alpha: &Scalar,
        out: &Tensor,
    ) -> Result<Tensor> {
        if binary_out(Binary::Sub, self_, other, alpha, out)? {
            return Ok(out.clone());
        }
        fallback::sub_out(ks, self_, other, alpha, out)
    }

    fn mm_out(ks: DispatchKeySet, self_: &Tensor, mat2: &Tensor, out: &Tensor) -> Result<Tensor> {
        if device::mm(self_, mat2, out)? {
            return Ok(out.clone());
        }
        fallback::mm_out(ks, self_, mat2, out)
    }

    fn mul_out(ks: DispatchKeySet, self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
        if binary_out(Binary::Mul, self_, other, &Scalar::Int(1), out)? {
            return Ok(out.clone());
        }
        fallback::mul_out(ks, self_, other, out)
    }

    fn relu(ks: DispatchKeySet, self_: &Tensor) -> Result<Tensor> {
        let out = Tensor::empty(self_.sizes(), self_.dtype(), self_.device())?;
        if device::relu(self_, &out)? {
            return Ok(out);
        }
        fallback::relu(ks, self_)
    }

    /// emu differentiates `sigmoid` itself (`autograd:` in emu.yaml): the forward
    /// runs below the autograd keys, and its backward node (`EmuSigmoidBackward`)
    /// computes `grad * s * (1 - s)` from the saved result with `sigmoid_backward`.
    fn autograd_sigmoid(ks: DispatchKeySet, self_: &Tensor) -> Result<Tensor> {
        let out = opal::ops::sigmoid::redispatch(ks.below(DispatchKey::AutogradOther), self_)?;
        if !autograd::helpers::should_record(&[self_]) {
            return Ok(out);
        }
        let saved = autograd::SavedTensor::output(&out, "EmuSigmoidBackward", "result")?;
        autograd::record(
            "EmuSigmoidBackward",
            &[self_],
            &[&out],
            Box::new(move |grads| {
                let g = autograd::helpers::grad_at(grads, 0);
                Ok(vec![Some(opal::ops::sigmoid_backward(&g, &saved.get()?)?)])
            }),
        )?;
        Ok(out)
    }

    fn sum(ks: DispatchKeySet, self_: &Tensor) -> Result<Tensor> {
        // Integer sums are int64 in PyTorch; the device kernel sums in the input dtype,
        // so only f32, f64 and i64 inputs run here.
        if matches!(self_.dtype(), DType::F32 | DType::F64 | DType::I64) {
            let out = Tensor::empty(&[], self_.dtype(), self_.device())?;
            if device::sum_all(self_, &out)? {
                return Ok(out);
            }
        }
        fallback::sum(ks, self_)
    }

    fn _to_copy(
        _ks: DispatchKeySet,
        self_: &Tensor,
        dtype: Option<DType>,
        _layout: Option<Layout>,
        device: Option<Device>,
        _pin_memory: Option<bool>,
        _non_blocking: bool,
        _memory_format: Option<MemoryFormat>,
    ) -> Result<Tensor> {
        to_copy(self_, dtype, device)
    }

    fn view(_ks: DispatchKeySet, self_: &Tensor, size: &[i64]) -> Result<Tensor> {
        let numel = self_.numel();
        let known: i64 = size.iter().filter(|&&s| s != -1).product();
        let mut sizes = size.to_vec();
        if let Some(i) = size.iter().position(|&s| s == -1) {
            if known == 0 || numel % known != 0 {
                return Err(OpalError::shape(format!(
                    "emu view: shape {size:?} is invalid for input of size {numel}"
                )));
            }
            sizes[i] = numel / known;
        }
        if sizes.iter().product::<i64>() != numel {
            return Err(OpalError::shape(format!(
                "emu view: shape {size:?} is invalid for input of size {numel}"
            )));
        }
        if !self_.is_contiguous() {
            return Err(OpalError::shape(
                "emu view: the input is not contiguous; use reshape (which copies)".to_string(),
            ));
        }
        let mut strides = vec![1i64; sizes.len()];
        for i in (0..sizes.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * sizes[i + 1].max(1);
        }
        self_.as_strided(&sizes, &strides, self_.storage_offset())
    }

    fn full(
        _ks: DispatchKeySet,
        size: &[i64],
        fill_value: &Scalar,
        dtype: Option<DType>,
        _layout: Option<Layout>,
        device: Option<Device>,
        _pin_memory: Option<bool>,
    ) -> Result<Tensor> {
        full(size, fill_value, dtype, device)
    }

    fn zeros(
        _ks: DispatchKeySet,
        size: &[i64],
        dtype: Option<DType>,
        _layout: Option<Layout>,
        device: Option<Device>,
        _pin_memory: Option<bool>,
    ) -> Result<Tensor> {
        filled_with_int(size, 0, dtype, device)
    }

    fn ones(
        _ks: DispatchKeySet,
        size: &[i64],
        dtype: Option<DType>,
        _layout: Option<Layout>,
        device: Option<Device>,
        _pin_memory: Option<bool>,
    ) -> Result<Tensor> {
        filled_with_int(size, 1, dtype, device)
    }

    fn arange_start_step(
        _ks: DispatchKeySet,
        start: &Scalar,
        end: &Scalar,
        step: &Scalar,
        dtype: Option<DType>,
        _layout: Option<Layout>,
        device: Option<Device>,
        _pin_memory: Option<bool>,
    ) -> Result<Tensor> {
        let on = device.ok_or_else(|| OpalError::device("emu factory called without a device"))?;
        let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
        if st == 0.0 || !(e - s).is_finite() || (e - s) * st < 0.0 {
            return Err(OpalError::msg(format!(
                "emu arange: invalid range start={s}, end={e}, step={st}"
            )));
        }
        let n = ((e - s) / st).ceil() as i64;
        let ints = [start, end, step]
            .iter()
            .all(|v| matches!(v, Scalar::Int(_) | Scalar::Bool(_)));
        let dt = dtype.unwrap_or(if ints {
            DType::I64
        } else {
            opal::dtype::default_dtype()
        });
        let t = Tensor::empty(&[n], dt, on)?;
        device::iota(&t, start, step)?;
        Ok(t)
    }

    fn transfer_to_cpu(src: &Tensor) -> Result<Tensor> {
        device::copy_to_host(src)
    }

    fn transfer_from_cpu(src: &Tensor, dst: &Tensor) -> Result<()> {
        device::copy_from_host(src, dst)
    }
}
