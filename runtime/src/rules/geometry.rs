//! Geometry rules of the core opset's view and storage ops: the view `diagonal`
//! takes of its input, `empty_strided`'s arguments, and the strides of a channels-last request (`resize_`'s
//! `memory_format`).
//!
//! Owns: these formulas and their errors. Must not: allocate or read tensors.

use crate::{OpalError, Result};

/// Sizes, strides and storage offset of `diagonal(offset, dim1, dim2)` of a tensor
/// with `sizes` / `strides` / `storage_offset`: `dim1` and `dim2` removed, the
/// diagonal appended as the last dim (stride `stride1 + stride2`). An offset past
/// the matrix gives an empty diagonal at the input's own offset.
pub fn diagonal_geometry(
    op: &str,
    sizes: &[i64],
    strides: &[i64],
    storage_offset: i64,
    (offset, dim1, dim2): (i64, i64, i64),
) -> Result<(Vec<i64>, Vec<i64>, i64)> {
    let nd = sizes.len();
    let d1 = crate::tensor::wrap_dim(op, dim1, nd)?;
    let d2 = crate::tensor::wrap_dim(op, dim2, nd)?;
    if nd < 2 {
        return Err(OpalError::shape(format!(
            "{op}: expected a tensor of at least 2 dims, got {nd}"
        )));
    }
    if d1 == d2 {
        return Err(OpalError::msg(format!(
            "{op}: diagonal dimensions cannot be identical {dim1}, {dim2}"
        )));
    }
    let (s1, s2) = (sizes[d1], sizes[d2]);
    let (len, shift) = if offset >= 0 {
        (
            s1.min(s2.saturating_sub(offset)),
            offset.saturating_mul(strides[d2]),
        )
    } else {
        (
            s1.saturating_add(offset).min(s2),
            offset.saturating_neg().saturating_mul(strides[d1]),
        )
    };
    let len = len.max(0);
    let start = if len == 0 {
        storage_offset
    } else {
        storage_offset + shift
    };
    let keep = |v: &[i64]| -> Vec<i64> {
        (0..nd)
            .filter(|&d| d != d1 && d != d2)
            .map(|d| v[d])
            .collect()
    };
    let mut out_sizes = keep(sizes);
    out_sizes.push(len);
    let mut out_strides = keep(strides);
    out_strides.push(strides[d1] + strides[d2]);
    Ok((out_sizes, out_strides, start))
}

/// `empty_strided`'s geometry arguments: one stride per size and no negative size
/// (negative strides are refused when the storage is sized).
pub fn check_strided_args(op: &str, size: &[i64], stride: &[i64]) -> Result<()> {
    if let Some(s) = size.iter().find(|&&s| s < 0) {
        return Err(OpalError::msg(format!(
            "{op}: Trying to create tensor with negative dimension {s}: {size:?}"
        )));
    }
    if size.len() != stride.len() {
        return Err(OpalError::msg(format!(
            "{op}: dimensionality of sizes ({}) must match dimensionality of strides ({})",
            size.len(),
            stride.len()
        )));
    }
    Ok(())
}

/// Channels-last strides of a 4-d (`ChannelsLast`) or 5-d (`ChannelsLast3d`) shape:
/// channels fastest, then the spatial dims from last to first, batch slowest.
/// `None` for any other rank.
pub fn channels_last_strides(sizes: &[i64]) -> Option<Vec<i64>> {
    if sizes.len() != 4 && sizes.len() != 5 {
        return None;
    }
    let mut order = vec![1];
    order.extend((2..sizes.len()).rev());
    order.push(0);
    let mut strides = vec![0i64; sizes.len()];
    let mut acc = 1i64;
    for &d in &order {
        strides[d] = acc;
        acc = acc.saturating_mul(sizes[d].max(1));
    }
    Some(strides)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagonal_views_follow_the_offset() {
        // A 3x4 row-major matrix: the first super-diagonal starts at element 1.
        let g = diagonal_geometry("diagonal", &[3, 4], &[4, 1], 0, (1, 0, 1)).unwrap();
        assert_eq!(g, (vec![3], vec![5], 1));
        let g = diagonal_geometry("diagonal", &[3, 4], &[4, 1], 0, (-1, 0, 1)).unwrap();
        assert_eq!(g, (vec![2], vec![5], 4));
        let g = diagonal_geometry("diagonal", &[3, 4], &[4, 1], 2, (9, 0, 1)).unwrap();
        assert_eq!(g, (vec![0], vec![5], 2));
        let g = diagonal_geometry("diagonal", &[2, 3, 4], &[12, 4, 1], 0, (1, 2, 0)).unwrap();
        assert_eq!(g, (vec![3, 1], vec![4, 13], 12));
        assert!(diagonal_geometry("diagonal", &[3, 4], &[4, 1], 0, (0, 1, -1)).is_err());
        assert!(diagonal_geometry("diagonal", &[3], &[1], 0, (0, 0, 1)).is_err());
    }

    #[test]
    fn channels_last_puts_channels_fastest() {
        assert_eq!(
            channels_last_strides(&[1, 2, 3, 4]),
            Some(vec![24, 1, 8, 2])
        );
        assert_eq!(channels_last_strides(&[2, 3]), None);
    }
}
