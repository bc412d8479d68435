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
use opal::dtype::default_dtype;
use opal::rules::factory::{Arange, Filled};
use opal::{DType, Device, Layout, MemoryFormat, Result, Scalar, Tensor};

/// The dtype a scalar fill value implies when none is requested (the rule's, for
/// backends that name it from here).
pub use opal::rules::factory::dtype_of_fill as scalar_default_dtype;

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

/// `zeros`, `ones`, `full`: the size and dtype `opal::rules::factory` chose.
pub fn filled(f: Filled) -> Result<Tensor> {
    factory(f.op, f.size, f.dtype, None, f.device)
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

/// `arange.start_step`: the dtype and length `opal::rules::factory` chose.
pub fn arange_start_step(a: Arange) -> Result<Tensor> {
    factory("arange", &[a.len], a.dtype, None, a.device)
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
