//! Meta kernels of `native_dropout` and `native_dropout_backward` and their autogen
//! out= forms: the output takes the input's sizes and dtype (contiguous, as the CPU
//! kernel writes it), the mask the same sizes as bool.
//!
//! Owns: these four kernels. Must not: hold the argument rules (`shape::dropout`).

use super::{check_inputs, new_contiguous, pointwise};
use crate::shape::dropout::{check_dropout, check_float};
use opal::{DType, Result, Scalar, Tensor};

/// `native_dropout`: `(output, mask)`.
pub fn native_dropout(input: &Tensor, p: f64, _train: Option<bool>) -> Result<(Tensor, Tensor)> {
    const OP: &str = "native_dropout";
    check_inputs(OP, &[input])?;
    check_dropout(OP, p, input.dtype())?;
    Ok((
        new_contiguous(input.sizes(), input.dtype())?,
        new_contiguous(input.sizes(), DType::Bool)?,
    ))
}

/// `native_dropout_backward`: `grad_output * mask * scale` (broadcasting).
pub fn native_dropout_backward(grad_output: &Tensor, mask: &Tensor, scale: f64) -> Result<Tensor> {
    const OP: &str = "native_dropout_backward";
    check_inputs(OP, &[grad_output, mask])?;
    check_float(OP, grad_output.dtype())?;
    let masked = pointwise::mul_tensor(grad_output, mask)?;
    pointwise::mul_scalar(&masked, &Scalar::Float(scale))
}
