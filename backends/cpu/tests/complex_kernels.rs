//! Complex matrix products, powers, reductions, scans and scatters on the CPU:
//! the edges the OpInfo replay (contiguous inputs, small shapes) does not reach —
//! transposed and expanded operands, products large enough for the `gemm` crate
//! and its threads, empty inputs, special values and the `dtype=` casts. Expected
//! values are PyTorch 2.15's (quoted to 10 digits) or a plain complex triple loop.

use opal::{Complex, DType, Scalar, Tensor};
use opal_cpu::elementwise::binary;
use opal_cpu::reduce::{overloads, scan, sum};
use opal_cpu::shape as views;
use opal_cpu::{copy, index, linalg};

fn c128(v: &[(f64, f64)], shape: &[i64]) -> Tensor {
    let v: Vec<Complex<f64>> = v.iter().map(|&(r, i)| Complex::new(r, i)).collect();
    Tensor::from_vec(v, shape).unwrap()
}

fn parts(t: &Tensor) -> Vec<(f64, f64)> {
    let c = copy::contiguous(&copy::to_dtype(t, DType::C128).unwrap()).unwrap();
    c.to_vec::<Complex<f64>>()
        .unwrap()
        .into_iter()
        .map(|z| (z.re, z.im))
        .collect()
}

fn close(got: &[(f64, f64)], want: &[(f64, f64)], tol: f64) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        let ok = |a: f64, b: f64| (a - b).abs() <= tol * (1.0 + b.abs());
        assert!(ok(g.0, w.0) && ok(g.1, w.1), "{got:?} vs {want:?}");
    }
}

/// A deterministic complex matrix `rows x cols` with parts in [-1, 1).
fn filled(rows: i64, cols: i64, seed: u64) -> Tensor {
    let mut s = seed;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 33) as f64 / (1u64 << 31) as f64) * 2.0 - 1.0
    };
    let v: Vec<(f64, f64)> = (0..rows * cols).map(|_| (next(), next())).collect();
    c128(&v, &[rows, cols])
}

/// `a @ b` by the definition, for matrices given as row-major parts.
fn naive_mm(a: &[(f64, f64)], b: &[(f64, f64)], m: usize, k: usize, n: usize) -> Vec<(f64, f64)> {
    let mut out = vec![(0.0, 0.0); m * n];
    for i in 0..m {
        for j in 0..n {
            for l in 0..k {
                let (p, q) = (a[i * k + l], b[l * n + j]);
                out[i * n + j].0 += p.0 * q.0 - p.1 * q.1;
                out[i * n + j].1 += p.0 * q.1 + p.1 * q.0;
            }
        }
    }
    out
}

#[test]
fn mm_of_transposed_and_large_operands_matches_the_definition() {
    // Large enough for the gemm crate's kernels and a split across threads; the
    // left operand a transposed view (column-major), in both precisions.
    for (m, k, n) in [(3, 4, 5), (150, 70, 130)] {
        let at = filled(k, m, 1);
        let a = views::t(&at).unwrap();
        let b = filled(k, n, 2);
        let want = naive_mm(&parts(&a), &parts(&b), m as usize, k as usize, n as usize);
        close(&parts(&linalg::mm(&a, &b).unwrap()), &want, 1e-12);
        let (a64, b64) = (
            copy::to_dtype(&a, DType::C64).unwrap(),
            copy::to_dtype(&b, DType::C64).unwrap(),
        );
        let r = linalg::mm(&a64, &b64).unwrap();
        assert_eq!(r.dtype(), DType::C64);
        close(&parts(&r), &want, 1e-4);
    }
}

#[test]
fn bmm_with_an_expanded_operand_and_empty_inner_dim() {
    let a = filled(6, 4, 3);
    let b = filled(4, 5, 4);
    let a3 = views::view(&a, &[2, 3, 4]).unwrap();
    // The right operand shared by both products (batch stride 0).
    let b3 = views::expand(&views::view(&b, &[1, 4, 5]).unwrap(), &[2, 4, 5], false).unwrap();
    let r = linalg::bmm(&a3, &b3).unwrap();
    assert_eq!(r.sizes(), &[2, 3, 5]);
    close(
        &parts(&r),
        &naive_mm(&parts(&a), &parts(&b), 6, 4, 5),
        1e-12,
    );
    // k = 0: every element is the empty sum.
    let z = linalg::bmm(&c128(&[], &[2, 3, 0]), &c128(&[], &[2, 0, 4])).unwrap();
    assert_eq!(parts(&z), vec![(0.0, 0.0); 24]);
}

#[test]
fn addmm_scales_in_complex_and_skips_self_when_beta_is_zero() {
    let m = c128(
        &[
            (1.0, 1.0),
            (2.0, 0.0),
            (0.0, 0.0),
            (1.0, -1.0),
            (0.0, 3.0),
            (-1.0, 0.0),
        ],
        &[3, 2],
    );
    let w = c128(&[(1.0, 0.0), (0.0, 1.0), (2.0, 0.0), (-1.0, 0.0)], &[2, 2]);
    let bias = c128(&[(1.0, 0.0), (0.0, 2.0)], &[2]);
    let (beta, alpha) = (Scalar::Complex(2.0, -1.0), Scalar::Complex(0.0, 0.5));
    let r = linalg::addmm(&bias, &m, &w, &beta, &alpha).unwrap();
    // PyTorch 2.15: torch.addmm(bias, m, w, beta=2-1j, alpha=0.5j).
    let want = [
        (1.5, 1.5),
        (1.5, 2.5),
        (3.0, 0.0),
        (1.5, 3.5),
        (0.5, -2.0),
        (2.0, 3.0),
    ];
    close(&parts(&r), &want, 1e-12);
    // beta = 0: self is not read, its NaNs do not reach the result.
    let nan = c128(&[(f64::NAN, 0.0)], &[1]);
    let r = linalg::addmm(&nan, &m, &w, &Scalar::Int(0), &Scalar::Int(1)).unwrap();
    close(
        &parts(&r),
        &naive_mm(&parts(&m), &parts(&w), 3, 2, 2),
        1e-12,
    );
    // Complex and real operands do not mix, as in PyTorch.
    let real = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let e = linalg::mm(&w, &real).unwrap_err().to_string();
    assert!(e.contains("mm") && e.contains("same dtype"), "{e}");
}

#[test]
fn pow_of_complex_bases_and_exponents() {
    let x = c128(&[(1.0, 2.0), (-3.0, 0.5), (0.25, -1.0)], &[3]);
    let y = c128(&[(0.5, -1.0), (2.0, 0.0), (-1.5, 0.25)], &[3]);
    let want = [
        (4.3825650599, -1.1243974774),
        (8.75, -3.0),
        (-0.5494456295, 1.2123806482),
    ];
    close(
        &parts(&binary::pow_tensor_tensor(&x, &y).unwrap()),
        &want,
        1e-9,
    );
    let want = [
        (-6.9606644596, 2.7296244648),
        (6.4726611413, 14.776090222),
        (-1.0626326953, 0.1856385804),
    ];
    close(
        &parts(&binary::pow_tensor_scalar(&x, &Scalar::Float(2.5)).unwrap()),
        &want,
        1e-9,
    );
    let want = [
        (-0.12, -0.16),
        (0.1022644266, 0.0350620891),
        (-0.830449827, 0.4429065744),
    ];
    close(
        &parts(&binary::pow_tensor_scalar(&x, &Scalar::Int(-2)).unwrap()),
        &want,
        1e-9,
    );
    // A real tensor to a complex power is complex.
    let r = Tensor::from_slice(&[2.0f32, -1.0], &[2]).unwrap();
    let p = binary::pow_tensor_scalar(&r, &Scalar::Complex(1.0, 1.0)).unwrap();
    assert_eq!(p.dtype(), DType::C64);
    close(
        &parts(&p),
        &[(1.5384777784, 1.2779225111), (-0.0432139151, 0.0)],
        1e-6,
    );
}

#[test]
fn pow_special_values_follow_pytorch() {
    let inf = f64::INFINITY;
    let z = c128(&[(0.0, 0.0), (inf, 0.0), (f64::NAN, 1.0)], &[3]);
    // Exponent 0 fills ones without reading the base.
    assert_eq!(
        parts(&binary::pow_tensor_scalar(&z, &Scalar::Int(0)).unwrap()),
        vec![(1.0, 0.0); 3]
    );
    // Exponent 2 multiplies: inf * inf's imaginary part is inf * 0, NaN.
    let sq = parts(&binary::pow_tensor_scalar(&z, &Scalar::Int(2)).unwrap());
    assert_eq!(sq[0], (0.0, 0.0));
    assert!(sq[1].0 == inf && sq[1].1.is_nan(), "{sq:?}");
    // Exponent -1 is the reciprocal: 1 / 0 is (inf, NaN).
    let rc = parts(&binary::pow_tensor_scalar(&z, &Scalar::Int(-1)).unwrap());
    assert!(rc[0].0 == inf && rc[0].1.is_nan(), "{rc:?}");
    // Tensor exponents: 0^0 is NaN (exp(0 * log 0)), 0^(1+i) is 0.
    let b = c128(&[(0.0, 0.0), (0.0, 0.0)], &[2]);
    let e = c128(&[(0.0, 0.0), (1.0, 1.0)], &[2]);
    let p = parts(&binary::pow_tensor_tensor(&b, &e).unwrap());
    assert!(p[0].0.is_nan() && p[0].1.is_nan(), "{p:?}");
    assert_eq!((p[1].0.abs(), p[1].1.abs()), (0.0, 0.0));
}

fn sample() -> Tensor {
    c128(
        &[
            (1.0, 2.0),
            (3.0, -1.0),
            (0.0, 0.5),
            (2.0, 0.0),
            (-1.0, 1.0),
            (1.0, 0.0),
        ],
        &[2, 3],
    )
}

#[test]
fn prod_over_dims_empty_rows_and_real_dtypes() {
    let a = sample();
    let r = overloads::prod_dim_int(&a, 1, true, None).unwrap();
    assert_eq!(r.sizes(), &[2, 1]);
    close(&parts(&r), &[(-2.5, 2.5), (-2.0, 2.0)], 1e-12);
    let r = overloads::prod_dim_int(&views::t(&a).unwrap(), 1, false, None).unwrap();
    close(&parts(&r), &[(2.0, 4.0), (-2.0, 4.0), (0.0, 0.5)], 1e-12);
    // The empty product is one.
    let e = overloads::prod_dim_int(&c128(&[], &[2, 0]), 1, false, None).unwrap();
    assert_eq!(parts(&e), vec![(1.0, 0.0); 2]);
    // Into a real dtype the input is cast first (imaginary parts dropped).
    let r = sum::prod(&a, Some(DType::F64)).unwrap();
    assert_eq!(
        (r.dtype(), r.to_vec::<f64>().unwrap()),
        (DType::F64, vec![0.0])
    );
    // A real input into a complex dtype.
    let x = Tensor::from_slice(&[2.0f32, -3.0], &[2]).unwrap();
    let r = sum::prod(&x, Some(DType::C64)).unwrap();
    assert_eq!((r.dtype(), parts(&r)), (DType::C64, vec![(-6.0, 0.0)]));
}

#[test]
fn cumsum_of_views_empty_tensors_and_into_complex() {
    let r = scan::cumsum(&views::t(&sample()).unwrap(), 1, None).unwrap();
    let want = [
        (1.0, 2.0),
        (3.0, 2.0),
        (3.0, -1.0),
        (2.0, 0.0),
        (0.0, 0.5),
        (1.0, 0.5),
    ];
    close(&parts(&r), &want, 1e-12);
    let e = scan::cumsum(&c128(&[], &[0, 3]), 0, None).unwrap();
    assert_eq!((e.sizes(), e.dtype()), (&[0i64, 3][..], DType::C128));
    let x = Tensor::from_slice(&[1i64, 2, 3], &[3]).unwrap();
    let r = scan::cumsum(&x, 0, Some(DType::C64)).unwrap();
    assert_eq!(
        (r.dtype(), parts(&r)),
        (DType::C64, vec![(1.0, 0.0), (3.0, 0.0), (6.0, 0.0)])
    );
}

#[test]
fn var_and_std_of_complex_are_real() {
    let a = sample();
    let v = sum::var_correction(&a, Some(&[1]), None, false).unwrap();
    assert_eq!(v.dtype(), DType::F64);
    close(
        &parts(&v),
        &[(4.5833333333, 0.0), (2.6666666667, 0.0)],
        1e-9,
    );
    let s = sum::std_correction(&a, Some(&[0]), Some(&Scalar::Int(0)), false).unwrap();
    close(
        &parts(&s),
        &[
            (1.1180339887, 0.0),
            (2.2360679775, 0.0),
            (0.5590169944, 0.0),
        ],
        1e-9,
    );
    // complex64 gives float32; a transposed view; keepdim.
    let c = copy::to_dtype(
        &views::t(&c128(
            &[(1.0, 1.0), (2.0, -1.0), (0.0, 0.0), (0.0, 3.0)],
            &[2, 2],
        ))
        .unwrap(),
        DType::C64,
    )
    .unwrap();
    let s = sum::std_correction(&c, Some(&[1]), None, true).unwrap();
    assert_eq!((s.dtype(), s.sizes()), (DType::F32, &[2i64, 1][..]));
    close(&parts(&s), &[(1.0, 0.0), (3.1622776602, 0.0)], 1e-6);
    // Too few elements for the correction: the parts' 0/0 makes NaN, as PyTorch's.
    let r = c128(&[(1.0, 0.0), (2.0, 0.0)], &[2]);
    let v = sum::var_correction(&r, None, Some(&Scalar::Int(2)), false).unwrap();
    assert!(v.to_vec::<f64>().unwrap()[0].is_nan());
}

#[test]
fn scatters_of_complex_values_accumulate_and_keep_order() {
    let zeros = c128(&[(0.0, 0.0); 3], &[3]);
    let idx = Tensor::from_slice(&[0i64, 2, 0], &[3]).unwrap();
    let src = c128(&[(1.0, 1.0), (2.0, 0.0), (0.0, -3.0)], &[3]);
    let r = index::scatter_add(&zeros, 0, &idx, &src).unwrap();
    assert_eq!(parts(&r), vec![(1.0, -2.0), (0.0, 0.0), (2.0, 0.0)]);
    let ones = c128(&[(1.0, 0.0); 3], &[3]);
    let at = Tensor::from_slice(&[0i64, 0], &[2]).unwrap();
    let vals = c128(&[(0.0, 1.0), (0.0, 2.0)], &[2]);
    let r = index::put::index_put(&ones, &[Some(at.clone())], &vals, true).unwrap();
    assert_eq!(parts(&r), vec![(1.0, 3.0), (1.0, 0.0), (1.0, 0.0)]);
    let r = index::put::index_put(&ones, &[Some(at)], &vals, false).unwrap();
    assert_eq!(parts(&r), vec![(0.0, 2.0), (1.0, 0.0), (1.0, 0.0)]);
    // Values must have self's dtype, as PyTorch requires.
    let real = Tensor::from_slice(&[1.0f64, 2.0], &[2]).unwrap();
    let at = Tensor::from_slice(&[0i64, 1], &[2]).unwrap();
    assert!(index::put::index_put(&ones, &[Some(at)], &real, true).is_err());
    // masked_scatter into a transposed view, source read in row-major order.
    let x = views::t(&c128(
        &[(1.0, 0.0), (2.0, 0.0), (3.0, 0.0), (4.0, 0.0)],
        &[2, 2],
    ))
    .unwrap();
    let mask = Tensor::from_slice(&[true, false, false, true], &[2, 2]).unwrap();
    let src = c128(&[(0.0, 1.0), (0.0, 2.0)], &[2]);
    let r = index::masked::masked_scatter(&x, &mask, &src).unwrap();
    assert_eq!(
        parts(&r),
        vec![(0.0, 1.0), (3.0, 0.0), (2.0, 0.0), (0.0, 2.0)]
    );
}

#[test]
fn dot_of_complex_vectors_does_not_conjugate() {
    // torch.dot multiplies as given (vdot would conjugate the first vector).
    let a = c128(&[(1.0, 2.0), (3.0, -1.0)], &[2]);
    let b = c128(&[(0.0, 2.0), (1.0, 1.0)], &[2]);
    let r = linalg::dot(&a, &b).unwrap();
    assert_eq!((r.sizes(), parts(&r)), (&[][..], vec![(0.0, 4.0)]));
}
