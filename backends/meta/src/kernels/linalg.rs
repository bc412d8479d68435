//! Meta kernels of matrix products: `mm`, `bmm`, `matmul`, `addmm`, `baddbmm`,
//! `dot` and `linear` with their `out=` and in-place forms. Products do not promote:
//! operands share one dtype, results are contiguous.
//!
//! Owns: wiring `shape::linalg` to meta tensors. Must not: compute sizes inline.

use super::{check_inputs, inplace_variants, new_contiguous};
use crate::shape::linalg::{
    addmm_sizes, baddbmm_sizes, bmm_sizes, dot_sizes, linear_sizes, matmul_sizes, mm_sizes,
    same_dtype,
};
use opal::{Result, Scalar, Tensor};

fn product(
    op: &str,
    tensors: &[&Tensor],
    sizes: impl FnOnce() -> Result<Vec<i64>>,
) -> Result<Tensor> {
    check_inputs(op, tensors)?;
    let dtypes: Vec<_> = tensors.iter().map(|t| t.dtype()).collect();
    let d = same_dtype(op, &dtypes)?;
    new_contiguous(&sizes()?, d)
}

/// `mm`.
pub fn mm(self_: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    product("mm", &[self_, mat2], || {
        mm_sizes("mm", self_.sizes(), mat2.sizes())
    })
}

/// `bmm`.
pub fn bmm(self_: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    product("bmm", &[self_, mat2], || {
        bmm_sizes("bmm", self_.sizes(), mat2.sizes())
    })
}

/// `matmul`: vectors are promoted to matrices and batch dims broadcast.
pub fn matmul(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    product("matmul", &[self_, other], || {
        matmul_sizes("matmul", self_.sizes(), other.sizes())
    })
}

/// `addmm`: `self` broadcasts to the product.
pub fn addmm(
    self_: &Tensor,
    mat1: &Tensor,
    mat2: &Tensor,
    _beta: &Scalar,
    _alpha: &Scalar,
) -> Result<Tensor> {
    product("addmm", &[self_, mat1, mat2], || {
        addmm_sizes("addmm", self_.sizes(), mat1.sizes(), mat2.sizes())
    })
}

/// `baddbmm`.
pub fn baddbmm(
    self_: &Tensor,
    batch1: &Tensor,
    batch2: &Tensor,
    _beta: &Scalar,
    _alpha: &Scalar,
) -> Result<Tensor> {
    product("baddbmm", &[self_, batch1, batch2], || {
        baddbmm_sizes("baddbmm", self_.sizes(), batch1.sizes(), batch2.sizes())
    })
}

/// `dot`: a zero-dim result.
pub fn dot(self_: &Tensor, tensor: &Tensor) -> Result<Tensor> {
    product("dot", &[self_, tensor], || {
        dot_sizes("dot", self_.sizes(), tensor.sizes())
    })
}

/// `linear`: `input @ weight.T (+ bias)`.
pub fn linear(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let mut ts = vec![input, weight];
    ts.extend(bias);
    product("linear", &ts, || {
        linear_sizes(
            "linear",
            input.sizes(),
            weight.sizes(),
            bias.map(|b| b.sizes()),
        )
    })
}

inplace_variants! {
    addmm_ = "addmm_" from addmm(mat1: &Tensor, mat2: &Tensor, beta: &Scalar, alpha: &Scalar);
    baddbmm_ = "baddbmm_" from baddbmm(batch1: &Tensor, batch2: &Tensor, beta: &Scalar, alpha: &Scalar);
}
