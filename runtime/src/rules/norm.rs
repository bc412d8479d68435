//! The normalization ops' argument rules, shared by the CPU and Meta kernels:
//! `native_group_norm`'s `N, C, HxW, group` arguments against the input's sizes,
//! per-channel parameters and the backward's statistics; `native_layer_norm`'s
//! normalized shape (and its backward's); `native_batch_norm`'s per-channel
//! tensors and statistics dtype. Each op's rule proper takes the schema's
//! arguments and returns them checked; both backends' YAML entries read
//! `rule | kernel`, so the ops' signatures are written here only.
//!
//! Owns: these checks and their errors. Must not: allocate tensors or read their
//! data (sizes and dtypes only).

use crate::{DType, OpalError, Result, Tensor};

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

/// `native_layer_norm`'s arguments, checked.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct LayerNorm<'a> {
    pub input: &'a Tensor,
    pub normalized_shape: &'a [i64],
    pub weight: Option<&'a Tensor>,
    pub bias: Option<&'a Tensor>,
    pub eps: f64,
    /// Rows normalized: the product of the dims before `normalized_shape`.
    pub rows: usize,
    /// Elements per row: the product of `normalized_shape`.
    pub row_len: usize,
    /// The sizes of `mean` / `rstd`: the leading dims, then 1 per normalized dim.
    pub stat_sizes: Vec<i64>,
}

/// The rule of `native_layer_norm` (and of its `out=` form): a non-empty
/// `normalized_shape` that ends the input's sizes, and `weight` / `bias` of that
/// shape.
pub fn native_layer_norm<'a>(
    input: &'a Tensor,
    normalized_shape: &'a [i64],
    weight: Option<&'a Tensor>,
    bias: Option<&'a Tensor>,
    eps: f64,
) -> Result<LayerNorm<'a>> {
    layer_norm(
        "native_layer_norm",
        input,
        normalized_shape,
        weight,
        bias,
        eps,
    )
}

fn layer_norm<'a>(
    op: &str,
    input: &'a Tensor,
    normalized_shape: &'a [i64],
    weight: Option<&'a Tensor>,
    bias: Option<&'a Tensor>,
    eps: f64,
) -> Result<LayerNorm<'a>> {
    super::check_defined(op, &[input])?;
    let nd = normalized_shape.len();
    if nd == 0 {
        return Err(OpalError::msg(format!("{op}: Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got normalized_shape = []")));
    }
    for (what, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t {
            if t.sizes() != normalized_shape {
                return Err(OpalError::shape(format!(
                    "{op}: Expected {what} to be of same shape as normalized_shape, but got {what} of shape {:?} and normalized_shape = {normalized_shape:?}",
                    t.sizes()
                )));
            }
        }
    }
    let s = input.sizes();
    if s.len() < nd || &s[s.len() - nd..] != normalized_shape {
        let dims: Vec<String> = normalized_shape.iter().map(|v| v.to_string()).collect();
        return Err(OpalError::shape(format!(
            "{op}: Given normalized_shape={normalized_shape:?}, expected input with shape [*, {}], but got input of size{s:?}",
            dims.join(", ")
        )));
    }
    let axis = s.len() - nd;
    let count = |d: &[i64]| d.iter().product::<i64>() as usize;
    let mut stat_sizes = s[..axis].to_vec();
    stat_sizes.extend(std::iter::repeat_n(1, nd));
    Ok(LayerNorm {
        input,
        normalized_shape,
        weight,
        bias,
        eps,
        rows: count(&s[..axis]),
        row_len: count(normalized_shape),
        stat_sizes,
    })
}

/// `native_layer_norm_backward`'s arguments, checked.
#[derive(Clone, Debug)]
pub struct LayerNormBackward<'a> {
    /// The gradient of the forward result, of the input's sizes.
    pub grad_out: &'a Tensor,
    /// The forward's saved mean, one per row.
    pub mean: &'a Tensor,
    /// The forward's saved reciprocal standard deviation, one per row.
    pub rstd: &'a Tensor,
    /// The forward's arguments (`eps` unused).
    pub norm: LayerNorm<'a>,
    /// Which of `(grad_input, grad_weight, grad_bias)` to compute.
    pub output_mask: [bool; 3],
}

/// The rule of `native_layer_norm_backward` (and of its `out=` form): the
/// forward's, `grad_out` shaped like the input, one `mean` and `rstd` per row and
/// three mask entries.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn native_layer_norm_backward<'a>(
    grad_out: &'a Tensor,
    input: &'a Tensor,
    normalized_shape: &'a [i64],
    mean: &'a Tensor,
    rstd: &'a Tensor,
    weight: Option<&'a Tensor>,
    bias: Option<&'a Tensor>,
    output_mask: &[bool],
) -> Result<LayerNormBackward<'a>> {
    const OP: &str = "native_layer_norm_backward";
    super::check_defined(OP, &[grad_out, mean, rstd])?;
    let output_mask = three_masks(OP, output_mask)?;
    let norm = layer_norm(OP, input, normalized_shape, weight, bias, 0.0)?;
    if grad_out.sizes() != input.sizes() {
        return Err(OpalError::shape(format!(
            "{OP}: grad_out of shape {:?} does not match input {:?}",
            grad_out.sizes(),
            input.sizes()
        )));
    }
    for (what, t) in [("mean", mean), ("rstd", rstd)] {
        if t.numel() as usize != norm.rows {
            return Err(OpalError::shape(format!(
                "{OP}: expected {what} to have {} elements, got {}",
                norm.rows,
                t.numel()
            )));
        }
    }
    Ok(LayerNormBackward {
        grad_out,
        mean,
        rstd,
        norm,
        output_mask,
    })
}

/// A backward op's `output_mask`, which must have three entries.
pub fn three_masks(op: &str, output_mask: &[bool]) -> Result<[bool; 3]> {
    output_mask.try_into().map_err(|_| {
        OpalError::msg(format!(
            "{op}: output_mask must have 3 entries, got {}",
            output_mask.len()
        ))
    })
}

/// `native_batch_norm`'s arguments, checked.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct BatchNorm<'a> {
    pub input: &'a Tensor,
    pub weight: Option<&'a Tensor>,
    pub bias: Option<&'a Tensor>,
    pub running_mean: Option<&'a Tensor>,
    pub running_var: Option<&'a Tensor>,
    pub training: bool,
    pub momentum: f64,
    pub eps: f64,
    /// `(N, C, inner)`: the batch, the channels (dim 1), the elements per channel
    /// and sample (the product of the dims after 1).
    pub dims: (usize, usize, usize),
    /// The dtype of `save_mean` / `save_invstd`: float32 for a float16 / bfloat16
    /// input with a float32 per-channel tensor, else the input's.
    pub stat_dtype: DType,
}

/// The rule of `native_batch_norm` (and of its `out=` form): an input of at least
/// two dims, running statistics in evaluation, and `C` elements in every
/// per-channel tensor.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn native_batch_norm<'a>(
    input: &'a Tensor,
    weight: Option<&'a Tensor>,
    bias: Option<&'a Tensor>,
    running_mean: Option<&'a Tensor>,
    running_var: Option<&'a Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<BatchNorm<'a>> {
    const OP: &str = "native_batch_norm";
    super::check_defined(OP, &[input])?;
    let s = input.sizes();
    if s.len() < 2 {
        return Err(OpalError::shape(format!(
            "{OP}: Expected 2D or more input, got input of size {s:?}"
        )));
    }
    if !training && (running_mean.is_none() || running_var.is_none()) {
        return Err(OpalError::msg(format!(
            "{OP}: running_mean and running_var must be defined in evaluation mode"
        )));
    }
    let c = s[1];
    let params = [
        ("weight", weight),
        ("bias", bias),
        ("running_mean", running_mean),
        ("running_var", running_var),
    ];
    for (name, t) in params {
        if let Some(t) = t {
            if t.numel() != c {
                return Err(OpalError::shape(format!(
                    "{OP}: {name} should contain {c} elements not {}",
                    t.numel()
                )));
            }
        }
    }
    let d = input.dtype();
    let mixed = matches!(d, DType::F16 | DType::BF16)
        && params
            .iter()
            .any(|(_, t)| t.is_some_and(|t| t.dtype() == DType::F32));
    Ok(BatchNorm {
        input,
        weight,
        bias,
        running_mean,
        running_var,
        training,
        momentum,
        eps,
        dims: (
            s[0] as usize,
            c as usize,
            s[2..].iter().product::<i64>() as usize,
        ),
        stat_dtype: if mixed { DType::F32 } else { d },
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
