//! The reduction overloads of the core opset's last group: `mean` over every
//! element (with a `dtype=` only), `prod` over one dim, `any` over a list of dims,
//! with their `out=` forms.
//!
//! Owns: how each overload's arguments map onto the shared drivers of
//! [`super::sum`] (which dims, which identity). Must not: reduce anything itself.

use super::dim_mask;
use super::sum::{mean_impl, prod_impl, truth_over};
use crate::out::Dest;
use opal::{DType, Result, Tensor};

/// `mean`: the mean of every element (floating or complex input, or a `dtype=`).
pub fn mean(self_: &Tensor, dtype: Option<DType>) -> Result<Tensor> {
    mean_impl(self_, None, false, dtype, Dest::New, "mean")
}
/// `mean.dtype_out`.
pub fn mean_dtype_out(self_: &Tensor, dtype: Option<DType>, out: &Tensor) -> Result<Tensor> {
    mean_impl(self_, None, false, dtype, Dest::Out(out), "mean.dtype_out")
}

/// `prod.dim_int`: the product along `dim` (integers and bool in int64).
pub fn prod_dim_int(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    prod_impl(
        self_,
        Some(&[dim]),
        keepdim,
        dtype,
        Dest::New,
        "prod.dim_int",
    )
}
/// `prod.int_out`.
pub fn prod_int_out(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    dtype: Option<DType>,
    out: &Tensor,
) -> Result<Tensor> {
    prod_impl(
        self_,
        Some(&[dim]),
        keepdim,
        dtype,
        Dest::Out(out),
        "prod.int_out",
    )
}

/// `any.dims`' dims: `None` reduces every dim but, unlike `sum`'s, an empty list
/// reduces none (the result is `self != 0`).
fn any_dims_impl(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let mask = match dim {
        Some([]) => vec![false; self_.dim()],
        d => dim_mask(d, self_.dim(), op)?,
    };
    truth_over(self_, &mask, keepdim, false, dest, op)
}
/// `any.dims`: true where some element over `dim` is non-zero.
pub fn any_dims(self_: &Tensor, dim: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    any_dims_impl(self_, dim, keepdim, Dest::New, "any.dims")
}
/// `any.dims_out`.
pub fn any_dims_out(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    out: &Tensor,
) -> Result<Tensor> {
    any_dims_impl(self_, dim, keepdim, Dest::Out(out), "any.dims_out")
}
