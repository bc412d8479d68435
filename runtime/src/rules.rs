//! PyTorch's shape and dtype rules that every backend applies the same way, so that
//! the CPU kernels and the Meta (shape-only) kernels cannot disagree: broadcasting,
//! `-1` in a requested shape, contiguous strides and the strides of a view, which
//! result dtype may be written where, and which `alpha` an `add`/`sub` accepts. Each error names the op and reads as PyTorch's.
//! Convolution's argument rules live in [`conv`], pooling's in [`pool`], the geometry of views such as `diagonal` in
//! [`geometry`], the normalization ops' argument checks in [`norm`], the losses'
//! in [`loss`],
//! `arange`'s and `empty_strided`'s in [`factory`], `randperm`'s in [`random`], `masked_scatter`'s and `index_put`'s in [`indexing`],
//! the softmax family's in [`softmax`], the one-dim views' (`slice`, `select`)
//! in [`view`], bilinear upsampling's shapes and source taps in [`upsample`].
//!
//! Owns: these rules. Must not: allocate tensors, read tensor data, or know any
//! backend (backends call these; kernels stay in their crates).

use crate::{DType, OpalError, Result, Scalar, Tensor};

pub mod bag;
pub mod conv;
pub mod distance;
pub mod factory;
pub mod fold;
pub mod geometry;
pub mod indexing;
pub mod loss;
pub mod norm;
pub mod pool;
pub mod random;
pub mod sampling;
pub mod softmax;
pub mod spectral;
pub mod upsample;
pub mod view;

/// Every tensor of `tensors` is defined: an undefined tensor (which stands for
/// no tensor) is laid out like an empty one and would otherwise pass a rule as one.
pub fn check_defined(op: &str, tensors: &[&Tensor]) -> Result<()> {
    if tensors.iter().all(|t| t.is_defined()) {
        Ok(())
    } else {
        Err(OpalError::msg(format!(
            "{op}: expected a defined tensor, got an undefined one"
        )))
    }
}

/// A floating `dtype`, as the kernels that compute in floating point require
/// ("expected a floating point tensor, got Long" otherwise).
pub fn check_floating(op: &str, dtype: DType) -> Result<()> {
    if dtype.is_floating_point() {
        Ok(())
    } else {
        Err(OpalError::msg(format!(
            "{op}: expected a floating point tensor, got {dtype}"
        )))
    }
}

/// Broadcasts `shapes` together: aligned at the right, each size equal to the
/// others or 1 (PyTorch's "The size of tensor a (3) must match the size of tensor b
/// (4) at non-singleton dimension 1" otherwise).
pub fn broadcast_shapes(op: &str, shapes: &[&[i64]]) -> Result<Vec<i64>> {
    let ndim = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1i64; ndim];
    for s in shapes {
        let off = ndim - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[off + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(OpalError::shape(format!(
                    "{op}: the size of tensor a ({}) must match the size of tensor b ({d}) at non-singleton dimension {}",
                    *o,
                    off + i
                )));
            }
        }
    }
    Ok(out)
}

/// Resolves at most one `-1` in a requested shape against `numel` (`view`,
/// `reshape`); every other size must be non-negative and the product must be
/// `numel`.
pub fn infer_size(op: &str, shape: &[i64], numel: i64) -> Result<Vec<i64>> {
    let mut known = 1i64;
    let mut infer = None;
    for (i, &s) in shape.iter().enumerate() {
        if s == -1 {
            if infer.is_some() {
                return Err(OpalError::shape(format!(
                    "{op}: only one dimension can be inferred"
                )));
            }
            infer = Some(i);
        } else if s < 0 {
            return Err(OpalError::shape(format!(
                "{op}: invalid shape dimension {s}"
            )));
        } else {
            known = known.saturating_mul(s);
        }
    }
    let invalid = || {
        OpalError::shape(format!(
            "{op}: shape '{shape:?}' is invalid for input of size {numel}"
        ))
    };
    let mut out = shape.to_vec();
    match infer {
        // With a zero among the known sizes the inferred size is ambiguous.
        Some(_) if known == 0 || numel % known != 0 => return Err(invalid()),
        Some(i) => out[i] = numel / known,
        None if known != numel => return Err(invalid()),
        None => {}
    }
    Ok(out)
}

/// PyTorch's `canCast`: a result of dtype `from` may be written to a tensor of
/// dtype `to` unless that drops a category (complex to real, floating to integral,
/// anything but bool to bool).
pub fn can_cast(from: DType, to: DType) -> bool {
    !((from.is_complex() && !to.is_complex())
        || (from.is_floating_point() && to.is_integral(true))
        || (from != DType::Bool && to == DType::Bool))
}

/// The `alpha` of `add`/`sub` must suit the dtype the op computes in: a boolean
/// alpha only for boolean results, no floating alpha for integral ones, no complex
/// alpha for real ones.
pub fn check_alpha(op: &str, dtype: DType, alpha: &Scalar) -> Result<()> {
    // The schema default, valid for every dtype: most calls pass it.
    if let Scalar::Int(1) = alpha {
        return Ok(());
    }
    if dtype != DType::Bool && alpha.is_bool() {
        return Err(OpalError::msg(format!(
            "{op}: boolean alpha only supported for boolean results"
        )));
    }
    if dtype.is_integral(true) && (alpha.is_floating_point() || alpha.is_complex()) {
        return Err(OpalError::msg(format!(
            "{op}: for integral input tensors, argument alpha must not be a floating point number"
        )));
    }
    if !dtype.is_complex() && alpha.is_complex() {
        return Err(OpalError::msg(format!(
            "{op}: for non-complex input tensors, argument alpha must not be a complex number (got {alpha})"
        )));
    }
    Ok(())
}

/// Row-major strides. Size-0 and size-1 dims count as 1 so strides stay positive,
/// which is what PyTorch allocates.
pub fn contiguous_strides(sizes: &[i64]) -> Vec<i64> {
    let mut strides = vec![0; sizes.len()];
    let mut acc = 1i64;
    for i in (0..sizes.len()).rev() {
        strides[i] = acc;
        acc = acc.saturating_mul(sizes[i].max(1));
    }
    strides
}

/// Strides that let a tensor of `old_sizes`/`old_strides` be viewed as `new_sizes`
/// without copying, or `None` when the memory layout does not allow it.
///
/// Old dims are grouped into runs that are contiguous with each other; every new dim
/// must fall inside one run, taking its stride from the run's innermost stride.
pub fn view_strides(old_sizes: &[i64], old_strides: &[i64], new_sizes: &[i64]) -> Option<Vec<i64>> {
    if old_sizes.is_empty() {
        // A scalar is one element: any all-ones shape views it.
        return Some(vec![1; new_sizes.len()]);
    }
    if old_sizes.iter().product::<i64>() == 0 {
        return Some(if old_sizes == new_sizes {
            old_strides.to_vec()
        } else {
            contiguous_strides(new_sizes)
        });
    }
    let mut new_strides = vec![0i64; new_sizes.len()];
    let mut view_d = new_sizes.len() as isize - 1;
    let mut base_stride = *old_strides.last()?;
    let mut run_numel = 1i64;
    let mut view_numel = 1i64;
    for d in (0..old_sizes.len()).rev() {
        run_numel *= old_sizes[d];
        // A run ends at the first dim or where the next-outer dim does not continue it.
        let run_ends =
            d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != run_numel * base_stride);
        if run_ends {
            while view_d >= 0 && (view_numel < run_numel || new_sizes[view_d as usize] == 1) {
                new_strides[view_d as usize] = view_numel * base_stride;
                view_numel *= new_sizes[view_d as usize];
                view_d -= 1;
            }
            if view_numel != run_numel {
                return None;
            }
            if d > 0 {
                base_stride = old_strides[d - 1];
                run_numel = 1;
                view_numel = 1;
            }
        }
    }
    if view_d != -1 {
        return None;
    }
    Some(new_strides)
}

/// The reductions `scatter_reduce.two` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterReduce {
    /// `"sum"`.
    Sum,
    /// `"prod"`.
    Prod,
    /// `"mean"`.
    Mean,
    /// `"amax"`.
    Amax,
    /// `"amin"`.
    Amin,
}

/// `reduce` of `scatter_reduce.two` as a [`ScatterReduce`]; any other name is an
/// error naming `op` and the value.
pub fn scatter_reduce_kind(op: &str, reduce: &str) -> Result<ScatterReduce> {
    Ok(match reduce {
        "sum" => ScatterReduce::Sum,
        "prod" => ScatterReduce::Prod,
        "mean" => ScatterReduce::Mean,
        "amax" => ScatterReduce::Amax,
        "amin" => ScatterReduce::Amin,
        other => {
            return Err(OpalError::msg(format!(
                "{op}: argument 'reduce' must be one of sum, prod, mean, amax, amin, got '{other}'"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting() {
        assert_eq!(
            broadcast_shapes("t", &[&[3, 1, 5], &[4, 1]]).unwrap(),
            vec![3, 4, 5]
        );
        assert_eq!(broadcast_shapes("t", &[&[], &[2, 0]]).unwrap(), vec![2, 0]);
        assert_eq!(
            broadcast_shapes("t", &[&[1, 0], &[3, 1]]).unwrap(),
            vec![3, 0]
        );
        assert_eq!(broadcast_shapes("t", &[]).unwrap(), Vec::<i64>::new());
        let e = broadcast_shapes("myop", &[&[2, 3], &[4]])
            .unwrap_err()
            .to_string();
        assert!(e.contains("myop: the size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"), "{e}");
    }

    #[test]
    fn inferring_one_size() {
        assert_eq!(infer_size("view", &[2, -1], 12).unwrap(), vec![2, 6]);
        assert_eq!(infer_size("view", &[3, 4], 12).unwrap(), vec![3, 4]);
        assert!(infer_size("view", &[5, -1], 12).is_err());
        assert!(infer_size("view", &[-1, -1], 12).is_err());
        assert!(infer_size("view", &[0, -1], 0).is_err());
        assert!(infer_size("view", &[-2, 6], 12).is_err());
        // Products past i64 are an error, not an overflow.
        assert!(infer_size("view", &[i64::MAX, i64::MAX, -1], 12).is_err());
    }

    #[test]
    fn casting_and_alpha() {
        assert!(can_cast(DType::I64, DType::F32));
        assert!(can_cast(DType::F64, DType::F16));
        assert!(can_cast(DType::Bool, DType::Bool));
        assert!(can_cast(DType::Bool, DType::U8));
        assert!(!can_cast(DType::F32, DType::I64));
        assert!(!can_cast(DType::I32, DType::Bool));
        assert!(!can_cast(DType::C64, DType::F64));
        assert!(check_alpha("add", DType::I64, &Scalar::Float(0.5)).is_err());
        assert!(check_alpha("add", DType::F32, &Scalar::Float(0.5)).is_ok());
        assert!(check_alpha("add", DType::Bool, &Scalar::Bool(true)).is_ok());
        assert!(check_alpha("add", DType::F32, &Scalar::Bool(true)).is_err());
        assert!(check_alpha("add", DType::Bool, &Scalar::Int(2)).is_ok());
        assert!(check_alpha("add", DType::F32, &Scalar::Int(1)).is_ok());
    }
    #[test]
    fn view_strides_match_memory_runs() {
        // Contiguous: any regrouping works.
        assert_eq!(
            view_strides(&[2, 3, 4], &[12, 4, 1], &[6, 4]),
            Some(vec![4, 1])
        );
        // Transposed 2x3 (strides 1,2): flattening is not a view.
        assert_eq!(view_strides(&[3, 2], &[1, 3], &[6]), None);
        // Splitting a dim of a transposed tensor is a view.
        assert_eq!(
            view_strides(&[4, 2], &[1, 4], &[2, 2, 2]),
            Some(vec![2, 1, 4])
        );
        // Size-1 dims can be inserted anywhere.
        assert_eq!(view_strides(&[3], &[2], &[1, 3, 1]), Some(vec![6, 2, 2]));
    }
}
