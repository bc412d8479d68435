//! Meta kernels of group norm and its backward, from the arguments
//! `opal::rules::norm` checked (`rule | kernel` in `backend.yaml`, as in the CPU
//! backend's).
//!
//! Owns: their result dtypes and layouts. Must not: check an argument or compute a
//! size (the rules do).

use super::{check_inputs, new_contiguous};
use opal::rules::norm::{GroupNorm, GroupNormBackward};
use opal::{Result, Tensor};

/// `native_group_norm`: output like the input, `[N, group]` statistics.
pub fn native_group_norm(p: GroupNorm) -> Result<(Tensor, Tensor, Tensor)> {
    let input = p.input;
    let mut ts = vec![input];
    ts.extend(p.weight);
    ts.extend(p.bias);
    check_inputs("native_group_norm", &ts)?;
    let (n, _, _, group) = p.dims;
    let stats = [n as i64, group as i64];
    let d = input.dtype();
    Ok((
        new_contiguous(input.sizes(), d)?,
        new_contiguous(&stats, d)?,
        new_contiguous(&stats, d)?,
    ))
}

/// `native_group_norm_backward`: each requested gradient shaped like its input.
pub fn native_group_norm_backward(p: GroupNormBackward) -> Result<(Tensor, Tensor, Tensor)> {
    let mut ts = vec![p.grad_out, p.input, p.mean, p.rstd];
    ts.extend(p.weight);
    check_inputs("native_group_norm_backward", &ts)?;
    let d = p.input.dtype();
    let c = [p.dims.1 as i64];
    let make = |i: usize, s: &[i64]| {
        if p.output_mask[i] {
            new_contiguous(s, d)
        } else {
            Ok(Tensor::undefined())
        }
    };
    Ok((make(0, p.input.sizes())?, make(1, &c)?, make(2, &c)?))
}
