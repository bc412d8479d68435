//! Argument rules of the random factories the CPU and Meta kernels share:
//! `randperm`'s `n` against what its dtype can hold. [`randperm`] and
//! [`randperm_generator`] take the schema's arguments and return a [`Randperm`],
//! from which both backends' kernels work (`rule | kernel` in their YAMLs); each
//! backend checks `layout` and `device` against itself.
//!
//! Owns: these checks and their errors (PyTorch's). Must not: draw numbers.

use crate::{DType, Device, Generator, Layout, OpalError, Result};

/// A checked `randperm`.
pub struct Randperm<'a> {
    /// The permutation's length.
    pub n: i64,
    /// The generator to draw from (the device's default when `None`).
    pub generator: Option<&'a Generator>,
    /// The result's dtype (int64 unless requested).
    pub dtype: DType,
    /// The requested layout, for the backend to check.
    pub layout: Option<Layout>,
    /// The requested device, for the backend to check.
    pub device: Option<Device>,
    /// `pin_memory`.
    pub pin_memory: Option<bool>,
}

/// The rule of `randperm.generator`: [`check_randperm`] in the requested dtype.
pub fn randperm_generator(
    n: i64,
    generator: Option<&Generator>,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Randperm<'_>> {
    let dtype = dtype.unwrap_or(DType::I64);
    check_randperm("randperm", n, dtype)?;
    Ok(Randperm {
        n,
        generator,
        dtype,
        layout,
        device,
        pin_memory,
    })
}

/// The rule of `randperm`: [`randperm_generator`] with the default generator.
pub fn randperm<'a>(
    n: i64,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Randperm<'a>> {
    randperm_generator(n, None, dtype, layout, device, pin_memory)
}

/// `randperm(n, dtype)`: `n` non-negative, every value `0..n` exact in `dtype`
/// (integers hold `n - 1`; f16, f32 and f64 count exactly up to `2^(mantissa+1)+1`;
/// bf16 is not checked, as in PyTorch); bool and complex are refused.
pub fn check_randperm(op: &str, n: i64, dtype: DType) -> Result<()> {
    if n < 0 {
        return Err(OpalError::msg(format!(
            "{op}: Trying to create tensor with negative dimension {n}: [{n}]"
        )));
    }
    if dtype == DType::Bool || dtype.is_complex() {
        return Err(OpalError::msg(format!(
            "{op}: \"randperm\" not implemented for '{dtype}'"
        )));
    }
    let top = n.saturating_sub(1);
    let int_max = match dtype {
        DType::U8 => Some(u8::MAX as i64),
        DType::I8 => Some(i8::MAX as i64),
        DType::I16 => Some(i16::MAX as i64),
        DType::I32 => Some(i32::MAX as i64),
        _ => None,
    };
    if let Some(max) = int_max {
        if top > max {
            return Err(OpalError::msg(format!(
                "{op}: value cannot be converted to type {dtype} without overflow (n = {n})"
            )));
        }
    }
    let float_max = match dtype {
        DType::F16 => Some((1i64 << 11) + 1),
        DType::F32 => Some((1i64 << 24) + 1),
        DType::F64 => Some((1i64 << 53) + 1),
        _ => None,
    };
    if let Some(max) = float_max {
        if n > max {
            return Err(OpalError::msg(format!(
                "{op}: n cannot be greater than {max} for {dtype} type."
            )));
        }
    }
    Ok(())
}
