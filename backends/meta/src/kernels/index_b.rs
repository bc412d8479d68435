//! Meta kernels of the copies, scatters and data checks of the core opset:
//! `copy`, `_local_scalar_dense`, `_assert_async.msg`, `scatter.value`,
//! `scatter_reduce.two`, with `out=` and in-place forms.
//!
//! Owns: their dtype and layout choices. Must not: compute sizes inline
//! (`shape::index`, `opal::rules`).

use super::{check_inputs, inplace_variants, new_strided};
use crate::shape::fail;
use crate::shape::geometry::preserve_strides;
use crate::shape::index::check_scatter;
use opal::rules::view::PickScatter;
use opal::{Result, Scalar, Tensor};

/// A result laid out like `self_` (dense, `self_`'s dim order).
fn like(self_: &Tensor) -> Result<Tensor> {
    new_strided(
        self_.sizes(),
        &preserve_strides(self_.sizes(), self_.strides()),
        self_.dtype(),
    )
}

/// `copy`: `self_`'s geometry and dtype; `src` must broadcast to `self_`'s sizes.
pub fn copy(self_: &Tensor, src: &Tensor, _non_blocking: bool) -> Result<Tensor> {
    const OP: &str = "copy";
    check_inputs(OP, &[self_, src])?;
    let b = opal::rules::broadcast_shapes(OP, &[self_.sizes(), src.sizes()])?;
    if b != self_.sizes() {
        return Err(fail(
            OP,
            format!(
                "argument 'src' of sizes {:?} cannot be broadcast to self's sizes {:?}",
                src.sizes(),
                self_.sizes()
            ),
        ));
    }
    like(self_)
}

/// `_local_scalar_dense`: a meta tensor has no value to read.
pub fn _local_scalar_dense(self_: &Tensor) -> Result<Scalar> {
    check_inputs("_local_scalar_dense", &[self_])?;
    Err(fail(
        "_local_scalar_dense",
        "cannot read the value of argument 'self': meta tensors hold no data",
    ))
}

/// `_assert_async.msg`: nothing to check without data (PyTorch's meta kernel also
/// passes).
pub fn _assert_async_msg(self_: &Tensor, _assert_msg: &str) -> Result<()> {
    check_inputs("_assert_async", &[self_])
}

/// `scatter.value`: the index must fit `self_` outside `dim`.
pub fn scatter_value(self_: &Tensor, dim: i64, index: &Tensor, _value: &Scalar) -> Result<Tensor> {
    const OP: &str = "scatter";
    check_inputs(OP, &[self_, index])?;
    super::index::check_scatter_index_dtype(OP, index)?;
    check_scatter(OP, self_.sizes(), dim, index.sizes(), index.sizes())?;
    like(self_)
}

/// `scatter_reduce.two`: as `scatter.src`, with a known reduction name.
pub fn scatter_reduce_two(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: &str,
    _include_self: bool,
) -> Result<Tensor> {
    const OP: &str = "scatter_reduce";
    opal::rules::scatter_reduce_kind(OP, reduce)?;
    super::index::scatter_like(OP, self_, dim, index, src)
}

/// `slice_scatter`, `select_scatter`: a result like `self`.
pub fn scatter_pick(s: PickScatter) -> Result<Tensor> {
    check_inputs("scatter_pick", &[s.pick.input, s.src])?;
    like(s.pick.input)
}

inplace_variants! {
    scatter_value_ = "scatter_.value" from scatter_value(dim: i64, index: &Tensor, value: &Scalar);
    scatter_reduce_two_ = "scatter_reduce_.two" from scatter_reduce_two(dim: i64, index: &Tensor, src: &Tensor, reduce: &str, include_self: bool);
}
