//! Output sizes of matrix products: `mm`, `bmm`, `addmm`, `baddbmm`, `dot`,
//! `matmul` (with batch broadcasting and 1-d promotion) and `linear`, plus the
//! same-dtype rule these kernels enforce.
//!
//! Owns: matrix-product size rules. Must not: pick memory layouts (products are
//! allocated contiguous) or touch tensors.

use super::fail;
use super::geometry::check_expandable;
use opal::{DType, Result};

/// Matrix products do not promote: every operand must share one dtype.
pub fn same_dtype(op: &str, dtypes: &[DType]) -> Result<DType> {
    let first = *dtypes
        .first()
        .ok_or_else(|| fail(op, "needs at least one operand"))?;
    match dtypes.iter().find(|&&d| d != first) {
        Some(d) => Err(fail(
            op,
            format!(
                "expected both operands to have the same dtype, but got: {} != {}",
                first.name(),
                d.name()
            ),
        )),
        None => Ok(first),
    }
}

fn need_dims(op: &str, what: &str, sizes: &[i64], n: usize) -> Result<()> {
    if sizes.len() == n {
        Ok(())
    } else {
        Err(fail(
            op,
            format!("{what} must be a {n}-D tensor, got {}-D", sizes.len()),
        ))
    }
}

fn cannot_multiply(op: &str, a: &[i64], b: &[i64]) -> opal::OpalError {
    let show = |s: &[i64]| {
        s.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join("x")
    };
    fail(
        op,
        format!(
            "mat1 and mat2 shapes cannot be multiplied ({} and {})",
            show(a),
            show(b)
        ),
    )
}

/// `mm`: `[n, m] @ [m, p] -> [n, p]`.
pub fn mm_sizes(op: &str, a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
    need_dims(op, "self", a, 2)?;
    need_dims(op, "mat2", b, 2)?;
    if a[1] != b[0] {
        return Err(cannot_multiply(op, a, b));
    }
    Ok(vec![a[0], b[1]])
}

/// `bmm`: `[b, n, m] @ [b, m, p] -> [b, n, p]`.
pub fn bmm_sizes(op: &str, a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
    need_dims(op, "batch1", a, 3)?;
    need_dims(op, "batch2", b, 3)?;
    if a[0] != b[0] {
        return Err(fail(
            op,
            format!(
                "batch1 and batch2 must have same number of batches, got {} and {}",
                a[0], b[0]
            ),
        ));
    }
    if a[2] != b[1] {
        return Err(cannot_multiply(op, &a[1..], &b[1..]));
    }
    Ok(vec![a[0], a[1], b[2]])
}

/// `addmm`: the product's sizes; `self` must broadcast to them.
pub fn addmm_sizes(op: &str, input: &[i64], a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
    let out = mm_sizes(op, a, b)?;
    check_expandable(op, input, &out)?;
    Ok(out)
}

/// `baddbmm`: the batched product's sizes; `self` must broadcast to them.
pub fn baddbmm_sizes(op: &str, input: &[i64], a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
    let out = bmm_sizes(op, a, b)?;
    check_expandable(op, input, &out)?;
    Ok(out)
}

/// `dot`: two 1-d tensors of one length give a zero-dim result.
pub fn dot_sizes(op: &str, a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
    if a.len() != 1 || b.len() != 1 {
        return Err(fail(
            op,
            format!(
                "1D tensors expected, but got {}D and {}D tensors",
                a.len(),
                b.len()
            ),
        ));
    }
    if a[0] != b[0] {
        return Err(fail(
            op,
            format!(
                "inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of elements, but got {} and {} elements respectively",
                a[0], b[0], a[0], b[0]
            ),
        ));
    }
    Ok(Vec::new())
}

/// `matmul`: 1-d operands are promoted to matrices (and the added dim removed from
/// the result); leading batch dims broadcast.
pub fn matmul_sizes(op: &str, a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
    if a.is_empty() || b.is_empty() {
        return Err(fail(
            op,
            format!(
                "both arguments to matmul need to be at least 1D, but they are {}D and {}D",
                a.len(),
                b.len()
            ),
        ));
    }
    if a.len() == 1 && b.len() == 1 {
        return dot_sizes(op, a, b);
    }
    let (n, m_a) = if a.len() == 1 {
        (None, a[0])
    } else {
        (Some(a[a.len() - 2]), a[a.len() - 1])
    };
    let (m_b, p) = if b.len() == 1 {
        (b[0], None)
    } else {
        (b[b.len() - 2], Some(b[b.len() - 1]))
    };
    if m_a != m_b {
        return Err(cannot_multiply(op, a, b));
    }
    let batch_a = &a[..a.len().saturating_sub(2)];
    let batch_b = &b[..b.len().saturating_sub(2)];
    let mut out = opal::rules::broadcast_shapes(op, &[batch_a, batch_b])?;
    out.extend(n);
    out.extend(p);
    Ok(out)
}

/// `linear`: `input [..., in]`, `weight [out, in]` (or `[in]`) -> `[..., out]`;
/// a bias must broadcast to the result.
pub fn linear_sizes(
    op: &str,
    input: &[i64],
    weight: &[i64],
    bias: Option<&[i64]>,
) -> Result<Vec<i64>> {
    if input.is_empty() || weight.is_empty() || weight.len() > 2 {
        return Err(fail(
            op,
            format!("expected input of at least 1-D and a 1-D or 2-D weight, got {input:?} and {weight:?}"),
        ));
    }
    let in_features = *weight.last().unwrap_or(&0);
    if input[input.len() - 1] != in_features {
        let rows: i64 = input[..input.len() - 1].iter().product();
        return Err(cannot_multiply(
            op,
            &[rows, input[input.len() - 1]],
            &[in_features, if weight.len() == 2 { weight[0] } else { 1 }],
        ));
    }
    let mut out = input[..input.len() - 1].to_vec();
    if weight.len() == 2 {
        out.push(weight[0]);
    }
    if let Some(b) = bias {
        check_expandable(op, b, &out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_products() {
        assert_eq!(mm_sizes("mm", &[2, 3], &[3, 4]).unwrap(), vec![2, 4]);
        let e = mm_sizes("mm", &[2, 3], &[4, 4]).unwrap_err().to_string();
        assert!(e.contains("mm") && e.contains("2x3 and 4x4"), "{e}");
        assert_eq!(
            bmm_sizes("bmm", &[5, 2, 3], &[5, 3, 4]).unwrap(),
            vec![5, 2, 4]
        );
        assert!(bmm_sizes("bmm", &[5, 2, 3], &[4, 3, 4]).is_err());
        assert_eq!(
            addmm_sizes("addmm", &[4], &[2, 3], &[3, 4]).unwrap(),
            vec![2, 4]
        );
        assert!(addmm_sizes("addmm", &[3], &[2, 3], &[3, 4]).is_err());
    }

    #[test]
    fn matmul_promotes_vectors_and_broadcasts_batches() {
        assert_eq!(
            matmul_sizes("matmul", &[3], &[3]).unwrap(),
            Vec::<i64>::new()
        );
        assert_eq!(matmul_sizes("matmul", &[2, 3], &[3]).unwrap(), vec![2]);
        assert_eq!(matmul_sizes("matmul", &[3], &[3, 4]).unwrap(), vec![4]);
        assert_eq!(
            matmul_sizes("matmul", &[7, 1, 2, 3], &[5, 3, 4]).unwrap(),
            vec![7, 5, 2, 4]
        );
        assert_eq!(
            matmul_sizes("matmul", &[3], &[5, 3, 4]).unwrap(),
            vec![5, 4]
        );
        assert_eq!(
            matmul_sizes("matmul", &[5, 2, 3], &[3]).unwrap(),
            vec![5, 2]
        );
        assert!(matmul_sizes("matmul", &[2, 3], &[2, 3]).is_err());
    }

    #[test]
    fn linear_maps_last_dim() {
        assert_eq!(
            linear_sizes("linear", &[8, 4, 16], &[32, 16], Some(&[32])).unwrap(),
            vec![8, 4, 32]
        );
        assert!(linear_sizes("linear", &[8, 15], &[32, 16], None).is_err());
        assert!(same_dtype("mm", &[DType::F32, DType::F64]).is_err());
    }
}
