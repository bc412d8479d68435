//! Scans along one dimension: `cumsum` (functional, out=, in-place).
//!
//! Owns: the running-sum kernel and its dtype rule (integers and bool accumulate
//! into int64 unless `dtype=` says otherwise; floats accumulate in f64; complex
//! scans its real and imaginary parts). Must not:
//! re-implement layout handling (uses [`super::Rows`]).

use super::sum::by_parts;
use super::{wrap_dim, write_rows_back, Rows};
use crate::dtype_dispatch::Elem;
use crate::out::{write_result, Dest};
use crate::{dispatch_float, dispatch_int_bool};
use opal::{DType, Result, Tensor};

fn cumsum_impl(
    self_: &Tensor,
    dim: i64,
    dtype: Option<DType>,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let rd = match dtype {
        Some(d) => d,
        None if self_.dtype().is_integral(true) => DType::I64,
        None => self_.dtype(),
    };
    if rd.is_complex() {
        // Running sums are linear: the parts scan on their own. (A complex input
        // into a real `dtype=` is cast first, dropping the imaginary part, as
        // PyTorch does.)
        return by_parts(self_, rd, dest, op, |part, rt| {
            cumsum_impl(part, dim, Some(rt), Dest::New, op)
        });
    }
    let w = wrap_dim(dim, self_.dim(), op)?;
    let mask: Vec<bool> = (0..self_.dim()).map(|i| i == w).collect();
    write_result(dest, self_.sizes(), rd, op, |o| {
        if rd.is_floating_point() {
            let rows = Rows::new(self_, &mask, DType::F64)?;
            let data = rows.slice::<f64>()?;
            let mut v = Vec::with_capacity(data.len());
            for r in data.chunks(rows.inner.max(1)) {
                let mut acc = 0.0f64;
                for &x in r {
                    acc += x;
                    v.push(acc);
                }
            }
            dispatch_float!(rd, op, |T, C| {
                let v: Vec<T> = v.iter().map(|&x| T::from_f64(x)).collect();
                write_rows_back(o, w, &v, op)
            })
        } else {
            let rows = Rows::new(self_, &mask, DType::I64)?;
            let data = rows.slice::<i64>()?;
            let mut v = Vec::with_capacity(data.len());
            for r in data.chunks(rows.inner.max(1)) {
                let mut acc = 0i64;
                for &x in r {
                    acc = acc.wrapping_add(x);
                    v.push(acc);
                }
            }
            dispatch_int_bool!(rd, op, |T| {
                let v: Vec<T> = v.iter().map(|&x| T::from_i64(x)).collect();
                write_rows_back(o, w, &v, op)
            })
        }
    })
}
/// `cumsum`: running sum along `dim`.
pub fn cumsum(self_: &Tensor, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
    cumsum_impl(self_, dim, dtype, Dest::New, "cumsum")
}
/// `cumsum.out`.
pub fn cumsum_out(self_: &Tensor, dim: i64, dtype: Option<DType>, out: &Tensor) -> Result<Tensor> {
    cumsum_impl(self_, dim, dtype, Dest::Out(out), "cumsum.out")
}
/// `cumsum_`.
pub fn cumsum_(self_: &Tensor, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
    cumsum_impl(self_, dim, dtype, Dest::InPlace(self_), "cumsum_")
}
