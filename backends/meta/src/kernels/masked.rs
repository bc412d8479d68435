//! Meta kernels of the mask- and index-driven writes and of `nonzero`:
//! `masked_scatter` (+ in-place), `index_put` (+ in-place) and `nonzero` (+ out=),
//! which refuses meta tensors: its output length is the number of non-zero
//! elements, a value meta tensors do not have (PyTorch's meta tensors refuse it too).
//!
//! Owns: these ops' dtype and shape checks on meta tensors. Must not: restate
//! `index.Tensor`'s result-shape rule (`shape::index::index_sizes`).

use super::{check_inputs, finish_inplace, new_contiguous};
use crate::shape::fail;
use crate::shape::index::{index_sizes, IndexEntry};
use opal::{DType, Result, Tensor};

fn data_dependent(op: &str) -> opal::OpalError {
    fail(
        op,
        "the output's length is the number of non-zero elements of the input, which a \
         meta tensor (no data) cannot know",
    )
}

/// `nonzero`: refused (a data-dependent output shape).
pub fn nonzero(self_: &Tensor) -> Result<Tensor> {
    check_inputs("nonzero", &[self_])?;
    Err(data_dependent("nonzero"))
}

/// `nonzero.out`: refused, as `nonzero`.
pub fn nonzero_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    check_inputs("nonzero.out", &[self_, out])?;
    Err(data_dependent("nonzero.out"))
}

fn masked_scatter_checks(op: &str, self_: &Tensor, mask: &Tensor, source: &Tensor) -> Result<()> {
    check_inputs(op, &[self_, mask, source])?;
    opal::rules::indexing::check_masked_scatter(op, self_.dtype(), mask.dtype(), source.dtype())
}

/// `masked_scatter`: `self` and `mask` broadcast together, `self`'s dtype.
pub fn masked_scatter(self_: &Tensor, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
    const OP: &str = "masked_scatter";
    masked_scatter_checks(OP, self_, mask, source)?;
    let sizes = opal::rules::broadcast_shapes(OP, &[self_.sizes(), mask.sizes()])?;
    new_contiguous(&sizes, self_.dtype())
}

/// `masked_scatter_`: the mask must broadcast to `self`.
pub fn masked_scatter_(self_: &Tensor, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
    finish_inplace(
        "masked_scatter_",
        &masked_scatter(self_, mask, source)?,
        self_,
    )
}

/// `index_put`: `self`'s sizes and dtype; `values` must have `self`'s dtype and,
/// when no boolean mask makes the indexing result's length data-dependent,
/// broadcast to that result.
pub fn index_put(
    self_: &Tensor,
    indices: &[Option<Tensor>],
    values: &Tensor,
    _accumulate: bool,
) -> Result<Tensor> {
    const OP: &str = "index_put";
    check_inputs(OP, &[self_, values])?;
    check_inputs(OP, &indices.iter().flatten().collect::<Vec<_>>())?;
    opal::rules::indexing::check_index_put_dtypes(OP, self_.dtype(), values.dtype())?;
    if indices.iter().all(Option::is_none) {
        return Err(fail(OP, "expected at least one index tensor, got none"));
    }
    let entries: Vec<IndexEntry<'_>> = indices
        .iter()
        .map(|t| match t {
            None => IndexEntry::Full,
            Some(t) if matches!(t.dtype(), DType::Bool | DType::U8) => IndexEntry::Mask,
            Some(t) => IndexEntry::Int(t.sizes()),
        })
        .collect();
    if !entries.iter().any(|e| matches!(e, IndexEntry::Mask)) {
        let result = index_sizes(OP, self_.sizes(), &entries)?;
        let b = opal::rules::broadcast_shapes(OP, &[values.sizes(), &result])?;
        if b != result {
            return Err(opal::rules::indexing::index_put_shape_mismatch(
                OP,
                values.sizes(),
                &result,
            ));
        }
    }
    new_contiguous(self_.sizes(), self_.dtype())
}

/// `index_put_`.
pub fn index_put_(
    self_: &Tensor,
    indices: &[Option<Tensor>],
    values: &Tensor,
    accumulate: bool,
) -> Result<Tensor> {
    index_put(self_, indices, values, accumulate)?;
    Ok(self_.clone())
}
