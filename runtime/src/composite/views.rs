//! View composites of the core opset: `alias`, `as_strided`, `squeeze.dims` and
//! `split_with_sizes`. Each is arithmetic on sizes, strides and the storage offset,
//! the same on every backend, so one kernel serves CPU, Meta and out-of-tree devices;
//! the result shares `self`'s storage, as PyTorch's views do.
//!
//! Owns: these kernels. Must not: touch tensor data (a view never copies).

use super::wrap_dim;
use crate::dispatch::DispatchKeySet;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::Tensor;

/// `alias`: a view of all of `self` (same sizes, strides and offset).
pub(super) fn alias(_ks: DispatchKeySet, self_: &Tensor) -> Result<Tensor> {
    self_.as_strided(self_.sizes(), self_.strides(), self_.storage_offset())
}

/// `as_strided`: a view of `self`'s storage with the given geometry (`self`'s own
/// offset when none is given). Sizes and strides must be non-negative and of one
/// length, and every element must lie inside the storage: checked by
/// [`Tensor::as_strided`].
pub(super) fn as_strided(
    _ks: DispatchKeySet,
    self_: &Tensor,
    size: &[i64],
    stride: &[i64],
    storage_offset: Option<i64>,
) -> Result<Tensor> {
    if size.len() != stride.len() {
        return Err(OpalError::msg(format!(
            "as_strided: mismatch in length of strides and shape: {} sizes ({size:?}), {} \
             strides ({stride:?})",
            size.len(),
            stride.len()
        )));
    }
    if let Some(s) = size.iter().find(|&&s| s < 0) {
        return Err(OpalError::msg(format!(
            "as_strided: negative size {s} in {size:?}"
        )));
    }
    if let Some(s) = stride.iter().find(|&&s| s < 0) {
        return Err(OpalError::msg(format!(
            "as_strided: negative strides are not supported, got {s} in {stride:?}"
        )));
    }
    let offset = storage_offset.unwrap_or_else(|| self_.storage_offset());
    if offset < 0 {
        return Err(OpalError::msg(format!(
            "as_strided: storage_offset must be non-negative, got {offset}"
        )));
    }
    self_.as_strided(size, stride, offset)
}

/// `squeeze.dims`: removes each listed dim whose size is 1 (others stay). A 0-dim
/// tensor takes dims 0 and -1; a dim listed twice is an error, as in PyTorch.
pub(super) fn squeeze_dims(_ks: DispatchKeySet, self_: &Tensor, dim: &[i64]) -> Result<Tensor> {
    let nd = self_.dim();
    let mut drop = vec![false; nd.max(1)];
    for &d in dim {
        let w = wrap_dim("squeeze", d, nd)?;
        if std::mem::replace(&mut drop[w], true) {
            return Err(OpalError::msg(format!(
                "squeeze: dim {w} appears multiple times in the list of dims {dim:?}"
            )));
        }
    }
    let (mut sizes, mut strides) = (Vec::with_capacity(nd), Vec::with_capacity(nd));
    for (i, (&s, &st)) in self_.sizes().iter().zip(self_.strides()).enumerate() {
        if !(drop[i] && s == 1) {
            sizes.push(s);
            strides.push(st);
        }
    }
    self_.as_strided(&sizes, &strides, self_.storage_offset())
}

/// `split_with_sizes`: consecutive views along `dim` of the given lengths, which
/// must be non-negative and add up to the dim's size.
pub(super) fn split_with_sizes(
    _ks: DispatchKeySet,
    self_: &Tensor,
    split_sizes: &[i64],
    dim: i64,
) -> Result<Vec<Tensor>> {
    if self_.dim() == 0 {
        return Err(OpalError::msg(
            "split_with_sizes: expects at least a 1-dimensional tensor",
        ));
    }
    let d = wrap_dim("split_with_sizes", dim, self_.dim())?;
    let size = self_.sizes()[d];
    let mut total: i64 = 0;
    for &s in split_sizes {
        if s < 0 {
            return Err(OpalError::msg(format!(
                "split_with_sizes: split_sizes must be non-negative, but got split_sizes={split_sizes:?}"
            )));
        }
        total = total.saturating_add(s);
    }
    if total != size {
        return Err(OpalError::msg(format!(
            "split_with_sizes: expects split_sizes to sum exactly to {size} (input tensor's size at \
             dimension {d}), but got split_sizes={split_sizes:?}"
        )));
    }
    let mut start = 0;
    split_sizes
        .iter()
        .map(|&len| {
            let piece = ops::slice_tensor::call(self_, d as i64, Some(start), Some(start + len), 1);
            start += len;
            piece
        })
        .collect()
}
