//! Matrix-multiply cores over raw strided pointers: the `gemm` family's f32/f64
//! kernels, a plain triple loop for integer element types.
//!
//! Owns: how one GEMM call is cut into bands for threads (run through
//! [`crate::parallel::fork_chunks`]) and the integer fallback.
//! Must not: know about tensors, dtypes or op names (callers check shapes and
//! hand over valid pointers).

use num_traits::AsPrimitive;

/// A read-only strided matrix view: element `(i, j)` lives at `ptr + i*rs + j*cs`.
#[derive(Copy, Clone)]
pub(crate) struct MatRef<T> {
    pub ptr: *const T,
    pub rs: isize,
    pub cs: isize,
}

/// A writable strided matrix view; same addressing as [`MatRef`].
#[derive(Copy, Clone)]
pub(crate) struct MatMut<T> {
    pub ptr: *mut T,
    pub rs: isize,
    pub cs: isize,
}

/// Below this many multiply-adds (about 128x128x64) a GEMM runs on the calling
/// thread: a helper's band must first pull the operands from the caller's cache,
/// which for smaller products cost what the second thread saved. The small GPT
/// fixture's products (128-row, 131K-524K multiply-adds) took as long on one thread
/// as on two, and its step got 5% faster with them on one (alternating runs, 8 of
/// 8); the MLP fixture's 2M-multiply-add products still gain 1.8x from two.
pub(crate) const PARALLEL_MIN_WORK: usize = 1 << 20;

/// Narrowest block of output rows or columns given to one thread: thinner blocks
/// leave the `gemm` crate's register tiles partly empty.
const MIN_BLOCK: usize = 32;

/// How a parallel GEMM is cut: into `blocks` bands of `width` output rows (when
/// `rows`) or columns, each an independent single-threaded GEMM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bands {
    rows: bool,
    width: usize,
    blocks: usize,
}

/// Cuts the output into one band per thread: bands of columns, which the `gemm`
/// crate vectorizes along, unless the output is more than twice as tall as it is
/// wide. One band each measured fastest for 512x512 (0.97x libtorch against 0.94x
/// with two per thread and 0.91x for row bands, 16 paired runs): with warm helpers
/// (see [`crate::parallel`]) there is no late start to balance, and every extra
/// band packs its operands again. `None` runs the product on the calling thread.
fn bands(m: usize, n: usize, k: usize, allow: bool) -> Option<Bands> {
    if !allow || m.saturating_mul(n).saturating_mul(k) < PARALLEL_MIN_WORK {
        return None;
    }
    let threads = rayon::current_num_threads();
    let (rows, side) = if m > 2 * n { (true, m) } else { (false, n) };
    let blocks = threads.min(side / MIN_BLOCK);
    if threads <= 1 || blocks <= 1 {
        return None;
    }
    // Multiples of 16 keep every band but the last aligned to whole SIMD vectors.
    let width = side.div_ceil(blocks).next_multiple_of(16);
    Some(Bands {
        rows,
        width,
        blocks: side.div_ceil(width),
    })
}

/// The three operands of one GEMM, shared by the threads that compute its bands.
#[derive(Clone, Copy)]
pub(crate) struct Operands<T> {
    dst: MatMut<T>,
    a: MatRef<T>,
    b: MatRef<T>,
}
// SAFETY: plain addresses; the threads of one `gemm_float` call write disjoint
// bands of `dst` and only read `a` and `b` (its caller's contract guarantees that
// they do not overlap `dst`).
unsafe impl<T> Sync for Operands<T> {}

/// One of the `gemm` family's per-type kernels: `dst := dst_scale * dst +
/// product_scale * lhs @ rhs`, arguments in the order (m, n, k, dst, dst_cs, dst_rs,
/// read_dst, lhs, lhs_cs, lhs_rs, rhs, rhs_cs, rhs_rs, dst_scale, product_scale,
/// conj_dst, conj_lhs, conj_rhs, parallelism).
type GemmKernel<T> = unsafe fn(
    usize,
    usize,
    usize,
    *mut T,
    isize,
    isize,
    bool,
    *const T,
    isize,
    isize,
    *const T,
    isize,
    isize,
    T,
    T,
    bool,
    bool,
    bool,
    gemm_common::Parallelism,
);

/// Element types multiplied by the `gemm` family's kernels. The per-type crates are
/// called directly: the umbrella `gemm::gemm<T>` picks its kernel by `TypeId`, and
/// unoptimized builds kept all five kernels (complex ones included, ~17 MB of code)
/// in every test binary.
pub(crate) trait GemmFloat: num_traits::Float + Send + Sync + 'static {
    /// The kernel for this type, chosen once for this CPU by its crate.
    fn kernel() -> GemmKernel<Self>;

    /// Computes a product too small for [`Self::kernel`] to pay off and returns
    /// true, or returns false having touched nothing.
    ///
    /// # Safety
    /// As for [`gemm_float`], with `k >= 1`.
    #[allow(clippy::too_many_arguments)] // a GEMM's shape, three operands and two scales
    unsafe fn small(
        _m: usize,
        _n: usize,
        _k: usize,
        _ops: Operands<Self>,
        _alpha: Self,
        _beta: Option<Self>,
    ) -> bool {
        false
    }
}
impl GemmFloat for f32 {
    fn kernel() -> GemmKernel<f32> {
        gemm_f32::gemm::f32::get_gemm_fn()
    }

    unsafe fn small(
        m: usize,
        n: usize,
        k: usize,
        Operands { dst, a, b }: Operands<f32>,
        alpha: f32,
        beta: Option<f32>,
    ) -> bool {
        let Some(isa) = super::small_gemm::Isa::detected() else {
            return false;
        };
        // SAFETY: forwarded contract; `isa` is what this CPU supports.
        unsafe { super::small_gemm::gemm_f32(m, n, k, dst, a, b, alpha, beta, isa) }
    }
}
impl GemmFloat for f64 {
    fn kernel() -> GemmKernel<f64> {
        gemm_f64::gemm::f64::get_gemm_fn()
    }
}

/// `dst = beta * dst + alpha * (a @ b)` for an `m x k` by `k x n` product.
/// `beta == None` means dst is write-only (its old contents, NaN included, are ignored),
/// which is PyTorch's rule for `beta == 0`. `parallel == false` keeps the call on this
/// thread (for callers that already parallelize over a batch).
///
/// # Safety
/// Every pointer must address a valid matrix of the given shape and strides for its
/// element type; `dst` must not overlap `a` or `b` and must not have aliasing
/// elements (no zero strides) when `m, n > 0`.
#[allow(clippy::too_many_arguments)] // a GEMM's shape, three operands and two scales
pub(crate) unsafe fn gemm_float<T: GemmFloat>(
    m: usize,
    n: usize,
    k: usize,
    dst: MatMut<T>,
    a: MatRef<T>,
    b: MatRef<T>,
    alpha: T,
    beta: Option<T>,
    parallel: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        // The gemm crate needs k >= 1 to touch dst; the product is all zeros.
        for i in 0..m as isize {
            for j in 0..n as isize {
                // SAFETY: (i, j) is inside the m x n destination (caller's contract).
                let p = unsafe { dst.ptr.offset(i * dst.rs + j * dst.cs) };
                // SAFETY: p is a valid, exclusively owned element of dst.
                unsafe { *p = beta.map_or(T::zero(), |b| b * *p) };
            }
        }
        return;
    }
    let ops = Operands { dst, a, b };
    // SAFETY: forwarded from this function's contract; k >= 1 here.
    if unsafe { T::small(m, n, k, ops, alpha, beta) } {
        return;
    }
    let Some(plan) = bands(m, n, k, parallel) else {
        // SAFETY: forwarded from this function's contract.
        unsafe { gemm_serial(m, n, k, ops, alpha, beta) };
        return;
    };
    crate::parallel::fork_chunks(plan.blocks, |block| {
        let start = block * plan.width;
        let side = if plan.rows { m } else { n };
        let len = plan.width.min(side - start);
        let (bm, bn) = if plan.rows { (len, n) } else { (m, len) };
        // SAFETY: the band's rows (or columns) lie inside the caller's matrices,
        // and bands of dst are disjoint, so each is a valid GEMM of its own.
        unsafe { gemm_serial(bm, bn, k, ops.band(plan.rows, start), alpha, beta) }
    });
}

impl<T> Operands<T> {
    /// The operands of the band of output rows (or columns) from `start` on: the
    /// same rows of `a` (or columns of `b`), all of the other operand.
    ///
    /// # Safety
    /// `start` must be inside the output's rows (or columns).
    unsafe fn band(self, rows: bool, start: usize) -> Self {
        let s = start as isize;
        // SAFETY: the caller's contract keeps the offsets inside the matrices.
        unsafe {
            if rows {
                Operands {
                    dst: MatMut {
                        ptr: self.dst.ptr.offset(s * self.dst.rs),
                        ..self.dst
                    },
                    a: MatRef {
                        ptr: self.a.ptr.offset(s * self.a.rs),
                        ..self.a
                    },
                    b: self.b,
                }
            } else {
                Operands {
                    dst: MatMut {
                        ptr: self.dst.ptr.offset(s * self.dst.cs),
                        ..self.dst
                    },
                    a: self.a,
                    b: MatRef {
                        ptr: self.b.ptr.offset(s * self.b.cs),
                        ..self.b
                    },
                }
            }
        }
    }
}

/// One single-threaded `gemm` crate call: `dst = beta * dst + alpha * (a @ b)`.
///
/// # Safety
/// As for [`gemm_float`], with `k >= 1`.
unsafe fn gemm_serial<T: GemmFloat>(
    m: usize,
    n: usize,
    k: usize,
    Operands { dst, a, b }: Operands<T>,
    alpha: T,
    beta: Option<T>,
) {
    let (read_dst, dst_scale) = match beta {
        Some(b) => (true, b),
        None => (false, T::zero()),
    };
    let (m, n, Operands { dst, a, b }) = kernel_layout(m, n, k, Operands { dst, a, b });
    // SAFETY: forwarded from this function's contract (`kernel_layout` only
    // re-describes the same elements); the kernel reads/writes exactly the m x n,
    // m x k and k x n elements addressed by the given non-negative strides.
    unsafe {
        T::kernel()(
            m,
            n,
            k,
            dst.ptr,
            dst.cs,
            dst.rs,
            read_dst,
            a.ptr,
            a.cs,
            a.rs,
            b.ptr,
            b.cs,
            b.rs,
            dst_scale,
            alpha,
            false,
            false,
            false,
            gemm_common::Parallelism::None,
        )
    }
}

/// The same product described the way the kernels work best and are written for:
/// a destination whose rows are closer together than its columns (otherwise
/// `C = A B` is computed as `Cᵀ = Bᵀ Aᵀ`, which swaps each view's strides), and
/// non-negative destination and inner strides (a negative one is walked from its
/// other end). Returns the new `(m, n)` and operands; `k` is unchanged.
fn kernel_layout<T>(m: usize, n: usize, k: usize, ops: Operands<T>) -> (usize, usize, Operands<T>) {
    let Operands {
        mut dst,
        mut a,
        mut b,
    } = ops;
    let (mut m, mut n) = (m, n);
    if dst.cs.unsigned_abs() < dst.rs.unsigned_abs() {
        (m, n) = (n, m);
        (dst.rs, dst.cs) = (dst.cs, dst.rs);
        (a, b) = (
            MatRef {
                ptr: b.ptr,
                rs: b.cs,
                cs: b.rs,
            },
            MatRef {
                ptr: a.ptr,
                rs: a.cs,
                cs: a.rs,
            },
        );
    }
    // `wrapping_offset` stays inside the views (the last row, column or inner
    // index), so the pointers remain valid for the kernel.
    if dst.rs < 0 && m > 0 {
        let last = (m - 1) as isize;
        dst.ptr = dst.ptr.wrapping_offset(last * dst.rs);
        a.ptr = a.ptr.wrapping_offset(last * a.rs);
        (dst.rs, a.rs) = (-dst.rs, -a.rs);
    }
    if dst.cs < 0 && n > 0 {
        let last = (n - 1) as isize;
        dst.ptr = dst.ptr.wrapping_offset(last * dst.cs);
        b.ptr = b.ptr.wrapping_offset(last * b.cs);
        (dst.cs, b.cs) = (-dst.cs, -b.cs);
    }
    if a.cs < 0 && k > 0 {
        let last = (k - 1) as isize;
        a.ptr = a.ptr.wrapping_offset(last * a.cs);
        b.ptr = b.ptr.wrapping_offset(last * b.rs);
        (a.cs, b.rs) = (-a.cs, -b.rs);
    }
    (m, n, Operands { dst, a, b })
}

/// Integer (and any non-float) product with wrapping arithmetic, computed in i64 and
/// wrapped back to the element type, which matches PyTorch's C++ integer overflow.
/// `beta == None` ignores dst's old contents.
///
/// # Safety
/// Same contract as [`gemm_float`].
#[allow(clippy::too_many_arguments)] // a GEMM's shape, three operands and two scales
pub(crate) unsafe fn gemm_int<T>(
    m: usize,
    n: usize,
    k: usize,
    dst: MatMut<T>,
    a: MatRef<T>,
    b: MatRef<T>,
    alpha: i64,
    beta: Option<i64>,
) where
    T: AsPrimitive<i64>,
    i64: AsPrimitive<T>,
{
    for i in 0..m as isize {
        for j in 0..n as isize {
            let mut acc: i64 = 0;
            for p in 0..k as isize {
                // SAFETY: (i, p) and (p, j) are inside a and b (caller's contract).
                let (x, y) = unsafe {
                    (
                        *a.ptr.offset(i * a.rs + p * a.cs),
                        *b.ptr.offset(p * b.rs + j * b.cs),
                    )
                };
                acc = acc.wrapping_add(x.as_().wrapping_mul(y.as_()));
            }
            // SAFETY: (i, j) is inside dst (caller's contract).
            let d = unsafe { dst.ptr.offset(i * dst.rs + j * dst.cs) };
            let prod = acc.wrapping_mul(alpha);
            // SAFETY: d is a valid, exclusively owned element of dst.
            unsafe {
                *d = match beta {
                    Some(bt) => bt.wrapping_mul((*d).as_()).wrapping_add(prod),
                    None => prod,
                }
                .as_()
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, n: usize, k: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        c
    }

    /// `c = 2 * (a @ b) + 0.5 * c`, parallel allowed: row-major `c` (m x n) and `b`
    /// (k x n), and `a` (m x k) given as (buffer, row stride, column stride).
    fn scaled_product(
        m: usize,
        n: usize,
        k: usize,
        c: &mut [f64],
        (a, a_rs, a_cs): (&[f64], isize, isize),
        b: &[f64],
    ) {
        assert!(c.len() == m * n && a.len() == m * k && b.len() == k * n);
        let (c, a, b) = (c.as_mut_ptr(), a.as_ptr(), b.as_ptr());
        // SAFETY: the buffers hold exactly these shapes under these strides.
        unsafe {
            gemm_float(
                m,
                n,
                k,
                MatMut {
                    ptr: c,
                    rs: n as isize,
                    cs: 1,
                },
                MatRef {
                    ptr: a,
                    rs: a_rs,
                    cs: a_cs,
                },
                MatRef {
                    ptr: b,
                    rs: n as isize,
                    cs: 1,
                },
                2.0,
                Some(0.5),
                true,
            )
        }
    }

    #[test]
    fn float_gemm_matches_naive_with_alpha_beta() {
        let (m, n, k) = (7, 5, 9);
        let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
        let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.11).cos()).collect();
        let mut c = vec![1.0; m * n];
        let want: Vec<f64> = naive(m, n, k, &a, &b)
            .iter()
            .map(|x| 2.0 * x + 0.5)
            .collect();
        scaled_product(m, n, k, &mut c, (&a, k as isize, 1), &b);
        for (x, y) in c.iter().zip(&want) {
            assert!((x - y).abs() < 1e-12, "{x} vs {y}");
        }
    }

    /// (start, row stride, column stride) of an `rows x cols` matrix stored row- or
    /// column-major; `flip` = (rows, columns) walks it from the other end (negative
    /// strides, which the kernels only take after `kernel_layout` turns them around).
    fn view(
        rows: usize,
        cols: usize,
        col_major: bool,
        flip: (bool, bool),
    ) -> (isize, isize, isize) {
        let (mut rs, mut cs) = if col_major {
            (1, rows as isize)
        } else {
            (cols as isize, 1)
        };
        let mut start = 0;
        if flip.0 {
            start += (rows as isize - 1) * rs;
            rs = -rs;
        }
        if flip.1 {
            start += (cols as isize - 1) * cs;
            cs = -cs;
        }
        (start, rs, cs)
    }

    #[test]
    fn every_layout_and_stride_sign_gives_the_naive_product() {
        let (m, n, k) = (6, 4, 5);
        let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
        let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.11).cos()).collect();
        let want = naive(m, n, k, &a, &b);
        for case in 0..64u32 {
            let bit = |i: u32| case & (1 << i) != 0;
            let (dst_col_major, flip_dst) = (bit(0), (bit(1), bit(2)));
            let (a_col_major, b_col_major, flip_inner) = (bit(3), bit(4), bit(5));
            // Lay a and b out as their views read them, then compute.
            let (a_at, a_rs, a_cs) = view(m, k, a_col_major, (false, flip_inner));
            let (b_at, b_rs, b_cs) = view(k, n, b_col_major, (flip_inner, false));
            let mut a_buf = vec![0.0; m * k];
            let mut b_buf = vec![0.0; k * n];
            for i in 0..m {
                for p in 0..k {
                    a_buf[(a_at + i as isize * a_rs + p as isize * a_cs) as usize] = a[i * k + p];
                }
            }
            for p in 0..k {
                for j in 0..n {
                    b_buf[(b_at + p as isize * b_rs + j as isize * b_cs) as usize] = b[p * n + j];
                }
            }
            let (c_at, c_rs, c_cs) = view(m, n, dst_col_major, flip_dst);
            let mut c = vec![f64::NAN; m * n];
            // SAFETY: every view addresses exactly its buffer's elements (checked by
            // the index arithmetic above, which panics out of bounds).
            unsafe {
                gemm_float(
                    m,
                    n,
                    k,
                    MatMut {
                        ptr: c.as_mut_ptr().offset(c_at),
                        rs: c_rs,
                        cs: c_cs,
                    },
                    MatRef {
                        ptr: a_buf.as_ptr().offset(a_at),
                        rs: a_rs,
                        cs: a_cs,
                    },
                    MatRef {
                        ptr: b_buf.as_ptr().offset(b_at),
                        rs: b_rs,
                        cs: b_cs,
                    },
                    1.0,
                    None,
                    false,
                )
            };
            for i in 0..m {
                for j in 0..n {
                    let got = c[(c_at + i as isize * c_rs + j as isize * c_cs) as usize];
                    let w = want[i * n + j];
                    assert!(
                        (got - w).abs() < 1e-12,
                        "case {case:06b} ({i}, {j}): {got} vs {w}"
                    );
                }
            }
        }
    }

    #[test]
    fn beta_none_ignores_nan_in_dst() {
        let a = [1.0f32, 2.0];
        let b = [3.0f32, 4.0];
        let mut c = [f32::NAN];
        // SAFETY: 1x2 @ 2x1 into 1x1, contiguous buffers.
        unsafe {
            gemm_float(
                1,
                1,
                2,
                MatMut {
                    ptr: c.as_mut_ptr(),
                    rs: 1,
                    cs: 1,
                },
                MatRef {
                    ptr: a.as_ptr(),
                    rs: 2,
                    cs: 1,
                },
                MatRef {
                    ptr: b.as_ptr(),
                    rs: 1,
                    cs: 1,
                },
                1.0,
                None,
                false,
            )
        };
        assert_eq!(c[0], 11.0);
    }

    #[test]
    fn int_gemm_wraps() {
        let a = [100i8, 100];
        let b = [2i8, 1];
        let mut c = [0i8];
        // SAFETY: 1x2 @ 2x1 into 1x1, contiguous buffers.
        unsafe {
            gemm_int(
                1,
                1,
                2,
                MatMut {
                    ptr: c.as_mut_ptr(),
                    rs: 1,
                    cs: 1,
                },
                MatRef {
                    ptr: a.as_ptr(),
                    rs: 2,
                    cs: 1,
                },
                MatRef {
                    ptr: b.as_ptr(),
                    rs: 1,
                    cs: 1,
                },
                1,
                None,
            )
        };
        assert_eq!(c[0], (300i64 as i8));
    }

    #[test]
    fn bands_are_one_aligned_block_per_thread() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        pool.install(|| {
            assert_eq!(bands(512, 512, 512, false), None, "not allowed");
            assert_eq!(bands(8, 8, 8, true), None, "too little work");
            assert_eq!(
                bands(4096, 40, 4096, true),
                Some(Bands {
                    rows: true,
                    width: 1376,
                    blocks: 3
                })
            );
            for (m, n) in [(512, 512), (100, 1000), (1000, 100), (333, 97), (64, 4096)] {
                let plan = bands(m, n, 512, true).expect("parallel");
                let side = if plan.rows { m } else { n };
                assert_eq!(plan.rows, m > 2 * n);
                assert_eq!(plan.width % 16, 0);
                assert!(plan.width * (plan.blocks - 1) < side && plan.width * plan.blocks >= side);
                assert!(plan.blocks <= 3);
            }
        });
    }

    #[test]
    fn banded_parallel_gemm_matches_naive() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        // Row bands, column bands, uneven last bands, and a transposed operand.
        for (m, n, k, a_transposed) in [
            (300, 70, 65, false),
            (70, 300, 65, true),
            (97, 333, 40, false),
        ] {
            let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
            let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.11).cos()).collect();
            // `a_t` holds A column-major, read back through swapped strides.
            let a_t: Vec<f64> = (0..m * k).map(|i| a[(i % m) * k + i / m]).collect();
            let want: Vec<f64> = naive(m, n, k, &a, &b)
                .iter()
                .map(|x| 2.0 * x + 0.5)
                .collect();
            let mut c = vec![1.0; m * n];
            assert!(bands(m, n, k, true).is_some() || pool.current_num_threads() == 1);
            pool.install(|| {
                let a_op = if a_transposed {
                    (&a_t[..], 1, m as isize)
                } else {
                    (&a[..], k as isize, 1)
                };
                scaled_product(m, n, k, &mut c, a_op, &b)
            });
            for (i, (x, y)) in c.iter().zip(&want).enumerate() {
                assert!((x - y).abs() < 1e-9, "{m}x{n}x{k} at {i}: {x} vs {y}");
            }
        }
    }
}
