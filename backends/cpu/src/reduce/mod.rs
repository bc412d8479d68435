//! Reductions and scans: sum, mean, prod, amax/amin, argmax/argmin, max/min over a
//! dim, all/any, var/std, logsumexp, linalg_vector_norm, cumsum, sort, topk.
//!
//! Owns: dim wrapping and dim-list resolution for reductions (`wrap_dim`,
//! [`dim_mask`]), the "reduced dims last, contiguous rows" layout ([`Rows`]) and
//! helpers that write row results back into an output of any layout. Must not:
//! implement element-wise math (that is [`crate::elementwise`]).
//!
//! # For kernel authors
//!
//! * `wrap_dim``(dim, ndim, op)` — PyTorch dim wrapping (a 0-d tensor accepts
//!   dims -1 and 0).
//! * [`dim_mask`]`(dims, ndim, op)` — `None` or `[]` mean "all dims"; repeated dims
//!   are an error.
//! * [`Rows::new`]`(t, &mask, dtype)` — `t` cast to `dtype` and laid out as
//!   `outer` contiguous rows of `inner` elements, reduced dims innermost.
//! * [`write_rows_back`] — place per-row results computed in "dim last" order into
//!   an output tensor in the original dim order.

/// Declares a reduction's functional and `out=` forms, which differ only in
/// where the result goes: each calls `impl_fn(<args>, <extra>, dest, op_name)`.
macro_rules! new_and_out {
    ($(#[$m:meta])* $f:ident $name:literal, $f_out:ident $out_name:literal =
     $impl_fn:ident($($a:ident: $t:ty),*; $($extra:expr)?)) => {
        $(#[$m])*
        pub fn $f($($a: $t),*) -> Result<Tensor> {
            $impl_fn($($a,)* $($extra,)? Dest::New, $name)
        }
        $(#[$m])*
        pub fn $f_out($($a: $t,)* out: &Tensor) -> Result<Tensor> {
            $impl_fn($($a,)* $($extra,)? Dest::Out(out), $out_name)
        }
    };
}

pub mod minmax;
pub mod overloads;
pub mod scan;
pub mod sort;
pub mod sum;

use crate::copy::{contiguous, copy_into, to_dtype};
use crate::out::empty_uninit as empty;
// Layout helpers only move elements: any element type, complex included.
use opal::{DType, Element, OpalError, Result, Tensor};

pub(crate) use crate::nn::io::wrap_dim;

/// Which dims a reduction collapses: `None` or an empty list reduce all dims.
pub fn dim_mask(dims: Option<&[i64]>, ndim: usize, op: &str) -> Result<Vec<bool>> {
    let mut mask = vec![false; ndim];
    match dims {
        None | Some([]) => mask.iter_mut().for_each(|m| *m = true),
        Some(ds) => {
            for &d in ds {
                let w = wrap_dim(d, ndim, op)?;
                if ndim == 0 {
                    continue;
                }
                if mask[w] {
                    return Err(OpalError::msg(format!(
                        "{op}: dim {w} appears multiple times in the list of dims"
                    )));
                }
                mask[w] = true;
            }
        }
    }
    Ok(mask)
}

/// Output shape of a reduction over `mask`.
pub fn reduced_shape(sizes: &[i64], mask: &[bool], keepdim: bool) -> Vec<i64> {
    sizes
        .iter()
        .zip(mask)
        .filter_map(|(&s, &m)| {
            if !m {
                Some(s)
            } else if keepdim {
                Some(1)
            } else {
                None
            }
        })
        .collect()
}

/// A tensor re-laid-out as `outer` contiguous rows of `inner` elements: kept dims
/// outermost (in order), reduced dims innermost (in order).
pub struct Rows {
    /// The contiguous data (dtype as requested).
    pub data: Tensor,
    /// Number of rows (product of kept dims).
    pub outer: usize,
    /// Row length (product of reduced dims).
    pub inner: usize,
}

impl Rows {
    /// Casts `t` to `dtype` and lays it out with masked dims last.
    pub fn new(t: &Tensor, mask: &[bool], dtype: DType) -> Result<Rows> {
        let perm: Vec<usize> = (0..t.dim())
            .filter(|&d| !mask[d])
            .chain((0..t.dim()).filter(|&d| mask[d]))
            .collect();
        let sizes: Vec<i64> = perm.iter().map(|&d| t.sizes()[d]).collect();
        let strides: Vec<i64> = perm.iter().map(|&d| t.strides()[d]).collect();
        let view = t.as_strided(&sizes, &strides, t.storage_offset())?;
        let data = contiguous(&to_dtype(&view, dtype)?)?;
        let inner: i64 = (0..t.dim())
            .filter(|&d| mask[d])
            .map(|d| t.sizes()[d])
            .product();
        let outer: i64 = (0..t.dim())
            .filter(|&d| !mask[d])
            .map(|d| t.sizes()[d])
            .product();
        Ok(Rows {
            data,
            outer: outer as usize,
            inner: inner as usize,
        })
    }

    /// The row data as a slice of `T` (the dtype given to [`Rows::new`]).
    pub fn slice<T: Element>(&self) -> Result<&[T]> {
        if self.outer * self.inner == 0 {
            return Ok(&[]);
        }
        let p = self.data.data_ptr::<T>()?;
        // SAFETY: `data` is contiguous with outer*inner elements of T, alive as long as self.
        Ok(unsafe { std::slice::from_raw_parts(p, self.outer * self.inner) })
    }
}

/// A contiguous CPU tensor of `shape` holding `v`.
pub fn tensor_from_vec<T: Element>(v: &[T], shape: &[i64]) -> Result<Tensor> {
    let t = empty(shape, T::DTYPE)?;
    if !v.is_empty() {
        let p = t.data_ptr::<T>()?;
        // SAFETY: `t` is a fresh contiguous tensor of `v.len()` elements of T.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
    }
    Ok(t)
}

/// Writes `v` (row-major over `out`'s shape) into `out`, whatever its strides.
pub fn write_vec<T: Element>(out: &Tensor, v: &[T], op: &str) -> Result<()> {
    if out.is_contiguous() && out.dtype() == T::DTYPE {
        if !v.is_empty() {
            let p = out.data_ptr::<T>()?;
            // SAFETY: `out` is contiguous with v.len() elements of T.
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
        }
        return Ok(());
    }
    let tmp = tensor_from_vec(v, out.sizes())?;
    copy_into(out, &tmp, op)
}

/// Writes per-row results `v`, laid out as `[kept dims..., len]` with the row axis
/// being `dim`, into `out` (original dim order, `out.sizes()[dim] == len`).
pub fn write_rows_back<T: Element>(out: &Tensor, dim: usize, v: &[T], op: &str) -> Result<()> {
    let nd = out.dim();
    if nd == 0 {
        return write_vec(out, v, op);
    }
    let perm: Vec<usize> = (0..nd).filter(|&d| d != dim).chain([dim]).collect();
    let sizes: Vec<i64> = perm.iter().map(|&d| out.sizes()[d]).collect();
    let strides: Vec<i64> = perm.iter().map(|&d| out.strides()[d]).collect();
    let view = out.as_strided(&sizes, &strides, out.storage_offset())?;
    let tmp = tensor_from_vec(v, &sizes)?;
    copy_into(&view, &tmp, op)
}

/// Per-row map `f(row) -> O` over `rows`, in parallel when large.
pub fn map_rows<T: Element, O: Element + Default>(
    rows: &Rows,
    f: impl Fn(&[T]) -> O + Sync,
) -> Result<Vec<O>> {
    let data = rows.slice::<T>()?;
    let (outer, inner) = (rows.outer, rows.inner);
    let mut out = vec![O::default(); outer];
    if outer * inner >= crate::iter::GRAIN && outer > 1 {
        // About four tasks per thread, for balance on a shared machine.
        let per_task = outer.div_ceil(4 * rayon::current_num_threads());
        crate::parallel::fork_chunks_mut(&mut out, per_task, |c, task| {
            for (j, o) in task.iter_mut().enumerate() {
                let i = c * per_task + j;
                *o = f(&data[i * inner..(i + 1) * inner]);
            }
        });
    } else {
        for (i, o) in out.iter_mut().enumerate() {
            *o = f(&data[i * inner..(i + 1) * inner]);
        }
    }
    Ok(out)
}
