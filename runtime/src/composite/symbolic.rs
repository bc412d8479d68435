//! Symbolic queries and graph assertions that exported graphs keep: `sym_size.int`,
//! `sym_stride.int`, `sym_numel`, `sym_storage_offset`, `sym_is_contiguous`,
//! `_assert_scalar`, `sym_constrain_range_for_size`, plus `fill.Scalar` (a
//! `full_like`). Opal's SymInt is a plain `i64`, so the queries read the tensor's
//! geometry and the assertions check concrete values.
//!
//! Owns: these kernels. Must not: read tensor data (geometry only; `fill` goes
//! through `full_like`).

use super::shape::is_contiguous_as;
use crate::dispatch::DispatchKeySet;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::{MemoryFormat, Scalar, Tensor};

/// A dim of `self_` for a query: scalars have none to ask about (PyTorch refuses
/// any dim of a 0-d tensor here, unlike reductions).
fn query_dim(op: &str, self_: &Tensor, dim: i64) -> Result<usize> {
    if self_.dim() == 0 {
        return Err(OpalError::msg(format!(
            "{op}: dimension specified as {dim} but tensor has no dimensions"
        )));
    }
    super::wrap_dim(op, dim, self_.dim())
}

/// `sym_size.int`: the size of dim `dim`.
pub(super) fn sym_size_int(_ks: DispatchKeySet, self_: &Tensor, dim: i64) -> Result<i64> {
    Ok(self_.sizes()[query_dim("sym_size", self_, dim)?])
}

/// `sym_stride.int`: the stride of dim `dim`, in elements.
pub(super) fn sym_stride_int(_ks: DispatchKeySet, self_: &Tensor, dim: i64) -> Result<i64> {
    Ok(self_.strides()[query_dim("sym_stride", self_, dim)?])
}

/// `sym_numel`: the element count.
pub(super) fn sym_numel(_ks: DispatchKeySet, self_: &Tensor) -> Result<i64> {
    Ok(self_.numel())
}

/// `sym_storage_offset`: the offset of the first element in its storage.
pub(super) fn sym_storage_offset(_ks: DispatchKeySet, self_: &Tensor) -> Result<i64> {
    Ok(self_.storage_offset())
}

/// `sym_is_contiguous`: whether `self_` is dense in `memory_format` (a format that
/// does not fit the tensor's rank answers false, as PyTorch's does).
pub(super) fn sym_is_contiguous(
    _ks: DispatchKeySet,
    self_: &Tensor,
    memory_format: MemoryFormat,
) -> Result<bool> {
    if memory_format == MemoryFormat::Preserve {
        return Err(OpalError::msg(
            "sym_is_contiguous: memory format Preserve is not a layout a tensor can be in",
        ));
    }
    Ok(is_contiguous_as(self_, memory_format))
}

/// `fill.Scalar`: a tensor like `self_` (dtype, layout, device) holding `value`.
pub(super) fn fill_scalar(_ks: DispatchKeySet, self_: &Tensor, value: &Scalar) -> Result<Tensor> {
    ops::full_like(self_, value)
}

/// `_assert_scalar`: an error carrying `assert_msg` when `self_` is false / zero.
pub(super) fn _assert_scalar(_ks: DispatchKeySet, self_: &Scalar, assert_msg: &str) -> Result<()> {
    if self_.to_bool() {
        Ok(())
    } else {
        Err(OpalError::msg(format!(
            "_assert_scalar: {assert_msg} (value {self_:?})"
        )))
    }
}

/// `sym_constrain_range_for_size`: `size` must be an integer in `[min, max]`, where
/// a size's range starts at 0 and `min` may not be negative.
pub(super) fn sym_constrain_range_for_size(
    _ks: DispatchKeySet,
    size: &Scalar,
    min: Option<i64>,
    max: Option<i64>,
) -> Result<()> {
    const OP: &str = "sym_constrain_range_for_size";
    let v = match size {
        Scalar::Int(v) => *v,
        Scalar::Bool(b) => *b as i64,
        other => {
            return Err(OpalError::msg(format!(
                "{OP}: argument 'size' must be an integer, got {other:?}"
            )))
        }
    };
    if let Some(m) = min.filter(|&m| m < 0) {
        return Err(OpalError::msg(format!(
            "{OP}: argument 'min' must be non-negative for a size, got {m}"
        )));
    }
    let (lo, hi) = (min.unwrap_or(0), max.unwrap_or(i64::MAX));
    if hi < lo {
        return Err(OpalError::msg(format!(
            "{OP}: max {hi} is smaller than min {lo}"
        )));
    }
    if v < lo || v > hi {
        return Err(OpalError::msg(format!(
            "{OP}: invalid value range for {v} between [{lo}, {hi}]"
        )));
    }
    Ok(())
}
