//! Meta kernels of reductions and scans: sums, means, products, extrema with and
//! without indices, variance / std, logsumexp, all / any, vector norms, cumsum,
//! softmax and its backward, topk and sort, with their `out=` forms.
//!
//! Owns: each reduction's dtype choice and `out=` dtype rule (reductions compute
//! in `out`'s dtype when no dtype is requested). Must not: compute reduced sizes
//! itself (`shape::reduce`).

use super::{
    check_inputs, check_out_tensor, finish_inplace, new_contiguous, new_strided, out_variants,
};
use crate::shape::elementwise::dense_strides_like;
use crate::shape::fail;
use crate::shape::geometry::wrap_dim;
use crate::shape::index::topk_sizes;
use crate::shape::promote::{accumulate_dtype, check_out_exact, float_reduction_dtype, to_float};
use crate::shape::reduce::{
    arg_reduction_sizes, check_nonempty_dims, reduced_sizes, reduction_mask, single_dim_sizes,
};
use opal::rules::softmax::{Softmax, SoftmaxBackward};
use opal::{DType, Result, Scalar, Tensor};

/// A contiguous reduction result of `self` over `dims` (`None`/empty = all).
pub fn reduction(
    op: &str,
    self_: &Tensor,
    dims: Option<&[i64]>,
    keepdim: bool,
    dtype: DType,
    need_nonempty: bool,
) -> Result<Tensor> {
    check_inputs(op, &[self_])?;
    let mask = reduction_mask(op, self_.sizes(), dims)?;
    if need_nonempty {
        check_nonempty_dims(op, self_.sizes(), &mask)?;
    }
    new_contiguous(&reduced_sizes(self_.sizes(), &mask, keepdim), dtype)
}

/// `out=` of a reduction with a `dtype` argument: with no dtype the result is
/// computed in `out`'s dtype, with one `out` must have it.
pub(super) fn reduction_out(
    op: &str,
    result: &Tensor,
    requested: Option<DType>,
    out: &Tensor,
) -> Result<Tensor> {
    if let Some(d) = requested {
        check_out_exact(op, d, out.dtype())?;
    }
    check_out_tensor(op, result.sizes(), out.dtype(), out)?;
    Ok(out.clone())
}

/// `sum`.
pub fn sum(self_: &Tensor, dtype: Option<DType>) -> Result<Tensor> {
    reduction(
        "sum",
        self_,
        None,
        false,
        accumulate_dtype(self_.dtype(), dtype),
        false,
    )
}

/// `sum.dim_IntList`.
pub fn sum_dim_intlist(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    reduction(
        "sum",
        self_,
        dim,
        keepdim,
        accumulate_dtype(self_.dtype(), dtype),
        false,
    )
}

/// `sum.IntList_out`.
pub fn sum_intlist_out(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<DType>,
    out: &Tensor,
) -> Result<Tensor> {
    reduction_out(
        "sum.IntList_out",
        &sum_dim_intlist(self_, dim, keepdim, dtype)?,
        dtype,
        out,
    )
}

/// `mean.dim`: floating or complex input (or an explicit dtype) only.
pub fn mean_dim(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    let d = float_reduction_dtype("mean", self_.dtype(), dtype)?;
    reduction("mean", self_, dim, keepdim, d, false)
}

/// `mean.out`.
pub fn mean_out(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<DType>,
    out: &Tensor,
) -> Result<Tensor> {
    let d = float_reduction_dtype("mean.out", self_.dtype(), dtype.or(Some(out.dtype())))?;
    let r = reduction("mean.out", self_, dim, keepdim, d, false)?;
    reduction_out("mean.out", &r, dtype, out)
}

/// `prod`.
pub fn prod(self_: &Tensor, dtype: Option<DType>) -> Result<Tensor> {
    reduction(
        "prod",
        self_,
        None,
        false,
        accumulate_dtype(self_.dtype(), dtype),
        false,
    )
}

/// `amax`: an empty `dim` list reduces everything; empty dims cannot be reduced.
pub fn amax(self_: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
    reduction("amax", self_, Some(dim), keepdim, self_.dtype(), true)
}

/// `amin`.
pub fn amin(self_: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
    reduction("amin", self_, Some(dim), keepdim, self_.dtype(), true)
}

fn values_indices(op: &str, self_: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    check_inputs(op, &[self_])?;
    let sizes = single_dim_sizes(op, self_.sizes(), dim, keepdim, true)?;
    Ok((
        new_contiguous(&sizes, self_.dtype())?,
        new_contiguous(&sizes, DType::I64)?,
    ))
}

/// `max.dim`: values and int64 indices.
pub fn max_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    values_indices("max", self_, dim, keepdim)
}

/// `min.dim`.
pub fn min_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    values_indices("min", self_, dim, keepdim)
}

/// `argmax`: no dim means the flattened input.
pub fn argmax(self_: &Tensor, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
    check_inputs("argmax", &[self_])?;
    new_contiguous(
        &arg_reduction_sizes("argmax", self_.sizes(), dim, keepdim)?,
        DType::I64,
    )
}

/// `argmin`.
pub fn argmin(self_: &Tensor, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
    check_inputs("argmin", &[self_])?;
    new_contiguous(
        &arg_reduction_sizes("argmin", self_.sizes(), dim, keepdim)?,
        DType::I64,
    )
}

fn var_like(op: &str, self_: &Tensor, dim: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    let d = self_.dtype();
    if !(d.is_floating_point() || d.is_complex()) {
        return Err(fail(
            op,
            format!(
                "only supports floating point and complex dtypes, got {}",
                d.name()
            ),
        ));
    }
    reduction(op, self_, dim, keepdim, d.to_real(), false)
}

/// `var.correction`: complex input gives its real dtype.
pub fn var_correction(
    self_: &Tensor,
    dim: Option<&[i64]>,
    _correction: Option<&Scalar>,
    keepdim: bool,
) -> Result<Tensor> {
    var_like("var", self_, dim, keepdim)
}

/// `std.correction`.
pub fn std_correction(
    self_: &Tensor,
    dim: Option<&[i64]>,
    _correction: Option<&Scalar>,
    keepdim: bool,
) -> Result<Tensor> {
    var_like("std", self_, dim, keepdim)
}

/// `logsumexp`: integer input gives the default float dtype.
pub fn logsumexp(self_: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
    reduction(
        "logsumexp",
        self_,
        Some(dim),
        keepdim,
        to_float(self_.dtype()),
        false,
    )
}

fn bool_reduction(op: &str, self_: &Tensor, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    // uint8 input keeps uint8 (a legacy PyTorch rule); everything else gives bool.
    let d = if self_.dtype() == DType::U8 {
        DType::U8
    } else {
        DType::Bool
    };
    reduction(op, self_, dims, keepdim, d, false)
}

/// `all`.
pub fn all(self_: &Tensor) -> Result<Tensor> {
    bool_reduction("all", self_, None, false)
}

/// `any`.
pub fn any(self_: &Tensor) -> Result<Tensor> {
    bool_reduction("any", self_, None, false)
}

/// `any.dim`.
pub fn any_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<Tensor> {
    bool_reduction("any.dim", self_, Some(&[dim]), keepdim)
}

/// `linalg_vector_norm`: a real floating result; norms without an identity
/// (`ord` negative or infinite) cannot reduce empty dims.
pub fn linalg_vector_norm(
    self_: &Tensor,
    ord: &Scalar,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    let op = "linalg_vector_norm";
    let d = float_reduction_dtype(op, self_.dtype(), dtype)?;
    let o = ord.to_f64();
    let need_nonempty = o < 0.0 || o.is_infinite();
    reduction(op, self_, dim, keepdim, d.to_real(), need_nonempty)
}

/// `cumsum`: same sizes, accumulating dtype, contiguous.
pub fn cumsum(self_: &Tensor, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
    check_inputs("cumsum", &[self_])?;
    wrap_dim("cumsum", dim, self_.dim())?;
    new_contiguous(self_.sizes(), accumulate_dtype(self_.dtype(), dtype))
}

/// `cumsum_`.
pub fn cumsum_(self_: &Tensor, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
    finish_inplace("cumsum_", &cumsum(self_, dim, dtype)?, self_)
}

/// `cumsum.out`.
pub fn cumsum_out(self_: &Tensor, dim: i64, dtype: Option<DType>, out: &Tensor) -> Result<Tensor> {
    reduction_out("cumsum.out", &cumsum(self_, dim, dtype)?, dtype, out)
}

/// `topk`: `dim` shrinks to `k`; values and int64 indices.
pub fn topk(
    self_: &Tensor,
    k: i64,
    dim: i64,
    _largest: bool,
    _sorted: bool,
) -> Result<(Tensor, Tensor)> {
    check_inputs("topk", &[self_])?;
    let sizes = topk_sizes("topk", self_.sizes(), k, dim)?;
    Ok((
        new_contiguous(&sizes, self_.dtype())?,
        new_contiguous(&sizes, DType::I64)?,
    ))
}

/// `sort`: results keep the input's dim order (dense strides like `self`).
pub fn sort(self_: &Tensor, dim: i64, _descending: bool) -> Result<(Tensor, Tensor)> {
    check_inputs("sort", &[self_])?;
    wrap_dim("sort", dim, self_.dim())?;
    let strides = dense_strides_like(self_.sizes(), &[self_.strides()]);
    Ok((
        new_strided(self_.sizes(), &strides, self_.dtype())?,
        new_strided(self_.sizes(), &strides, DType::I64)?,
    ))
}

/// `_softmax`, `_log_softmax`: the rule's dtype, contiguous.
pub fn softmax(s: Softmax) -> Result<Tensor> {
    check_inputs("softmax", &[s.input])?;
    new_contiguous(s.input.sizes(), s.dtype)
}

/// `_softmax_backward_data`, `_log_softmax_backward_data`: the gradient has the
/// forward input's dtype.
pub fn softmax_backward(b: SoftmaxBackward) -> Result<Tensor> {
    check_inputs("softmax_backward", &[b.grad_output, b.output])?;
    new_contiguous(b.grad_output.sizes(), b.input_dtype)
}

out_variants! {
    logsumexp_out = "logsumexp.out" from logsumexp(self_: &Tensor, dim: &[i64], keepdim: bool);
    all_all_out = "all.all_out" from all(self_: &Tensor);
    any_all_out = "any.all_out" from any(self_: &Tensor);
    any_out = "any.out" from any_dim(self_: &Tensor, dim: i64, keepdim: bool);
}
