//! Extreme-value reductions: amax, amin, argmax, argmin, max.dim, min.dim.
//!
//! Owns: NaN semantics (a NaN is the extreme; its first index wins), tie-breaking
//! (first occurrence), and the error on empty reductions (no identity exists).
//! Must not: re-implement layout handling (uses [`super::Rows`]).

use super::{dim_mask, map_rows, reduced_shape, wrap_dim, write_vec, Rows};
use crate::dispatch_all;
use crate::dtype_dispatch::Elem;
use crate::out::{write_result, Dest};
use opal::{DType, OpalError, Result, Tensor};

/// Index of the max (or min) of a non-empty row: first NaN, else first extreme.
#[inline]
fn arg_extreme<T: Elem>(r: &[T], max: bool) -> usize {
    let mut best = 0;
    let mut bv = r[0];
    #[allow(clippy::eq_op)] // x != x is the generic NaN test
    for (i, &x) in r.iter().enumerate().skip(1) {
        if bv != bv {
            break;
        }
        if x != x || (max && x > bv) || (!max && x < bv) {
            best = i;
            bv = x;
        }
    }
    best
}

fn check_nonempty(self_: &Tensor, mask: &[bool], op: &str) -> Result<()> {
    for (d, (&s, &m)) in self_.sizes().iter().zip(mask).enumerate() {
        if m && s == 0 {
            return Err(OpalError::msg(format!(
                "{op}: expected reduction dim {d} to have non-zero size"
            )));
        }
    }
    if self_.numel() == 0 && self_.dim() == 0 {
        return Err(OpalError::msg(format!(
            "{op}: cannot reduce an empty tensor"
        )));
    }
    Ok(())
}

fn amax_impl(
    self_: &Tensor,
    dim: &[i64],
    keepdim: bool,
    max: bool,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let dt = self_.dtype();
    let mask = dim_mask(Some(dim), self_.dim(), op)?;
    check_nonempty(self_, &mask, op)?;
    let shape = reduced_shape(self_.sizes(), &mask, keepdim);
    write_result(dest, &shape, dt, op, |o| {
        dispatch_all!(dt, op, |T| {
            let rows = Rows::new(self_, &mask, dt)?;
            let v = map_rows::<T, T>(&rows, |r| r[arg_extreme(r, max)])?;
            write_vec(o, &v, op)
        })
    })
}
/// `amax`: maximum over `dim` (all dims when empty), NaN-propagating.
pub fn amax(self_: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
    amax_impl(self_, dim, keepdim, true, Dest::New, "amax")
}
/// `amax.out`.
pub fn amax_out(self_: &Tensor, dim: &[i64], keepdim: bool, out: &Tensor) -> Result<Tensor> {
    amax_impl(self_, dim, keepdim, true, Dest::Out(out), "amax.out")
}
/// `amin`: minimum over `dim` (all dims when empty), NaN-propagating.
pub fn amin(self_: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
    amax_impl(self_, dim, keepdim, false, Dest::New, "amin")
}
/// `amin.out`.
pub fn amin_out(self_: &Tensor, dim: &[i64], keepdim: bool, out: &Tensor) -> Result<Tensor> {
    amax_impl(self_, dim, keepdim, false, Dest::Out(out), "amin.out")
}

fn argmax_impl(
    self_: &Tensor,
    dim: Option<i64>,
    keepdim: bool,
    max: bool,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let dt = self_.dtype();
    let (mask, shape) = match dim {
        Some(d) => {
            let w = wrap_dim(d, self_.dim(), op)?;
            let mask: Vec<bool> = (0..self_.dim()).map(|i| i == w).collect();
            let shape = reduced_shape(self_.sizes(), &mask, keepdim);
            (mask, shape)
        }
        None => {
            // Flattened: the result is a scalar (or all-ones shape with keepdim).
            let mask = vec![true; self_.dim()];
            let shape = if keepdim {
                vec![1; self_.dim()]
            } else {
                vec![]
            };
            (mask, shape)
        }
    };
    check_nonempty(self_, &mask, op)?;
    write_result(dest, &shape, DType::I64, op, |o| {
        dispatch_all!(dt, op, |T| {
            let rows = Rows::new(self_, &mask, dt)?;
            let v = map_rows::<T, i64>(&rows, |r| arg_extreme(r, max) as i64)?;
            write_vec(o, &v, op)
        })
    })
}
/// `argmax`: index of the maximum (over the flattened tensor when `dim` is None).
pub fn argmax(self_: &Tensor, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
    argmax_impl(self_, dim, keepdim, true, Dest::New, "argmax")
}
/// `argmax.out`.
pub fn argmax_out(self_: &Tensor, dim: Option<i64>, keepdim: bool, out: &Tensor) -> Result<Tensor> {
    argmax_impl(self_, dim, keepdim, true, Dest::Out(out), "argmax.out")
}
/// `argmin`.
pub fn argmin(self_: &Tensor, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
    argmax_impl(self_, dim, keepdim, false, Dest::New, "argmin")
}
/// `argmin.out`.
pub fn argmin_out(self_: &Tensor, dim: Option<i64>, keepdim: bool, out: &Tensor) -> Result<Tensor> {
    argmax_impl(self_, dim, keepdim, false, Dest::Out(out), "argmin.out")
}

fn max_dim_impl(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    max: bool,
    outs: Option<(&Tensor, &Tensor)>,
    op: &str,
) -> Result<(Tensor, Tensor)> {
    let dt = self_.dtype();
    let w = wrap_dim(dim, self_.dim(), op)?;
    let mask: Vec<bool> = (0..self_.dim()).map(|i| i == w).collect();
    check_nonempty(self_, &mask, op)?;
    let shape = reduced_shape(self_.sizes(), &mask, keepdim);
    let rows = Rows::new(self_, &mask, dt)?;
    let (vd, id) = match outs {
        Some((v, i)) => (Dest::Out(v), Dest::Out(i)),
        None => (Dest::New, Dest::New),
    };
    if let Some((_, i)) = outs {
        if i.dtype() != DType::I64 {
            return Err(OpalError::msg(format!(
                "{op}: expected indices to have dtype int64, got {}",
                i.dtype()
            )));
        }
    }
    let idx = dispatch_all!(dt, op, |T| map_rows::<T, i64>(
        &rows,
        |r| arg_extreme(r, max) as i64
    ))?;
    let values = write_result(vd, &shape, dt, op, |o| {
        dispatch_all!(dt, op, |T| {
            let data = rows.slice::<T>()?;
            let v: Vec<T> = idx
                .iter()
                .enumerate()
                .map(|(row, &i)| data[row * rows.inner + i as usize])
                .collect();
            write_vec(o, &v, op)
        })
    })?;
    let indices = write_result(id, &shape, DType::I64, op, |o| write_vec(o, &idx, op))?;
    Ok((values, indices))
}
/// `max.dim`: (values, indices) of the maximum along `dim`.
pub fn max_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    max_dim_impl(self_, dim, keepdim, true, None, "max.dim")
}
/// `max.dim_max`.
pub fn max_dim_max(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    max: &Tensor,
    max_values: &Tensor,
) -> Result<(Tensor, Tensor)> {
    max_dim_impl(
        self_,
        dim,
        keepdim,
        true,
        Some((max, max_values)),
        "max.dim_max",
    )
}
/// `min.dim`: (values, indices) of the minimum along `dim`.
pub fn min_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    max_dim_impl(self_, dim, keepdim, false, None, "min.dim")
}
/// `min.dim_min`.
pub fn min_dim_min(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    min: &Tensor,
    min_indices: &Tensor,
) -> Result<(Tensor, Tensor)> {
    max_dim_impl(
        self_,
        dim,
        keepdim,
        false,
        Some((min, min_indices)),
        "min.dim_min",
    )
}
