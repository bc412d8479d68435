//! Meta kernels of embedding bags (`_embedding_bag` and its backward ops): the
//! four results' shapes and dtypes from the shared rules.
//!
//! Owns: nothing but the calls. Must not: restate a check or a shape
//! (`opal::rules::bag`).

use super::{check_inputs, new_contiguous};
use crate::shape::fail;
use opal::rules::bag::{bag_mode, embedding_bag_shapes, BagMode};
use opal::{Result, Tensor};

/// `_embedding_bag`: `(output, offset2bag, bag_size, max_indices)`.
#[allow(clippy::too_many_arguments)] // PyTorch's schema
pub fn _embedding_bag(
    weight: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
    scale_grad_by_freq: bool,
    mode: i64,
    sparse: bool,
    per_sample_weights: Option<&Tensor>,
    include_last_offset: bool,
    padding_idx: i64,
) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    let op = "_embedding_bag";
    check_inputs(op, &[weight, indices, offsets])?;
    let _ = (scale_grad_by_freq, sparse);
    let sh = embedding_bag_shapes(
        op,
        (weight.sizes(), weight.dtype()),
        (indices.sizes(), indices.dtype()),
        (offsets.sizes(), offsets.dtype()),
        mode,
        per_sample_weights.map(|p| (p.sizes(), p.dtype())),
        include_last_offset,
        padding_idx,
    )?;
    let it = sh.index_dtype;
    Ok((
        new_contiguous(&sh.output, weight.dtype())?,
        new_contiguous(&sh.offset2bag, it)?,
        new_contiguous(&sh.bag_size, it)?,
        new_contiguous(&sh.max_indices, it)?,
    ))
}

fn grad_dims(op: &str, grad: &Tensor) -> Result<i64> {
    match grad.sizes() {
        [_, d] if grad.dtype().is_floating_point() => Ok(*d),
        s => Err(fail(
            op,
            format!("expected a 2-d floating grad [bags, D], got {s:?}"),
        )),
    }
}

/// `_embedding_bag_backward`: `[num_weights, D]`.
#[allow(clippy::too_many_arguments)] // PyTorch's schema
pub fn _embedding_bag_backward(
    grad: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
    offset2bag: &Tensor,
    bag_size: &Tensor,
    maximum_indices: &Tensor,
    num_weights: i64,
    scale_grad_by_freq: bool,
    mode: i64,
    sparse: bool,
    per_sample_weights: Option<&Tensor>,
    padding_idx: i64,
) -> Result<Tensor> {
    let op = "_embedding_bag_backward";
    check_inputs(
        op,
        &[
            grad,
            indices,
            offsets,
            offset2bag,
            bag_size,
            maximum_indices,
        ],
    )?;
    let _ = (scale_grad_by_freq, per_sample_weights, padding_idx);
    if sparse {
        return Err(fail(op, "sparse=True: Opal has no sparse tensors"));
    }
    bag_mode(op, mode)?;
    let d = grad_dims(op, grad)?;
    new_contiguous(&[num_weights, d], grad.dtype())
}

/// `_embedding_bag_per_sample_weights_backward`: one value per index.
pub fn _embedding_bag_per_sample_weights_backward(
    grad: &Tensor,
    weight: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
    offset2bag: &Tensor,
    mode: i64,
    padding_idx: i64,
) -> Result<Tensor> {
    let op = "_embedding_bag_per_sample_weights_backward";
    check_inputs(op, &[grad, weight, indices, offsets, offset2bag])?;
    let _ = padding_idx;
    if bag_mode(op, mode)? != BagMode::Sum {
        return Err(fail(
            op,
            "embedding_bag_backward: per_sample_weights only supported for mode='sum'",
        ));
    }
    grad_dims(op, grad)?;
    new_contiguous(
        &[indices.sizes().first().copied().unwrap_or(0)],
        grad.dtype(),
    )
}
