//! Meta kernels of neural-network ops: convolution and its backward, pooling,
//! upsampling, layer / batch norm, embeddings, one-hot and the losses with their
//! backward ops and `out=` forms.
//!
//! Owns: dtype and memory-format choices of these ops (e.g. channels-last inputs
//! give channels-last outputs). Must not: compute sizes inline (`shape::nn`).

use super::{check_inputs, check_out_tensor, new_contiguous, new_strided};
use crate::shape::fail;
use crate::shape::geometry::{format_strides, prefers_channels_last};
use crate::shape::index::{check_index_dtype, one_hot_sizes};
use crate::shape::linalg::same_dtype;
use crate::shape::nn::{
    batch_norm_channels, check_reduction, conv_output_sizes, embedding_sizes, layer_norm_sizes,
    nll_loss_sizes, pointwise_loss_sizes, pool2d_output_sizes, resize2d_sizes, ConvParams,
};
use opal::{DType, Result, Tensor};

/// A result laid out like `like` suggests (channels-last stays channels-last).
fn new_like_format(sizes: &[i64], like: &Tensor, dtype: DType) -> Result<Tensor> {
    let cl = sizes.len() == like.dim() && prefers_channels_last(like.sizes(), like.strides());
    new_strided(sizes, &format_strides(sizes, cl), dtype)
}

/// `convolution`: plain or transposed, grouped and dilated.
#[allow(clippy::too_many_arguments)]
pub fn convolution(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
) -> Result<Tensor> {
    let op = "convolution";
    let mut ts = vec![input, weight];
    ts.extend(bias);
    check_inputs(op, &ts)?;
    let d = same_dtype(op, &ts.iter().map(|t| t.dtype()).collect::<Vec<_>>())?;
    let p = ConvParams {
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
    };
    let sizes = conv_output_sizes(op, input.sizes(), weight.sizes(), &p)?;
    if let Some(b) = bias {
        if b.sizes() != [sizes[1]] {
            return Err(fail(
                op,
                format!(
                    "expected bias to be 1-dimensional with {} elements, but got bias of size {:?}",
                    sizes[1],
                    b.sizes()
                ),
            ));
        }
    }
    let like = if prefers_channels_last(weight.sizes(), weight.strides()) {
        weight
    } else {
        input
    };
    new_like_format(&sizes, like, d)
}

/// `convolution_backward`: gradients shaped like input, weight and bias, for the
/// outputs `output_mask` requests; an undefined tensor for the others (as PyTorch).
#[allow(clippy::too_many_arguments)]
pub fn convolution_backward(
    grad_output: &Tensor,
    input: &Tensor,
    weight: &Tensor,
    bias_sizes: Option<&[i64]>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "convolution_backward";
    check_inputs(op, &[grad_output, input, weight])?;
    if output_mask.len() != 3 {
        return Err(fail(
            op,
            format!("output_mask must have 3 entries, got {}", output_mask.len()),
        ));
    }
    let p = ConvParams {
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
    };
    let expected = conv_output_sizes(op, input.sizes(), weight.sizes(), &p)?;
    if grad_output.sizes() != expected.as_slice() {
        return Err(fail(
            op,
            format!(
                "expected grad_output of size {expected:?}, but got {:?}",
                grad_output.sizes()
            ),
        ));
    }
    let d = grad_output.dtype();
    let gi = if output_mask[0] {
        new_like_format(input.sizes(), input, d)?
    } else {
        Tensor::undefined()
    };
    let gw = if output_mask[1] {
        new_like_format(weight.sizes(), weight, d)?
    } else {
        Tensor::undefined()
    };
    let gb = if output_mask[2] {
        let channels = [expected[1]];
        new_contiguous(bias_sizes.unwrap_or(&channels), d)?
    } else {
        Tensor::undefined()
    };
    Ok((gi, gw, gb))
}

/// `max_pool2d_with_indices`: values and int64 indices.
#[allow(clippy::too_many_arguments)]
pub fn max_pool2d_with_indices(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    let op = "max_pool2d_with_indices";
    check_inputs(op, &[self_])?;
    let sizes = pool2d_output_sizes(
        op,
        self_.sizes(),
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    )?;
    Ok((
        new_like_format(&sizes, self_, self_.dtype())?,
        new_like_format(&sizes, self_, DType::I64)?,
    ))
}

/// `avg_pool2d`.
#[allow(clippy::too_many_arguments)]
pub fn avg_pool2d(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    _count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    let op = "avg_pool2d";
    check_inputs(op, &[self_])?;
    if divisor_override == Some(0) {
        return Err(fail(op, "divisor must be not zero"));
    }
    let sizes = pool2d_output_sizes(
        op,
        self_.sizes(),
        kernel_size,
        stride,
        padding,
        &[1],
        ceil_mode,
    )?;
    new_like_format(&sizes, self_, self_.dtype())
}

/// `_adaptive_avg_pool2d`.
pub fn _adaptive_avg_pool2d(self_: &Tensor, output_size: &[i64]) -> Result<Tensor> {
    let op = "_adaptive_avg_pool2d";
    check_inputs(op, &[self_])?;
    let sizes = resize2d_sizes(op, self_.sizes(), output_size, 3)?;
    new_like_format(&sizes, self_, self_.dtype())
}

/// `upsample_nearest2d`: 4-d input only.
pub fn upsample_nearest2d(
    self_: &Tensor,
    output_size: &[i64],
    _scales_h: Option<f64>,
    _scales_w: Option<f64>,
) -> Result<Tensor> {
    let op = "upsample_nearest2d";
    check_inputs(op, &[self_])?;
    let sizes = resize2d_sizes(op, self_.sizes(), output_size, 4)?;
    new_like_format(&sizes, self_, self_.dtype())
}

/// `max_pool2d_with_indices_backward`: a gradient shaped like the forward input.
#[allow(clippy::too_many_arguments)]
pub fn max_pool2d_with_indices_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    indices: &Tensor,
) -> Result<Tensor> {
    let op = "max_pool2d_with_indices_backward";
    check_inputs(op, &[grad_output, self_, indices])?;
    let expected = pool2d_output_sizes(
        op,
        self_.sizes(),
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    )?;
    for (what, t) in [("grad_output", grad_output), ("indices", indices)] {
        if t.sizes() != expected.as_slice() {
            return Err(fail(
                op,
                format!(
                    "expected {what} of size {expected:?}, but got {:?}",
                    t.sizes()
                ),
            ));
        }
    }
    new_like_format(self_.sizes(), self_, grad_output.dtype())
}

/// `native_layer_norm`: `(output, mean, rstd)`; statistics keep the leading dims.
pub fn native_layer_norm(
    input: &Tensor,
    normalized_shape: &[i64],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    _eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "native_layer_norm";
    let mut ts = vec![input];
    ts.extend(weight);
    ts.extend(bias);
    check_inputs(op, &ts)?;
    let (out, stats) = layer_norm_sizes(
        op,
        input.sizes(),
        normalized_shape,
        weight.map(|w| w.sizes()),
        bias.map(|b| b.sizes()),
    )?;
    let d = input.dtype();
    Ok((
        new_contiguous(&out, d)?,
        new_contiguous(&stats, d)?,
        new_contiguous(&stats, d)?,
    ))
}

/// `native_layer_norm_backward`: an undefined tensor for each output `output_mask`
/// does not request (as PyTorch).
#[allow(clippy::too_many_arguments)]
pub fn native_layer_norm_backward(
    grad_out: &Tensor,
    input: &Tensor,
    normalized_shape: &[i64],
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "native_layer_norm_backward";
    check_inputs(op, &[grad_out, input, mean, rstd])?;
    if output_mask.len() != 3 {
        return Err(fail(
            op,
            format!("output_mask must have 3 entries, got {}", output_mask.len()),
        ));
    }
    layer_norm_sizes(
        op,
        input.sizes(),
        normalized_shape,
        weight.map(|w| w.sizes()),
        bias.map(|b| b.sizes()),
    )?;
    if grad_out.sizes() != input.sizes() {
        return Err(fail(
            op,
            format!(
                "grad_out {:?} must have the input's sizes {:?}",
                grad_out.sizes(),
                input.sizes()
            ),
        ));
    }
    let d = input.dtype();
    let gi = if output_mask[0] {
        new_contiguous(input.sizes(), d)?
    } else {
        Tensor::undefined()
    };
    let param = |t: Option<&Tensor>| -> Result<Tensor> {
        match t {
            Some(t) => new_contiguous(t.sizes(), t.dtype()),
            None => new_contiguous(normalized_shape, d),
        }
    };
    let gw = if output_mask[1] {
        param(weight)?
    } else {
        Tensor::undefined()
    };
    let gb = if output_mask[2] {
        param(bias)?
    } else {
        Tensor::undefined()
    };
    Ok((gi, gw, gb))
}

/// `native_batch_norm`: `(output, save_mean, save_invstd)`; the saved statistics
/// have one entry per channel in training and none in evaluation.
#[allow(clippy::too_many_arguments)]
pub fn native_batch_norm(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    training: bool,
    _momentum: f64,
    _eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "native_batch_norm";
    let params = [
        ("weight", weight),
        ("bias", bias),
        ("running_mean", running_mean),
        ("running_var", running_var),
    ];
    let mut ts = vec![input];
    ts.extend(params.iter().filter_map(|(_, t)| *t));
    check_inputs(op, &ts)?;
    if !training && (running_mean.is_none() || running_var.is_none()) {
        return Err(fail(
            op,
            "running_mean and running_var must be defined in evaluation mode",
        ));
    }
    let numels: Vec<(&str, Option<i64>)> = params
        .iter()
        .map(|(n, t)| (*n, t.map(|t| t.numel())))
        .collect();
    let c = batch_norm_channels(op, input.sizes(), &numels)?;
    // Reduced-precision input with float32 parameters keeps float32 statistics.
    let d = input.dtype();
    let mixed = matches!(d, DType::F16 | DType::BF16)
        && params
            .iter()
            .any(|(_, t)| t.is_some_and(|t| t.dtype() == DType::F32));
    let stat_dtype = if mixed { DType::F32 } else { d };
    let stat = [if training { c } else { 0 }];
    Ok((
        new_like_format(input.sizes(), input, d)?,
        new_contiguous(&stat, stat_dtype)?,
        new_contiguous(&stat, stat_dtype)?,
    ))
}

/// `embedding`: one row of `weight` per index.
pub fn embedding(
    weight: &Tensor,
    indices: &Tensor,
    _padding_idx: i64,
    _scale_grad_by_freq: bool,
    _sparse: bool,
) -> Result<Tensor> {
    let op = "embedding";
    check_inputs(op, &[weight, indices])?;
    check_index_dtype(op, "indices", indices.dtype(), &[DType::I64, DType::I32])?;
    new_contiguous(
        &embedding_sizes(op, weight.sizes(), indices.sizes())?,
        weight.dtype(),
    )
}

/// `embedding_dense_backward`: `[num_weights, embedding_dim]`.
pub fn embedding_dense_backward(
    grad_output: &Tensor,
    indices: &Tensor,
    num_weights: i64,
    _padding_idx: i64,
    _scale_grad_by_freq: bool,
) -> Result<Tensor> {
    let op = "embedding_dense_backward";
    check_inputs(op, &[grad_output, indices])?;
    check_index_dtype(op, "indices", indices.dtype(), &[DType::I64, DType::I32])?;
    if num_weights < 0 {
        return Err(fail(
            op,
            format!("num_weights must be non-negative, got {num_weights}"),
        ));
    }
    let dim = grad_output.sizes().last().copied().unwrap_or(1);
    new_contiguous(&[num_weights, dim], grad_output.dtype())
}

/// `one_hot`: int64 classes; the class count must be given (meta has no data).
pub fn one_hot(self_: &Tensor, num_classes: i64) -> Result<Tensor> {
    let op = "one_hot";
    check_inputs(op, &[self_])?;
    check_index_dtype(op, "self", self_.dtype(), &[DType::I64])?;
    new_contiguous(&one_hot_sizes(op, self_.sizes(), num_classes)?, DType::I64)
}

/// `nll_loss_forward`: `(output, total_weight)`.
pub fn nll_loss_forward(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    _ignore_index: i64,
) -> Result<(Tensor, Tensor)> {
    let op = "nll_loss_forward";
    let mut ts = vec![self_, target];
    ts.extend(weight);
    check_inputs(op, &ts)?;
    check_index_dtype(op, "target", target.dtype(), &[DType::I64, DType::U8])?;
    let (out, tw) = nll_loss_sizes(
        op,
        self_.sizes(),
        target.sizes(),
        weight.map(|w| w.numel()),
        reduction,
    )?;
    Ok((
        new_contiguous(&out, self_.dtype())?,
        new_contiguous(&tw, self_.dtype())?,
    ))
}

/// `nll_loss_backward`: a gradient shaped like `self`.
#[allow(clippy::too_many_arguments)]
pub fn nll_loss_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    total_weight: &Tensor,
) -> Result<Tensor> {
    let op = "nll_loss_backward";
    check_inputs(op, &[grad_output, self_, target, total_weight])?;
    nll_loss_forward(self_, target, weight, reduction, ignore_index)?;
    if total_weight.numel() != 1 {
        return Err(fail(
            op,
            format!(
                "expected total_weight to be a single element tensor, got {:?}",
                total_weight.sizes()
            ),
        ));
    }
    new_contiguous(self_.sizes(), self_.dtype())
}

/// `mse_loss`: the broadcast shape without reduction, else a scalar.
pub fn mse_loss(self_: &Tensor, target: &Tensor, reduction: i64) -> Result<Tensor> {
    let op = "mse_loss";
    check_inputs(op, &[self_, target])?;
    let d = super::pointwise::common_dtype(&[self_, target], &[])?;
    if reduction == 0 {
        check_reduction(op, reduction)?;
        return super::pointwise::elementwise(op, &[self_, target], d);
    }
    new_contiguous(
        &pointwise_loss_sizes(op, self_.sizes(), target.sizes(), reduction)?,
        d,
    )
}

/// `mse_loss_backward`: a gradient shaped like `self`.
pub fn mse_loss_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    reduction: i64,
) -> Result<Tensor> {
    let op = "mse_loss_backward";
    check_inputs(op, &[grad_output, self_, target])?;
    pointwise_loss_sizes(op, self_.sizes(), target.sizes(), reduction)?;
    new_contiguous(self_.sizes(), self_.dtype())
}

/// `binary_cross_entropy`: input and target have one shape; the weight broadcasts.
pub fn binary_cross_entropy(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
) -> Result<Tensor> {
    let op = "binary_cross_entropy";
    let mut ts = vec![self_, target];
    ts.extend(weight);
    check_inputs(op, &ts)?;
    if self_.sizes() != target.sizes() {
        return Err(fail(
            op,
            format!("using a target size ({:?}) that is different to the input size ({:?}) is not supported", target.sizes(), self_.sizes()),
        ));
    }
    if let Some(w) = weight {
        crate::shape::geometry::check_expandable(op, w.sizes(), self_.sizes())?;
    }
    new_contiguous(
        &pointwise_loss_sizes(op, self_.sizes(), target.sizes(), reduction)?,
        self_.dtype(),
    )
}

/// `mse_loss.out`: element-wise when unreduced, so castable dtypes are accepted.
pub fn mse_loss_out(
    self_: &Tensor,
    target: &Tensor,
    reduction: i64,
    out: &Tensor,
) -> Result<Tensor> {
    let r = mse_loss(self_, target, reduction)?;
    check_out_tensor("mse_loss.out", r.sizes(), r.dtype(), out)?;
    Ok(out.clone())
}
