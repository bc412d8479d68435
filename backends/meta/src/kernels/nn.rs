//! Meta kernels of neural-network ops: convolution and its backward, embeddings
//! and one-hot (pooling and upsampling are in `pool`, normalization in `norm`,
//! the losses in `loss`).
//!
//! Owns: dtype and memory-format choices of these ops (e.g. channels-last inputs
//! give channels-last outputs). Must not: check arguments or compute sizes
//! (`opal::rules` and `shape::index` do).

use super::{check_inputs, new_contiguous, new_strided};
use crate::shape::geometry::{format_strides, prefers_channels_last};
use crate::shape::index::{check_index_dtype, one_hot_sizes};
use opal::rules::bag::{Embedding, EmbeddingDenseBackward};
use opal::rules::conv::{Convolution, ConvolutionBackward};
use opal::{DType, Result, Tensor};

/// A result laid out like `like` suggests (channels-last stays channels-last).
pub(crate) fn new_like_format(sizes: &[i64], like: &Tensor, dtype: DType) -> Result<Tensor> {
    let cl = sizes.len() == like.dim() && prefers_channels_last(like.sizes(), like.strides());
    new_strided(sizes, &format_strides(sizes, cl), dtype)
}

/// `convolution`: plain or transposed, grouped and dilated; a channels-last weight
/// or input gives a channels-last result.
pub fn convolution(c: Convolution) -> Result<Tensor> {
    let mut ts = vec![c.input, c.weight];
    ts.extend(c.bias);
    check_inputs("convolution", &ts)?;
    let like = if prefers_channels_last(c.weight.sizes(), c.weight.strides()) {
        c.weight
    } else {
        c.input
    };
    new_like_format(&c.sizes, like, c.dtype)
}

/// `convolution_backward`: gradients shaped like input, weight and bias, for the
/// outputs `output_mask` requests; an undefined tensor for the others (as PyTorch).
pub fn convolution_backward(b: ConvolutionBackward) -> Result<(Tensor, Tensor, Tensor)> {
    let c = &b.conv;
    check_inputs("convolution_backward", &[b.grad_output, c.input, c.weight])?;
    let d = c.dtype;
    let channels = [c.sizes[1]];
    let make = |i: usize, t: Option<&Tensor>| match (b.output_mask[i], t) {
        (false, _) => Ok(Tensor::undefined()),
        (true, Some(t)) => new_like_format(t.sizes(), t, d),
        // PyTorch's meta kernel shapes the bias gradient by `bias_sizes`.
        (true, None) => new_contiguous(b.bias_sizes.unwrap_or(&channels), d),
    };
    Ok((
        make(0, Some(c.input))?,
        make(1, Some(c.weight))?,
        make(2, None)?,
    ))
}

/// `embedding`: one row of `weight` per index.
pub fn embedding(e: Embedding) -> Result<Tensor> {
    check_inputs("embedding", &[e.weight, e.indices])?;
    new_contiguous(&e.sizes, e.weight.dtype())
}

/// `embedding_dense_backward`: `[num_weights, embedding_dim]`.
pub fn embedding_dense_backward(e: EmbeddingDenseBackward) -> Result<Tensor> {
    check_inputs("embedding_dense_backward", &[e.grad_output, e.indices])?;
    new_contiguous(&[e.num_weights, e.dim], e.grad_output.dtype())
}

/// `one_hot`: int64 classes; the class count must be given (meta has no data).
pub fn one_hot(self_: &Tensor, num_classes: i64) -> Result<Tensor> {
    let op = "one_hot";
    check_inputs(op, &[self_])?;
    check_index_dtype(op, "self", self_.dtype(), &[DType::I64])?;
    new_contiguous(&one_hot_sizes(op, self_.sizes(), num_classes)?, DType::I64)
}
