//! Matrix products: `mm`, `bmm`, `addmm`, `baddbmm`, `dot` and their out= / in-place
//! forms (`matmul` itself is composite and lives elsewhere).
//!
//! Owns: argument checks with PyTorch's messages, the dtype policy (f32/f64 through
//! the `gemm` crate reading the operands' strides directly, f16/bf16 widened to f32
//! and rounded once at the end, complex as real products of the parts (see
//! `complex.rs`), integers by a wrapping triple loop, bool rejected).
//! Must not: touch other part's kernels or the runtime's internals.

mod complex;
pub(crate) mod gemm_core;
mod small_gemm;

use crate::copy::{copy_into, to_dtype};
use crate::nn::io::{err, shape_err, write_out};
use crate::parallel::SharedPtr;
use gemm_core::{gemm_float, gemm_int, GemmFloat, MatMut, MatRef, PARALLEL_MIN_WORK};
use opal::tensor::KernelAccess;
use opal::{DType, Scalar, Tensor};

type Result<T> = opal::Result<T>;

/// A batch of `bsz` matrices `rows x cols` inside a tensor: element (b, i, j) at
/// `b*bs + i*rs + j*cs` from the tensor's first element.
#[derive(Copy, Clone)]
struct Batch {
    bsz: usize,
    rows: usize,
    cols: usize,
    bs: isize,
    rs: isize,
    cs: isize,
}

fn mat_layout(t: &Tensor) -> Batch {
    let (s, st) = (t.sizes(), t.strides());
    if s.len() == 3 {
        Batch {
            bsz: s[0] as usize,
            rows: s[1] as usize,
            cols: s[2] as usize,
            bs: st[0] as isize,
            rs: st[1] as isize,
            cs: st[2] as isize,
        }
    } else {
        Batch {
            bsz: 1,
            rows: s[0] as usize,
            cols: s[1] as usize,
            bs: 0,
            rs: st[0] as isize,
            cs: st[1] as isize,
        }
    }
}

fn check_same_dtype(a: &Tensor, b: &Tensor, op: &str) -> Result<()> {
    if a.dtype() != b.dtype() {
        return Err(err(
            op,
            format!(
                "expected m1 and m2 to have the same dtype, but got: {} != {}",
                a.dtype(),
                b.dtype()
            ),
        ));
    }
    Ok(())
}

fn int_scalar(s: &Scalar, name: &str, op: &str) -> Result<i64> {
    match s {
        Scalar::Float(_) | Scalar::Complex(..) => Err(err(
            op,
            format!(
                "For integral input tensors, argument {name} must not be a floating point number."
            ),
        )),
        other => Ok(other.to_i64()),
    }
}

/// `out[b] = beta * c[b] + alpha * a[b] @ b[b]` into a new contiguous tensor of shape
/// `out_shape`; `c` (broadcastable to it) is skipped when absent or `beta == 0`.
/// Multiply-adds of a whole batch of products, each too small to split itself,
/// from which the products are shared among threads. As for single products (see
/// `PARALLEL_MIN_WORK`), smaller batches lost more to moving operands between
/// cores than they gained: the GPT fixture's attention batches (32 heads of
/// 16x16x8, 64K in all) ran faster on one thread (alternating runs, 7 of 8).
const BATCH_PARALLEL_MIN_WORK: usize = 1 << 20;

fn batched_product(
    op: &str,
    a: &Tensor,
    b: &Tensor,
    c: Option<(&Tensor, &Scalar)>,
    alpha: &Scalar,
    out_shape: &[i64],
) -> Result<Tensor> {
    let dtype = a.dtype();
    check_same_dtype(a, b, op)?;
    if let Some((ct, _)) = c {
        if ct.dtype() != dtype {
            return Err(err(
                op,
                format!(
                    "expected self and mat2 to have the same dtype, but got: {} != {}",
                    ct.dtype(),
                    dtype
                ),
            ));
        }
    }
    match dtype {
        DType::F32 => float_product::<f32>(op, a, b, c, alpha, out_shape),
        DType::F64 => float_product::<f64>(op, a, b, c, alpha, out_shape),
        DType::F16 | DType::BF16 => {
            // Widen once, multiply in f32, round once: PyTorch's CPU result for
            // reduced-precision GEMM up to accumulation order.
            let (a32, b32) = (to_dtype(a, DType::F32)?, to_dtype(b, DType::F32)?);
            let c32 = match c {
                Some((ct, beta)) => Some((to_dtype(ct, DType::F32)?, beta)),
                None => None,
            };
            let r = float_product::<f32>(
                op,
                &a32,
                &b32,
                c32.as_ref().map(|(t, s)| (t, *s)),
                alpha,
                out_shape,
            )?;
            to_dtype(&r, dtype)
        }
        DType::C64 => complex::complex_product::<f32>(op, a, b, c, alpha, out_shape),
        DType::C128 => complex::complex_product::<f64>(op, a, b, c, alpha, out_shape),
        DType::U8 => int_product::<u8>(op, a, b, c, alpha, out_shape),
        DType::I8 => int_product::<i8>(op, a, b, c, alpha, out_shape),
        DType::I16 => int_product::<i16>(op, a, b, c, alpha, out_shape),
        DType::I32 => int_product::<i32>(op, a, b, c, alpha, out_shape),
        DType::I64 => int_product::<i64>(op, a, b, c, alpha, out_shape),
        other => Err(err(op, format!("not implemented for '{other}'"))),
    }
}

/// Prepares the output: zeros, or `c` broadcast into it when it contributes.
fn prefilled(
    out_shape: &[i64],
    dtype: DType,
    c: Option<(&Tensor, bool)>,
    op: &str,
) -> Result<Tensor> {
    // The GEMM writes every element (reading them only when `c` was copied in), so
    // a recycled uninitialised block is enough.
    let out = crate::out::empty_uninit(out_shape, dtype)?;
    if let Some((ct, true)) = c {
        copy_into(&out, ct, op)?;
    }
    Ok(out)
}

fn float_product<C: GemmFloat + opal::Element>(
    op: &str,
    a: &Tensor,
    b: &Tensor,
    c: Option<(&Tensor, &Scalar)>,
    alpha: &Scalar,
    out_shape: &[i64],
) -> Result<Tensor> {
    let beta = c.map(|(_, s)| s.to_f64()).filter(|&bv| bv != 0.0);
    let out = prefilled(
        out_shape,
        a.dtype(),
        c.map(|(t, _)| (t, beta.is_some())),
        op,
    )?;
    // One right operand for every product of a batch (an expanded weight: batch
    // stride 0) makes the batch one taller product when the left operand's and
    // the output's batches are runs of rows one stride apart: one call instead
    // of one per batch element (ViT's and Llama's projections are such
    // batches). A left operand laid out otherwise is copied so (it is the
    // smaller operand: `m x k` against the product's `m x n x k`).
    let runs = |l: &Batch| l.bs == l.rows as isize * l.rs;
    let shared_b = mat_layout(b).bs == 0 && mat_layout(&out).bsz > 1;
    let a_rows;
    let a = if shared_b && !runs(&mat_layout(a)) {
        a_rows = crate::copy::contiguous(a)?;
        &a_rows
    } else {
        a
    };
    let (mut la, lb, mut lo) = (mat_layout(a), mat_layout(b), mat_layout(&out));
    if shared_b && runs(&la) && runs(&lo) {
        la = Batch {
            bsz: 1,
            rows: la.bsz * la.rows,
            bs: 0,
            ..la
        };
        lo = Batch {
            bsz: 1,
            rows: lo.bsz * lo.rows,
            bs: 0,
            ..lo
        };
    }
    let acc = KernelAccess::new(&[a, b], &[&out])?;
    let (pa, pb, po) = (
        acc.read_ptr::<C>(a)?,
        acc.read_ptr::<C>(b)?,
        acc.write_ptr::<C>(&out)?,
    );
    let alpha = C::from(alpha.to_f64()).unwrap_or_else(C::nan);
    let beta = beta.map(|bv| C::from(bv).unwrap_or_else(C::nan));
    let (pa, pb, po) = (
        SharedPtr(pa.cast_mut()),
        SharedPtr(pb.cast_mut()),
        SharedPtr(po),
    );
    // Product `i` of the batch; `parallel` lets it split its own rows or columns.
    let product = |i: isize, parallel: bool| {
        // SAFETY: the three tensors are borrowed by `acc` until every product has
        // run; shapes were checked by the caller so every (batch, row, col)
        // addressed through the tensors' own strides is an element of that tensor;
        // `out` is a fresh contiguous tensor that shares no storage with `a` or
        // `b`, and product `i` writes only its own batch of it.
        unsafe {
            gemm_float(
                lo.rows,
                lo.cols,
                la.cols,
                MatMut {
                    ptr: po.offset(i * lo.bs),
                    rs: lo.rs,
                    cs: lo.cs,
                },
                MatRef {
                    ptr: pa.offset(i * la.bs),
                    rs: la.rs,
                    cs: la.cs,
                },
                MatRef {
                    ptr: pb.offset(i * lb.bs),
                    rs: lb.rs,
                    cs: lb.cs,
                },
                alpha,
                beta,
                parallel,
            )
        }
    };
    // Saturating: the counts only choose the threading and must not overflow.
    let each = lo.rows.saturating_mul(lo.cols).saturating_mul(la.cols);
    if lo.bsz > 1
        && each < PARALLEL_MIN_WORK
        && lo.bsz.saturating_mul(each) >= BATCH_PARALLEL_MIN_WORK
    {
        // Products too small to split themselves (an attention head's): whole
        // products go to the threads instead.
        let per = lo.bsz.div_ceil(4 * rayon::current_num_threads());
        crate::parallel::fork_chunks(lo.bsz.div_ceil(per), |c| {
            for i in c * per..((c + 1) * per).min(lo.bsz) {
                product(i as isize, false);
            }
        });
    } else {
        for i in 0..lo.bsz as isize {
            product(i, true);
        }
    }
    drop(acc);
    Ok(out)
}

fn int_product<T>(
    op: &str,
    a: &Tensor,
    b: &Tensor,
    c: Option<(&Tensor, &Scalar)>,
    alpha: &Scalar,
    out_shape: &[i64],
) -> Result<Tensor>
where
    T: opal::Element + num_traits::AsPrimitive<i64>,
    i64: num_traits::AsPrimitive<T>,
{
    let alpha = int_scalar(alpha, "alpha", op)?;
    let beta = match c {
        Some((_, s)) => Some(int_scalar(s, "beta", op)?).filter(|&bv| bv != 0),
        None => None,
    };
    let out = prefilled(
        out_shape,
        a.dtype(),
        c.map(|(t, _)| (t, beta.is_some())),
        op,
    )?;
    let (la, lb, lo) = (mat_layout(a), mat_layout(b), mat_layout(&out));
    let acc = KernelAccess::new(&[a, b], &[&out])?;
    let (pa, pb, po) = (
        acc.read_ptr::<T>(a)?,
        acc.read_ptr::<T>(b)?,
        acc.write_ptr::<T>(&out)?,
    );
    for i in 0..lo.bsz as isize {
        // SAFETY: as in `float_product`: borrowed, shape-checked, non-overlapping.
        unsafe {
            gemm_int(
                lo.rows,
                lo.cols,
                la.cols,
                MatMut {
                    ptr: po.offset(i * lo.bs),
                    rs: lo.rs,
                    cs: lo.cs,
                },
                MatRef {
                    ptr: pa.offset(i * la.bs),
                    rs: la.rs,
                    cs: la.cs,
                },
                MatRef {
                    ptr: pb.offset(i * lb.bs),
                    rs: lb.rs,
                    cs: lb.cs,
                },
                alpha,
                beta,
            )
        };
    }
    drop(acc);
    Ok(out)
}

fn check_mm_shapes(a: &Tensor, b: &Tensor, op: &str, first: &str) -> Result<()> {
    if a.dim() != 2 {
        return Err(shape_err(op, format!("{first} must be a matrix")));
    }
    if b.dim() != 2 {
        return Err(shape_err(op, "mat2 must be a matrix"));
    }
    if a.sizes()[1] != b.sizes()[0] {
        return Err(shape_err(
            op,
            format!(
                "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
                a.sizes()[0],
                a.sizes()[1],
                b.sizes()[0],
                b.sizes()[1]
            ),
        ));
    }
    Ok(())
}

fn check_bmm_shapes(a: &Tensor, b: &Tensor, op: &str) -> Result<()> {
    if a.dim() != 3 || b.dim() != 3 {
        return Err(shape_err(
            op,
            format!(
                "batch1 and batch2 must be 3D tensors, got {}D and {}D",
                a.dim(),
                b.dim()
            ),
        ));
    }
    let (sa, sb) = (a.sizes(), b.sizes());
    if sa[0] != sb[0] || sa[2] != sb[1] {
        return Err(shape_err(
            op,
            format!(
                "Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}].",
                sa[0], sa[2], sb[0], sb[1]
            ),
        ));
    }
    Ok(())
}

fn check_broadcast(c: &Tensor, shape: &[i64], op: &str) -> Result<()> {
    opal::rules::broadcast_shapes(op, &[c.sizes(), shape]).and_then(|s| {
        if s == shape {
            Ok(())
        } else {
            Err(shape_err(
                op,
                format!(
                    "self of shape {:?} cannot be broadcast to {shape:?}",
                    c.sizes()
                ),
            ))
        }
    })
}

/// `self_ @ mat2` for 2-D tensors.
pub fn mm(self_: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    check_mm_shapes(self_, mat2, "mm", "self")?;
    let shape = [self_.sizes()[0], mat2.sizes()[1]];
    batched_product("mm", self_, mat2, None, &Scalar::Int(1), &shape)
}

/// `mm` into `out` (resized by out= rules).
pub fn mm_out(self_: &Tensor, mat2: &Tensor, out: &Tensor) -> Result<Tensor> {
    write_out(&mm(self_, mat2)?, out, "mm.out")
}

/// Batched `self_[b] @ mat2[b]` for 3-D tensors.
pub fn bmm(self_: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    check_bmm_shapes(self_, mat2, "bmm")?;
    let shape = [self_.sizes()[0], self_.sizes()[1], mat2.sizes()[2]];
    batched_product("bmm", self_, mat2, None, &Scalar::Int(1), &shape)
}

/// `bmm` into `out`.
pub fn bmm_out(self_: &Tensor, mat2: &Tensor, out: &Tensor) -> Result<Tensor> {
    write_out(&bmm(self_, mat2)?, out, "bmm.out")
}

/// `beta * self_ + alpha * mat1 @ mat2`; `self_` broadcasts to the product's shape.
pub fn addmm(
    self_: &Tensor,
    mat1: &Tensor,
    mat2: &Tensor,
    beta: &Scalar,
    alpha: &Scalar,
) -> Result<Tensor> {
    check_mm_shapes(mat1, mat2, "addmm", "mat1")?;
    let shape = [mat1.sizes()[0], mat2.sizes()[1]];
    check_broadcast(self_, &shape, "addmm")?;
    batched_product("addmm", mat1, mat2, Some((self_, beta)), alpha, &shape)
}

/// `addmm` into `out`.
pub fn addmm_out(
    self_: &Tensor,
    mat1: &Tensor,
    mat2: &Tensor,
    beta: &Scalar,
    alpha: &Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(&addmm(self_, mat1, mat2, beta, alpha)?, out, "addmm.out")
}

/// In-place `addmm`: `self_` must already have the product's shape.
pub fn addmm_(
    self_: &Tensor,
    mat1: &Tensor,
    mat2: &Tensor,
    beta: &Scalar,
    alpha: &Scalar,
) -> Result<Tensor> {
    let r = addmm(self_, mat1, mat2, beta, alpha)?;
    if r.sizes() != self_.sizes() {
        return Err(shape_err(
            "addmm_",
            format!(
                "self of shape {:?} is not the result shape {:?}",
                self_.sizes(),
                r.sizes()
            ),
        ));
    }
    copy_into(self_, &r, "addmm_")?;
    Ok(self_.clone())
}

/// `beta * self_ + alpha * batch1 @ batch2` over a batch.
pub fn baddbmm(
    self_: &Tensor,
    batch1: &Tensor,
    batch2: &Tensor,
    beta: &Scalar,
    alpha: &Scalar,
) -> Result<Tensor> {
    check_bmm_shapes(batch1, batch2, "baddbmm")?;
    let shape = [batch1.sizes()[0], batch1.sizes()[1], batch2.sizes()[2]];
    check_broadcast(self_, &shape, "baddbmm")?;
    batched_product(
        "baddbmm",
        batch1,
        batch2,
        Some((self_, beta)),
        alpha,
        &shape,
    )
}

/// `baddbmm` into `out`.
pub fn baddbmm_out(
    self_: &Tensor,
    batch1: &Tensor,
    batch2: &Tensor,
    beta: &Scalar,
    alpha: &Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &baddbmm(self_, batch1, batch2, beta, alpha)?,
        out,
        "baddbmm.out",
    )
}

/// In-place `baddbmm`.
pub fn baddbmm_(
    self_: &Tensor,
    batch1: &Tensor,
    batch2: &Tensor,
    beta: &Scalar,
    alpha: &Scalar,
) -> Result<Tensor> {
    let r = baddbmm(self_, batch1, batch2, beta, alpha)?;
    if r.sizes() != self_.sizes() {
        return Err(shape_err(
            "baddbmm_",
            format!(
                "self of shape {:?} is not the result shape {:?}",
                self_.sizes(),
                r.sizes()
            ),
        ));
    }
    copy_into(self_, &r, "baddbmm_")?;
    Ok(self_.clone())
}

/// Inner product of two 1-D tensors of equal length, as a 0-dim tensor.
pub fn dot(self_: &Tensor, tensor: &Tensor) -> Result<Tensor> {
    const OP: &str = "dot";
    if self_.dim() != 1 || tensor.dim() != 1 {
        return Err(shape_err(
            OP,
            format!(
                "1D tensors expected, but got {}D and {}D tensors",
                self_.dim(),
                tensor.dim()
            ),
        ));
    }
    if self_.dtype() != tensor.dtype() {
        return Err(err(
            OP,
            format!(
                "expected both vectors to have same dtype, but found {} and {}",
                self_.dtype(),
                tensor.dtype()
            ),
        ));
    }
    if self_.numel() != tensor.numel() {
        return Err(shape_err(
            OP,
            format!(
                "inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of elements, but got {} and {} elements respectively",
                self_.numel(),
                tensor.numel(),
                self_.numel(),
                tensor.numel()
            ),
        ));
    }
    // A dot product is a 1 x n by n x 1 product; reuse the GEMM path via views.
    let n = self_.numel();
    let row = self_.as_strided(&[1, n], &[0, self_.strides()[0]], self_.storage_offset())?;
    let col = tensor.as_strided(&[n, 1], &[tensor.strides()[0], 0], tensor.storage_offset())?;
    let r = batched_product(OP, &row, &col, None, &Scalar::Int(1), &[1, 1])?;
    r.as_strided(&[], &[], 0)
}

/// `dot` into `out`.
pub fn dot_out(self_: &Tensor, tensor: &Tensor, out: &Tensor) -> Result<Tensor> {
    write_out(&dot(self_, tensor)?, out, "dot.out")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[f32], s: &[i64]) -> Tensor {
        Tensor::from_slice(v, s).unwrap()
    }

    #[test]
    fn mm_matches_hand_product_and_reads_transposed_views() {
        let a = t(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
        let b = t(&[1., 0., 0., 1., 1., 1.], &[3, 2]);
        let r = mm(&a, &b).unwrap();
        assert_eq!(r.sizes(), &[2, 2]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![4., 5., 10., 11.]);
        // a^T as a strided view (no copy): [3,2] @ [2,3]
        let at = a.as_strided(&[3, 2], &[1, 3], 0).unwrap();
        let r2 = mm(&at, &a).unwrap();
        assert_eq!(r2.to_vec::<f32>().unwrap()[0], 1. * 1. + 4. * 4.);
    }

    #[test]
    fn mm_errors_name_the_op() {
        let a = t(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
        let e = mm(&a, &a).unwrap_err().to_string();
        assert!(e.contains("mm") && e.contains("2x3 and 2x3"), "{e}");
        let d = Tensor::from_slice(&[1.0f64; 6], &[3, 2]).unwrap();
        assert!(mm(&a, &d).unwrap_err().to_string().contains("same dtype"));
        let b = Tensor::from_slice(&[true; 6], &[3, 2]).unwrap();
        let ab = Tensor::from_slice(&[true; 6], &[2, 3]).unwrap();
        assert!(mm(&ab, &b).is_err());
    }

    #[test]
    fn addmm_broadcasts_self_and_ignores_it_when_beta_zero() {
        let a = t(&[1., 2., 3., 4.], &[2, 2]);
        let bias = t(&[10., f32::NAN], &[2]);
        let r = addmm(&bias, &a, &a, &Scalar::Int(0), &Scalar::Float(0.5)).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![3.5, 5., 7.5, 11.]);
        let bias = t(&[10., 20.], &[2]);
        let r = addmm(&bias, &a, &a, &Scalar::Float(2.0), &Scalar::Int(1)).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![27., 50., 35., 62.]);
    }

    #[test]
    fn bf16_and_int_products() {
        let a: Vec<half::bf16> = [1.5f32, 2., 3., 4.]
            .iter()
            .map(|&x| half::bf16::from_f32(x))
            .collect();
        let ta = Tensor::from_slice(&a, &[2, 2]).unwrap();
        let r = mm(&ta, &ta).unwrap();
        assert_eq!(r.dtype(), DType::BF16);
        let got: Vec<f32> = r
            .to_vec::<half::bf16>()
            .unwrap()
            .iter()
            .map(|x| x.to_f32())
            .collect();
        assert_eq!(got, vec![8.25, 11., 16.5, 22.]);
        let i = Tensor::from_slice(&[1i64, 2, 3], &[3]).unwrap();
        assert_eq!(dot(&i, &i).unwrap().to_vec::<i64>().unwrap(), vec![14]);
        assert!(addmm(&i, &i, &i, &Scalar::Int(1), &Scalar::Float(1.5)).is_err());
    }

    #[test]
    fn bmm_and_baddbmm() {
        let a = t(&[1., 2., 3., 4., 5., 6., 7., 8.], &[2, 2, 2]);
        let r = bmm(&a, &a).unwrap();
        assert_eq!(
            r.to_vec::<f32>().unwrap(),
            vec![7., 10., 15., 22., 67., 78., 91., 106.]
        );
        let c = t(&[1.], &[1]);
        let r = baddbmm(&c, &a, &a, &Scalar::Int(1), &Scalar::Int(1)).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap()[7], 107.);
    }

    /// A batch of small products (each below the split limit, together above the
    /// batch limit) shared among threads, with a transposed second operand and a
    /// broadcast (stride-0 batch) first operand, and baddbmm's scaled `self`,
    /// against a plain f64 reference.
    #[test]
    fn batches_of_small_products_shared_among_threads_match_a_naive_reference() {
        let (bsz, m, k, n) = (521usize, 16usize, 8usize, 16usize);
        assert!(m * k * n < PARALLEL_MIN_WORK && bsz * m * k * n >= BATCH_PARALLEL_MIN_WORK);
        let av: Vec<f32> = (0..m * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        // b[i] is stored as its transpose ([n, k]) and read through strides.
        let bt: Vec<f32> = (0..bsz * n * k)
            .map(|i| ((i * 53 % 89) as f32 - 44.0) / 20.0)
            .collect();
        let a = t(&av, &[m as i64, k as i64])
            .as_strided(&[bsz as i64, m as i64, k as i64], &[0, k as i64, 1], 0)
            .unwrap();
        let b = t(&bt, &[(bsz * n * k) as i64])
            .as_strided(
                &[bsz as i64, k as i64, n as i64],
                &[(n * k) as i64, 1, k as i64],
                0,
            )
            .unwrap();
        let c = t(&[0.25], &[1]);
        let r = bmm(&a, &b).unwrap().to_vec::<f32>().unwrap();
        let r2 = baddbmm(&c, &a, &b, &Scalar::Float(2.0), &Scalar::Float(0.5))
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        for bi in 0..bsz {
            for i in 0..m {
                for j in 0..n {
                    let w: f64 = (0..k)
                        .map(|p| av[i * k + p] as f64 * bt[bi * n * k + j * k + p] as f64)
                        .sum();
                    let at = (bi * m + i) * n + j;
                    assert!(
                        (r[at] as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                        "bmm {bi} ({i},{j})"
                    );
                    let w2 = 0.5 + 0.5 * w;
                    assert!(
                        (r2[at] as f64 - w2).abs() <= 1e-4 * (1.0 + w2.abs()),
                        "baddbmm {bi} ({i},{j})"
                    );
                }
            }
        }
    }

    /// Products large enough to be cut into bands for threads (through the global
    /// pool), with a transposed-view operand and a scaled, broadcast `self` for
    /// addmm, against a plain f64 reference.
    #[test]
    fn large_products_split_across_threads_match_a_naive_reference() {
        let (m, k, n) = (300usize, 130usize, 97usize);
        let av: Vec<f32> = (0..m * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        // b is stored as its transpose ([n, k]) and read through a strided view.
        let bt: Vec<f32> = (0..n * k)
            .map(|i| ((i * 53 % 89) as f32 - 44.0) / 20.0)
            .collect();
        let bias: Vec<f32> = (0..n).map(|j| j as f32 / 7.0).collect();
        let a = t(&av, &[m as i64, k as i64]);
        let b = t(&bt, &[n as i64, k as i64])
            .as_strided(&[k as i64, n as i64], &[1, k as i64], 0)
            .unwrap();
        let want = |i: usize, j: usize| -> f64 {
            (0..k)
                .map(|p| av[i * k + p] as f64 * bt[j * k + p] as f64)
                .sum()
        };
        let r = mm(&a, &b).unwrap().to_vec::<f32>().unwrap();
        let c = t(&bias, &[n as i64]);
        let r2 = addmm(&c, &a, &b, &Scalar::Float(0.5), &Scalar::Float(2.0))
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        for i in 0..m {
            for j in 0..n {
                let w = want(i, j);
                let got = r[i * n + j] as f64;
                assert!(
                    (got - w).abs() <= 1e-3 * (1.0 + w.abs()),
                    "mm ({i},{j}): {got} vs {w}"
                );
                let w2 = 0.5 * bias[j] as f64 + 2.0 * w;
                let got2 = r2[i * n + j] as f64;
                assert!(
                    (got2 - w2).abs() <= 1e-3 * (1.0 + w2.abs()),
                    "addmm ({i},{j}): {got2} vs {w2}"
                );
            }
        }
        // The same in f64, tall enough to be cut into row bands.
        let a64 = Tensor::from_slice(
            &av.iter().map(|&x| x as f64).collect::<Vec<_>>(),
            &[m as i64, k as i64],
        )
        .unwrap();
        let b64 = Tensor::from_slice(
            &bt[..k * 20].iter().map(|&x| x as f64).collect::<Vec<_>>(),
            &[k as i64, 20],
        )
        .unwrap();
        let r64 = mm(&a64, &b64).unwrap().to_vec::<f64>().unwrap();
        for i in 0..m {
            for j in 0..20 {
                let w: f64 = (0..k)
                    .map(|p| av[i * k + p] as f64 * bt[p * 20 + j] as f64)
                    .sum();
                assert!(
                    (r64[i * 20 + j] - w).abs() <= 1e-9 * (1.0 + w.abs()),
                    "f64 mm ({i},{j})"
                );
            }
        }
    }
}
