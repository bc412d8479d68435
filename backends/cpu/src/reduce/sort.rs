//! Sorting along one dimension: `sort` and `topk` (with their `values=/indices=`
//! out forms).
//!
//! Owns: ordering semantics — NaN sorts as larger than every number (last when
//! ascending, first when descending), ties keep their original order (stable).
//! Must not: re-implement layout handling (uses [`super::Rows`]).

use super::{wrap_dim, write_rows_back, Rows};
use crate::dispatch_all;
use crate::dtype_dispatch::Elem;
use crate::out::{write_result, Dest};
use opal::{DType, OpalError, Result, Tensor};
use std::cmp::Ordering;

/// Total order with NaN greatest; `x != x` detects NaN for any element type.
#[inline]
#[allow(clippy::eq_op)]
fn cmp_nan_last<T: Elem>(a: &T, b: &T) -> Ordering {
    match (a != a, b != b) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(b).unwrap_or(Ordering::Equal),
    }
}

/// Sorted (values, indices) of every row, first `k` of each, in row-major order.
fn sort_rows<T: Elem>(rows: &Rows, descending: bool, k: usize) -> Result<(Vec<T>, Vec<i64>)> {
    let data = rows.slice::<T>()?;
    let n = rows.inner;
    let mut vals = Vec::with_capacity(rows.outer * k);
    let mut idxs = Vec::with_capacity(rows.outer * k);
    let mut order: Vec<usize> = Vec::with_capacity(n);
    for r in 0..rows.outer {
        let row = &data[r * n..(r + 1) * n];
        order.clear();
        order.extend(0..n);
        // Stable: equal keys keep index order in both directions.
        if descending {
            order.sort_by(|&i, &j| cmp_nan_last(&row[j], &row[i]));
        } else {
            order.sort_by(|&i, &j| cmp_nan_last(&row[i], &row[j]));
        }
        for &i in &order[..k] {
            vals.push(row[i]);
            idxs.push(i as i64);
        }
    }
    Ok((vals, idxs))
}

#[allow(clippy::too_many_arguments)]
fn sort_impl(
    self_: &Tensor,
    dim: i64,
    descending: bool,
    k: Option<i64>,
    outs: Option<(&Tensor, &Tensor)>,
    op: &str,
) -> Result<(Tensor, Tensor)> {
    let dt = self_.dtype();
    let w = wrap_dim(dim, self_.dim(), op)?;
    let n = if self_.dim() == 0 {
        1
    } else {
        self_.sizes()[w]
    };
    let k = match k {
        None => n,
        Some(k) if k >= 0 && k <= n => k,
        Some(k) => {
            return Err(OpalError::msg(format!(
                "{op}: selected index k out of range (k = {k}, dimension size {n})"
            )))
        }
    };
    let mut shape = self_.sizes().to_vec();
    if !shape.is_empty() {
        shape[w] = k;
    }
    let mask: Vec<bool> = (0..self_.dim()).map(|i| i == w).collect();
    let rows = Rows::new(self_, &mask, dt)?;
    let (vd, id) = match outs {
        Some((v, i)) => (Dest::Out(v), Dest::Out(i)),
        None => (Dest::New, Dest::New),
    };
    if let Some((_, i)) = outs {
        if i.dtype() != DType::I64 {
            return Err(OpalError::msg(format!(
                "{op}: indices must be int64, got {}",
                i.dtype()
            )));
        }
    }
    let mut idx = Vec::new();
    let values = write_result(vd, &shape, dt, op, |o| {
        dispatch_all!(dt, op, |T| {
            let (v, i) = sort_rows::<T>(&rows, descending, k as usize)?;
            idx = i;
            write_rows_back(o, w, &v, op)
        })
    })?;
    let indices = write_result(id, &shape, DType::I64, op, |o| {
        write_rows_back(o, w, &idx, op)
    })?;
    Ok((values, indices))
}

/// `sort`: (values, indices) sorted along `dim`.
pub fn sort(self_: &Tensor, dim: i64, descending: bool) -> Result<(Tensor, Tensor)> {
    sort_impl(self_, dim, descending, None, None, "sort")
}
/// `sort.values`.
pub fn sort_values(
    self_: &Tensor,
    dim: i64,
    descending: bool,
    values: &Tensor,
    indices: &Tensor,
) -> Result<(Tensor, Tensor)> {
    sort_impl(
        self_,
        dim,
        descending,
        None,
        Some((values, indices)),
        "sort.values",
    )
}
/// `topk`: the `k` largest (or smallest) along `dim`, sorted.
pub fn topk(
    self_: &Tensor,
    k: i64,
    dim: i64,
    largest: bool,
    sorted: bool,
) -> Result<(Tensor, Tensor)> {
    // Results are always sorted; `sorted=False` permits any order, so sorted is valid.
    let _ = sorted;
    sort_impl(self_, dim, largest, Some(k), None, "topk")
}
/// `topk.values`.
#[allow(clippy::too_many_arguments)]
pub fn topk_values(
    self_: &Tensor,
    k: i64,
    dim: i64,
    largest: bool,
    sorted: bool,
    values: &Tensor,
    indices: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let _ = sorted;
    sort_impl(
        self_,
        dim,
        largest,
        Some(k),
        Some((values, indices)),
        "topk.values",
    )
}
