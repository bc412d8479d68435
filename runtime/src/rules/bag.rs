//! Embedding bags (`_embedding_bag` and its backward ops): the argument checks,
//! the bag modes PyTorch encodes as integers, and the shapes and dtypes of the
//! four results, the same for every backend.
//!
//! Owns: these rules and their errors. Must not: allocate tensors, read tensor
//! data (the checks on index values live with the kernels that read them), or
//! know any backend.

use crate::{DType, OpalError, Result};

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
