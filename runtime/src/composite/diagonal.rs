//! The view `diagonal`: arithmetic on sizes, strides and the storage offset
//! ([`crate::rules::geometry::diagonal_geometry`]), the same on every backend, so one
//! kernel serves CPU, Meta and out-of-tree devices. The result shares `self`'s
//! storage, as PyTorch's view does.
//!
//! Owns: this kernel. Must not: touch tensor data (a view never copies).

use crate::dispatch::DispatchKeySet;
use crate::error::Result;
use crate::rules::geometry::diagonal_geometry;
use crate::Tensor;

/// `diagonal`: the diagonal of the `(dim1, dim2)` matrices of `self`, `offset`
/// above (positive) or below (negative) the main one, as a new last dim.
pub(super) fn diagonal(
    _ks: DispatchKeySet,
    self_: &Tensor,
    offset: i64,
    dim1: i64,
    dim2: i64,
) -> Result<Tensor> {
    let (sizes, strides, start) = diagonal_geometry(
        "diagonal",
        self_.sizes(),
        self_.strides(),
        self_.storage_offset(),
        (offset, dim1, dim2),
    )?;
    self_.as_strided(&sizes, &strides, start)
}
