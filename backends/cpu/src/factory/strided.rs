//! `empty_strided`: an uninitialised CPU tensor with the given sizes and strides.
//!
//! Owns: this factory's device. Must not: check its arguments
//! (`opal::rules::factory`) or lay out memory itself (the runtime's
//! `Tensor::empty_strided` sizes the storage).

use super::{check_options, pinned_if};
use crate::nn::io::in_op;
use opal::rules::factory::EmptyStrided;
use opal::{Device, Result, Tensor};

/// `empty_strided`: sizes and strides as given (overlapping strides allowed, as in
/// PyTorch), the default float dtype when none is requested.
pub fn empty_strided(e: EmptyStrided) -> Result<Tensor> {
    const OP: &str = "empty_strided";
    check_options(None, e.device, OP)?;
    let t = Tensor::empty_strided(e.size, e.stride, e.dtype, Device::cpu()).map_err(in_op(OP))?;
    pinned_if(t, e.pin_memory, OP)
}
