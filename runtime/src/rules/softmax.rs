//! The softmax family's argument rules (`_softmax`, `_log_softmax` and their
//! `_backward_data` ops), shared by the CPU and Meta kernels: the wrapped `dim`,
//! the result's dtype (`half_to_float` turns a float16 input into a float32
//! result) and the backward's matching sizes. Each op's rule takes the schema's
//! arguments and returns them checked; both backends' YAML entries read
//! `rule | kernel`, and the `out=` forms (whose `out` must have the result's
//! dtype) are derived.
//!
//! Owns: these checks and their errors. Must not: allocate tensors, read their
//! data, or refuse what only one backend cannot compute (the CPU kernels refuse
//! `half_to_float`, as PyTorch's CPU kernels do).

use crate::{DType, OpalError, Result, Tensor};

/// `_softmax`'s or `_log_softmax`'s arguments, checked.
#[derive(Clone, Debug)]
pub struct Softmax<'a> {
    /// `self`.
    pub input: &'a Tensor,
    /// `dim`, wrapped (0 for a 0-d input).
    pub dim: usize,
    /// `half_to_float`.
    pub half_to_float: bool,
    /// The result's dtype: float32 with `half_to_float`, else the input's.
    pub dtype: DType,
}

fn forward<'a>(op: &str, input: &'a Tensor, dim: i64, half_to_float: bool) -> Result<Softmax<'a>> {
    super::check_defined(op, &[input])?;
    let dim = crate::tensor::wrap_dim(op, dim, input.dim())?;
    let dtype = match (half_to_float, input.dtype()) {
        (false, d) => d,
        (true, DType::F16) => DType::F32,
        (true, _) => {
            return Err(OpalError::msg(format!(
                "{op}: conversion is supported for Half type only"
            )))
        }
    };
    if !(dtype.is_floating_point() || dtype.is_complex()) {
        return Err(OpalError::msg(format!(
            "{op}: \"{op}\" not implemented for '{}'",
            dtype.name()
        )));
    }
    Ok(Softmax {
        input,
        dim,
        half_to_float,
        dtype,
    })
}

/// The rule of `_softmax` (and of its `out=` form).
pub fn _softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Result<Softmax<'_>> {
    forward("_softmax", self_, dim, half_to_float)
}

/// The rule of `_log_softmax` (and of its `out=` form).
pub fn _log_softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Result<Softmax<'_>> {
    forward("_log_softmax", self_, dim, half_to_float)
}

/// `_softmax_backward_data`'s or `_log_softmax_backward_data`'s arguments, checked.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct SoftmaxBackward<'a> {
    pub grad_output: &'a Tensor,
    pub output: &'a Tensor,
    /// `dim`, wrapped.
    pub dim: usize,
    /// The forward input's dtype: the gradient's.
    pub input_dtype: DType,
}

fn backward<'a>(
    op: &str,
    grad_output: &'a Tensor,
    output: &'a Tensor,
    dim: i64,
    input_dtype: DType,
) -> Result<SoftmaxBackward<'a>> {
    super::check_defined(op, &[grad_output, output])?;
    if grad_output.sizes() != output.sizes() {
        return Err(OpalError::shape(format!(
            "{op}: grad_output of shape {:?} does not match output of shape {:?}",
            grad_output.sizes(),
            output.sizes()
        )));
    }
    let dim = crate::tensor::wrap_dim(op, dim, grad_output.dim())?;
    Ok(SoftmaxBackward {
        grad_output,
        output,
        dim,
        input_dtype,
    })
}

/// The rule of `_softmax_backward_data` (and of its `out=` form).
pub fn _softmax_backward_data<'a>(
    grad_output: &'a Tensor,
    output: &'a Tensor,
    dim: i64,
    input_dtype: DType,
) -> Result<SoftmaxBackward<'a>> {
    backward(
        "_softmax_backward_data",
        grad_output,
        output,
        dim,
        input_dtype,
    )
}

/// The rule of `_log_softmax_backward_data` (and of its `out=` form).
pub fn _log_softmax_backward_data<'a>(
    grad_output: &'a Tensor,
    output: &'a Tensor,
    dim: i64,
    input_dtype: DType,
) -> Result<SoftmaxBackward<'a>> {
    backward(
        "_log_softmax_backward_data",
        grad_output,
        output,
        dim,
        input_dtype,
    )
}
