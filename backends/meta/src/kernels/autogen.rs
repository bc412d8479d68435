//! Meta kernels of the `out=` operators that `native_functions.yaml` generates with
//! `autogen:` (`relu.out`, `sum.out`, `convolution.out`, ...). PyTorch derives them
//! as "run the functional op, resize `out`, copy into it", and its copy for these
//! demands that `out` already has the result's dtype (it never converts), so they
//! resize an `out` of exactly the functional result's dtype (the CPU kernels apply
//! the same rule). `_to_copy` and the `*_like` ops take their dtype from `out`.
//!
//! Owns: these `out=` forms. Must not: compute shapes (the functional kernels do).

use super::finish_out_exact;
use super::{factory, index, nn, pointwise, reduce, view};
use opal::{DType, MemoryFormat, Result, Scalar, Tensor};

/// The autogen `out=` convention: `out` must have the functional result's dtype
/// and takes its sizes.
pub fn copy_out(op: &str, result: &Tensor, out: &Tensor) -> Result<Tensor> {
    finish_out_exact(op, result, out)
}

macro_rules! copy_out_variants {
    ($($out:ident = $name:literal from $m:ident :: $f:ident($($a:ident: $t:ty),* $(,)?);)*) => {$(
        #[doc = concat!("`", $name, "`: the functional result resized (and cast) into `out`.")]
        #[allow(clippy::too_many_arguments)] // the schema fixes the argument list
        pub fn $out($($a: $t,)* out: &Tensor) -> Result<Tensor> {
            copy_out($name, &$m::$f($($a),*)?, out)
        }
    )*};
}

copy_out_variants! {
    add_scalar_out = "add.Scalar_out" from pointwise::add_scalar(self_: &Tensor, other: &Scalar, alpha: &Scalar);
    mul_scalar_out = "mul.Scalar_out" from pointwise::mul_scalar(self_: &Tensor, other: &Scalar);
    masked_fill_scalar_out = "masked_fill.Scalar_out" from pointwise::masked_fill_scalar(self_: &Tensor, mask: &Tensor, value: &Scalar);
    isnan_out = "isnan.out" from pointwise::isnan(self_: &Tensor);
    relu_out = "relu.out" from pointwise::relu(self_: &Tensor);
    sum_out = "sum.out" from reduce::sum(self_: &Tensor, dtype: Option<DType>);
    prod_out = "prod.out" from reduce::prod(self_: &Tensor, dtype: Option<DType>);
    convolution_out = "convolution.out" from nn::convolution(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, stride: &[i64], padding: &[i64], dilation: &[i64], transposed: bool, output_padding: &[i64], groups: i64);
    _adaptive_avg_pool2d_out = "_adaptive_avg_pool2d.out" from nn::_adaptive_avg_pool2d(self_: &Tensor, output_size: &[i64]);
    embedding_out = "embedding.out" from nn::embedding(weight: &Tensor, indices: &Tensor, padding_idx: i64, scale_grad_by_freq: bool, sparse: bool);
    embedding_dense_backward_out = "embedding_dense_backward.out" from nn::embedding_dense_backward(grad_output: &Tensor, indices: &Tensor, num_weights: i64, padding_idx: i64, scale_grad_by_freq: bool);
    flip_out = "flip.out" from index::flip(self_: &Tensor, dims: &[i64]);
    roll_out = "roll.out" from index::roll(self_: &Tensor, shifts: &[i64], dims: &[i64]);
    repeat_out = "repeat.out" from index::repeat(self_: &Tensor, repeats: &[i64]);
    constant_pad_nd_out = "constant_pad_nd.out" from index::constant_pad_nd(self_: &Tensor, pad: &[i64], value: &Scalar);
}

/// `_to_copy.out`: the dtype is `out`'s (`_to_copy`'s dtype option comes from it).
pub fn _to_copy_out(
    self_: &Tensor,
    non_blocking: bool,
    memory_format: Option<MemoryFormat>,
    out: &Tensor,
) -> Result<Tensor> {
    let r = view::_to_copy(
        self_,
        Some(out.dtype()),
        None,
        None,
        None,
        non_blocking,
        memory_format,
    )?;
    copy_out("_to_copy.out", &r, out)
}

/// `zeros_like.out`.
pub fn zeros_like_out(
    self_: &Tensor,
    memory_format: Option<MemoryFormat>,
    out: &Tensor,
) -> Result<Tensor> {
    copy_out(
        "zeros_like.out",
        &factory::zeros_like(self_, Some(out.dtype()), None, None, None, memory_format)?,
        out,
    )
}

/// `ones_like.out`.
pub fn ones_like_out(
    self_: &Tensor,
    memory_format: Option<MemoryFormat>,
    out: &Tensor,
) -> Result<Tensor> {
    copy_out(
        "ones_like.out",
        &factory::ones_like(self_, Some(out.dtype()), None, None, None, memory_format)?,
        out,
    )
}

/// `full_like.out`.
pub fn full_like_out(
    self_: &Tensor,
    fill_value: &Scalar,
    memory_format: Option<MemoryFormat>,
    out: &Tensor,
) -> Result<Tensor> {
    copy_out(
        "full_like.out",
        &factory::full_like(
            self_,
            fill_value,
            Some(out.dtype()),
            None,
            None,
            None,
            memory_format,
        )?,
        out,
    )
}

/// Resizes the outputs an `output_mask` requested; the others are left as given.
fn masked_outs(
    op: &str,
    mask: &[bool],
    results: [Tensor; 3],
    outs: [&Tensor; 3],
) -> Result<(Tensor, Tensor, Tensor)> {
    let [r0, r1, r2] = results;
    let one = |i: usize, r: Tensor, o: &Tensor| -> Result<Tensor> {
        if mask.get(i).copied().unwrap_or(true) {
            copy_out(op, &r, o)
        } else {
            Ok(o.clone())
        }
    };
    Ok((
        one(0, r0, outs[0])?,
        one(1, r1, outs[1])?,
        one(2, r2, outs[2])?,
    ))
}

/// `native_layer_norm.out`.
#[allow(clippy::too_many_arguments)]
pub fn native_layer_norm_out(
    input: &Tensor,
    normalized_shape: &[i64],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
    out0: &Tensor,
    out1: &Tensor,
    out2: &Tensor,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (a, b, c) = nn::native_layer_norm(input, normalized_shape, weight, bias, eps)?;
    masked_outs("native_layer_norm.out", &[], [a, b, c], [out0, out1, out2])
}

/// `native_layer_norm_backward.out`.
#[allow(clippy::too_many_arguments)]
pub fn native_layer_norm_backward_out(
    grad_out: &Tensor,
    input: &Tensor,
    normalized_shape: &[i64],
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    output_mask: &[bool],
    out0: &Tensor,
    out1: &Tensor,
    out2: &Tensor,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (a, b, c) = nn::native_layer_norm_backward(
        grad_out,
        input,
        normalized_shape,
        mean,
        rstd,
        weight,
        bias,
        output_mask,
    )?;
    masked_outs(
        "native_layer_norm_backward.out",
        output_mask,
        [a, b, c],
        [out0, out1, out2],
    )
}

/// `convolution_backward.out`.
#[allow(clippy::too_many_arguments)]
pub fn convolution_backward_out(
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
    out0: &Tensor,
    out1: &Tensor,
    out2: &Tensor,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (a, b, c) = nn::convolution_backward(
        grad_output,
        input,
        weight,
        bias_sizes,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        output_mask,
    )?;
    masked_outs(
        "convolution_backward.out",
        output_mask,
        [a, b, c],
        [out0, out1, out2],
    )
}
