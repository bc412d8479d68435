//! `var.dim` and `var.out`: the `unbiased` flag of PyTorch's older overloads is the
//! correction 1 (or 0) of `var.correction`, which every backend implements and
//! autograd differentiates, so these decompose into it (as in PyTorch, where they
//! are CompositeImplicitAutograd).
//!
//! Owns: this mapping. Must not: compute a variance itself.

use crate::dispatch::DispatchKeySet;
use crate::error::Result;
use crate::{ops, Scalar, Tensor};

fn correction(unbiased: bool) -> Scalar {
    Scalar::Int(i64::from(unbiased))
}

/// `var.dim`: the variance over `dim`, Bessel-corrected when `unbiased`.
pub(super) fn var_dim(
    _ks: DispatchKeySet,
    self_: &Tensor,
    dim: Option<&[i64]>,
    unbiased: bool,
    keepdim: bool,
) -> Result<Tensor> {
    ops::var_correction::call(self_, dim, Some(&correction(unbiased)), keepdim)
}

/// `var.out`.
pub(super) fn var_out(
    _ks: DispatchKeySet,
    self_: &Tensor,
    dim: Option<&[i64]>,
    unbiased: bool,
    keepdim: bool,
    out: &Tensor,
) -> Result<Tensor> {
    ops::var_correction_out::call(self_, dim, Some(&correction(unbiased)), keepdim, out)
}
