//! Meta kernels of `randperm` and its generator / `out=` forms: a `[n]` tensor of
//! the requested dtype (int64 by default).
//!
//! Owns: nothing beyond wiring. Must not: restate `randperm`'s argument rules
//! (`opal::rules::random`).

use super::view::check_target;
use super::{check_out_tensor, new_contiguous};
use opal::rules::random::check_randperm;
use opal::{DType, Device, Generator, Layout, Result, Tensor};

/// `randperm.generator`.
#[allow(clippy::too_many_arguments)]
pub fn randperm_generator(
    n: i64,
    _generator: Option<&Generator>,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    const OP: &str = "randperm";
    check_target(OP, layout, device)?;
    let dt = dtype.unwrap_or(DType::I64);
    check_randperm(OP, n, dt)?;
    new_contiguous(&[n], dt)
}

/// `randperm`.
pub fn randperm(
    n: i64,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    randperm_generator(n, None, dtype, layout, device, pin_memory)
}

/// `randperm.generator_out`: `[n]` in `out`'s dtype.
pub fn randperm_generator_out(
    n: i64,
    _generator: Option<&Generator>,
    out: &Tensor,
) -> Result<Tensor> {
    const OP: &str = "randperm.generator_out";
    check_randperm(OP, n, out.dtype())?;
    check_out_tensor(OP, &[n], out.dtype(), out)?;
    Ok(out.clone())
}

/// `randperm.out`.
pub fn randperm_out(n: i64, out: &Tensor) -> Result<Tensor> {
    randperm_generator_out(n, None, out)
}
