//! CPU kernels of the `out=` operators that `native_functions.yaml` derives with
//! `autogen:` (`relu.out`, `sum.out`, `convolution.out`, ...), plus
//! `native_batch_norm.out`, which follows the same convention.
//!
//! PyTorch generates these as "run the functional op, resize `out` to the result
//! (`resize_output`: warn when a non-empty `out` changes shape), copy the result
//! into it". Its copy helper for generated out= kernels demands that `out` already
//! has the result's dtype and device (unlike structured out= kernels, which cast
//! whenever `canCast` allows): the copy never converts. Ops whose functional form
//! takes `dtype`/`device` options (`_to_copy`, `zeros_like`, `ones_like`,
//! `full_like`) take them from `out`, so there any dtype of `out` is accepted.
//! [`copy_out`] is that rule; `native_dropout.out` and `native_dropout_backward.out`
//! (autogen ops too, in `nn::dropout`) use it as well, and `add.Scalar_out` /
//! `mul.Scalar_out` (`elementwise::binary`) apply [`check_out`] before computing
//! straight into `out`.
//!
//! Owns: these `out=` kernels and the rule ([`copy_out`], [`copy_outs`],
//! [`check_out`]). Must not: compute anything itself
//! (the functional kernels do), or decide how a backward kernel represents an
//! unrequested gradient (the functional kernel's registered form is used as is).

use crate::copy::copy_into;
use crate::out::resize_out;
use crate::registration::{generated::CpuKernels, Cpu};
use crate::{elementwise, factory, nn, reduce, shape};
use opal::dispatch::DispatchKeySet;
use opal::{DType, MemoryFormat, OpalError, Result, Scalar, Tensor};

/// Writes the functional `result` of `op` into its `out=` tensor: `out` must pass
/// [`check_out`] (checked before anything is changed), is resized to `result`'s
/// shape by PyTorch's out= rule and receives a copy.
pub fn copy_out(op: &str, result: &Tensor, out: &Tensor) -> Result<Tensor> {
    check_out(op, result.dtype(), out)?;
    write_checked(op, result, out)?;
    Ok(out.clone())
}

/// Resizes and fills an `out` that already passed [`check_out`].
fn write_checked(op: &str, result: &Tensor, out: &Tensor) -> Result<()> {
    resize_out(out, result.sizes(), op)?;
    copy_into(out, result, op)
}

/// The autogen rule alone: `out` is a CPU tensor of exactly the result's dtype.
pub fn check_out(op: &str, result: DType, out: &Tensor) -> Result<()> {
    if !out.device().is_cpu() {
        return Err(OpalError::msg(format!(
            "{op}: expected out tensor to have device cpu, but got {:?} instead",
            out.device()
        )));
    }
    if out.dtype() != result {
        return Err(OpalError::msg(format!(
            "{op}: expected out tensor to have dtype {result}, but got {} instead",
            out.dtype()
        )));
    }
    Ok(())
}

macro_rules! copy_out_variants {
    ($($out:ident = $name:literal from $($f:ident)::+ ($($a:ident: $t:ty),* $(,)?);)*) => {$(
        #[doc = concat!("`", $name, "`: the functional result copied into `out` (same dtype).")]
        #[allow(clippy::too_many_arguments, reason = "the schema fixes the argument list")]
        pub fn $out($($a: $t,)* out: &Tensor) -> Result<Tensor> {
            copy_out($name, &$($f)::+($($a),*)?, out)
        }
    )*};
}

copy_out_variants! {
    masked_fill_scalar_out = "masked_fill.Scalar_out" from elementwise::select::masked_fill_scalar(self_: &Tensor, mask: &Tensor, value: &Scalar);
    isnan_out = "isnan.out" from elementwise::select::isnan(self_: &Tensor);
    relu_out = "relu.out" from elementwise::activation::relu(self_: &Tensor);
    sum_out = "sum.out" from reduce::sum::sum(self_: &Tensor, dtype: Option<DType>);
    prod_out = "prod.out" from reduce::sum::prod(self_: &Tensor, dtype: Option<DType>);
    convolution_out = "convolution.out" from nn::convolution(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, stride: &[i64], padding: &[i64], dilation: &[i64], transposed: bool, output_padding: &[i64], groups: i64);
    _adaptive_avg_pool2d_out = "_adaptive_avg_pool2d.out" from nn::_adaptive_avg_pool2d(self_: &Tensor, output_size: &[i64]);
    embedding_out = "embedding.out" from nn::embedding(weight: &Tensor, indices: &Tensor, padding_idx: i64, scale_grad_by_freq: bool, sparse: bool);
    embedding_dense_backward_out = "embedding_dense_backward.out" from nn::embedding_dense_backward(grad_output: &Tensor, indices: &Tensor, num_weights: i64, padding_idx: i64, scale_grad_by_freq: bool);
    flip_out = "flip.out" from shape::flip(self_: &Tensor, dims: &[i64]);
    roll_out = "roll.out" from shape::roll(self_: &Tensor, shifts: &[i64], dims: &[i64]);
    repeat_out = "repeat.out" from shape::repeat(self_: &Tensor, repeats: &[i64]);
    constant_pad_nd_out = "constant_pad_nd.out" from shape::constant_pad_nd(self_: &Tensor, pad: &[i64], value: &Scalar);
}

/// `_to_copy.out`: a copy of `self` converted to `out`'s dtype (the dtype option of
/// `_to_copy` comes from `out`).
pub fn _to_copy_out(
    self_: &Tensor,
    non_blocking: bool,
    memory_format: Option<MemoryFormat>,
    out: &Tensor,
) -> Result<Tensor> {
    let op = "_to_copy.out";
    let r = shape::_to_copy(
        self_,
        Some(out.dtype()),
        None,
        None,
        None,
        non_blocking,
        memory_format,
    )?;
    copy_out(op, &r, out)
}

/// `zeros_like.out`: `out` resized to `self`'s shape and zero-filled, in its own dtype.
pub fn zeros_like_out(
    self_: &Tensor,
    memory_format: Option<MemoryFormat>,
    out: &Tensor,
) -> Result<Tensor> {
    let r = factory::zeros_like(self_, Some(out.dtype()), None, None, None, memory_format)?;
    copy_out("zeros_like.out", &r, out)
}

/// `ones_like.out`: `out` resized to `self`'s shape and filled with ones.
pub fn ones_like_out(
    self_: &Tensor,
    memory_format: Option<MemoryFormat>,
    out: &Tensor,
) -> Result<Tensor> {
    let r = factory::ones_like(self_, Some(out.dtype()), None, None, None, memory_format)?;
    copy_out("ones_like.out", &r, out)
}

/// `full_like.out`: `out` resized to `self`'s shape and filled with `fill_value`.
pub fn full_like_out(
    self_: &Tensor,
    fill_value: &Scalar,
    memory_format: Option<MemoryFormat>,
    out: &Tensor,
) -> Result<Tensor> {
    let r = factory::full_like(
        self_,
        fill_value,
        Some(out.dtype()),
        None,
        None,
        None,
        memory_format,
    )?;
    copy_out("full_like.out", &r, out)
}

/// [`copy_out`] for several `(result, out)` pairs of one op: every `out` is checked
/// before any is written, so that an error leaves them all untouched.
pub fn copy_outs(op: &str, pairs: &[(&Tensor, &Tensor)]) -> Result<()> {
    for (result, out) in pairs {
        check_out(op, result.dtype(), out)?;
    }
    for (result, out) in pairs {
        write_checked(op, result, out)?;
    }
    Ok(())
}

/// Copies the three results of a three-output op into its outs, except those whose
/// `output_mask` entry is false: PyTorch computes no such gradient, so that `out`
/// is returned as given (an empty `mask` requests all three).
fn copy_outs3(
    op: &str,
    mask: &[bool],
    (r0, r1, r2): (Tensor, Tensor, Tensor),
    outs: [&Tensor; 3],
) -> Result<(Tensor, Tensor, Tensor)> {
    let wanted = |i: usize| mask.get(i).copied().unwrap_or(true);
    let pairs: Vec<(&Tensor, &Tensor)> = [&r0, &r1, &r2]
        .into_iter()
        .zip(outs)
        .enumerate()
        .filter(|&(i, _)| wanted(i))
        .map(|(_, p)| p)
        .collect();
    copy_outs(op, &pairs)?;
    Ok((outs[0].clone(), outs[1].clone(), outs[2].clone()))
}

/// `native_layer_norm.out`: output, mean and rstd into `out0`, `out1`, `out2`.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
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
    let r = nn::native_layer_norm(input, normalized_shape, weight, bias, eps)?;
    copy_outs3("native_layer_norm.out", &[], r, [out0, out1, out2])
}

/// `native_batch_norm.out`: output, saved mean and saved inverse std into `out`,
/// `save_mean`, `save_invstd` (in evaluation mode the saved statistics are empty,
/// so those two are resized to zero elements). Running statistics are updated in
/// place as by `native_batch_norm`.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn native_batch_norm_out(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
    out: &Tensor,
    save_mean: &Tensor,
    save_invstd: &Tensor,
) -> Result<(Tensor, Tensor, Tensor)> {
    let r = nn::native_batch_norm(
        input,
        weight,
        bias,
        running_mean,
        running_var,
        training,
        momentum,
        eps,
    )?;
    copy_outs3(
        "native_batch_norm.out",
        &[],
        r,
        [out, save_mean, save_invstd],
    )
}

// The two backward ops below take the functional result from the registered CPU
// kernel (the schema's `(Tensor, Tensor, Tensor)`), not from `nn::…` directly, so
// that they do not depend on how the kernel represents an unrequested gradient;
// `output_mask` alone says which outs are written. The key set is unused by CPU
// kernels.

/// `native_layer_norm_backward.out`: the gradients `output_mask` requests.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
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
    let r = Cpu::native_layer_norm_backward(
        DispatchKeySet::empty(),
        grad_out,
        input,
        normalized_shape,
        mean,
        rstd,
        weight,
        bias,
        output_mask,
    )?;
    copy_outs3(
        "native_layer_norm_backward.out",
        output_mask,
        r,
        [out0, out1, out2],
    )
}

/// `convolution_backward.out`: the gradients `output_mask` requests.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
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
    let r = Cpu::convolution_backward(
        DispatchKeySet::empty(),
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
    copy_outs3(
        "convolution_backward.out",
        output_mask,
        r,
        [out0, out1, out2],
    )
}
