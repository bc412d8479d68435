//! Output sizes of reductions: which dims a `dim` argument selects (none / empty
//! list = all), `keepdim`, and the "cannot reduce an empty dim" checks of ops
//! without an identity (max, amin, argmax, ...).
//!
//! Owns: reduction size rules. Must not: choose dtypes (see `promote`); reduction
//! outputs are always allocated contiguous, so no strides live here.

use super::fail;
use super::geometry::{dim_mask, wrap_dim};
use opal::Result;

/// Which dims a reduction reduces: `None` or an empty list means every dim.
pub fn reduction_mask(op: &str, sizes: &[i64], dims: Option<&[i64]>) -> Result<Vec<bool>> {
    match dims {
        Some(d) if !d.is_empty() => dim_mask(op, d, sizes.len()),
        _ => Ok(vec![true; sizes.len()]),
    }
}

/// Sizes after reducing the dims in `mask`: dropped, or kept as 1 with `keepdim`.
pub fn reduced_sizes(sizes: &[i64], mask: &[bool], keepdim: bool) -> Vec<i64> {
    sizes
        .iter()
        .zip(mask)
        .filter_map(|(&s, &m)| match (m, keepdim) {
            (false, _) => Some(s),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Sizes of a reduction over `dims` (`None` / empty = all dims).
pub fn reduction_sizes(
    op: &str,
    sizes: &[i64],
    dims: Option<&[i64]>,
    keepdim: bool,
) -> Result<Vec<i64>> {
    let mask = reduction_mask(op, sizes, dims)?;
    Ok(reduced_sizes(sizes, &mask, keepdim))
}

/// For reductions without an identity element: every reduced dim must be non-empty.
pub fn check_nonempty_dims(op: &str, sizes: &[i64], mask: &[bool]) -> Result<()> {
    for (d, (&s, &m)) in sizes.iter().zip(mask).enumerate() {
        if m && s == 0 {
            return Err(fail(
                op,
                format!("expected reduction dim {d} to have non-zero size"),
            ));
        }
    }
    Ok(())
}

/// Sizes of a single-dim reduction (`max.dim`, `argmax` with a dim, `topk`-like
/// index outputs), checking the dim is non-empty when `need_nonempty`.
pub fn single_dim_sizes(
    op: &str,
    sizes: &[i64],
    dim: i64,
    keepdim: bool,
    need_nonempty: bool,
) -> Result<Vec<i64>> {
    let d = wrap_dim(op, dim, sizes.len())?;
    if sizes.is_empty() {
        return Ok(Vec::new());
    }
    let mut mask = vec![false; sizes.len()];
    mask[d] = true;
    if need_nonempty {
        check_nonempty_dims(op, sizes, &mask)?;
    }
    Ok(reduced_sizes(sizes, &mask, keepdim))
}

/// `argmax`/`argmin` sizes: with no dim the input is flattened (keepdim keeps every
/// dim as 1).
pub fn arg_reduction_sizes(
    op: &str,
    sizes: &[i64],
    dim: Option<i64>,
    keepdim: bool,
) -> Result<Vec<i64>> {
    match dim {
        Some(d) => single_dim_sizes(op, sizes, d, keepdim, true),
        None => {
            if sizes.contains(&0) {
                return Err(fail(
                    op,
                    "expected reduction dim to be specified for input.numel() == 0",
                ));
            }
            Ok(if keepdim {
                vec![1; sizes.len()]
            } else {
                Vec::new()
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reductions_drop_or_keep_dims() {
        assert_eq!(
            reduction_sizes("sum", &[2, 3, 4], Some(&[1]), false).unwrap(),
            vec![2, 4]
        );
        assert_eq!(
            reduction_sizes("sum", &[2, 3, 4], Some(&[0, 1]), true).unwrap(),
            vec![1, 1, 4]
        );
        assert_eq!(
            reduction_sizes("sum", &[2, 3, 4], None, false).unwrap(),
            Vec::<i64>::new()
        );
        assert_eq!(
            reduction_sizes("sum", &[2, 3, 4], Some(&[]), true).unwrap(),
            vec![1, 1, 1]
        );
        assert!(reduction_sizes("sum", &[2, 3], Some(&[1, -1]), false).is_err());
        assert_eq!(
            reduction_sizes("sum", &[], Some(&[0]), false).unwrap(),
            Vec::<i64>::new()
        );
    }

    #[test]
    fn empty_dims_rejected_only_without_identity() {
        assert!(single_dim_sizes("max", &[0, 3], 0, false, true).is_err());
        assert_eq!(
            single_dim_sizes("max", &[0, 3], 1, false, true).unwrap(),
            vec![0]
        );
        assert!(arg_reduction_sizes("argmax", &[0], None, false).is_err());
        assert_eq!(
            arg_reduction_sizes("argmax", &[2, 3], None, true).unwrap(),
            vec![1, 1]
        );
    }
}
