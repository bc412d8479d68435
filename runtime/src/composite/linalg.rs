//! Linear-algebra composites: `matmul` (PyTorch's rules for 1-d, 2-d and batched
//! operands with broadcast batch dims), `matmul.out`, `linear` and `linear.out`.
//!
//! Owns: these kernels and the batch-shape broadcasting they need. Must not:
//! multiply anything itself (`dot`, `mm`, `bmm`, `addmm` do).

use crate::dispatch::DispatchKeySet;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::Tensor;

/// The broadcast of two batch shapes (aligned at the right; equal sizes or 1).
fn broadcast(a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
    let n = a.len().max(b.len());
    let at = |s: &[i64], i: usize| (i + s.len()).checked_sub(n).map_or(1, |j| s[j]);
    (0..n)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            (x, y) => Err(OpalError::msg(format!(
                "matmul: batch dimensions {a:?} and {b:?} are not broadcastable ({x} vs {y})"
            ))),
        })
        .collect()
}

/// `matmul`: dot product (1-d · 1-d), matrix-vector (2-d · 1-d), vector-matrix
/// (1-d · 2-d), matrix product (2-d · 2-d), and batched products otherwise, where a
/// 1-d operand gets a dim of size 1 prepended (left) or appended (right) that is
/// removed from the result, and the batch dims (all but the last two) broadcast.
pub(super) fn matmul(_ks: DispatchKeySet, self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let (da, db) = (self_.dim(), other.dim());
    match (da, db) {
        (0, _) | (_, 0) => Err(OpalError::msg(format!(
            "matmul: both arguments need to be at least 1-d, got {da}-d and {db}-d"
        ))),
        (1, 1) => ops::dot(self_, other),
        (2, 1) => ops::squeeze_dim(&ops::mm(self_, &ops::unsqueeze(other, 1)?)?, 1),
        (1, 2) => ops::squeeze_dim(&ops::mm(&ops::unsqueeze(self_, 0)?, other)?, 0),
        (2, 2) => ops::mm(self_, other),
        // A batch of matrices times one matrix or vector: one mm over all rows.
        (_, 1 | 2) => {
            let sizes = self_.sizes();
            let k = sizes[da - 1];
            let rows = sizes[..da - 1].iter().product::<i64>();
            let flat = ops::reshape(self_, &[rows, k])?;
            let mut shape = sizes[..da - 1].to_vec();
            let prod = if db == 1 {
                ops::squeeze_dim(&ops::mm(&flat, &ops::unsqueeze(other, 1)?)?, 1)?
            } else {
                shape.push(other.sizes()[1]);
                ops::mm(&flat, other)?
            };
            ops::reshape(&prod, &shape)
        }
        _ => batched(self_, other),
    }
}

/// The general case of [`matmul`]: both operands seen as (broadcast batch) × matrix,
/// flattened to one batch dim for `bmm`.
fn batched(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (sa, sb) = (a.sizes(), b.sizes());
    let (da, db) = (sa.len(), sb.len());
    let n = if da > 1 { sa[da - 2] } else { 1 };
    let k = sa[da - 1];
    let (k2, p) = if db > 1 {
        (sb[db - 2], sb[db - 1])
    } else {
        (sb[0], 1)
    };
    if k != k2 {
        return Err(OpalError::msg(format!(
            "matmul: shapes {sa:?} and {sb:?} cannot be multiplied ({k} vs {k2})"
        )));
    }
    let batch = broadcast(&sa[..da.saturating_sub(2)], &sb[..db.saturating_sub(2)])?;
    let count = batch.iter().product::<i64>();
    let a = if da == 1 {
        ops::unsqueeze(a, 0)?
    } else {
        a.clone()
    };
    let b = if db == 1 {
        ops::unsqueeze(b, 1)?
    } else {
        b.clone()
    };
    let to = |m: i64, n: i64| [batch.as_slice(), &[m, n]].concat();
    let a = ops::reshape(&ops::expand(&a, &to(n, k))?, &[count, n, k])?;
    let b = ops::reshape(&ops::expand(&b, &to(k, p))?, &[count, k, p])?;
    let prod = ops::bmm(&a, &b)?;
    let mut shape = batch;
    if da > 1 {
        shape.push(n);
    }
    if db > 1 {
        shape.push(p);
    }
    ops::reshape(&prod, &shape)
}

/// `matmul.out`: the out= kernels of `dot` and `mm` where the operands are those;
/// otherwise the product is computed and written into `out` by `cat.out` of that one
/// tensor, which applies the out= rules (resize, dtype check) on every backend.
pub(super) fn matmul_out(
    ks: DispatchKeySet,
    self_: &Tensor,
    other: &Tensor,
    out: &Tensor,
) -> Result<Tensor> {
    match (self_.dim(), other.dim()) {
        (1, 1) => ops::dot_out(self_, other, out),
        (2, 2) => ops::mm_out(self_, other, out),
        _ => {
            let prod = matmul(ks, self_, other)?;
            ops::cat_out::call(&[prod], 0, out)
        }
    }
}

/// `linear`: `input @ weight.T + bias` — one `addmm` for a 2-d input with bias,
/// else `matmul` then `add`.
pub(super) fn linear(
    _ks: DispatchKeySet,
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
) -> Result<Tensor> {
    let wt = ops::t(weight)?;
    match bias {
        Some(b) if input.dim() == 2 => ops::addmm(b, input, &wt),
        Some(b) => ops::add_tensor(&ops::matmul(input, &wt)?, b),
        None => ops::matmul(input, &wt),
    }
}

/// `linear.out`: `input @ weight.T + bias` written into `out` — `addmm.out` for a
/// 2-d input with bias (as `linear` uses `addmm`), else `matmul.out` and then the
/// bias added into `out` in place. `out` follows the out= rules of the product's
/// kernel (resized to the result, a dtype the result can be cast to).
pub(super) fn linear_out(
    _ks: DispatchKeySet,
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    out: &Tensor,
) -> Result<Tensor> {
    let wt = ops::t(weight)?;
    match bias {
        Some(b) if input.dim() == 2 => ops::addmm_out(b, input, &wt, out),
        Some(b) => {
            ops::matmul_out(input, &wt, out)?;
            ops::add_tensor_(out, b)
        }
        None => ops::matmul_out(input, &wt, out),
    }
}

#[cfg(test)]
mod tests {
    use super::broadcast;

    #[test]
    fn batch_shapes_broadcast() {
        assert_eq!(broadcast(&[2, 1], &[3]).unwrap(), vec![2, 3]);
        assert_eq!(broadcast(&[], &[4, 5]).unwrap(), vec![4, 5]);
        assert_eq!(broadcast(&[1], &[0]).unwrap(), vec![0]);
        assert!(broadcast(&[2], &[3]).is_err());
    }
}
