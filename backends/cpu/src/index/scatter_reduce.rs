//! `scatter.value` (a scalar written where `index` points) and
//! `scatter_reduce.two` (src values reduced into `self` with sum, prod, mean,
//! amax or amin, with or without `self`'s own values), with in-place and out=
//! forms.
//!
//! Owns: the reductions' element rules per dtype. Must not: validate indices or
//! shapes itself (`scatter_positions` does, with the gather/scatter messages).

use super::{add, check_index, check_scatter_shapes, check_src_dtype, scatter_positions};
use crate::copy::{copy_into, to_vec_as};
use crate::dispatch_all;
use crate::dtype_dispatch::Elem;
use crate::nn::io::{with_slice, write_out};
use crate::parallel::fork_each_mut;
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
        if split_sum_or_mean(&mut out, self_, dim, index, src, r, include_self)? {
            return Tensor::from_vec(out, self_.sizes());
        }
        with_slice::<T, _>(src, |sv| {
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

/// Index runs shorter than this stay on one thread: a second thread's private
/// output and the pass adding it back cost more than they save.
const SPLIT_MIN: usize = 1 << 16;

/// One thread's share of a split scatter: a run of the index and src, reduced
/// into `out` (the result itself for the first run, a private buffer holding the
/// identity for the others).
struct Run<'a, T> {
    out: &'a mut [T],
    count: &'a mut [i64],
    index: &'a [i64],
    src: &'a [T],
    /// Whether a position's first value replaces what `out` holds (`self`'s own
    /// value, dropped without `include_self`); private buffers start at the
    /// identity instead.
    replace_first: bool,
    /// The first index value out of range, if any.
    bad: Option<i64>,
}

impl<T: Elem> Run<'_, T> {
    fn reduce(&mut self) {
        let m = self.out.len();
        let pairs = self.index.iter().zip(self.src);
        if self.count.is_empty() {
            for (&k, &v) in pairs {
                // Negative values wrap to huge ones, out of range as well.
                let Some(o) = self.out.get_mut(k as usize) else {
                    self.bad = Some(k);
                    return;
                };
                *o = add(*o, v);
            }
            return;
        }
        for (&k, &v) in pairs {
            if k as u64 >= m as u64 {
                self.bad = Some(k);
                return;
            }
            let k = k as usize;
            self.out[k] = if self.count[k] == 0 && self.replace_first {
                v
            } else {
                add(self.out[k], v)
            };
            self.count[k] += 1;
        }
    }
}

/// `sum` and `mean` of a long 1-D scatter, split across threads: each thread
/// reduces one run of the index into its own copy of the output (the first into
/// `out`, which holds `self_`), and the copies are then added in run order, so
/// the values are those of one thread's walk up to how partial sums are grouped.
/// A walk bound by scattered memory traffic gains from a second core's caches;
/// PyTorch, for its part, sorts the index. Returns `false`, having done nothing,
/// where this does not pay or the shapes are not 1-D.
fn split_sum_or_mean<T: Elem + Send + Sync>(
    out: &mut [T],
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    r: Reduce,
    include_self: bool,
) -> Result<bool> {
    const OP: &str = "scatter_reduce";
    let n = index.numel() as usize;
    let threads = rayon::current_num_threads().min(n / SPLIT_MIN);
    let one_dim = self_.dim() == 1 && index.dim() == 1 && src.dim() == 1;
    if !(r == Reduce::Sum || r == Reduce::Mean)
        || !one_dim
        || index.dtype() != DType::I64
        || threads < 2
        || out.is_empty()
        // Each extra thread's buffer is as long as `out`: keep them below the input.
        || out.len() * (threads - 1) > n
    {
        return Ok(false);
    }
    let d = check_scatter_shapes(self_, dim, index, src, OP)?;
    let counted = r == Reduce::Mean || !include_self;
    let m = out.len();
    let identity = if T::IS_FLOAT {
        // -0.0, not 0.0: adding it leaves every value, -0.0 included, unchanged.
        T::from_f64(-0.0)
    } else {
        T::from_i64(0)
    };
    let mut private = vec![identity; m * (threads - 1)];
    let mut counts = vec![0i64; if counted { m * threads } else { 0 }];
    with_slice::<i64, _>(index, |iv| {
        with_slice::<T, _>(src, |sv| {
            let per = n.div_ceil(threads);
            let outs = std::iter::once(&mut *out).chain(private.chunks_mut(m));
            let mut count_parts = counts.chunks_mut(m.max(1));
            let mut runs: Vec<Run<T>> = outs
                .zip(iv.chunks(per).zip(sv[..n].chunks(per)))
                .enumerate()
                .map(|(t, (out, (index, src)))| Run {
                    out,
                    count: if counted {
                        count_parts.next().unwrap_or_default()
                    } else {
                        &mut []
                    },
                    index,
                    src,
                    replace_first: t == 0 && !include_self,
                    bad: None,
                })
                .collect();
            fork_each_mut(&mut runs, Run::reduce);
            if let Some(bad) = runs.iter().find_map(|run| run.bad) {
                check_index(bad, m as i64, d, OP)?;
            }
            Ok(())
        })
    })?;
    for (o, value) in out.iter_mut().enumerate() {
        let (mut hits, own_hits) = (0i64, counts.get(o).copied().unwrap_or(0));
        // Without `include_self`, a position only later runs reach forgets `self`.
        let mut acc = if counted && !include_self && own_hits == 0 {
            identity
        } else {
            *value
        };
        for (t, part) in private.chunks(m).enumerate() {
            acc = add(acc, part[o]);
            if counted {
                hits += counts[(t + 1) * m + o];
            }
        }
        hits += own_hits;
        if !counted || hits > 0 {
            *value = acc;
        }
        if r == Reduce::Mean && hits > 0 {
            *value = mean_of(*value, hits + include_self as i64);
        }
    }
    Ok(true)
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

    /// The split walk against one thread's walk written out here, on an index long
    /// enough to split, with positions no run reaches, reached by one run only,
    /// and by both.
    #[test]
    fn split_scatter_matches_one_walk() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let n = 3 * SPLIT_MIN;
        let m = 1000usize;
        // Early positions only in the first half, late ones only in the second,
        // the middle in both; the last ten never.
        let index: Vec<i64> = (0..n)
            .map(|i| {
                let k = (i * 7919) % 330;
                (if i < n / 2 { k } else { k + 330 }) as i64
            })
            .collect();
        let src: Vec<f32> = (0..n).map(|i| ((i % 13) as f32 - 6.0) * 0.37).collect();
        let base: Vec<f32> = (0..m).map(|i| i as f32 * 0.5).collect();
        let t = |v: &[f32]| Tensor::from_slice(v, &[v.len() as i64]).unwrap();
        let ix = Tensor::from_slice(&index, &[n as i64]).unwrap();
        for (reduce, include_self) in [
            ("sum", true),
            ("sum", false),
            ("mean", true),
            ("mean", false),
        ] {
            let got = pool
                .install(|| scatter_reduce_two(&t(&base), 0, &ix, &t(&src), reduce, include_self))
                .unwrap()
                .to_vec::<f32>()
                .unwrap();
            let (mut sum, mut hits) = (vec![0f64; m], vec![0i64; m]);
            for (&k, &v) in index.iter().zip(&src) {
                sum[k as usize] += v as f64;
                hits[k as usize] += 1;
            }
            for o in 0..m {
                let own = include_self as i64;
                let want = if hits[o] == 0 {
                    base[o] as f64
                } else {
                    let total = sum[o] + if include_self { base[o] as f64 } else { 0.0 };
                    if reduce == "mean" {
                        total / (hits[o] + own) as f64
                    } else {
                        total
                    }
                };
                assert!(
                    (got[o] as f64 - want).abs() <= 1e-3 * want.abs().max(1.0),
                    "{reduce} include_self={include_self} at {o}: {} vs {want}",
                    got[o]
                );
            }
        }
        // A bad value late in the second run is reported as one walk reports it.
        let mut bad = index.clone();
        bad[n - 5] = -3;
        let ixb = Tensor::from_slice(&bad, &[n as i64]).unwrap();
        let e = pool
            .install(|| scatter_reduce_two(&t(&base), 0, &ixb, &t(&src), "sum", true))
            .unwrap_err();
        assert!(e.to_string().contains("index -3 is out of bounds"), "{e}");
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
