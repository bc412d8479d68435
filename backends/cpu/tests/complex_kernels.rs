//! Complex matrix products, powers, reductions, scans and scatters on the CPU:
//! the edges the OpInfo replay (contiguous inputs, small shapes) does not reach —
//! transposed and expanded operands, products large enough for the `gemm` crate
//! and its threads, empty inputs, special values and the `dtype=` casts. Expected
//! values are PyTorch 2.15's (quoted to 10 digits) or a plain complex triple loop.

use opal::{Complex, DType, Tensor};
use opal_cpu::shape as views;
use opal_cpu::{copy, index};

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
