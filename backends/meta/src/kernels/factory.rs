//! Meta kernels of factory ops (`zeros`, `ones`, `full`, `arange`, `linspace`,
//! `eye`, `rand`, `randn`) and `*_like` ops: sizes and dtype from the arguments,
//! including the dtype PyTorch infers from scalar arguments.
//!
//! Owns: factory dtype inference and `arange`'s length rule. Must not: fill data
//! (meta tensors have none) or serve a `device` other than meta.

use super::view::{check_target, strides_for_format};
use super::{check_inputs, meta_device, new_contiguous};
use crate::shape::fail;
use crate::shape::geometry::check_sizes;
use opal::dtype::{default_complex_dtype, default_dtype};
use opal::{DType, Device, Layout, MemoryFormat, Result, Scalar, Tensor};

fn factory(
    op: &str,
    size: &[i64],
    dtype: DType,
    layout: Option<Layout>,
    device: Option<Device>,
) -> Result<Tensor> {
    check_target(op, layout, device)?;
    check_sizes(op, size)?;
    new_contiguous(size, dtype)
}

/// The dtype a scalar fill value implies when none is requested.
pub fn scalar_default_dtype(s: &Scalar) -> DType {
    match s {
        Scalar::Bool(_) => DType::Bool,
        Scalar::Int(_) => DType::I64,
        Scalar::Float(_) => default_dtype(),
        Scalar::Complex(..) => default_complex_dtype(),
    }
}

/// `empty.memory_format`: sizes and dtype only; `memory_format` picks the strides.
pub fn empty_memory_format(
    size: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    const OP: &str = "empty.memory_format";
    let t = factory(
        OP,
        size,
        dtype.unwrap_or_else(default_dtype),
        layout,
        device,
    )?;
    match memory_format {
        None | Some(MemoryFormat::Contiguous) => Ok(t),
        Some(MemoryFormat::Preserve) => Err(fail(
            OP,
            "memory format Preserve needs an input tensor; empty has none",
        )),
        Some(format) => {
            let strides = strides_for_format(OP, &t, Some(format))?;
            Tensor::empty_strided(size, &strides, t.dtype(), meta_device())
        }
    }
}

/// `zeros`.
pub fn zeros(
    size: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    factory(
        "zeros",
        size,
        dtype.unwrap_or_else(default_dtype),
        layout,
        device,
    )
}

/// `ones`.
pub fn ones(
    size: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    factory(
        "ones",
        size,
        dtype.unwrap_or_else(default_dtype),
        layout,
        device,
    )
}

/// `full`: without a dtype, the fill value's kind decides (bool, int64, float).
pub fn full(
    size: &[i64],
    fill_value: &Scalar,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    factory(
        "full",
        size,
        dtype.unwrap_or_else(|| scalar_default_dtype(fill_value)),
        layout,
        device,
    )
}

/// `eye`: an `n x n` matrix.
pub fn eye(
    n: i64,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    if n < 0 {
        return Err(fail(
            "eye",
            format!("n must be greater or equal to 0, got {n}"),
        ));
    }
    factory(
        "eye",
        &[n, n],
        dtype.unwrap_or_else(default_dtype),
        layout,
        device,
    )
}

fn random(
    op: &str,
    size: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
) -> Result<Tensor> {
    let d = dtype.unwrap_or_else(default_dtype);
    if !(d.is_floating_point() || d.is_complex()) {
        return Err(fail(op, format!("not implemented for '{}'", d.name())));
    }
    factory(op, size, d, layout, device)
}

/// `rand`: floating dtypes only.
pub fn rand(
    size: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    random("rand", size, dtype, layout, device)
}

/// `randn`.
pub fn randn(
    size: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    random("randn", size, dtype, layout, device)
}

/// Number of elements of `arange(start, end, step)` in `dtype`: exact integer
/// arithmetic for int64 with integer bounds, else computed in double precision.
pub fn arange_len(start: &Scalar, end: &Scalar, step: &Scalar, dtype: DType) -> Result<i64> {
    let op = "arange";
    let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
    if st == 0.0 {
        return Err(fail(op, "step must be nonzero"));
    }
    if !s.is_finite() || !e.is_finite() {
        return Err(fail(op, format!("unsupported range: {s} -> {e}")));
    }
    if !((st > 0.0 && e >= s) || (st < 0.0 && e <= s)) {
        return Err(fail(
            op,
            "upper bound and larger bound inconsistent with step sign",
        ));
    }
    let all_int = [start, end, step].iter().all(|x| x.is_integral());
    let len = if dtype.is_integral(true) && all_int {
        // In i128, where no int64 bounds overflow: ceil((end - start) / step).
        let (s, e, st) = (
            start.to_i64() as i128,
            end.to_i64() as i128,
            step.to_i64() as i128,
        );
        let span = e - s;
        let n = (span / st + i128::from(span % st != 0)).max(0);
        i64::try_from(n).map_err(|_| fail(op, format!("invalid size, possible overflow: {n}")))?
    } else {
        let n = ((e - s) / st).ceil();
        if !(0.0..=(i64::MAX as f64)).contains(&n) {
            return Err(fail(op, format!("invalid size, possible overflow: {n}")));
        }
        n as i64
    };
    Ok(len)
}

/// `arange.start_step`: int64 for integer bounds, the default float otherwise.
#[allow(clippy::too_many_arguments)]
pub fn arange_start_step(
    start: &Scalar,
    end: &Scalar,
    step: &Scalar,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    let d = dtype.unwrap_or_else(|| {
        if [start, end, step].iter().all(|x| x.is_integral()) {
            DType::I64
        } else {
            default_dtype()
        }
    });
    let n = arange_len(start, end, step, d)?;
    factory("arange", &[n], d, layout, device)
}

/// `linspace`: `steps` points, the default float dtype unless requested.
#[allow(clippy::too_many_arguments)]
pub fn linspace(
    _start: &Scalar,
    _end: &Scalar,
    steps: i64,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    if steps < 0 {
        return Err(fail("linspace", "number of steps must be non-negative"));
    }
    factory(
        "linspace",
        &[steps],
        dtype.unwrap_or_else(default_dtype),
        layout,
        device,
    )
}

fn like(
    op: &str,
    self_: &Tensor,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    check_inputs(op, &[self_])?;
    check_target(op, layout, device)?;
    let strides = strides_for_format(op, self_, memory_format)?;
    Tensor::empty_strided(
        self_.sizes(),
        &strides,
        dtype.unwrap_or(self_.dtype()),
        meta_device(),
    )
}

/// `zeros_like`: `self`'s sizes, dtype and (by default) layout.
#[allow(clippy::too_many_arguments)]
pub fn zeros_like(
    self_: &Tensor,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    like("zeros_like", self_, dtype, layout, device, memory_format)
}

/// `ones_like`.
#[allow(clippy::too_many_arguments)]
pub fn ones_like(
    self_: &Tensor,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    like("ones_like", self_, dtype, layout, device, memory_format)
}

/// `full_like`: the dtype is `self`'s unless requested (not the fill value's).
#[allow(clippy::too_many_arguments)]
pub fn full_like(
    self_: &Tensor,
    _fill_value: &Scalar,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    like("full_like", self_, dtype, layout, device, memory_format)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arange_lengths() {
        let (i, f) = (Scalar::Int, Scalar::Float);
        assert_eq!(arange_len(&i(0), &i(8), &i(1), DType::I64).unwrap(), 8);
        assert_eq!(arange_len(&i(1), &i(10), &i(3), DType::I64).unwrap(), 3);
        assert_eq!(arange_len(&i(10), &i(0), &i(-3), DType::I64).unwrap(), 4);
        assert_eq!(
            arange_len(&f(0.0), &f(1.0), &f(0.1), DType::F32).unwrap(),
            10
        );
        assert!(arange_len(&i(0), &i(5), &i(0), DType::I64).is_err());
        assert!(arange_len(&i(5), &i(0), &i(1), DType::I64).is_err());
    }

    #[test]
    fn fill_values_pick_dtypes() {
        assert_eq!(scalar_default_dtype(&Scalar::Bool(true)), DType::Bool);
        assert_eq!(scalar_default_dtype(&Scalar::Int(3)), DType::I64);
        assert_eq!(scalar_default_dtype(&Scalar::Float(0.5)), DType::F32);
    }
}
