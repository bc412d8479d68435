//! Meta kernel of 3-d max pooling (`max_pool3d_with_indices`): values in the
//! input's dtype and int64 indices, shaped by the shared window rule.
//!
//! Owns: this kernel's dtype and rank checks. Must not: compute window sizes
//! itself (`opal::rules::pool`).

use super::{check_inputs, new_contiguous};
use crate::shape::fail;
use opal::rules::pool::pool_window;
use opal::{DType, Result, Tensor};

/// `max_pool3d_with_indices`: `[N, C, D, H, W]` or `[C, D, H, W]` input.
pub fn max_pool3d_with_indices(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    let op = "max_pool3d_with_indices";
    check_inputs(op, &[self_])?;
    let s = self_.sizes();
    let n = s.len();
    if !(n == 4 || n == 5) || s[n - 4..].contains(&0) {
        return Err(fail(
            op,
            format!("non-empty 4D or 5D (batch mode) tensor expected for input, but got input of size {s:?}"),
        ));
    }
    if !self_.dtype().is_floating_point() {
        return Err(fail(
            op,
            format!(
                "expected a floating point input, but got input dtype {:?}",
                self_.dtype()
            ),
        ));
    }
    let g = pool_window::<3>(
        op,
        [s[n - 3], s[n - 2], s[n - 1]],
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    )?;
    let mut sizes = s[..n - 3].to_vec();
    sizes.extend(g.out);
    Ok((
        new_contiguous(&sizes, self_.dtype())?,
        new_contiguous(&sizes, DType::I64)?,
    ))
}
