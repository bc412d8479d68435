//! Meta kernels of the normalization ops (group, layer and batch norm) and the
//! backward ops of group and layer norm, from the arguments `opal::rules::norm`
//! checked (`rule | kernel` in `backend.yaml`, as in the CPU backend's).
//!
//! Owns: their result dtypes and layouts. Must not: check an argument or compute a
//! size (the rules do).

use super::{check_inputs, new_contiguous, nn::new_like_format};
use opal::rules::norm::{BatchNorm, GroupNorm, GroupNormBackward, LayerNorm, LayerNormBackward};
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

/// `native_layer_norm`: `(output, mean, rstd)`; statistics keep the leading dims.
pub fn native_layer_norm(l: LayerNorm) -> Result<(Tensor, Tensor, Tensor)> {
    let mut ts = vec![l.input];
    ts.extend(l.weight);
    ts.extend(l.bias);
    check_inputs("native_layer_norm", &ts)?;
    let d = l.input.dtype();
    Ok((
        new_contiguous(l.input.sizes(), d)?,
        new_contiguous(&l.stat_sizes, d)?,
        new_contiguous(&l.stat_sizes, d)?,
    ))
}

/// `native_layer_norm_backward`: an undefined tensor for each output `output_mask`
/// does not request (as PyTorch); parameter gradients like their parameter.
pub fn native_layer_norm_backward(b: LayerNormBackward) -> Result<(Tensor, Tensor, Tensor)> {
    let l = &b.norm;
    check_inputs(
        "native_layer_norm_backward",
        &[b.grad_out, l.input, b.mean, b.rstd],
    )?;
    let d = l.input.dtype();
    let make = |i: usize, like: Option<&Tensor>| match (b.output_mask[i], like) {
        (false, _) => Ok(Tensor::undefined()),
        (true, Some(t)) => new_contiguous(t.sizes(), t.dtype()),
        (true, None) => new_contiguous(l.normalized_shape, d),
    };
    Ok((
        make(0, Some(l.input))?,
        make(1, l.weight)?,
        make(2, l.bias)?,
    ))
}

/// `native_batch_norm`: `(output, save_mean, save_invstd)`; the saved statistics
/// have one entry per channel in training and none in evaluation.
pub fn native_batch_norm(b: BatchNorm) -> Result<(Tensor, Tensor, Tensor)> {
    let mut ts = vec![b.input];
    ts.extend(
        [b.weight, b.bias, b.running_mean, b.running_var]
            .into_iter()
            .flatten(),
    );
    check_inputs("native_batch_norm", &ts)?;
    let stat = [if b.training { b.dims.1 as i64 } else { 0 }];
    Ok((
        new_like_format(b.input.sizes(), b.input, b.input.dtype())?,
        new_contiguous(&stat, b.stat_dtype)?,
        new_contiguous(&stat, b.stat_dtype)?,
    ))
}
