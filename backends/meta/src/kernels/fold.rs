//! Meta kernel of the sliding-block ops `col2im` and `im2col`, from the arguments
//! `opal::rules::fold` checked (`rule | kernel` in `backend.yaml`, as in the CPU
//! backend's).
//!
//! Owns: nothing but the allocation. Must not: check an argument or compute a
//! size (the rules do).

use super::{check_inputs, new_contiguous};
use opal::rules::fold::Fold;
use opal::{Result, Tensor};

/// `col2im` (`[N, C * kh * kw, L]` -> `[N, C, H, W]`) or `im2col` (the reverse),
/// batched or not: the input's dtype, contiguous.
pub fn fold(p: Fold) -> Result<Tensor> {
    check_inputs(p.op, &[p.input])?;
    new_contiguous(&p.shape, p.input.dtype())
}
