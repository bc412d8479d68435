//! Meta kernels of embedding bags (`_embedding_bag` and its backward ops), from
//! the arguments `opal::rules::bag` checked (`rule | kernel` in `backend.yaml`, as
//! in the CPU backend's).
//!
//! Owns: nothing but the allocations. Must not: restate a check or a shape
//! (`opal::rules::bag`).

use super::{check_inputs, new_contiguous};
use opal::rules::bag::{EmbeddingBag, EmbeddingBagBackward, PerSampleWeightsBackward};
use opal::{Result, Tensor};

/// `_embedding_bag`: `(output, offset2bag, bag_size, max_indices)`.
pub fn _embedding_bag(e: EmbeddingBag) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    check_inputs("_embedding_bag", &[e.weight, e.indices, e.offsets])?;
    let (sh, it) = (&e.shapes, e.shapes.index_dtype);
    Ok((
        new_contiguous(&sh.output, e.weight.dtype())?,
        new_contiguous(&sh.offset2bag, it)?,
        new_contiguous(&sh.bag_size, it)?,
        new_contiguous(&sh.max_indices, it)?,
    ))
}

/// `_embedding_bag_backward`: `[num_weights, D]`.
pub fn _embedding_bag_backward(e: EmbeddingBagBackward) -> Result<Tensor> {
    let ts = [
        e.grad,
        e.indices,
        e.offsets,
        e.offset2bag,
        e.bag_size,
        e.maximum_indices,
    ];
    check_inputs("_embedding_bag_backward", &ts)?;
    new_contiguous(&[e.num_weights, e.grad_dims.1 as i64], e.grad.dtype())
}

/// `_embedding_bag_per_sample_weights_backward`: one value per index.
pub fn _embedding_bag_per_sample_weights_backward(e: PerSampleWeightsBackward) -> Result<Tensor> {
    let ts = [e.grad, e.weight, e.indices, e.offsets, e.offset2bag];
    check_inputs("_embedding_bag_per_sample_weights_backward", &ts)?;
    new_contiguous(e.indices.sizes(), e.grad.dtype())
}
