//! Meta kernel of `empty_strided`: a meta tensor with the given sizes and strides.
//!
//! Owns: this factory's device. Must not: check its arguments
//! (`opal::rules::factory`) or lay out memory itself.

use super::meta_device;
use super::view::check_target;
use opal::rules::factory::EmptyStrided;
use opal::{Result, Tensor};

/// `empty_strided`.
pub fn empty_strided(e: EmptyStrided) -> Result<Tensor> {
    check_target("empty_strided", None, e.device)?;
    Tensor::empty_strided(e.size, e.stride, e.dtype, meta_device())
}
