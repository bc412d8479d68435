//! Embeddings (`embedding`, `embedding_dense_backward`) and embedding bags
//! (`_embedding_bag` and its backward ops): the argument checks,
//! the bag modes PyTorch encodes as integers, and the shapes and dtypes of the
//! four results, the same for every backend. The three ops' rules proper take
//! the schema's arguments and return them checked; both backends' YAML entries
//! read `rule | kernel`, so the ops' signatures are written here only.
//!
//! Owns: these rules and their errors. Must not: allocate tensors, read tensor
//! data (the checks on index values live with the kernels that read them), or
//! know any backend.

use crate::{DType, OpalError, Result, Tensor};

/// How a bag reduces its rows (`mode` 0, 1, 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BagMode {
    /// Sum (optionally weighted per sample).
    Sum,
    /// Mean over the bag's non-padding rows.
    Mean,
    /// Per-column maximum.
    Max,
}

/// Shapes and dtypes of `_embedding_bag`'s results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BagShapes {
    /// The reduction.
    pub mode: BagMode,
    /// Bags (`offsets` entries, less one with `include_last_offset`).
    pub bags: i64,
    /// `[bags, D]` in the weight's dtype.
    pub output: Vec<i64>,
    /// `[len(indices)]`, or `[0]` where PyTorch's CPU sum skips it (sum without
    /// a padding index over f32 / f16 / bf16 weights).
    pub offset2bag: Vec<i64>,
    /// `[bags]`.
    pub bag_size: Vec<i64>,
    /// `[bags, D]` for max, else `[bags]`.
    pub max_indices: Vec<i64>,
    /// Dtype of the three index results: int32 when indices and offsets both
    /// are, else int64.
    pub index_dtype: DType,
}

fn index_tensor(op: &str, arg: &str, pos: usize, s: &[i64], d: DType) -> Result<()> {
    if !matches!(d, DType::I32 | DType::I64) {
        return Err(OpalError::msg(format!(
            "{op}: Expected tensor for argument #{pos} '{arg}' to have one of the following scalar types: Long, Int; but got {d:?} instead"
        )));
    }
    if s.len() != 1 {
        return Err(OpalError::shape(format!(
            "{op}: Expected 1-dimensional tensor, but got {}-dimensional tensor for argument #{pos} '{arg}'",
            s.len()
        )));
    }
    Ok(())
}

/// The bag mode of `mode`.
pub fn bag_mode(op: &str, mode: i64) -> Result<BagMode> {
    match mode {
        0 => Ok(BagMode::Sum),
        1 => Ok(BagMode::Mean),
        2 => Ok(BagMode::Max),
        m => Err(OpalError::msg(format!(
            "{op}: `mode` must be sum, mean, or max, got {m}"
        ))),
    }
}

/// Checked `_embedding_bag` arguments (all but the index values) and its result
/// shapes. Each argument is `(sizes, dtype)`.
#[allow(clippy::too_many_arguments)] // the op's arguments, one each
pub fn embedding_bag_shapes(
    op: &str,
    weight: (&[i64], DType),
    indices: (&[i64], DType),
    offsets: (&[i64], DType),
    mode: i64,
    per_sample_weights: Option<(&[i64], DType)>,
    include_last_offset: bool,
    padding_idx: i64,
) -> Result<BagShapes> {
    let (ws, wd) = weight;
    if !wd.is_floating_point() {
        return Err(OpalError::msg(format!(
            "{op}: Expected tensor for argument #1 'weight' to have one of the following scalar types: Half, BFloat16, Float, Double; but got {wd:?} instead"
        )));
    }
    if ws.len() != 2 {
        return Err(OpalError::shape(format!(
            "{op}: Expected 2-dimensional tensor, but got {}-dimensional tensor for argument #1 'weight'",
            ws.len()
        )));
    }
    index_tensor(op, "indices", 2, indices.0, indices.1)?;
    index_tensor(op, "offsets", 3, offsets.0, offsets.1)?;
    let mode = bag_mode(op, mode)?;
    let n = indices.0[0];
    if let Some((ps, pd)) = per_sample_weights {
        if mode != BagMode::Sum {
            return Err(OpalError::msg(format!(
                "{op}: embedding_bag: per_sample_weights only supported with mode='sum'"
            )));
        }
        if pd != wd {
            return Err(OpalError::msg(format!(
                "{op}: Expected per_sample_weights of dtype {wd:?} (the weight's), got {pd:?}"
            )));
        }
        if ps != [n] {
            return Err(OpalError::shape(format!(
                "{op}: embedding_bag: If per_sample_weights ({ps:?}) is not None, then it must have the same shape as the input ({n})"
            )));
        }
    }
    let bags = offsets.0[0] - include_last_offset as i64;
    if bags < 0 {
        return Err(OpalError::msg(format!(
            "{op}: include_last_offset: number of offset should be at least 1"
        )));
    }
    let fast_sum = mode == BagMode::Sum
        && padding_idx < 0
        && matches!(wd, DType::F32 | DType::F16 | DType::BF16);
    let index_dtype = if indices.1 == DType::I32 && offsets.1 == DType::I32 {
        DType::I32
    } else {
        DType::I64
    };
    Ok(BagShapes {
        mode,
        bags,
        output: vec![bags, ws[1]],
        offset2bag: vec![if fast_sum { 0 } else { n }],
        bag_size: vec![bags],
        max_indices: if mode == BagMode::Max {
            vec![bags, ws[1]]
        } else {
            vec![bags]
        },
        index_dtype,
    })
}
/// Refuses `indices` of a dtype other than int64 / int32.
fn index_dtype(op: &str, indices: &Tensor) -> Result<()> {
    match indices.dtype() {
        DType::I64 | DType::I32 => Ok(()),
        other => Err(OpalError::msg(format!("{op}: Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got {other} instead"))),
    }
}

/// `embedding`'s arguments, checked.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct Embedding<'a> {
    pub weight: &'a Tensor,
    pub indices: &'a Tensor,
    pub padding_idx: i64,
    pub scale_grad_by_freq: bool,
    pub sparse: bool,
    /// The result's sizes: `indices`' then the embedding dim.
    pub sizes: Vec<i64>,
}

/// The rule of `embedding` (and of its `out=` form): a 2-d weight and int64 or
/// int32 indices (their values are the kernel's to check).
pub fn embedding<'a>(
    weight: &'a Tensor,
    indices: &'a Tensor,
    padding_idx: i64,
    scale_grad_by_freq: bool,
    sparse: bool,
) -> Result<Embedding<'a>> {
    const OP: &str = "embedding";
    super::check_defined(OP, &[weight, indices])?;
    let [_, dim] = *weight.sizes() else {
        return Err(OpalError::shape(format!(
            "{OP}: 'weight' must be 2-D, got {:?}",
            weight.sizes()
        )));
    };
    index_dtype(OP, indices)?;
    let mut sizes = indices.sizes().to_vec();
    sizes.push(dim);
    Ok(Embedding {
        weight,
        indices,
        padding_idx,
        scale_grad_by_freq,
        sparse,
        sizes,
    })
}

/// `embedding_dense_backward`'s arguments, checked.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct EmbeddingDenseBackward<'a> {
    pub grad_output: &'a Tensor,
    pub indices: &'a Tensor,
    pub num_weights: i64,
    pub padding_idx: i64,
    pub scale_grad_by_freq: bool,
    /// The embedding dim: `grad_output`'s last size.
    pub dim: i64,
}

/// The rule of `embedding_dense_backward` (and of its `out=` form): int64 or
/// int32 indices, a non-negative `num_weights` and one `grad_output` row per
/// index.
pub fn embedding_dense_backward<'a>(
    grad_output: &'a Tensor,
    indices: &'a Tensor,
    num_weights: i64,
    padding_idx: i64,
    scale_grad_by_freq: bool,
) -> Result<EmbeddingDenseBackward<'a>> {
    const OP: &str = "embedding_dense_backward";
    super::check_defined(OP, &[grad_output, indices])?;
    index_dtype(OP, indices)?;
    if num_weights < 0 {
        return Err(OpalError::msg(format!(
            "{OP}: num_weights must be non-negative, got {num_weights}"
        )));
    }
    let dim = grad_output.sizes().last().copied().unwrap_or(1);
    if grad_output.numel() != indices.numel().saturating_mul(dim) {
        return Err(OpalError::shape(format!(
            "{OP}: grad_output of shape {:?} does not match indices of shape {:?}",
            grad_output.sizes(),
            indices.sizes()
        )));
    }
    Ok(EmbeddingDenseBackward {
        grad_output,
        indices,
        num_weights,
        padding_idx,
        scale_grad_by_freq,
        dim,
    })
}

/// `_embedding_bag`'s arguments, checked, with its results' shapes.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct EmbeddingBag<'a> {
    pub weight: &'a Tensor,
    pub indices: &'a Tensor,
    pub offsets: &'a Tensor,
    pub scale_grad_by_freq: bool,
    pub sparse: bool,
    pub per_sample_weights: Option<&'a Tensor>,
    pub include_last_offset: bool,
    pub padding_idx: i64,
    /// The mode and the four results' shapes and dtypes.
    pub shapes: BagShapes,
}

/// The rule of `_embedding_bag` (and of its `out=` form): [`embedding_bag_shapes`].
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn _embedding_bag<'a>(
    weight: &'a Tensor,
    indices: &'a Tensor,
    offsets: &'a Tensor,
    scale_grad_by_freq: bool,
    mode: i64,
    sparse: bool,
    per_sample_weights: Option<&'a Tensor>,
    include_last_offset: bool,
    padding_idx: i64,
) -> Result<EmbeddingBag<'a>> {
    const OP: &str = "_embedding_bag";
    super::check_defined(OP, &[weight, indices, offsets])?;
    let shapes = embedding_bag_shapes(
        OP,
        (weight.sizes(), weight.dtype()),
        (indices.sizes(), indices.dtype()),
        (offsets.sizes(), offsets.dtype()),
        mode,
        per_sample_weights.map(|p| (p.sizes(), p.dtype())),
        include_last_offset,
        padding_idx,
    )?;
    Ok(EmbeddingBag {
        weight,
        indices,
        offsets,
        scale_grad_by_freq,
        sparse,
        per_sample_weights,
        include_last_offset,
        padding_idx,
        shapes,
    })
}

/// A 2-d floating gradient `[bags, D]`: `(bags, D)`.
fn bag_grad(op: &str, grad: &Tensor) -> Result<(usize, usize)> {
    match grad.sizes() {
        [b, d] if grad.dtype().is_floating_point() => Ok((*b as usize, *d as usize)),
        s => Err(OpalError::msg(format!(
            "{op}: expected a 2-d floating grad [bags, D], got {s:?} of dtype {:?}",
            grad.dtype()
        ))),
    }
}

/// `_embedding_bag_backward`'s arguments, checked.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct EmbeddingBagBackward<'a> {
    pub grad: &'a Tensor,
    pub indices: &'a Tensor,
    pub offsets: &'a Tensor,
    pub offset2bag: &'a Tensor,
    pub bag_size: &'a Tensor,
    pub maximum_indices: &'a Tensor,
    pub num_weights: i64,
    pub scale_grad_by_freq: bool,
    pub mode: BagMode,
    pub per_sample_weights: Option<&'a Tensor>,
    pub padding_idx: i64,
    /// The gradient's `(bags, D)`.
    pub grad_dims: (usize, usize),
}

/// The rule of `_embedding_bag_backward`: a dense gradient (`sparse` is refused:
/// Opal has no sparse tensors), a valid mode and a `[bags, D]` floating `grad`.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn _embedding_bag_backward<'a>(
    grad: &'a Tensor,
    indices: &'a Tensor,
    offsets: &'a Tensor,
    offset2bag: &'a Tensor,
    bag_size: &'a Tensor,
    maximum_indices: &'a Tensor,
    num_weights: i64,
    scale_grad_by_freq: bool,
    mode: i64,
    sparse: bool,
    per_sample_weights: Option<&'a Tensor>,
    padding_idx: i64,
) -> Result<EmbeddingBagBackward<'a>> {
    const OP: &str = "_embedding_bag_backward";
    let ts = [
        grad,
        indices,
        offsets,
        offset2bag,
        bag_size,
        maximum_indices,
    ];
    super::check_defined(OP, &ts)?;
    if sparse {
        return Err(OpalError::msg(format!(
            "{OP}: sparse=True: Opal has no sparse tensors"
        )));
    }
    if num_weights < 0 {
        return Err(OpalError::msg(format!(
            "{OP}: num_weights must be non-negative, got {num_weights}"
        )));
    }
    let mode = bag_mode(OP, mode)?;
    let grad_dims = bag_grad(OP, grad)?;
    Ok(EmbeddingBagBackward {
        grad,
        indices,
        offsets,
        offset2bag,
        bag_size,
        maximum_indices,
        num_weights,
        scale_grad_by_freq,
        mode,
        per_sample_weights,
        padding_idx,
        grad_dims,
    })
}

/// `_embedding_bag_per_sample_weights_backward`'s arguments, checked.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct PerSampleWeightsBackward<'a> {
    pub grad: &'a Tensor,
    pub weight: &'a Tensor,
    pub indices: &'a Tensor,
    pub offsets: &'a Tensor,
    pub offset2bag: &'a Tensor,
    pub padding_idx: i64,
    /// The gradient's `(bags, D)`.
    pub grad_dims: (usize, usize),
}

/// The rule of `_embedding_bag_per_sample_weights_backward` (and of its `out=`
/// form): mode sum, a `[bags, D]` floating `grad` and a `[rows, D]` weight of its
/// dtype.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn _embedding_bag_per_sample_weights_backward<'a>(
    grad: &'a Tensor,
    weight: &'a Tensor,
    indices: &'a Tensor,
    offsets: &'a Tensor,
    offset2bag: &'a Tensor,
    mode: i64,
    padding_idx: i64,
) -> Result<PerSampleWeightsBackward<'a>> {
    const OP: &str = "_embedding_bag_per_sample_weights_backward";
    super::check_defined(OP, &[grad, weight, indices, offsets, offset2bag])?;
    if bag_mode(OP, mode)? != BagMode::Sum {
        return Err(OpalError::msg(format!(
            "{OP}: embedding_bag_backward: per_sample_weights only supported for mode='sum'"
        )));
    }
    let grad_dims = bag_grad(OP, grad)?;
    let d = grad_dims.1 as i64;
    if !matches!(weight.sizes(), [_, wd] if *wd == d) || weight.dtype() != grad.dtype() {
        return Err(OpalError::msg(format!(
            "{OP}: expected weight [rows, {d}] of dtype {:?}, got {:?} of {:?}",
            grad.dtype(),
            weight.sizes(),
            weight.dtype()
        )));
    }
    index_tensor(OP, "indices", 3, indices.sizes(), indices.dtype())?;
    Ok(PerSampleWeightsBackward {
        grad,
        weight,
        indices,
        offsets,
        offset2bag,
        padding_idx,
        grad_dims,
    })
}
