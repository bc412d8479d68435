//! Pairwise distances (`_cdist_forward`, `_pdist_forward` and their backward ops):
//! the argument checks and the result shapes, the same for every backend. The four
//! ops' rules ([`_cdist_forward`], [`_cdist_backward`], [`_pdist_forward`],
//! [`_pdist_backward`]) take the schema's arguments and return a [`Distance`] or a
//! [`DistanceBackward`], from which the CPU kernels compute and the Meta kernels
//! shape their results (`rule | kernel` in both backend YAMLs).
//!
//! Owns: these rules and their errors. Must not: allocate tensors, read tensor
//! data, or know any backend.

use super::broadcast_shapes;
use crate::{DType, OpalError, Result, Tensor};

/// A checked `_cdist_forward` or `_pdist_forward`.
pub struct Distance<'a> {
    /// The op's name, for errors.
    pub op: &'static str,
    /// `x1` (`self` for pdist).
    pub x1: &'a Tensor,
    /// `x2` (`self` again for pdist).
    pub x2: &'a Tensor,
    /// The norm's `p`.
    pub p: f64,
    /// `_cdist_forward`'s `compute_mode` (`None` for pdist).
    pub compute_mode: Option<i64>,
    /// The distances' shape.
    pub shape: Vec<i64>,
}

/// A checked `_cdist_backward` or `_pdist_backward`.
pub struct DistanceBackward<'a> {
    /// The forward's arguments (`shape`: the gradient's, not the distances').
    pub forward: Distance<'a>,
    /// The incoming gradient, of the distances' shape.
    pub grad: &'a Tensor,
    /// The forward's result (`cdist` / `pdist`).
    pub result: &'a Tensor,
}

/// The rule of `_cdist_forward`: see [`cdist_shape`].
pub fn _cdist_forward<'a>(
    x1: &'a Tensor,
    x2: &'a Tensor,
    p: f64,
    compute_mode: Option<i64>,
) -> Result<Distance<'a>> {
    let (a, b) = ((x1.sizes(), x1.dtype()), (x2.sizes(), x2.dtype()));
    const OP: &str = "_cdist_forward";
    let shape = cdist_shape(OP, a, b, p, compute_mode)?;
    Ok(Distance {
        compute_mode,
        ..distance(OP, [x1, x2], p, shape)
    })
}

/// The rule of `_cdist_backward`: see [`cdist_backward_shape`].
pub fn _cdist_backward<'a>(
    grad: &'a Tensor,
    x1: &'a Tensor,
    x2: &'a Tensor,
    p: f64,
    cdist: &'a Tensor,
) -> Result<DistanceBackward<'a>> {
    let (a, b) = ((x1.sizes(), x1.dtype()), (x2.sizes(), x2.dtype()));
    const OP: &str = "_cdist_backward";
    let shape = cdist_backward_shape(OP, grad.sizes(), a, b, p, cdist.sizes())?;
    let forward = distance(OP, [x1, x2], p, shape);
    Ok(DistanceBackward {
        forward,
        grad,
        result: cdist,
    })
}

/// The rule of `_pdist_forward`: see [`pdist_shape`].
pub fn _pdist_forward(self_: &Tensor, p: f64) -> Result<Distance<'_>> {
    const OP: &str = "_pdist_forward";
    let shape = pdist_shape(OP, self_.sizes(), self_.dtype())?;
    Ok(distance(OP, [self_, self_], p, shape))
}

/// The rule of `_pdist_backward`: see [`pdist_backward_shape`].
pub fn _pdist_backward<'a>(
    grad: &'a Tensor,
    self_: &'a Tensor,
    p: f64,
    pdist: &'a Tensor,
) -> Result<DistanceBackward<'a>> {
    let (s, d) = (self_.sizes(), self_.dtype());
    const OP: &str = "_pdist_backward";
    let shape = pdist_backward_shape(OP, grad.sizes(), s, d, pdist.sizes())?;
    let forward = distance(OP, [self_, self_], p, shape);
    let result = pdist;
    Ok(DistanceBackward {
        forward,
        grad,
        result,
    })
}

fn distance<'a>(
    op: &'static str,
    [x1, x2]: [&'a Tensor; 2],
    p: f64,
    shape: Vec<i64>,
) -> Distance<'a> {
    Distance {
        op,
        x1,
        x2,
        p,
        compute_mode: None,
        shape,
    }
}

fn float_kernel(name: &str, dtype: DType) -> Result<()> {
    match dtype {
        DType::F32 | DType::F64 => Ok(()),
        d => Err(OpalError::msg(format!(
            "\"{name}\" not implemented for '{d:?}'"
        ))),
    }
}

/// `_cdist_forward(x1 [B1.., r1, c], x2 [B2.., r2, c], p, compute_mode)`: the
/// result shape `[broadcast(B1, B2).., r1, r2]`. Floating inputs of one dtype
/// (f32 or f64 on CPU), `p >= 0`, at least 2-d, equal column counts, mode 0-2.
pub fn cdist_shape(
    op: &str,
    x1: (&[i64], DType),
    x2: (&[i64], DType),
    p: f64,
    compute_mode: Option<i64>,
) -> Result<Vec<i64>> {
    for (name, (_, d)) in [("X1", x1), ("X2", x2)] {
        if !d.is_floating_point() {
            return Err(OpalError::msg(format!(
                "{op}: cdist only supports floating-point dtypes, {name} got: {d:?}"
            )));
        }
    }
    if p.is_nan() || p < 0.0 {
        return Err(OpalError::msg(format!(
            "{op}: cdist only supports non-negative p values, got p={p}"
        )));
    }
    for (name, (s, _)) in [("X1", x1), ("X2", x2)] {
        if s.len() < 2 {
            return Err(OpalError::shape(format!(
                "{op}: cdist only supports at least 2D tensors, {name} got: {}D",
                s.len()
            )));
        }
    }
    let (s1, s2) = (x1.0, x2.0);
    let (n1, n2) = (s1.len(), s2.len());
    if s1[n1 - 1] != s2[n2 - 1] {
        return Err(OpalError::shape(format!(
            "{op}: X1 and X2 must have the same number of columns. X1: {} X2: {}",
            s1[n1 - 1],
            s2[n2 - 1]
        )));
    }
    if let Some(m) = compute_mode {
        if !(0..=2).contains(&m) {
            return Err(OpalError::msg(format!(
                "{op}: possible modes: 0, 1, 2, but was: {m}"
            )));
        }
    }
    let mut shape = broadcast_shapes(op, &[&s1[..n1 - 2], &s2[..n2 - 2]])?;
    shape.extend([s1[n1 - 2], s2[n2 - 2]]);
    float_kernel("cdist", x1.1)?;
    if x1.1 != x2.1 {
        return Err(OpalError::msg(format!(
            "{op}: expected scalar type {:?} but found {:?}",
            x1.1, x2.1
        )));
    }
    Ok(shape)
}

/// `_cdist_backward(grad, x1, x2, p, cdist)`: the gradient of `x1` expanded to the
/// batch of the distances, `[B.., r1, c]`; `grad` and `cdist` must have the
/// distances' shape.
pub fn cdist_backward_shape(
    op: &str,
    grad: &[i64],
    x1: (&[i64], DType),
    x2: (&[i64], DType),
    p: f64,
    cdist: &[i64],
) -> Result<Vec<i64>> {
    let dist = cdist_shape(op, x1, x2, p, None)?;
    for (name, s) in [("grad", grad), ("cdist", cdist)] {
        if s != dist.as_slice() {
            return Err(OpalError::shape(format!(
                "{op}: expected {name} of shape {dist:?}, got {s:?}"
            )));
        }
    }
    let mut shape = dist[..dist.len() - 1].to_vec();
    shape.push(x1.0[x1.0.len() - 1]);
    Ok(shape)
}

/// `_pdist_forward(self [n, m], p)`: `n (n - 1) / 2` distances, one per pair of
/// rows `i < j` in row-major order. A 2-d f32 / f64 input.
pub fn pdist_shape(op: &str, x: &[i64], dtype: DType) -> Result<Vec<i64>> {
    if x.len() != 2 {
        return Err(OpalError::shape(format!(
            "{op}: pdist only supports 2D tensors, got: {}D",
            x.len()
        )));
    }
    float_kernel("pdist", dtype)?;
    let n = x[0];
    Ok(vec![n * (n - 1).max(0) / 2])
}

/// `_pdist_backward(grad, self, p, pdist)`: the gradient has `self`'s shape;
/// `grad` and `pdist` hold one value per pair.
pub fn pdist_backward_shape(
    op: &str,
    grad: &[i64],
    x: &[i64],
    dtype: DType,
    pdist: &[i64],
) -> Result<Vec<i64>> {
    let pairs = pdist_shape(op, x, dtype)?;
    for (name, s) in [("grad", grad), ("pdist", pdist)] {
        if s != pairs.as_slice() {
            return Err(OpalError::shape(format!(
                "{op}: expected {name} of shape {pairs:?}, got {s:?}"
            )));
        }
    }
    Ok(x.to_vec())
}
