//! `scatter.value` (a scalar written where `index` points) and
//! `scatter_reduce.two` (src values reduced into `self` with sum, prod, mean,
//! amax or amin, with or without `self`'s own values), with in-place and out=
//! forms.
//!
//! Owns: the reductions' element rules per dtype. Must not: validate indices or
//! shapes itself (`scatter_positions` does, with the gather/scatter messages).

use super::{add, check_src_dtype, scatter_positions};
use crate::copy::{copy_into, to_vec_as};
use crate::dispatch_all;
use crate::dtype_dispatch::Elem;
use crate::nn::io::write_out;
use opal::rules::{scatter_reduce_kind, ScatterReduce as Reduce};
use opal::{DType, Result, Scalar, Tensor};

/// A value of the element type `T` from a Scalar, as PyTorch's fill converts it
/// (floats truncate into integers, non-zero is true).
fn scalar_as<T: Elem>(v: &Scalar) -> T {
    if T::IS_FLOAT {
        T::from_f64(v.to_f64())
    } else if T::DTYPE == DType::Bool {
        T::from_i64(v.to_bool() as i64)
    } else {
        T::from_i64(v.to_i64())
    }
}

/// A copy of `self_` with `value` written where `index` points along `dim`.
pub fn scatter_value(self_: &Tensor, dim: i64, index: &Tensor, value: &Scalar) -> Result<Tensor> {
    const OP: &str = "scatter";
    dispatch_all!(self_.dtype(), OP, |T| {
        let mut out = to_vec_as::<T>(self_)?;
        let v: T = scalar_as(value);
        // The index bounds itself: there is no src whose sizes could limit it.
        scatter_positions(self_, dim, index, index, OP, |o, _| out[o] = v)?;
        Tensor::from_vec(out, self_.sizes())
    })
}

/// In-place `scatter.value`.
pub fn scatter_value_(self_: &Tensor, dim: i64, index: &Tensor, value: &Scalar) -> Result<Tensor> {
    copy_into(self_, &scatter_value(self_, dim, index, value)?, "scatter_")?;
    Ok(self_.clone())
}

/// `scatter.value` into `out`.
pub fn scatter_value_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    value: &Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &scatter_value(self_, dim, index, value)?,
        out,
        "scatter.value_out",
    )
}

/// One reduction step in `T`'s own arithmetic (each step rounded to `T`, as
/// PyTorch's CPU kernel accumulates); amax / amin propagate NaN.
#[inline]
fn combine<T: Elem>(r: Reduce, a: T, b: T) -> T {
    if r == Reduce::Sum || r == Reduce::Mean {
        return add(a, b);
    }
    if T::IS_FLOAT {
        let (x, y) = (a.to_f64(), b.to_f64());
        let v = match r {
            Reduce::Prod => x * y,
            _ if x.is_nan() || y.is_nan() => f64::NAN,
            Reduce::Amax => x.max(y),
            _ => x.min(y),
        };
        T::from_f64(v)
    } else if T::DTYPE == DType::Bool {
        let (x, y) = (a.to_bool(), b.to_bool());
        T::from_i64(match r {
            Reduce::Amax => x || y,
            _ => x && y,
        } as i64)
    } else {
        let (x, y) = (a.to_i64(), b.to_i64());
        T::from_i64(match r {
            Reduce::Prod => x.wrapping_mul(y),
            Reduce::Amax => x.max(y),
            _ => x.min(y),
        })
    }
}

/// The mean of a sum over `n` values: true division for floats, floor division
/// for integers (PyTorch divides integer means with rounding mode "floor").
#[inline]
fn mean_of<T: Elem>(sum: T, n: i64) -> T {
    if T::IS_FLOAT {
        T::from_f64(sum.to_f64() / n as f64)
    } else if T::DTYPE == DType::Bool {
        sum
    } else {
        T::from_i64(sum.to_i64().div_euclid(n))
    }
}

/// A copy of `self_` with `src` values reduced in where `index` points along `dim`.
/// Without `include_self`, a position that receives values forgets its own.
pub fn scatter_reduce_two(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: &str,
    include_self: bool,
) -> Result<Tensor> {
    const OP: &str = "scatter_reduce";
    let r = scatter_reduce_kind(OP, reduce)?;
    check_src_dtype(self_, src, OP)?;
    dispatch_all!(self_.dtype(), OP, |T| {
        let mut out = to_vec_as::<T>(self_)?;
        crate::nn::io::with_slice::<T, _>(src, |sv| {
            // Counts are needed only to divide a mean or to drop `self`'s own values.
            let counted = r == Reduce::Mean || !include_self;
            let mut count = vec![0i64; if counted { out.len() } else { 0 }];
            if counted {
                scatter_positions(self_, dim, index, src, OP, |o, s| {
                    out[o] = if count[o] == 0 && !include_self {
                        sv[s]
                    } else {
                        combine(r, out[o], sv[s])
                    };
                    count[o] += 1;
                })?;
            } else if r == Reduce::Sum {
                // Its own closure, so the per-element step is a bare add.
                scatter_positions(self_, dim, index, src, OP, |o, s| {
                    out[o] = add(out[o], sv[s]);
                })?;
            } else {
                scatter_positions(self_, dim, index, src, OP, |o, s| {
                    out[o] = combine(r, out[o], sv[s]);
                })?;
            }
            if r == Reduce::Mean {
                for (v, &n) in out.iter_mut().zip(&count) {
                    if n > 0 {
                        *v = mean_of(*v, n + include_self as i64);
                    }
                }
            }
            Ok(())
        })?;
        Tensor::from_vec(out, self_.sizes())
    })
}

/// In-place `scatter_reduce.two`.
pub fn scatter_reduce_two_(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: &str,
    include_self: bool,
) -> Result<Tensor> {
    let r = scatter_reduce_two(self_, dim, index, src, reduce, include_self)?;
    copy_into(self_, &r, "scatter_reduce_")?;
    Ok(self_.clone())
}

/// `scatter_reduce.two` into `out`.
pub fn scatter_reduce_two_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: &str,
    include_self: bool,
    out: &Tensor,
) -> Result<Tensor> {
    let r = scatter_reduce_two(self_, dim, index, src, reduce, include_self)?;
    write_out(&r, out, "scatter_reduce.two_out")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: &[f32], s: &[i64]) -> Tensor {
        Tensor::from_slice(v, s).unwrap()
    }

    #[test]
    fn reductions_with_and_without_self() {
        let s = f(&[1., 2., 3., 4.], &[4]);
        let ix = Tensor::from_slice(&[0i64, 0, 1, 0], &[4]).unwrap();
        let base = f(&[10., 20., 30.], &[3]);
        let run = |r: &str, inc: bool| {
            scatter_reduce_two(&base, 0, &ix, &s, r, inc)
                .unwrap()
                .to_vec::<f32>()
                .unwrap()
        };
        assert_eq!(run("sum", true), vec![17., 23., 30.]);
        assert_eq!(run("sum", false), vec![7., 3., 30.]);
        assert_eq!(run("prod", false), vec![8., 3., 30.]);
        assert_eq!(run("mean", true), vec![4.25, 11.5, 30.]);
        assert_eq!(run("amax", false), vec![4., 3., 30.]);
        assert_eq!(run("amin", true), vec![1., 3., 30.]);
        assert!(scatter_reduce_two(&base, 0, &ix, &s, "max", true).is_err());
        let bad = Tensor::from_slice(&[5i64], &[1]).unwrap();
        let e = scatter_reduce_two(&base, 0, &bad, &s, "sum", true).unwrap_err();
        assert!(e.to_string().contains("index 5"));
        let two = Tensor::from_slice(&[2i64], &[1]).unwrap();
        let v = scatter_value(&base, 0, &two, &Scalar::Float(1.5)).unwrap();
        assert_eq!(v.to_vec::<f32>().unwrap(), vec![10., 20., 1.5]);
        assert!(scatter_value(&base, 0, &bad, &Scalar::Int(1)).is_err());
    }
}
