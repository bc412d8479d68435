//! Register-blocked f32 products for matrices too small for the `gemm` crate's
//! packing and dispatch to pay off: an output at most 16 columns wide and an inner
//! dimension of at most 64 (an attention head's `q @ kᵀ`, `a @ v` and their
//! gradients, one per batch element).
//!
//! Owns: the choice of orientation for such a product and its AVX2+FMA loop.
//! Must not: know about tensors or dtypes, or take products it was not asked
//! about ([`gemm_f32`] says whether it took one; the caller runs the `gemm` crate
//! otherwise).
//!
//! Why: for a 16x16x8 product the `gemm` crate spent about 3,900 instructions per
//! call (its dispatch, packing and edge tiles), 12 such batched products of 32
//! heads each per step of the small GPT fixture were 14% of that step. Here each
//! group of four output rows keeps its `4 x W` sums in registers while the inner
//! index walks once over the (packed) right operand.

use super::gemm_core::{MatMut, MatRef};
use std::mem::MaybeUninit;

/// Widest output (columns, after choosing the orientation) taken here.
const MAX_N: usize = 16;
/// Longest inner dimension taken here (the packed right operand lives on the
/// stack: `MAX_K x 16` f32s, 4 KiB).
const MAX_K: usize = 64;
/// Tallest output taken here: beyond it the `gemm` crate's larger tiles (and its
/// threads) win.
const MAX_M: usize = 256;
/// Output rows whose sums are kept in registers at once (`ROWS x 16` f32 is eight
/// AVX registers, plus two for the operand rows).
const ROWS: usize = 4;

/// One orientation of the product: `dst (m x n) = a (m x k) @ b (k x n)`.
#[derive(Clone, Copy)]
struct Problem {
    m: usize,
    n: usize,
    dst: MatMut<f32>,
    a: MatRef<f32>,
    b: MatRef<f32>,
}

impl Problem {
    fn fits(&self, k: usize) -> bool {
        self.n <= MAX_N && self.m <= MAX_M && (1..=MAX_K).contains(&k)
    }

    /// The register width this orientation computes with (8 or 16 columns).
    fn width(&self) -> usize {
        if self.n <= 8 {
            8
        } else {
            16
        }
    }

    /// True when the right operand's rows can be read in place: `width()`
    /// contiguous elements per row, all of them in the matrix.
    fn reads_b_in_place(&self) -> bool {
        self.b.cs == 1 && self.n == self.width()
    }

    /// The same product as `dstᵀ = bᵀ @ aᵀ`.
    fn transposed(&self) -> Problem {
        let t = |v: MatRef<f32>| MatRef {
            ptr: v.ptr,
            rs: v.cs,
            cs: v.rs,
        };
        Problem {
            m: self.n,
            n: self.m,
            dst: MatMut {
                ptr: self.dst.ptr,
                rs: self.dst.cs,
                cs: self.dst.rs,
            },
            a: t(self.b),
            b: t(self.a),
        }
    }
}

/// `dst = beta * dst + alpha * (a @ b)` for an `m x k` by `k x n` f32 product when it
/// is small enough and the CPU has AVX2 and FMA; returns false (touching nothing)
/// otherwise. `beta == None` never reads `dst`.
///
/// # Safety
/// As for [`super::gemm_core::gemm_float`]: every pointer addresses a valid matrix of
/// the given shape and strides, and `dst` overlaps neither operand nor itself.
#[allow(clippy::too_many_arguments)] // a GEMM's shape, three operands and two scales
pub(crate) unsafe fn gemm_f32(
    m: usize,
    n: usize,
    k: usize,
    dst: MatMut<f32>,
    a: MatRef<f32>,
    b: MatRef<f32>,
    alpha: f32,
    beta: Option<f32>,
) -> bool {
    if !crate::nn::vecmath::has_avx2() || m == 0 || n == 0 {
        return false;
    }
    let given = Problem { m, n, dst, a, b };
    let flipped = given.transposed();
    // Prefer an orientation whose right operand needs no packing.
    let p = match (given.fits(k), flipped.fits(k)) {
        (true, true) if !given.reads_b_in_place() && flipped.reads_b_in_place() => flipped,
        (true, _) => given,
        (false, true) => flipped,
        (false, false) => return false,
    };
    // SAFETY: the CPU has AVX2 and FMA (checked above); the problem is the caller's
    // product (possibly transposed, which addresses the same elements), within the
    // limits `fits` checked.
    unsafe {
        if p.width() == 8 {
            product_avx2_w8(p, k, alpha, beta)
        } else {
            product_avx2_w16(p, k, alpha, beta)
        }
    }
    true
}

/// [`product`] at width 8, compiled for AVX2+FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA; `p` is a valid problem with `p.n <= 8` and
/// `1 <= k <= MAX_K`.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
unsafe fn product_avx2_w8(p: Problem, k: usize, alpha: f32, beta: Option<f32>) {
    // SAFETY: forwarded contract.
    unsafe { product::<8>(p, k, alpha, beta) }
}

/// [`product`] at width 16, compiled for AVX2+FMA.
///
/// # Safety
/// As for [`product_avx2_w8`], with `p.n <= 16`.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
unsafe fn product_avx2_w16(p: Problem, k: usize, alpha: f32, beta: Option<f32>) {
    // SAFETY: forwarded contract.
    unsafe { product::<16>(p, k, alpha, beta) }
}

/// The product with `W`-wide rows of sums.
///
/// # Safety
/// `p` is a valid problem (see [`gemm_f32`]) with `p.n <= W` and `1 <= k <= MAX_K`.
#[inline(always)]
unsafe fn product<const W: usize>(p: Problem, k: usize, alpha: f32, beta: Option<f32>) {
    // Only the k rows of W written below are ever read: no zero-fill of the rest.
    let mut packed = [MaybeUninit::<f32>::uninit(); MAX_K * MAX_N];
    let (b_ptr, b_rs) = if p.b.cs == 1 && p.n == W {
        (p.b.ptr, p.b.rs)
    } else {
        for (r, row) in packed.chunks_exact_mut(W).take(k).enumerate() {
            for (c, slot) in row.iter_mut().enumerate() {
                // Columns n..W are zero, so their sums are zero and never stored.
                let v = if c < p.n {
                    // SAFETY: (r, c) is an element of the k x n operand b.
                    unsafe { *p.b.ptr.offset(r as isize * p.b.rs + c as isize * p.b.cs) }
                } else {
                    0.0
                };
                *slot = MaybeUninit::new(v);
            }
        }
        (packed.as_ptr().cast::<f32>(), W as isize)
    };
    let mut i = 0;
    while i + ROWS <= p.m {
        // SAFETY: rows i..i+ROWS are rows of the problem; b_ptr/b_rs address k rows
        // of W readable f32 each (in place: n == W elements of b; else `packed`).
        unsafe {
            let sums = row_sums::<ROWS, W>(p.a, i, k, b_ptr, b_rs);
            store(&p, i, &sums, alpha, beta);
        }
        i += ROWS;
    }
    while i < p.m {
        // SAFETY: as above, for the single row i.
        unsafe {
            let sums = row_sums::<1, W>(p.a, i, k, b_ptr, b_rs);
            store(&p, i, &sums, alpha, beta);
        }
        i += 1;
    }
}

/// The sums of rows `i..i+R` of `a @ b`, `W` columns each.
///
/// # Safety
/// Rows `i..i+R` and columns `0..k` are elements of `a`; `b` addresses `k` rows of
/// `W` readable f32s, `b_rs` apart.
#[inline(always)]
unsafe fn row_sums<const R: usize, const W: usize>(
    a: MatRef<f32>,
    i: usize,
    k: usize,
    b: *const f32,
    b_rs: isize,
) -> [[f32; W]; R] {
    let mut sums = [[0.0f32; W]; R];
    let a0 = a.ptr.wrapping_offset(i as isize * a.rs);
    for q in 0..k {
        // SAFETY: row q of b holds W readable f32s (caller's contract); unaligned.
        let row: [f32; W] = unsafe {
            b.offset(q as isize * b_rs)
                .cast::<[f32; W]>()
                .read_unaligned()
        };
        for (r, s) in sums.iter_mut().enumerate() {
            // SAFETY: (i + r, q) is an element of a (caller's contract).
            let x = unsafe { *a0.offset(r as isize * a.rs + q as isize * a.cs) };
            for (acc, &y) in s.iter_mut().zip(&row) {
                *acc = x.mul_add(y, *acc);
            }
        }
    }
    sums
}

/// Writes `alpha * sums (+ beta * dst)` into rows `i..i+R`, columns `0..n` of dst.
///
/// # Safety
/// Those rows and columns are elements of `p.dst`, which nothing else reads or
/// writes meanwhile.
#[inline(always)]
unsafe fn store<const R: usize, const W: usize>(
    p: &Problem,
    i: usize,
    sums: &[[f32; W]; R],
    alpha: f32,
    beta: Option<f32>,
) {
    for (r, s) in sums.iter().enumerate() {
        let row = p.dst.ptr.wrapping_offset((i + r) as isize * p.dst.rs);
        if p.dst.cs == 1 && p.n == W {
            // SAFETY: the row's W == n elements are contiguous elements of dst.
            let out = unsafe { &mut *row.cast::<[f32; W]>() };
            match beta {
                None => out.iter_mut().zip(s).for_each(|(o, &v)| *o = alpha * v),
                Some(bt) => out
                    .iter_mut()
                    .zip(s)
                    .for_each(|(o, &v)| *o = bt.mul_add(*o, alpha * v)),
            }
            continue;
        }
        for (c, &v) in s.iter().enumerate().take(p.n) {
            // SAFETY: (i + r, c) is an element of dst.
            let o = unsafe { &mut *row.offset(c as isize * p.dst.cs) };
            *o = match beta {
                None => alpha * v,
                Some(bt) => bt.mul_add(*o, alpha * v),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                    .sum();
            }
        }
        c
    }

    /// Every shape up to the limits' edges, with each operand row- or column-major and
    /// the destination row- or column-major, with and without beta.
    #[test]
    fn small_products_match_the_naive_product_in_every_layout() {
        if !crate::nn::vecmath::has_avx2() {
            return;
        }
        let shapes = [
            (1, 1, 1),
            (16, 16, 8),
            (16, 8, 16),
            (5, 3, 7),
            (7, 16, 64),
            (13, 9, 2),
            (256, 16, 64),
            (3, 200, 5),
        ];
        for &(m, n, k) in &shapes {
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7919) % 97) as f32 / 17.0 - 2.5)
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|i| ((i * 104_729) % 89) as f32 / 13.0 - 3.0)
                .collect();
            let want = naive(m, n, k, &a, &b);
            for layout in 0..8u32 {
                let (a_t, b_t, d_t) = (layout & 1 != 0, layout & 2 != 0, layout & 4 != 0);
                // Re-lay the operands: transposed storage read through swapped strides.
                let relay =
                    |v: &[f32], rows: usize, cols: usize, t: bool| -> (Vec<f32>, isize, isize) {
                        if !t {
                            return (v.to_vec(), cols as isize, 1);
                        }
                        let mut out = vec![0.0; v.len()];
                        for r in 0..rows {
                            for c in 0..cols {
                                out[c * rows + r] = v[r * cols + c];
                            }
                        }
                        (out, 1, rows as isize)
                    };
                let (av, a_rs, a_cs) = relay(&a, m, k, a_t);
                let (bv, b_rs, b_cs) = relay(&b, k, n, b_t);
                let (d_rs, d_cs) = if d_t {
                    (1, m as isize)
                } else {
                    (n as isize, 1)
                };
                for beta in [None, Some(0.5f32)] {
                    let mut d = vec![1.0f32; m * n];
                    // SAFETY: the buffers hold these shapes under these strides.
                    let took = unsafe {
                        gemm_f32(
                            m,
                            n,
                            k,
                            MatMut {
                                ptr: d.as_mut_ptr(),
                                rs: d_rs,
                                cs: d_cs,
                            },
                            MatRef {
                                ptr: av.as_ptr(),
                                rs: a_rs,
                                cs: a_cs,
                            },
                            MatRef {
                                ptr: bv.as_ptr(),
                                rs: b_rs,
                                cs: b_cs,
                            },
                            2.0,
                            beta,
                        )
                    };
                    let fits_either = (n <= MAX_N && m <= MAX_M) || (m <= MAX_N && n <= MAX_M);
                    assert_eq!(took, fits_either && k <= MAX_K, "{m}x{n}x{k}");
                    if !took {
                        continue;
                    }
                    for i in 0..m {
                        for j in 0..n {
                            let got = d[(i as isize * d_rs + j as isize * d_cs) as usize] as f64;
                            let w = 2.0 * want[i * n + j] + beta.map_or(0.0, |bt| bt as f64);
                            assert!(
                                (got - w).abs() <= 1e-4 * (1.0 + w.abs()),
                                "{m}x{n}x{k} layout {layout} beta {beta:?} ({i},{j}): {got} vs {w}"
                            );
                        }
                    }
                }
            }
        }
    }
}
