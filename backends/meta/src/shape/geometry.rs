//! Size and stride arithmetic shared by every shape rule: dimension wrapping,
//! broadcasting, contiguous / channels-last / dense stride layouts, `-1` inference
//! and the "can this be a view" stride computation.
//!
//! Owns: pure functions over `&[i64]` sizes and strides. Must not: touch tensors,
//! dtypes or devices (callers pass plain slices so CPU and structured kernels can
//! reuse these without a meta tensor).

use super::fail;
use opal::Result;

pub use opal::tensor::wrap_dim;

/// Like [`wrap_dim`] for an insertion position (`unsqueeze`, `stack`): the valid range
/// is one wider than the tensor's rank.
pub fn wrap_insert_dim(op: &str, dim: i64, ndim: usize) -> Result<usize> {
    wrap_dim(op, dim, ndim + 1)
}

/// Turns a dim list into a per-dimension mask; repeated dims are an error.
/// An empty list selects nothing (callers decide whether that means "all").
pub fn dim_mask(op: &str, dims: &[i64], ndim: usize) -> Result<Vec<bool>> {
    let mut mask = vec![false; ndim.max(1)];
    for &d in dims {
        let w = wrap_dim(op, d, ndim)?;
        if mask[w] {
            return Err(fail(
                op,
                format!("dim {w} appears multiple times in the list of dims"),
            ));
        }
        mask[w] = true;
    }
    mask.truncate(ndim);
    Ok(mask)
}

/// Number of elements of a shape (sizes are already validated as non-negative).
pub fn numel(sizes: &[i64]) -> i64 {
    sizes.iter().product()
}

/// Rejects negative sizes (factory functions and `empty_strided` inputs).
pub fn check_sizes(op: &str, sizes: &[i64]) -> Result<()> {
    match sizes.iter().find(|&&s| s < 0) {
        Some(s) => Err(fail(
            op,
            format!("negative dimension {s} in size {sizes:?}"),
        )),
        None => Ok(()),
    }
}

pub use opal::rules::{contiguous_strides, view_strides};

/// Channels-last strides for a 4-d (`N, C, H, W`) or 5-d shape: channels vary
/// fastest, then the spatial dims, then the batch.
pub fn channels_last_strides(sizes: &[i64]) -> Option<Vec<i64>> {
    opal::rules::geometry::channels_last_strides(sizes)
}

/// Channels-last strides when `channels_last` is asked for and the rank allows it,
/// else contiguous ones.
pub fn format_strides(sizes: &[i64], channels_last: bool) -> Vec<i64> {
    match channels_last_strides(sizes) {
        Some(s) if channels_last => s,
        _ => contiguous_strides(sizes),
    }
}

/// Whether `sizes`/`strides` are channels-last and not also plainly contiguous
/// (what makes PyTorch suggest the channels-last format).
pub fn prefers_channels_last(sizes: &[i64], strides: &[i64]) -> bool {
    !is_contiguous(sizes, strides) && is_channels_last(sizes, strides)
}

/// Dense strides laying dimensions out in `order` (fastest first).
pub fn strides_for_order(sizes: &[i64], order: &[usize]) -> Vec<i64> {
    let mut strides = vec![0; sizes.len()];
    let mut acc = 1i64;
    for &d in order {
        strides[d] = acc;
        acc = acc.saturating_mul(sizes[d].max(1));
    }
    strides
}

/// PyTorch's `is_contiguous`: strides of size-1 dims do not matter; empty tensors
/// are contiguous.
pub fn is_contiguous(sizes: &[i64], strides: &[i64]) -> bool {
    if sizes.contains(&0) {
        return true;
    }
    let mut expected = 1i64;
    for i in (0..sizes.len()).rev() {
        if sizes[i] != 1 {
            if strides[i] != expected {
                return false;
            }
            expected *= sizes[i];
        }
    }
    true
}

/// Channels-last contiguity for 4-d / 5-d shapes (size-1 dims ignored).
pub fn is_channels_last(sizes: &[i64], strides: &[i64]) -> bool {
    match channels_last_strides(sizes) {
        None => false,
        Some(cl) => {
            if sizes.contains(&0) {
                return false;
            }
            sizes
                .iter()
                .zip(strides.iter().zip(cl.iter()))
                .all(|(&s, (&a, &b))| s == 1 || a == b)
        }
    }
}

/// Whether the elements occupy exactly `numel` consecutive slots with no overlap,
/// in some dimension order.
pub fn is_non_overlapping_and_dense(sizes: &[i64], strides: &[i64]) -> bool {
    if sizes.contains(&0) {
        return true;
    }
    let mut dims: Vec<usize> = (0..sizes.len()).filter(|&d| sizes[d] != 1).collect();
    dims.sort_by_key(|&d| strides[d]);
    let mut expected = 1i64;
    for d in dims {
        if strides[d] != expected {
            return false;
        }
        expected *= sizes[d];
    }
    true
}

/// PyTorch's `suggest_memory_format`, reduced to the choice that matters for
/// allocation: channels-last strides when the input is channels-last and not
/// plainly contiguous, else contiguous.
pub fn suggested_strides(sizes: &[i64], strides: &[i64]) -> Vec<i64> {
    format_strides(sizes, prefers_channels_last(sizes, strides))
}

/// Strides of `empty_like(x, memory_format=preserve)`: a dense, non-overlapping input
/// keeps its strides; anything else gets dense strides in the input's dim order.
pub fn preserve_strides(sizes: &[i64], strides: &[i64]) -> Vec<i64> {
    if is_non_overlapping_and_dense(sizes, strides) {
        return strides.to_vec();
    }
    super::elementwise::dense_strides_like(sizes, &[strides])
}

/// Checks that `from` can be expanded to `to` (in-place ops, `expand`, `masked_fill_`).
pub fn check_expandable(op: &str, from: &[i64], to: &[i64]) -> Result<()> {
    let ok = from.len() <= to.len()
        && from
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&f, &t)| f == t || f == 1);
    if ok {
        Ok(())
    } else {
        Err(fail(
            op,
            format!("shape {from:?} cannot be broadcast to {to:?}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_dims_and_rejects_out_of_range() {
        assert_eq!(wrap_dim("t", -1, 3).unwrap(), 2);
        assert_eq!(wrap_dim("t", 0, 0).unwrap(), 0);
        assert_eq!(wrap_dim("t", -1, 0).unwrap(), 0);
        let e = wrap_dim("sum", 3, 3).unwrap_err().to_string();
        assert!(e.contains("sum") && e.contains("[-3, 2]"), "{e}");
    }

    #[test]
    fn dense_and_contiguous_checks() {
        assert!(is_contiguous(&[2, 1, 3], &[3, 99, 1]));
        assert!(!is_contiguous(&[3, 2], &[1, 3]));
        assert!(is_non_overlapping_and_dense(&[3, 2], &[1, 3]));
        assert!(!is_non_overlapping_and_dense(&[3, 2], &[4, 1]));
        assert_eq!(
            channels_last_strides(&[2, 3, 4, 5]).unwrap(),
            vec![60, 1, 15, 3]
        );
        assert!(is_channels_last(&[2, 3, 4, 5], &[60, 1, 15, 3]));
    }
}
