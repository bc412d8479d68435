//! Meta kernels of the pairwise distances (`_cdist_forward`, `_pdist_forward` and
//! their backward ops), from the arguments `opal::rules::distance` checked
//! (`rule | kernel` in `backend.yaml`, as in the CPU backend's).
//!
//! Owns: nothing but the allocations. Must not: check an argument or compute a
//! shape (the rules do).

use super::{check_inputs, new_contiguous};
use opal::rules::distance::{Distance, DistanceBackward};
use opal::{Result, Tensor};

/// `_cdist_forward` (`[B.., r1, r2]`) or `_pdist_forward` (`[n (n - 1) / 2]`).
pub fn distance(d: Distance) -> Result<Tensor> {
    check_inputs(d.op, &[d.x1, d.x2])?;
    new_contiguous(&d.shape, d.x1.dtype())
}

/// `_cdist_backward` (`[B.., r1, c]`) or `_pdist_backward` (`self`'s shape).
pub fn distance_backward(d: DistanceBackward) -> Result<Tensor> {
    let f = d.forward;
    check_inputs(f.op, &[d.grad, f.x1, f.x2, d.result])?;
    new_contiguous(&f.shape, f.x1.dtype())
}
