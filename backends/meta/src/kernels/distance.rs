//! Meta kernels of the pairwise distances (`_cdist_forward`, `_pdist_forward` and
//! their backward ops): the inputs' dtype, shaped by the shared rules.
//!
//! Owns: nothing but the calls. Must not: restate a check or a shape
//! (`opal::rules::distance`).

use super::{check_inputs, new_contiguous};
use opal::rules::distance::{cdist_backward_shape, cdist_shape, pdist_backward_shape, pdist_shape};
use opal::{Result, Tensor};

/// `_cdist_forward`: `[B.., r1, r2]`.
pub fn _cdist_forward(
    x1: &Tensor,
    x2: &Tensor,
    p: f64,
    compute_mode: Option<i64>,
) -> Result<Tensor> {
    let op = "_cdist_forward";
    check_inputs(op, &[x1, x2])?;
    let shape = cdist_shape(
        op,
        (x1.sizes(), x1.dtype()),
        (x2.sizes(), x2.dtype()),
        p,
        compute_mode,
    )?;
    new_contiguous(&shape, x1.dtype())
}

/// `_cdist_backward`: `[B.., r1, c]`.
pub fn _cdist_backward(
    grad: &Tensor,
    x1: &Tensor,
    x2: &Tensor,
    p: f64,
    cdist: &Tensor,
) -> Result<Tensor> {
    let op = "_cdist_backward";
    check_inputs(op, &[grad, x1, x2, cdist])?;
    let (a, b) = ((x1.sizes(), x1.dtype()), (x2.sizes(), x2.dtype()));
    let shape = cdist_backward_shape(op, grad.sizes(), a, b, p, cdist.sizes())?;
    new_contiguous(&shape, x1.dtype())
}

/// `_pdist_forward`: `[n (n - 1) / 2]`.
pub fn _pdist_forward(self_: &Tensor, p: f64) -> Result<Tensor> {
    let op = "_pdist_forward";
    check_inputs(op, &[self_])?;
    let _ = p;
    new_contiguous(
        &pdist_shape(op, self_.sizes(), self_.dtype())?,
        self_.dtype(),
    )
}

/// `_pdist_backward`: `self`'s shape.
pub fn _pdist_backward(grad: &Tensor, self_: &Tensor, p: f64, pdist: &Tensor) -> Result<Tensor> {
    let op = "_pdist_backward";
    check_inputs(op, &[grad, self_, pdist])?;
    let _ = p;
    let shape = pdist_backward_shape(
        op,
        grad.sizes(),
        self_.sizes(),
        self_.dtype(),
        pdist.sizes(),
    )?;
    new_contiguous(&shape, self_.dtype())
}
