//! Meta kernels of joining, indexing and rearranging ops: `cat`, `stack`,
//! `index_select`, `gather`, `scatter`, `scatter_add`, advanced `index`, `flip`,
//! `roll`, `repeat`, `constant_pad_nd`, `tril` / `triu`, with `out=` and in-place
//! forms.
//!
//! Owns: dtype and layout choices of these ops. Must not: compute sizes inline
//! (`shape::index`).

use super::pointwise::common_dtype;
use super::{check_inputs, inplace_variants, new_contiguous, new_strided};
use crate::shape::fail;
use crate::shape::geometry::{format_strides, prefers_channels_last, preserve_strides};
use crate::shape::index::{
    cat_sizes, check_flip, check_index_dtype, check_roll, check_scatter, check_triangle,
    gather_sizes, index_select_sizes, index_sizes, pad_sizes, repeat_sizes, stack_sizes,
    IndexEntry,
};
use opal::{DType, Result, Scalar, Tensor};

const INDEX_DTYPES: [DType; 2] = [DType::I64, DType::I32];

/// `cat`: promoted dtype; channels-last when every input is channels-last.
pub fn cat(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    let refs: Vec<&Tensor> = tensors.iter().collect();
    check_inputs("cat", &refs)?;
    let shapes: Vec<&[i64]> = tensors.iter().map(|t| t.sizes()).collect();
    let sizes = cat_sizes("cat", &shapes, dim)?;
    let d = common_dtype(&refs, &[])?;
    // All-channels-last inputs give a channels-last result, like PyTorch's `cat`.
    let all_cl = !tensors.is_empty()
        && tensors
            .iter()
            .all(|t| prefers_channels_last(t.sizes(), t.strides()));
    if all_cl {
        return new_strided(&sizes, &format_strides(&sizes, true), d);
    }
    new_contiguous(&sizes, d)
}

/// `cat.out`: element-wise casting rules apply to `out`.
pub fn cat_out(tensors: &[Tensor], dim: i64, out: &Tensor) -> Result<Tensor> {
    super::finish_out("cat.out", &cat(tensors, dim)?, out)
}

/// `stack`: a new dim joining equally shaped tensors.
pub fn stack(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    let refs: Vec<&Tensor> = tensors.iter().collect();
    check_inputs("stack", &refs)?;
    let shapes: Vec<&[i64]> = tensors.iter().map(|t| t.sizes()).collect();
    let sizes = stack_sizes("stack", &shapes, dim)?;
    new_contiguous(&sizes, common_dtype(&refs, &[])?)
}

/// `stack.out`.
pub fn stack_out(tensors: &[Tensor], dim: i64, out: &Tensor) -> Result<Tensor> {
    super::finish_out("stack.out", &stack(tensors, dim)?, out)
}

/// `index_select`.
pub fn index_select(self_: &Tensor, dim: i64, index: &Tensor) -> Result<Tensor> {
    let op = "index_select";
    check_inputs(op, &[self_, index])?;
    check_index_dtype(op, "index", index.dtype(), &INDEX_DTYPES)?;
    new_contiguous(
        &index_select_sizes(op, self_.sizes(), dim, index.sizes())?,
        self_.dtype(),
    )
}

/// A gather or scatter index holds int64 or int32, unless it is empty (PyTorch
/// checks the dtype only of an index with elements).
pub(super) fn check_scatter_index_dtype(op: &str, index: &Tensor) -> Result<()> {
    if index.numel() == 0 {
        return Ok(());
    }
    check_index_dtype(op, "index", index.dtype(), &INDEX_DTYPES)
}

/// `gather`: the result has the index's sizes.
pub fn gather(self_: &Tensor, dim: i64, index: &Tensor, _sparse_grad: bool) -> Result<Tensor> {
    let op = "gather";
    check_inputs(op, &[self_, index])?;
    check_scatter_index_dtype(op, index)?;
    new_contiguous(
        &gather_sizes(op, self_.sizes(), dim, index.sizes())?,
        self_.dtype(),
    )
}

pub(super) fn scatter_like(
    op: &str,
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
) -> Result<Tensor> {
    check_inputs(op, &[self_, index, src])?;
    check_scatter_index_dtype(op, index)?;
    if src.dtype() != self_.dtype() {
        return Err(fail(
            op,
            format!(
                "expected self.dtype to be equal to src.dtype, got {} and {}",
                self_.dtype().name(),
                src.dtype().name()
            ),
        ));
    }
    check_scatter(op, self_.sizes(), dim, index.sizes(), src.sizes())?;
    new_strided(
        self_.sizes(),
        &preserve_strides(self_.sizes(), self_.strides()),
        self_.dtype(),
    )
}

/// `scatter.src`: a copy of `self` with `src` written at `index`.
pub fn scatter_src(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    scatter_like("scatter", self_, dim, index, src)
}

/// `scatter_add`.
pub fn scatter_add(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    scatter_like("scatter_add", self_, dim, index, src)
}

/// `index.Tensor`: advanced indexing with integer index tensors. Boolean masks give
/// a data-dependent shape, which meta tensors cannot know: that is an error.
pub fn index_tensor(self_: &Tensor, indices: &[Option<Tensor>]) -> Result<Tensor> {
    let op = "index";
    check_inputs(op, &[self_])?;
    check_inputs(op, &indices.iter().flatten().collect::<Vec<_>>())?;
    let mut entries = Vec::with_capacity(indices.len());
    for t in indices {
        entries.push(match t {
            None => IndexEntry::Full,
            Some(t) if matches!(t.dtype(), DType::Bool | DType::U8) => IndexEntry::Mask,
            Some(t) => {
                check_index_dtype(op, "indices", t.dtype(), &INDEX_DTYPES)?;
                IndexEntry::Int(t.sizes())
            }
        });
    }
    new_contiguous(&index_sizes(op, self_.sizes(), &entries)?, self_.dtype())
}

/// `flip`: same sizes, the input's dim order kept.
pub fn flip(self_: &Tensor, dims: &[i64]) -> Result<Tensor> {
    check_inputs("flip", &[self_])?;
    check_flip("flip", self_.dim(), dims)?;
    new_strided(
        self_.sizes(),
        &preserve_strides(self_.sizes(), self_.strides()),
        self_.dtype(),
    )
}

/// `roll`: same sizes, contiguous.
pub fn roll(self_: &Tensor, shifts: &[i64], dims: &[i64]) -> Result<Tensor> {
    check_inputs("roll", &[self_])?;
    check_roll("roll", self_.dim(), shifts, dims)?;
    new_contiguous(self_.sizes(), self_.dtype())
}

/// `repeat`.
pub fn repeat(self_: &Tensor, repeats: &[i64]) -> Result<Tensor> {
    check_inputs("repeat", &[self_])?;
    new_contiguous(
        &repeat_sizes("repeat", self_.sizes(), repeats)?,
        self_.dtype(),
    )
}

/// `constant_pad_nd`: laid out as the input suggests (channels-last stays).
pub fn constant_pad_nd(self_: &Tensor, pad: &[i64], _value: &Scalar) -> Result<Tensor> {
    check_inputs("constant_pad_nd", &[self_])?;
    let sizes = pad_sizes("constant_pad_nd", self_.sizes(), pad)?;
    let cl = sizes.len() == self_.dim() && prefers_channels_last(self_.sizes(), self_.strides());
    let strides = format_strides(&sizes, cl);
    new_strided(&sizes, &strides, self_.dtype())
}

fn triangle(op: &str, self_: &Tensor) -> Result<Tensor> {
    check_inputs(op, &[self_])?;
    check_triangle(op, self_.dim())?;
    new_contiguous(self_.sizes(), self_.dtype())
}

/// `tril`.
pub fn tril(self_: &Tensor, _diagonal: i64) -> Result<Tensor> {
    triangle("tril", self_)
}

/// `triu`.
pub fn triu(self_: &Tensor, _diagonal: i64) -> Result<Tensor> {
    triangle("triu", self_)
}

inplace_variants! {
    scatter_src_ = "scatter_.src" from scatter_src(dim: i64, index: &Tensor, src: &Tensor);
    scatter_add_ = "scatter_add_" from scatter_add(dim: i64, index: &Tensor, src: &Tensor);
    tril_ = "tril_" from tril(diagonal: i64);
    triu_ = "triu_" from triu(diagonal: i64);
}
