//! Complex matrix products (C64, C128) for `mm`, `bmm`, `addmm` and `baddbmm`.
//!
//! Owns: how a complex `beta * c + alpha * a @ b` is composed of the real GEMM of
//! [`super::gemm_core`]. A complex matrix's real and imaginary parts are two real
//! matrices with twice its strides, one element apart, so
//! `re(ab) = re a re b - im a im b` and `im(ab) = re a im b + im a re b` are four
//! real products over the operands in place: no copies, and none of the `gemm`
//! family's complex kernels (their own crates, and code size every test binary
//! would carry). `alpha` and `beta * c` are applied afterwards in complex
//! arithmetic. Must not: check shapes or dtypes (the caller did).

use super::gemm_core::{gemm_float, GemmFloat, MatMut, MatRef};
use super::{mat_layout, Batch};
use crate::dtype_dispatch::Cplx;
use crate::iter::{map1, map2};
use opal::tensor::KernelAccess;
use opal::{Complex, Element, Result, Scalar, Tensor};

/// The real (`im == 0`) or imaginary (`im == 1`) parts of matrix `i` of the complex
/// batch `l` at `p`, as a real matrix. The address is only computed here (wrapping,
/// so no `unsafe`); the GEMM that reads it relies on the caller's bounds.
fn part<R>(p: *const R, l: &Batch, i: usize, im: isize) -> MatRef<R> {
    MatRef {
        ptr: p.wrapping_offset(2 * i as isize * l.bs + im),
        rs: 2 * l.rs,
        cs: 2 * l.cs,
    }
}

/// [`part`] of a result written by the GEMMs.
fn part_mut<R>(p: *mut R, l: &Batch, i: usize, im: isize) -> MatMut<R> {
    let MatRef { ptr, rs, cs } = part(p.cast_const(), l, i, im);
    MatMut {
        ptr: ptr.cast_mut(),
        rs,
        cs,
    }
}

/// `beta * c + alpha * a @ b` of complex `a` and `b` (same dtype, `Complex<R>`)
/// into a new contiguous tensor of `out_shape`; `c` (broadcastable to it) is
/// skipped when absent or `beta == 0`, as PyTorch skips it (its NaNs included).
pub(super) fn complex_product<R>(
    op: &str,
    a: &Tensor,
    b: &Tensor,
    c: Option<(&Tensor, &Scalar)>,
    alpha: &Scalar,
    out_shape: &[i64],
) -> Result<Tensor>
where
    R: GemmFloat + Element,
    Complex<R>: Cplx<R = R> + Element,
{
    let prod = crate::out::empty_uninit(out_shape, a.dtype())?;
    let (la, lb, lo) = (mat_layout(a), mat_layout(b), mat_layout(&prod));
    let acc = KernelAccess::new(&[a, b], &[&prod])?;
    let pa = acc.read_ptr::<Complex<R>>(a)?.cast::<R>();
    let pb = acc.read_ptr::<Complex<R>>(b)?.cast::<R>();
    let po = acc.write_ptr::<Complex<R>>(&prod)?.cast::<R>();
    let (m, n, k) = (lo.rows, lo.cols, la.cols);
    let one = R::one();
    for i in 0..lo.bsz {
        let (ar, ai) = (part(pa, &la, i, 0), part(pa, &la, i, 1));
        let (br, bi) = (part(pb, &lb, i, 0), part(pb, &lb, i, 1));
        let (or, oi) = (part_mut(po, &lo, i, 0), part_mut(po, &lo, i, 1));
        // `acc` borrows the three tensors until the products have run. The caller
        // checked the shapes, so every (row, col) of batch `i` addressed through a
        // tensor's own strides is one of its complex elements, and a part's real
        // element is that element's first or second component. `prod` is fresh
        // and shares no storage with `a` or `b`; its two parts are disjoint element
        // sets (contiguous: non-zero strides where sizes exceed 1).
        // SAFETY: the four GEMMs read and write only the elements above.
        unsafe {
            gemm_float(m, n, k, or, ar, br, one, None, true);
            gemm_float(m, n, k, or, ai, bi, -one, Some(one), true);
            gemm_float(m, n, k, oi, ar, bi, one, None, true);
            gemm_float(m, n, k, oi, ai, br, one, Some(one), true);
        }
    }
    drop(acc);
    let al = Complex::<R>::from_scalar(alpha);
    let beta = c
        .map(|(t, s)| (t, Complex::<R>::from_scalar(s)))
        .filter(|(_, bv)| *bv != Complex::default());
    match beta {
        None if al == Complex::from_re(one) => {}
        None => map1::<Complex<R>, Complex<R>>(&prod, &prod, op, move |p| al.mul(p))?,
        Some((ct, bv)) => {
            map2::<Complex<R>, Complex<R>, Complex<R>>(&prod, &prod, ct, op, move |p, q| {
                al.mul(p).add(bv.mul(q))
            })?
        }
    }
    Ok(prod)
}
