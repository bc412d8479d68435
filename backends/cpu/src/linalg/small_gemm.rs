//! Register-blocked f32 products for matrices too small for the `gemm` crate's
//! packing and dispatch to pay off: an output at most 16 columns wide, an inner
//! dimension of at most 256 and at most `MAX_ROWS_BY_K` rows times inner length
//! (an attention head's `q @ kᵀ`, `a @ v` and their gradients, one per batch
//! element; a 10-class output layer's forward and weight gradient).
//!
//! Wider outputs of small products (up to `PANEL_MAX_WORK` multiply-adds: the
//! linear layers and 1x1 convolutions of small models) run as column panels of
//! 16, each the same loop: no packing buffer on the heap (the `gemm` crate's
//! per-call buffer was the largest allocation of such models' inference) and
//! none of its dispatch.
//!
//! Owns: the choice of orientation for such a product and its AVX2+FMA and
//! AVX-512 loops.
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
/// Longest inner dimension taken here with AVX-512 (the packed right operand lives
/// on the stack: `MAX_K x 16` f32s, 16 KiB).
const MAX_K: usize = 256;
/// The same with AVX2 only: past 64 the `gemm` crate's AVX2 kernels did as well
/// (a 64x10x128 product took as many instructions either way).
const MAX_K_AVX2: usize = 64;
/// Tallest output taken here: beyond it the `gemm` crate's larger tiles (and its
/// threads) win.
const MAX_M: usize = 512;
/// Most output rows times inner length taken here (512 x 64, or 128 x 256): at
/// most 16 columns, that is under `gemm_core::PARALLEL_MIN_WORK`, so the `gemm`
/// crate would run these on one thread too, after packing the left operand: for
/// GPT-2's 512-word output layer (512 x 16 x 64) a 128 KiB buffer allocated on
/// every call, the largest allocation of its inference.
const MAX_ROWS_BY_K: usize = 512 * 64;
const _: () = assert!(MAX_ROWS_BY_K * MAX_N < super::gemm_core::PARALLEL_MIN_WORK);
/// Most multiply-adds of a product run in column panels: what the `gemm` crate
/// would run on one thread anyway (at most `PARALLEL_MIN_WORK`).
const PANEL_MAX_WORK: usize = super::gemm_core::PARALLEL_MIN_WORK;
/// Output rows whose sums are kept in registers at once with AVX2 (`4 x 16` f32 is
/// eight AVX registers, plus two for the operand rows).
const ROWS_AVX2: usize = 4;
/// The same with AVX-512: eight rows of sums, one register each at width 16
/// (enough independent multiply-adds to keep both FMA units busy).
const ROWS_AVX512: usize = 8;

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
    fn fits(&self, k: usize, avx512: bool) -> bool {
        let max_k = if avx512 { MAX_K } else { MAX_K_AVX2 };
        self.n <= MAX_N
            && self.m <= MAX_M
            && (1..=max_k).contains(&k)
            && self.m * k <= MAX_ROWS_BY_K
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

    /// True when the product runs as column panels of `MAX_N` (see
    /// [`Problem::panel`]).
    fn fits_panels(&self, k: usize, avx512: bool) -> bool {
        let max_k = if avx512 { MAX_K } else { MAX_K_AVX2 };
        self.m <= MAX_M
            && (1..=max_k).contains(&k)
            && self.m.saturating_mul(self.n).saturating_mul(k) <= PANEL_MAX_WORK
    }

    /// Element copies and scattered stores the panels of this orientation
    /// cost beyond the products: packing `b` when its rows are not contiguous,
    /// storing one element at a time when `dst`'s rows are not.
    fn panel_overhead(&self, k: usize) -> usize {
        let pack = if self.b.cs == 1 { 0 } else { k * self.n };
        let scatter = if self.dst.cs == 1 { 0 } else { self.m * self.n };
        pack + scatter
    }

    /// Columns `j0..j0 + w` of the product: all of `a`, those columns of `b`
    /// and `dst`.
    fn panel(&self, j0: usize, w: usize) -> Problem {
        let j = j0 as isize;
        Problem {
            m: self.m,
            n: w,
            dst: MatMut {
                ptr: self.dst.ptr.wrapping_offset(j * self.dst.cs),
                ..self.dst
            },
            a: self.a,
            b: MatRef {
                ptr: self.b.ptr.wrapping_offset(j * self.b.cs),
                ..self.b
            },
        }
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

/// The instruction sets the loops here are built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AVX2 and FMA.
    Avx2,
    /// AVX-512F (with AVX2 and FMA).
    Avx512,
}

impl Isa {
    /// The best build this CPU runs, or `None` without AVX2 and FMA.
    pub(crate) fn detected() -> Option<Isa> {
        if crate::nn::vecmath::has_avx512() {
            Some(Isa::Avx512)
        } else if crate::nn::vecmath::has_avx2() {
            Some(Isa::Avx2)
        } else {
            None
        }
    }
}

/// `dst = beta * dst + alpha * (a @ b)` for an `m x k` by `k x n` f32 product when it
/// is small enough, with the loops built for `isa`; returns false (touching
/// nothing) otherwise. `beta == None` never reads `dst`.
///
/// # Safety
/// As for [`super::gemm_core::gemm_float`]: every pointer addresses a valid matrix of
/// the given shape and strides, and `dst` overlaps neither operand nor itself. The
/// CPU supports `isa` ([`Isa::detected`] or a lesser one).
#[allow(clippy::too_many_arguments)] // a GEMM's shape, three operands, two scales, the ISA
pub(crate) unsafe fn gemm_f32(
    m: usize,
    n: usize,
    k: usize,
    dst: MatMut<f32>,
    a: MatRef<f32>,
    b: MatRef<f32>,
    alpha: f32,
    beta: Option<f32>,
    isa: Isa,
) -> bool {
    if m == 0 || n == 0 {
        return false;
    }
    let avx512 = isa == Isa::Avx512;
    let given = Problem { m, n, dst, a, b };
    let flipped = given.transposed();
    // Prefer an orientation whose right operand needs no packing.
    let p = match (given.fits(k, avx512), flipped.fits(k, avx512)) {
        (true, true) if !given.reads_b_in_place() && flipped.reads_b_in_place() => flipped,
        (true, _) => given,
        (false, true) => flipped,
        (false, false) => {
            let p = [given, flipped]
                .into_iter()
                .filter(|q| q.fits_panels(k, avx512))
                .min_by_key(|q| q.panel_overhead(k));
            let Some(p) = p else {
                return false;
            };
            for j0 in (0..p.n).step_by(MAX_N) {
                let q = p.panel(j0, MAX_N.min(p.n - j0));
                // SAFETY: as below; a panel addresses columns j0.. of the same
                // problem, at most MAX_N of them.
                unsafe { run(q, k, alpha, beta, avx512) };
            }
            return true;
        }
    };
    // SAFETY: the CPU has AVX2 and FMA, and AVX-512F when `avx512` (caller's
    // contract); the problem is the caller's product (possibly
    // transposed, which addresses the same elements), within the limits `fits`
    // checked.
    unsafe { run(p, k, alpha, beta, avx512) };
    true
}

/// Runs `p` (at most `MAX_N` columns) with the build for its width.
///
/// # Safety
/// The CPU has AVX2 and FMA, and AVX-512F when `avx512`; `p` is a valid
/// problem (see [`gemm_f32`]) with `p.n <= MAX_N` and `1 <= k` within the
/// build's limit on k.
unsafe fn run(p: Problem, k: usize, alpha: f32, beta: Option<f32>, avx512: bool) {
    // SAFETY: forwarded contract.
    unsafe {
        match (p.width() == 8, avx512) {
            (true, false) => product_avx2_w8(p, k, alpha, beta),
            (false, false) => product_avx2_w16(p, k, alpha, beta),
            (true, true) => product_avx512_w8(p, k, alpha, beta),
            (false, true) => product_avx512_w16(p, k, alpha, beta),
        }
    }
}

/// Defines `unsafe fn $name(p, k, alpha, beta)`: [`product`] at width `$w` with `$r`
/// rows in flight, compiled with the target features `$features`.
///
/// Each generated function's safety contract: the CPU supports `$features`; `p` is
/// a valid problem (see [`gemm_f32`]) with `p.n <= $w` and `1 <= k <= MAX_K`.
macro_rules! product_build {
    ($(#[$doc:meta])* $name:ident, $features:literal, $w:literal, $r:expr) => {
        $(#[$doc])*
        #[cfg_attr(target_arch = "x86_64", target_feature(enable = $features))]
        unsafe fn $name(p: Problem, k: usize, alpha: f32, beta: Option<f32>) {
            // SAFETY: forwarded contract (see the macro).
            unsafe { product::<$w, $r>(p, k, alpha, beta) }
        }
    };
}

product_build!(
    /// Width 8 with AVX2+FMA.
    product_avx2_w8, "avx2,fma", 8, ROWS_AVX2
);
product_build!(
    /// Width 16 with AVX2+FMA (two registers per row of sums).
    product_avx2_w16, "avx2,fma", 16, ROWS_AVX2
);
product_build!(
    /// Width 8 with AVX-512: twice the rows in flight, 32 vector registers.
    product_avx512_w8, "avx512f,avx2,fma", 8, ROWS_AVX512
);
product_build!(
    /// Width 16 with AVX-512: one register per row of sums.
    product_avx512_w16, "avx512f,avx2,fma", 16, ROWS_AVX512
);

/// The product with `W`-wide rows of sums, `R` rows at a time.
///
/// # Safety
/// `p` is a valid problem (see [`gemm_f32`]) with `p.n <= W` and `1 <= k <= MAX_K`.
#[inline(always)]
unsafe fn product<const W: usize, const R: usize>(
    p: Problem,
    k: usize,
    alpha: f32,
    beta: Option<f32>,
) {
    // Only the k rows of W written below are ever read: no zero-fill of the rest.
    let mut packed = [MaybeUninit::<f32>::uninit(); MAX_K * MAX_N];
    let (b_ptr, b_rs) = if p.b.cs == 1 && p.n == W {
        (p.b.ptr, p.b.rs)
    } else {
        let rows = &mut packed[..k * W];
        // Columns n..W are zero, so their sums are zero and never stored.
        if p.n < W {
            for row in rows.chunks_exact_mut(W) {
                row[p.n..].fill(MaybeUninit::new(0.0));
            }
        }
        // Read b along its closer-spaced index (a transposed weight is read down
        // its contiguous columns).
        let (outer, inner, outer_s, inner_s, outer_w, inner_w) = if p.b.rs.abs() < p.b.cs.abs() {
            (p.n, k, p.b.cs, p.b.rs, 1, W)
        } else {
            (k, p.n, p.b.rs, p.b.cs, W, 1)
        };
        for o in 0..outer {
            let line = p.b.ptr.wrapping_offset(o as isize * outer_s);
            for q in 0..inner {
                // SAFETY: (o, q) is an element of the k x n operand b, read along
                // the chosen index order.
                let v = unsafe { *line.offset(q as isize * inner_s) };
                rows[o * outer_w + q * inner_w] = MaybeUninit::new(v);
            }
        }
        (packed.as_ptr().cast::<f32>(), W as isize)
    };
    let mut i = 0;
    while i + R <= p.m {
        // SAFETY: rows i..i+R are rows of the problem; b_ptr/b_rs address k rows
        // of W readable f32 each (in place: n == W elements of b; else `packed`).
        unsafe {
            let sums = row_sums::<R, W>(p.a, i, k, b_ptr, b_rs);
            store(&p, i, &sums, alpha, beta);
        }
        i += R;
    }
    // The last rows in smaller groups: each group's sums are independent chains
    // of multiply-adds, so fewer rows at a time would wait on each one's latency.
    if R > 4 && i + 4 <= p.m {
        // SAFETY: as above, for rows i..i+4.
        unsafe {
            let sums = row_sums::<4, W>(p.a, i, k, b_ptr, b_rs);
            store(&p, i, &sums, alpha, beta);
        }
        i += 4;
    }
    if i + 2 <= p.m {
        // SAFETY: as above, for rows i..i+2.
        unsafe {
            let sums = row_sums::<2, W>(p.a, i, k, b_ptr, b_rs);
            store(&p, i, &sums, alpha, beta);
        }
        i += 2;
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
            (512, 16, 64),
            (16, 513, 64),
            (32, 512, 64),
            (33, 40, 17),
            (8, 1024, 128),
            (2, 256, 144),
            (128, 16, 256),
            (3, 200, 5),
            (64, 10, 128),
            (10, 128, 64),
            (64, 16, 256),
            (65, 16, 256),
            (11, 7, 300),
            (9, 3, 255),
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
                let builds = [
                    Some(Isa::Avx2),
                    Some(Isa::Avx512).filter(|_| crate::nn::vecmath::has_avx512()),
                ];
                for (beta, isa) in [None, Some(0.5f32)]
                    .into_iter()
                    .flat_map(|bt| builds.into_iter().flatten().map(move |v| (bt, v)))
                {
                    let avx512 = isa == Isa::Avx512;
                    let mut d = vec![1.0f32; m * n];
                    // SAFETY: the buffers hold these shapes under these strides, and
                    // AVX-512 is asked for only where the CPU has it.
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
                            isa,
                        )
                    };
                    let fits = |rows: usize, cols: usize| {
                        cols <= MAX_N && rows <= MAX_M && rows * k <= MAX_ROWS_BY_K
                    };
                    let panels = (m <= MAX_M || n <= MAX_M) && m * n * k <= PANEL_MAX_WORK;
                    let fits_either = fits(m, n) || fits(n, m) || panels;
                    let max_k = if avx512 { MAX_K } else { MAX_K_AVX2 };
                    assert_eq!(took, fits_either && k <= max_k, "{m}x{n}x{k}");
                    if !took {
                        continue;
                    }
                    for i in 0..m {
                        for j in 0..n {
                            let got = d[(i as isize * d_rs + j as isize * d_cs) as usize] as f64;
                            let w = 2.0 * want[i * n + j] + beta.map_or(0.0, |bt| bt as f64);
                            assert!(
                                (got - w).abs() <= 1e-4 * (1.0 + w.abs()),
                                "{m}x{n}x{k} layout {layout} beta {beta:?} avx512 {avx512} ({i},{j}): {got} vs {w}"
                            );
                        }
                    }
                }
            }
        }
    }
}
