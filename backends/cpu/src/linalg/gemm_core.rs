//! Matrix-multiply cores over raw strided pointers: the `gemm` crate for f32/f64,
//! a plain triple loop for integer element types.
//!
//! Owns: the choice of threading for one GEMM call and the integer fallback.
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

/// Below this many multiply-adds a GEMM runs on the calling thread: waking rayon
/// workers costs more than it saves for small products.
const PARALLEL_MIN_WORK: usize = 64 * 64 * 64;

fn parallelism(m: usize, n: usize, k: usize, allow: bool) -> gemm::Parallelism {
    let threads = rayon::current_num_threads();
    if !allow || threads <= 1 || m.saturating_mul(n).saturating_mul(k) < PARALLEL_MIN_WORK {
        gemm::Parallelism::None
    } else {
        gemm::Parallelism::Rayon(threads)
    }
}

/// Element types multiplied by the `gemm` crate.
pub(crate) trait GemmFloat: num_traits::Float + Send + Sync + 'static {}
impl GemmFloat for f32 {}
impl GemmFloat for f64 {}

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
    // The gemm crate computes dst := dst_scale * dst + prod_scale * lhs @ rhs.
    let (read_dst, dst_scale) = match beta {
        Some(b) => (true, b),
        None => (false, T::zero()),
    };
    // SAFETY: forwarded from this function's contract; gemm reads/writes exactly the
    // m x n, m x k and k x n elements addressed by the given strides.
    unsafe {
        gemm::gemm(
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
            parallelism(m, n, k, parallel),
        )
    }
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
        // SAFETY: all three buffers are row-major with exactly these shapes.
        unsafe {
            gemm_float(
                m,
                n,
                k,
                MatMut {
                    ptr: c.as_mut_ptr(),
                    rs: n as isize,
                    cs: 1,
                },
                MatRef {
                    ptr: a.as_ptr(),
                    rs: k as isize,
                    cs: 1,
                },
                MatRef {
                    ptr: b.as_ptr(),
                    rs: n as isize,
                    cs: 1,
                },
                2.0,
                Some(0.5),
                true,
            )
        };
        for (x, y) in c.iter().zip(&want) {
            assert!((x - y).abs() < 1e-12, "{x} vs {y}");
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
}
