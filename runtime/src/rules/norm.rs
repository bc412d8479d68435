//! `native_group_norm`'s argument rules, shared by the CPU and Meta kernels of the
//! op and of its backward: the `N, C, HxW, group` arguments against the input's
//! sizes, per-channel parameters, and the backward's statistics. The two ops'
//! rules proper ([`native_group_norm`], [`native_group_norm_backward`]) take the
//! schema's arguments and return them checked; both backends' YAML entries read
//! `rule | kernel`, so the op's signature is written here only.
//!
//! Owns: these checks and their errors. Must not: allocate tensors or read their
//! data (sizes and dtypes only).

use crate::{OpalError, Result, Tensor};

/// `native_group_norm`'s arguments, checked.
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct GroupNorm<'a> {
    pub input: &'a Tensor,
    pub weight: Option<&'a Tensor>,
    pub bias: Option<&'a Tensor>,
    /// `(N, C, HxW, group)`.
    pub dims: (usize, usize, usize, usize),
    pub eps: f64,
}

/// The rule of `native_group_norm`: a floating input and [`group_norm_dims`].
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn native_group_norm<'a>(
    input: &'a Tensor,
    weight: Option<&'a Tensor>,
    bias: Option<&'a Tensor>,
    n: i64,
    c: i64,
    hxw: i64,
    group: i64,
    eps: f64,
) -> Result<GroupNorm<'a>> {
    const OP: &str = "native_group_norm";
    super::check_floating(OP, input.dtype())?;
    let params = [
        ("weight", weight.map(|t| t.sizes())),
        ("bias", bias.map(|t| t.sizes())),
    ];
    let dims = group_norm_dims(OP, input.sizes(), &params, (n, c, hxw, group))?;
    Ok(GroupNorm {
        input,
        weight,
        bias,
        dims,
        eps,
    })
}

/// `native_group_norm_backward`'s arguments, checked.
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct GroupNormBackward<'a> {
    pub grad_out: &'a Tensor,
    pub input: &'a Tensor,
    pub mean: &'a Tensor,
    pub rstd: &'a Tensor,
    pub weight: Option<&'a Tensor>,
    /// `(N, C, HxW, group)`.
    pub dims: (usize, usize, usize, usize),
    /// Which of `(grad_input, grad_weight, grad_bias)` to compute.
    pub output_mask: [bool; 3],
}

/// The rule of `native_group_norm_backward`: the forward's, and
/// [`group_norm_backward_check`].
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn native_group_norm_backward<'a>(
    grad_out: &'a Tensor,
    input: &'a Tensor,
    mean: &'a Tensor,
    rstd: &'a Tensor,
    weight: Option<&'a Tensor>,
    n: i64,
    c: i64,
    hxw: i64,
    group: i64,
    output_mask: &[bool],
) -> Result<GroupNormBackward<'a>> {
    const OP: &str = "native_group_norm_backward";
    super::check_floating(OP, input.dtype())?;
    let params = [("weight", weight.map(|t| t.sizes()))];
    let dims = group_norm_dims(OP, input.sizes(), &params, (n, c, hxw, group))?;
    group_norm_backward_check(
        OP,
        grad_out.sizes(),
        input.sizes(),
        &[("mean", mean.numel()), ("rstd", rstd.numel())],
        dims.0 * dims.3,
    )?;
    Ok(GroupNormBackward {
        grad_out,
        input,
        mean,
        rstd,
        weight,
        dims,
        output_mask: [0, 1, 2].map(|i| output_mask.get(i).copied().unwrap_or(false)),
    })
}

/// Checks `native_group_norm`'s (and its backward's) arguments against an input of
/// `input` sizes and the optional `weight` / `bias` sizes: non-negative `N, C, HxW`,
/// `group` dividing `C`, `N*C*HxW` elements with `C` in dim 1, and per-channel
/// parameters. Returns `(N, C, HxW, group)`.
pub fn group_norm_dims(
    op: &str,
    input: &[i64],
    params: &[(&str, Option<&[i64]>)],
    (n, c, hxw, group): (i64, i64, i64, i64),
) -> Result<(usize, usize, usize, usize)> {
    if n < 0 || c < 0 || hxw < 0 {
        return Err(OpalError::msg(format!(
            "{op}: N, C and HxW must be non-negative, got N={n}, C={c}, HxW={hxw}"
        )));
    }
    if group <= 0 || c % group != 0 {
        return Err(OpalError::msg(format!("{op}: Expected number of channels in input to be divisible by num_groups, but got input of shape {input:?} and num_groups={group}")));
    }
    let numel: i128 = input.iter().map(|&d| d as i128).product();
    if numel != (n as i128) * (c as i128) * (hxw as i128) || (input.len() >= 2 && input[1] != c) {
        return Err(OpalError::shape(format!(
            "{op}: Expected input of N*C*HxW = {n}*{c}*{hxw} elements with C channels in dim 1, got input of shape {input:?}"
        )));
    }
    for (what, s) in params {
        if let Some(s) = s {
            if s.len() != 1 || s[0] != c {
                return Err(OpalError::shape(format!("{op}: Expected {what} to be a vector of size equal to the number of channels in input, but got {what} of shape {s:?} and input of shape {input:?}")));
            }
        }
    }
    Ok((n as usize, c as usize, hxw as usize, group as usize))
}

/// `native_group_norm_backward`'s checks beyond [`group_norm_dims`]: `grad_out`
/// shaped like the input, and `mean` / `rstd` (given as `(name, numel)`) holding
/// `N * group` elements.
pub fn group_norm_backward_check(
    op: &str,
    grad_out: &[i64],
    input: &[i64],
    stats: &[(&str, i64)],
    rows: usize,
) -> Result<()> {
    if grad_out != input {
        return Err(OpalError::shape(format!(
            "{op}: Expected grad_out to have the shape of input {input:?}, got {grad_out:?}"
        )));
    }
    for (what, numel) in stats {
        if *numel as usize != rows {
            return Err(OpalError::shape(format!(
                "{op}: Expected {what} to have N*group = {rows} elements, got {numel}"
            )));
        }
    }
    Ok(())
}
