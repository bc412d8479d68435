//! The Meta backend's copy rule for the `out=` operators that `native_functions.yaml`
//! generates with `autogen:` (`relu.out`, `sum.out`, `convolution.out`, ...). The
//! generated trait runs the functional kernel (for `_to_copy` and the `*_like` ops
//! with `out`'s dtype) and hands the results to [`copy_outs`]. PyTorch's copy for
//! these demands that `out` already has the result's dtype (it never converts), so
//! an `out` of exactly that dtype is resized (the CPU backend applies the same rule).
//! The other `out=` ops with that rule (structured ones such as `mm.out`, whose
//! `out` must have the result's dtype too) are derived through it as well.
//!
//! Owns: that rule. Must not: compute shapes (the functional kernels do).

use super::{check_out_exact, finish_out_exact};
use opal::{Result, Tensor};

/// The autogen `out=` convention for several `(result, out)` pairs of one op
/// (`out_copy:` in `backend.yaml`): every `out` must have its result's dtype
/// (checked for all before any is resized) and takes its sizes.
pub fn copy_outs(op: &str, pairs: &[(&Tensor, &Tensor)]) -> Result<()> {
    for (result, out) in pairs {
        check_out_exact(op, result.dtype(), out.dtype())?;
    }
    for (result, out) in pairs {
        finish_out_exact(op, result, out)?;
    }
    Ok(())
}
