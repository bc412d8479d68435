//! Argument rules of the random factories the CPU and Meta kernels share:
//! `randperm`'s `n` against what its dtype can hold.
//!
//! Owns: these checks and their errors (PyTorch's). Must not: draw numbers.

use crate::{DType, OpalError, Result};

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
