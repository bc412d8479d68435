//! Backward formulas of matrix products (`mm`'s two operands).
//!
//! Owns: these formulas. Must not: record graph nodes.

use super::maybe_multiply;
use crate::error::Result;
use crate::{ops, Layout, Scalar, Tensor};

pub fn mm_mat1_backward(
    grad: &Tensor,
    mat2: &Tensor,
    sizes: &[i64],
    strides: &[i64],
    _layout: Layout,
    alpha: &Scalar,
) -> Result<Tensor> {
    if column_major(sizes, strides) {
        // mat1 is a transposed matrix: give its gradient the same layout, so that
        // the gradient comes out of the transpose's backward contiguous.
        return maybe_multiply(&ops::t(&ops::mm(mat2, &ops::t(grad)?)?)?, alpha);
    }
    maybe_multiply(&ops::mm(grad, &ops::t(mat2)?)?, alpha)
}

pub fn mm_mat2_backward(
    grad: &Tensor,
    mat1: &Tensor,
    sizes: &[i64],
    strides: &[i64],
    _layout: Layout,
    alpha: &Scalar,
) -> Result<Tensor> {
    if column_major(sizes, strides) {
        // mat2 is a transposed matrix (a linear layer's `weight.t()`): the same
        // product, computed transposed, has mat2's layout, so the weight's gradient
        // comes out of the transpose's backward contiguous.
        return maybe_multiply(&ops::t(&ops::mm(&ops::t(grad)?, mat1)?)?, alpha);
    }
    maybe_multiply(&ops::mm(&ops::t(mat1)?, grad)?, alpha)
}

/// True when a 2-d matrix of `sizes` and `strides` is stored column by column (a
/// transposed contiguous matrix) and not also row by row.
fn column_major(sizes: &[i64], strides: &[i64]) -> bool {
    matches!((sizes, strides), ([r, c], [1, cs]) if *r > 1 && *c > 1 && cs == r)
}
