//! Meta kernel of `empty_strided`: a meta tensor with the given sizes and strides.
//!
//! Owns: this factory's argument checks. Must not: lay out memory itself (the
//! runtime's `Tensor::empty_strided` checks the geometry).

use super::meta_device;
use super::view::check_target;
use opal::dtype::default_dtype;
use opal::{DType, Device, Layout, Result, Tensor};

/// `empty_strided`.
pub fn empty_strided(
    size: &[i64],
    stride: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    const OP: &str = "empty_strided";
    check_target(OP, layout, device)?;
    opal::rules::geometry::check_strided_args(OP, size, stride)?;
    Tensor::empty_strided(
        size,
        stride,
        dtype.unwrap_or_else(default_dtype),
        meta_device(),
    )
}
