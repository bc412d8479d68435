//! `empty_strided`: an uninitialised CPU tensor with the given sizes and strides.
//!
//! Owns: this factory's option checks. Must not: lay out memory itself (the
//! runtime's `Tensor::empty_strided` checks the geometry and sizes the storage).

use super::{check_options, pinned_if};
use crate::nn::io::in_op;
use opal::{DType, Device, Layout, Result, Tensor};

/// `empty_strided`: sizes and strides as given (overlapping strides allowed, as in
/// PyTorch), the default float dtype when none is requested.
pub fn empty_strided(
    size: &[i64],
    stride: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    const OP: &str = "empty_strided";
    check_options(layout, device, OP)?;
    opal::rules::geometry::check_strided_args(OP, size, stride)?;
    let dtype = dtype.unwrap_or_else(opal::dtype::default_dtype);
    let t = Tensor::empty_strided(size, stride, dtype, Device::cpu()).map_err(in_op(OP))?;
    pinned_if(t, pin_memory, OP)
}
