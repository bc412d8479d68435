//! Accumulating reductions: sum, mean, prod, all, any, var/std, logsumexp,
//! linalg_vector_norm (their other overloads are in [`super::overloads`]).
//!
//! Owns: these ops' dtype rules (integers sum into int64, mean/var need floats,
//! `dtype=` overrides) and their row kernels. Floats accumulate in f64, integers
//! in wrapping i64; complex sums and means reduce the two parts, products
//! multiply in the complex dtype, var/std add the parts' variances (a real
//! result). Must not: re-implement layout handling (uses [`super::Rows`]).

use super::{dim_mask, map_rows, reduced_shape, write_vec, Rows};
use crate::dtype_dispatch::{Cplx, Elem, Float};
use crate::nn::vecmath::{has_avx2, has_avx512, multiversion};
use crate::out::{write_result, Dest};
use crate::{dispatch_complex, dispatch_float, dispatch_int_bool};
use opal::{DType, OpalError, Result, Scalar, Tensor};

/// Sum/prod result dtype: `dtype=` if given, integers and bool widen to int64.
pub(super) fn accumulate_dtype(input: DType, dtype: Option<DType>) -> DType {
    match dtype {
        Some(d) => d,
        None if input.is_integral(true) => DType::I64,
        None => input,
    }
}

/// Shared driver: reduce `self_` over `dims` into dtype `rd`: floats by
/// `float_reduce` (given the input and the mask of reduced dims, usually
/// [`by_rows`]), integers row by row with `int_row` in wrapping i64.
#[allow(clippy::too_many_arguments)]
pub(super) fn reduce_acc(
    self_: &Tensor,
    dims: Option<&[i64]>,
    keepdim: bool,
    rd: DType,
    dest: Dest<'_>,
    op: &str,
    float_reduce: impl Fn(&Tensor, &[bool]) -> Result<Vec<f64>>,
    int_row: impl Fn(&[i64]) -> i64 + Sync,
) -> Result<Tensor> {
    if rd.is_complex() || self_.dtype().is_complex() {
        return Err(OpalError::msg(format!(
            "{op}: not supported for complex tensors (self has dtype {}, result dtype {rd})",
            self_.dtype()
        )));
    }
    let mask = dim_mask(dims, self_.dim(), op)?;
    let shape = reduced_shape(self_.sizes(), &mask, keepdim);
    write_result(dest, &shape, rd, op, |o| {
        if rd.is_floating_point() {
            let v = float_reduce(self_, &mask)?;
            dispatch_float!(rd, op, |T, C| {
                let v: Vec<T> = v.iter().map(|&x| T::from_f64(x)).collect();
                write_vec(o, &v, op)
            })
        } else {
            let rows = Rows::new(self_, &mask, DType::I64)?;
            let v = map_rows::<i64, i64>(&rows, &int_row)?;
            dispatch_int_bool!(rd, op, |T| {
                let v: Vec<T> = v.iter().map(|&x| T::from_i64(x)).collect();
                write_vec(o, &v, op)
            })
        }
    })
}

/// A float reduction done row by row with `row`, over the layout of [`Rows`]
/// (kept dims outer, reduced dims inner, in f64).
pub(super) fn by_rows(
    row: impl Fn(&[f64]) -> f64 + Sync,
) -> impl Fn(&Tensor, &[bool]) -> Result<Vec<f64>> {
    move |t, mask| map_rows::<f64, f64>(&Rows::new(t, mask, DType::F64)?, &row)
}

/// Sums of a contiguous f32 tensor over its leading dims (`mask` true for a
/// prefix of dims, false after it), as the column sums of a `[rows, cols]` matrix
/// accumulated in f64 row after row: the layout [`Rows`] builds would be a
/// transposed copy, which is what a linear layer's bias gradient paid. `None` when
/// the input does not have that form.
fn column_sums(t: &Tensor, mask: &[bool]) -> Option<Result<Vec<f64>>> {
    let lead = mask.iter().take_while(|&&m| m).count();
    if lead == 0 || lead == mask.len() || mask[lead..].iter().any(|&m| m) || !t.is_contiguous() {
        return None;
    }
    let rows = t.sizes()[..lead].iter().product::<i64>() as usize;
    let cols = t.sizes()[lead..].iter().product::<i64>() as usize;
    match t.dtype() {
        // f64 inputs keep the pairwise sum: a running f64 sum of f64 values loses
        // accuracy over long columns, of f32 values it does not.
        DType::F32 => Some(column_sums_of::<f32>(t, rows, cols)),
        _ => None,
    }
}

fn column_sums_of<T: Elem>(t: &Tensor, rows: usize, cols: usize) -> Result<Vec<f64>> {
    let mut acc = vec![0.0f64; cols];
    if rows * cols == 0 {
        return Ok(acc);
    }
    opal::tensor::KernelAccess::scoped([t], [], |[p], []| {
        // SAFETY: `t` is contiguous with `rows * cols` elements of `T` (checked by the
        // caller: contiguous, and its dtype is `T`), its storage borrowed for reading
        // while the slice lives.
        let data = unsafe { std::slice::from_raw_parts(p as *const T, rows * cols) };
        for row in data.chunks_exact(cols) {
            for (a, &x) in acc.iter_mut().zip(row) {
                *a += x.to_f64();
            }
        }
        Ok(())
    })?;
    Ok(acc)
}

/// Sums of a contiguous f32 or f64 tensor over its trailing dims (`mask` false for
/// a prefix of dims, true after it): each row summed straight from the input, rows
/// split across threads. [`Rows`] would first convert the whole input to f64, which
/// cost more than the sums (`x.mean(-1)`, layer statistics). `None` when the input
/// does not have that form. f32 rows of an f32 result add in f32 lanes, as
/// PyTorch's f32 sums do; an f64 result (`dtype=torch.float64`) sums the values
/// widened to f64, as PyTorch converts the input first.
fn row_sums(t: &Tensor, mask: &[bool], result: DType) -> Option<Result<Vec<f64>>> {
    let keep = mask.iter().take_while(|&&m| !m).count();
    if keep == mask.len() || mask[keep..].iter().any(|&m| !m) || !t.is_contiguous() {
        return None;
    }
    let rows = t.sizes()[..keep].iter().product::<i64>() as usize;
    let cols = t.sizes()[keep..].iter().product::<i64>() as usize;
    match (t.dtype(), result) {
        (DType::F32, DType::F32) => Some(row_sums_of(t, rows, cols, leaf_sums_f32)),
        (DType::F32, _) => Some(row_sums_of(t, rows, cols, leaf_sums_f32_wide)),
        (DType::F64, _) => Some(row_sums_of(t, rows, cols, leaf_sums_f64)),
        _ => None,
    }
}

/// Row sums of `rows x cols` contiguous values, each row by [`pairwise_sum_of`]
/// with `leaves` as its leaf kernel.
fn row_sums_of<T: Elem>(
    t: &Tensor,
    rows: usize,
    cols: usize,
    leaves: fn(&[T]) -> f64,
) -> Result<Vec<f64>> {
    let mut out = vec![0.0f64; rows];
    if rows * cols == 0 {
        return Ok(out);
    }
    opal::tensor::KernelAccess::scoped([t], [], |[p], []| {
        // SAFETY: `t` is contiguous with `rows * cols` elements of `T` (checked by the
        // caller: contiguous, and its dtype is `T`), its storage borrowed for reading
        // while the slice lives.
        let data = unsafe { std::slice::from_raw_parts(p as *const T, rows * cols) };
        // About 64K elements per task, whole rows each.
        let per_task = (65_536 / cols).max(1);
        let sum_rows = |first: usize, sums: &mut [f64]| {
            for (r, s) in sums.iter_mut().enumerate() {
                let row = &data[(first + r) * cols..(first + r + 1) * cols];
                *s = pairwise_sum_of(row, leaves);
            }
        };
        if rows * cols < 1 << 15 {
            sum_rows(0, &mut out);
        } else {
            crate::parallel::fork_chunks_mut(&mut out, per_task, |c, sums| {
                sum_rows(c * per_task, sums)
            });
        }
        Ok(())
    })?;
    Ok(out)
}

/// [`pairwise_sum`] of values summed by `leaves` (a multiversioned leaf kernel):
/// halves until a piece fits it.
fn pairwise_sum_of<T>(v: &[T], leaves: fn(&[T]) -> f64) -> f64 {
    if v.len() <= LEAF * MAX_LEAVES {
        return leaves(v);
    }
    let mid = v.len() / 2;
    pairwise_sum_of(&v[..mid], leaves) + pairwise_sum_of(&v[mid..], leaves)
}

/// Elements per leaf of the pairwise sum, and leaves per call of the vectorized
/// kernel.
const LEAF: usize = 256;
const MAX_LEAVES: usize = 64;
/// Independent f64 accumulators of a leaf: enough to hide the add latency in the
/// AVX-512 build (four vectors of eight).
const ACCS: usize = 32;

/// The leaf sums of up to `LEAF * MAX_LEAVES` values (in `ACCS` running f64
/// accumulators each), then those sums combined pairwise.
#[inline(always)]
fn leaf_sums<T: Elem>(v: &[T]) -> f64 {
    lane_leaf_sums::<T, f64, ACCS>(v, LEAF, |x| x.to_f64())
}

/// The sum of a power-of-two number of accumulators, adding the upper half onto
/// the lower until one is left (a fixed tree, so the rounding does not depend on
/// the vector width the kernel was built for).
#[inline(always)]
fn fold_halves<T: Copy + std::ops::AddAssign>(acc: &mut [T]) -> T {
    let mut width = acc.len();
    while width > 1 {
        width /= 2;
        for k in 0..width {
            acc[k] += acc[k + width];
        }
    }
    acc[0]
}

/// Elements per leaf of an f32 row, and the f32 lanes summing it.
const F32_LEAF: usize = 1024;
const F32_LANES: usize = 64;

/// The sums of up to `LEAF * MAX_LEAVES` f32 values: each leaf of [`F32_LEAF`]
/// values in [`F32_LANES`] f32 accumulators (16 values per lane, as PyTorch's
/// f32 cascade sums accumulate in f32), the leaf sums then combined pairwise in
/// f64. Widening every element to f64 instead cost three times as much: the
/// conversion, not the memory, bounded the row sums.
#[inline(always)]
fn leaf_sums_f32_lanes(v: &[f32]) -> f64 {
    lane_leaf_sums::<f32, f32, F32_LANES>(v, F32_LEAF, |x| x)
}

/// Leaves of `leaf` values of `v` (at most [`MAX_LEAVES`]), each summed in
/// `LANES` accumulators of type `A` (values lifted by `lift`) folded by
/// [`fold_halves`], its tail added in f64; the leaf sums then combined pairwise.
#[inline(always)]
fn lane_leaf_sums<T: Copy, A, const LANES: usize>(
    v: &[T],
    leaf: usize,
    lift: impl Fn(T) -> A,
) -> f64
where
    A: Copy + Default + std::ops::AddAssign + Into<f64>,
{
    const { assert!(LANES >= 8 && LANES.is_power_of_two()) };
    let mut leaves = [0.0f64; MAX_LEAVES];
    let mut n = 0;
    for (part, slot) in v.chunks(leaf).zip(leaves.iter_mut()) {
        let mut acc = [A::default(); LANES];
        let chunks = part.chunks_exact(LANES);
        let rem = chunks.remainder();
        for c in chunks {
            for k in 0..LANES {
                acc[k] += lift(c[k]);
            }
        }
        // The lanes fold to eight before the rest of the leaf: its eight-wide
        // steps then add into one vector instead of a slice of the wide
        // accumulator, which went through the stack (a quarter of a 1,000-wide
        // row's time). Rows shorter than `LANES` (a 32-wide `mean(-1)`) still
        // run in those vector steps, then at most seven values add in f64.
        let mut width = LANES;
        while width > 8 {
            width /= 2;
            for k in 0..width {
                acc[k] += acc[k + width];
            }
        }
        let mut acc8 = [A::default(); 8];
        acc8.copy_from_slice(&acc[..8]);
        let short = rem.chunks_exact(8);
        let tail = short.remainder();
        for c in short {
            for k in 0..8 {
                acc8[k] += lift(c[k]);
            }
        }
        let mut s: f64 = fold_halves(&mut acc8).into();
        for &x in tail {
            s += lift(x).into();
        }
        *slot = s;
        n += 1;
    }
    pairwise_sum(&leaves[..n])
}

multiversion!(leaf_sums_f32(v: &[f32]) -> f64 { leaf_sums_f32_lanes(v) });
multiversion!(leaf_sums_f32_wide(v: &[f32]) -> f64 { leaf_sums(v) });
multiversion!(leaf_sums_f64(v: &[f64]) -> f64 { leaf_sums(v) });

/// How many elements each output of a reduction over `mask` combines.
fn reduced_count(sizes: &[i64], mask: &[bool]) -> i64 {
    sizes
        .iter()
        .zip(mask)
        .filter(|(_, &m)| m)
        .map(|(&s, _)| s)
        .product()
}

/// Pairwise summation: accurate like PyTorch's cascade sum and vectorizable.
fn pairwise_sum(v: &[f64]) -> f64 {
    if v.len() <= 64 {
        let mut acc = [0.0f64; 4];
        let chunks = v.chunks_exact(4);
        let rem = chunks.remainder();
        for c in chunks {
            for k in 0..4 {
                acc[k] += c[k];
            }
        }
        let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        for &x in rem {
            s += x;
        }
        return s;
    }
    let mid = v.len() / 2;
    pairwise_sum(&v[..mid]) + pairwise_sum(&v[mid..])
}

fn sum_impl(
    self_: &Tensor,
    dims: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<DType>,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let rd = accumulate_dtype(self_.dtype(), dtype);
    if rd.is_complex() || self_.dtype().is_complex() {
        return by_parts(self_, rd, dest, op, |part, rt| {
            sum_impl(part, dims, keepdim, Some(rt), Dest::New, op)
        });
    }
    let by_pairs = by_rows(pairwise_sum);
    let floats = |t: &Tensor, mask: &[bool]| {
        column_sums(t, mask)
            .or_else(|| row_sums(t, mask, rd))
            .unwrap_or_else(|| by_pairs(t, mask))
    };
    reduce_acc(self_, dims, keepdim, rd, dest, op, floats, |r| {
        r.iter().fold(0i64, |a, &x| a.wrapping_add(x))
    })
}
/// A linear reduction of a complex input (or of a real one into a complex
/// `dtype=`): `reduce` runs on the real and the imaginary parts, in the real
/// component dtype of `rd`, and the two results are joined. A complex input
/// reduced into a real `dtype=` is cast to it first, dropping the imaginary
/// parts, as PyTorch does.
pub(super) fn by_parts(
    self_: &Tensor,
    rd: DType,
    dest: Dest<'_>,
    op: &str,
    reduce: impl Fn(&Tensor, DType) -> Result<Tensor>,
) -> Result<Tensor> {
    if !rd.is_complex() {
        let r = reduce(&crate::copy::to_dtype(self_, rd)?, rd)?;
        return write_result(dest, r.sizes(), rd, op, |o| {
            crate::copy::copy_into(o, &r, op)
        });
    }
    let input = crate::copy::to_dtype(self_, rd)?;
    let (re, im) = crate::copy::complex_parts(&input, op)?;
    let (re, im) = (reduce(&re, rd.to_real())?, reduce(&im, rd.to_real())?);
    write_result(dest, re.sizes(), rd, op, |o| {
        crate::copy::join_parts(o, &re, &im, op)
    })
}

/// `sum`: sum of all elements.
pub fn sum(self_: &Tensor, dtype: Option<DType>) -> Result<Tensor> {
    sum_impl(self_, None, false, dtype, Dest::New, "sum")
}
new_and_out! {
    /// `sum.dim_IntList`; `sum.IntList_out`.
    sum_dim_intlist "sum.dim_IntList", sum_intlist_out "sum.IntList_out" = sum_impl(
        self_: &Tensor, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>;
    )
}

pub(super) fn mean_impl(
    self_: &Tensor,
    dims: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<DType>,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let rd = dtype.unwrap_or(self_.dtype());
    if rd.is_complex() || self_.dtype().is_complex() {
        return by_parts(self_, rd, dest, op, |part, rt| {
            mean_impl(part, dims, keepdim, Some(rt), Dest::New, op)
        });
    }
    if !rd.is_floating_point() {
        return Err(OpalError::msg(format!(
            "{op}: could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {rd}"
        )));
    }
    let by_pairs = by_rows(|r| pairwise_sum(r) / r.len() as f64);
    let floats = |t: &Tensor, mask: &[bool]| match row_sums(t, mask, rd) {
        Some(sums) => {
            let n = reduced_count(t.sizes(), mask) as f64;
            sums.map(|v| v.into_iter().map(|s| s / n).collect())
        }
        None => by_pairs(t, mask),
    };
    reduce_acc(self_, dims, keepdim, rd, dest, op, floats, |_| 0)
}
new_and_out! {
    /// `mean.dim`; `mean.out`.
    mean_dim "mean.dim", mean_out "mean.out" = mean_impl(
        self_: &Tensor, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>;
    )
}

/// `prod` over `dims` (`None`: every dim) into `dtype` (default: the input's,
/// integers and bool in int64). A complex input into a real `dtype=` is cast
/// first (dropping the imaginary part), as PyTorch does.
pub(super) fn prod_impl(
    self_: &Tensor,
    dims: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<DType>,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let rd = accumulate_dtype(self_.dtype(), dtype);
    if rd.is_complex() {
        return prod_complex(self_, dims, keepdim, rd, dest, op);
    }
    let real;
    let input = if self_.dtype().is_complex() {
        real = crate::copy::to_dtype(self_, rd)?;
        &real
    } else {
        self_
    };
    reduce_acc(
        input,
        dims,
        keepdim,
        rd,
        dest,
        op,
        by_rows(|r| r.iter().product()),
        |r| r.iter().fold(1i64, |a, &x| a.wrapping_mul(x)),
    )
}

/// The complex product: each row multiplied in complex `rd` itself, as PyTorch's
/// CPU multiplies complex values in their own precision (products, unlike sums,
/// do not split into the parts).
fn prod_complex(
    self_: &Tensor,
    dims: Option<&[i64]>,
    keepdim: bool,
    rd: DType,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let mask = dim_mask(dims, self_.dim(), op)?;
    let shape = reduced_shape(self_.sizes(), &mask, keepdim);
    write_result(dest, &shape, rd, op, |o| {
        let rows = Rows::new(self_, &mask, rd)?;
        dispatch_complex!(rd, op, |T, R| {
            let one = T::from_re(<R as num_traits::One>::one());
            let v = map_rows::<T, T>(&rows, |r| r.iter().fold(one, |a, &x| a.mul(x)))?;
            write_vec(o, &v, op)
        })
    })
}

/// `prod`: product of all elements (integers in int64).
pub fn prod(self_: &Tensor, dtype: Option<DType>) -> Result<Tensor> {
    prod_impl(self_, None, false, dtype, Dest::New, "prod")
}

fn truth_impl(
    self_: &Tensor,
    dims: Option<&[i64]>,
    keepdim: bool,
    all: bool,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let mask = dim_mask(dims, self_.dim(), op)?;
    truth_over(self_, &mask, keepdim, all, dest, op)
}

/// `all` / `any` of `self_` over the dims set in `mask`.
pub(super) fn truth_over(
    self_: &Tensor,
    mask: &[bool],
    keepdim: bool,
    all: bool,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    // PyTorch keeps uint8 for uint8 inputs; everything else gives bool.
    let rd = if self_.dtype() == DType::U8 {
        DType::U8
    } else {
        DType::Bool
    };
    let shape = reduced_shape(self_.sizes(), mask, keepdim);
    write_result(dest, &shape, rd, op, |o| {
        let rows = Rows::new(self_, mask, DType::Bool)?;
        let v = map_rows::<bool, bool>(&rows, |r| {
            if all {
                r.iter().all(|&x| x)
            } else {
                r.iter().any(|&x| x)
            }
        })?;
        if rd == DType::U8 {
            let v: Vec<u8> = v.iter().map(|&b| b as u8).collect();
            write_vec(o, &v, op)
        } else {
            write_vec(o, &v, op)
        }
    })
}
/// `all`: true when every element is non-zero.
pub fn all(self_: &Tensor) -> Result<Tensor> {
    truth_impl(self_, None, false, true, Dest::New, "all")
}
/// `all.all_out`.
pub fn all_all_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    truth_impl(self_, None, false, true, Dest::Out(out), "all.all_out")
}
/// `any`: true when some element is non-zero.
pub fn any(self_: &Tensor) -> Result<Tensor> {
    truth_impl(self_, None, false, false, Dest::New, "any")
}
/// `any.all_out`.
pub fn any_all_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    truth_impl(self_, None, false, false, Dest::Out(out), "any.all_out")
}
/// `any.dim`: true where some element along `dim` is non-zero.
pub fn any_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<Tensor> {
    truth_impl(self_, Some(&[dim]), keepdim, false, Dest::New, "any.dim")
}
/// `any.out`.
pub fn any_out(self_: &Tensor, dim: i64, keepdim: bool, out: &Tensor) -> Result<Tensor> {
    truth_impl(
        self_,
        Some(&[dim]),
        keepdim,
        false,
        Dest::Out(out),
        "any.out",
    )
}

fn var_impl(
    self_: &Tensor,
    dim: Option<&[i64]>,
    correction: Option<&Scalar>,
    keepdim: bool,
    take_sqrt: bool,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let rd = self_.dtype();
    if rd.is_complex() {
        return var_complex(self_, dim, correction, keepdim, take_sqrt, dest, op);
    }
    if !rd.is_floating_point() {
        return Err(OpalError::msg(format!(
            "{op}: std and var only support floating point and complex dtypes, got {rd}"
        )));
    }
    let c = correction.map(|s| s.to_f64()).unwrap_or(1.0);
    reduce_acc(
        self_,
        dim,
        keepdim,
        rd,
        dest,
        op,
        by_rows(move |r| {
            let n = r.len() as f64;
            let mean = pairwise_sum(r) / n;
            let ss: f64 = r.iter().map(|&x| (x - mean) * (x - mean)).sum();
            let v = ss / (n - c).max(0.0);
            if take_sqrt {
                v.sqrt()
            } else {
                v
            }
        }),
        |_| 0,
    )
}
/// var/std of a complex tensor, real valued: the mean of `|x - mean|^2` is the
/// sum of the parts' variances (each with the same correction), so the parts
/// run through the real kernel and are added.
fn var_complex(
    self_: &Tensor,
    dim: Option<&[i64]>,
    correction: Option<&Scalar>,
    keepdim: bool,
    take_sqrt: bool,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let (re, im) = crate::copy::complex_parts(self_, op)?;
    let part = |t: &Tensor| var_impl(t, dim, correction, keepdim, false, Dest::New, op);
    let (vr, vi) = (part(&re)?, part(&im)?);
    let rt = self_.dtype().to_real();
    write_result(dest, vr.sizes(), rt, op, |o| {
        dispatch_float!(rt, op, |T, C| crate::iter::map2::<T, T, T>(
            o,
            &vr,
            &vi,
            op,
            |a, b| {
                let v = a.up() + b.up();
                T::down(if take_sqrt { v.sqrt() } else { v })
            }
        ))
    })
}

new_and_out! {
    /// `var.correction`; `var.correction_out`.
    var_correction "var.correction", var_correction_out "var.correction_out" = var_impl(
        self_: &Tensor, dim: Option<&[i64]>, correction: Option<&Scalar>, keepdim: bool; false
    )
}
new_and_out! {
    /// `std.correction`; `std.correction_out`.
    std_correction "std.correction", std_correction_out "std.correction_out" = var_impl(
        self_: &Tensor, dim: Option<&[i64]>, correction: Option<&Scalar>, keepdim: bool; true
    )
}

fn logsumexp_impl(
    self_: &Tensor,
    dim: &[i64],
    keepdim: bool,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let rd = crate::elementwise::float_result(self_.dtype(), op)?;
    reduce_acc(
        self_,
        Some(dim),
        keepdim,
        rd,
        dest,
        op,
        by_rows(|r| {
            let m = r.iter().fold(
                f64::NEG_INFINITY,
                |a, &x| if x > a || x.is_nan() { x } else { a },
            );
            if r.is_empty() {
                return f64::NEG_INFINITY;
            }
            // An infinite maximum would turn the shift into NaN; shift by 0 instead.
            let shift = if m.is_infinite() { 0.0 } else { m };
            r.iter().map(|&x| (x - shift).exp()).sum::<f64>().ln() + shift
        }),
        |_| 0,
    )
}
/// `logsumexp`: `log(sum(exp(x)))` over `dim`, computed stably.
pub fn logsumexp(self_: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
    logsumexp_impl(self_, dim, keepdim, Dest::New, "logsumexp")
}
/// `logsumexp.out`.
pub fn logsumexp_out(self_: &Tensor, dim: &[i64], keepdim: bool, out: &Tensor) -> Result<Tensor> {
    logsumexp_impl(self_, dim, keepdim, Dest::Out(out), "logsumexp.out")
}

fn norm_impl(
    self_: &Tensor,
    ord: &Scalar,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<DType>,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let rd = dtype.unwrap_or(self_.dtype());
    if !self_.dtype().is_floating_point() || !rd.is_floating_point() {
        return Err(OpalError::msg(format!(
            "{op}: expected a floating point input and result dtype, got {} and {rd}",
            self_.dtype()
        )));
    }
    let p = ord.to_f64();
    let mask = dim_mask(dim, self_.dim(), op)?;
    if p < 0.0 || p.is_infinite() {
        // Max/min-type norms of an empty reduction have no identity.
        let empty_reduced = self_.sizes().iter().zip(&mask).any(|(&s, &m)| m && s == 0);
        if empty_reduced && (p < 0.0 || p == f64::INFINITY) {
            return Err(OpalError::msg(format!(
                "{op}: cannot compute the {p}-norm of an empty reduction"
            )));
        }
    }
    reduce_acc(
        self_,
        dim,
        keepdim,
        rd,
        dest,
        op,
        by_rows(move |r| {
            if p == f64::INFINITY {
                r.iter().fold(0.0f64, |a, &x| {
                    if x.abs() > a || x.is_nan() {
                        x.abs()
                    } else {
                        a
                    }
                })
            } else if p == f64::NEG_INFINITY {
                r.iter().fold(f64::INFINITY, |a, &x| {
                    if x.abs() < a || x.is_nan() {
                        x.abs()
                    } else {
                        a
                    }
                })
            } else if p == 0.0 {
                r.iter().filter(|&&x| x != 0.0).count() as f64
            } else if p == 1.0 {
                r.iter().map(|x| x.abs()).sum()
            } else if p == 2.0 {
                r.iter().map(|x| x * x).sum::<f64>().sqrt()
            } else {
                r.iter().map(|x| x.abs().powf(p)).sum::<f64>().powf(1.0 / p)
            }
        }),
        |_| 0,
    )
}
new_and_out! {
    /// `linalg_vector_norm`; `linalg_vector_norm.out`.
    linalg_vector_norm "linalg_vector_norm", linalg_vector_norm_out "linalg_vector_norm.out" = norm_impl(
        self_: &Tensor, ord: &Scalar, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>;
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f32 rows are summed in f32 lanes: on long rows of mixed magnitudes they
    /// must stay within a few f32 ulps of the exact (f64) sum, and tails shorter
    /// than a lane group must count.
    #[test]
    fn f32_lane_sums_stay_close_to_the_exact_sum() {
        for len in [1usize, 63, 64, 1000, 1024, 1025, 16_384, 70_001] {
            let v: Vec<f32> = (0..len)
                .map(|i| ((i * 7919) % 1013) as f32 * if i % 3 == 0 { 1e3 } else { -0.37 })
                .collect();
            let exact: f64 = v.iter().map(|&x| f64::from(x)).sum();
            let abs: f64 = v.iter().map(|&x| f64::from(x).abs()).sum();
            let got = pairwise_sum_of(&v, leaf_sums_f32);
            assert!(
                (got - exact).abs() <= abs * 4.0 * f64::from(f32::EPSILON),
                "len {len}: {got} vs {exact}"
            );
        }
    }

    #[test]
    fn sums_over_leading_dims_match_the_row_layout() {
        let values: Vec<f32> = (0..24).map(|i| (i as f32 - 7.5) * 0.25).collect();
        let t = Tensor::from_slice(&values, &[2, 3, 4]).unwrap();
        // Leading dims of a contiguous input (the column path) ...
        let s = sum_dim_intlist(&t, Some(&[0, 1]), false, None).unwrap();
        let want: Vec<f32> = (0..4)
            .map(|j| (0..6).map(|i| values[i * 4 + j]).sum())
            .collect();
        assert_eq!(s.sizes(), &[4]);
        assert_eq!(s.to_vec::<f32>().unwrap(), want);
        let k = sum_dim_intlist(&t, Some(&[0]), true, Some(DType::F64)).unwrap();
        assert_eq!(k.sizes(), &[1, 3, 4]);
        assert_eq!(k.dtype(), DType::F64);
        let want0: Vec<f64> = (0..12)
            .map(|j| (values[j] + values[12 + j]) as f64)
            .collect();
        assert_eq!(k.to_vec::<f64>().unwrap(), want0);
        // ... and the same sums through the row layout (a transposed input).
        let tt = t.as_strided(&[4, 3, 2], &[1, 4, 12], 0).unwrap();
        let r = sum_dim_intlist(&tt, Some(&[1, 2]), false, None).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), want);
        // Non-finite values propagate as before.
        let n = Tensor::from_slice(&[f32::NAN, 1.0, f32::INFINITY, 2.0], &[2, 2]).unwrap();
        let ns = sum_dim_intlist(&n, Some(&[0]), false, None)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert!(
            ns[0].is_nan() && ns[1] == 3.0 || ns[0].is_infinite(),
            "{ns:?}"
        );
    }
}
