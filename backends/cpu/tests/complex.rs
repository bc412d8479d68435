//! Complex tensors on the CPU backend: what PyTorch refuses for complex numbers
//! (order, rounding, in-place magnitudes) is an `Err`
//! naming the op and the dtype, and in-place / out= forms keep their dtype rules.
//! The values of the supported ops are checked against PyTorch by the golden
//! cases of `tests/fixtures/golden-core/g` (`cargo test -p opal-tests --test integration golden::`).

use opal::{Complex, DType, Scalar, Tensor};
use opal_cpu::elementwise::{binary, overloads, unary};
use opal_cpu::reduce::{minmax, sort, sum};
use opal_cpu::{compare, copy};

fn c64(v: &[(f32, f32)], shape: &[i64]) -> Tensor {
    let v: Vec<Complex<f32>> = v.iter().map(|&(r, i)| Complex::new(r, i)).collect();
    Tensor::from_vec(v, shape).unwrap()
}

fn parts(t: &Tensor) -> Vec<(f64, f64)> {
    let c = copy::to_dtype(t, DType::C128).unwrap();
    let c = copy::contiguous(&c).unwrap();
    c.to_vec::<Complex<f64>>()
        .unwrap()
        .into_iter()
        .map(|z| (z.re, z.im))
        .collect()
}

/// The error of `r`, which must name the op (`op`, if given) and the complex
/// dtype (`C64` or `torch.complex64`).
fn refused<T: std::fmt::Debug>(r: opal::Result<T>, op: Option<&str>) {
    let m = r.expect_err("complex input must be refused").to_string();
    assert!(op.is_none_or(|o| m.contains(o)), "op missing from: {m}");
    assert!(
        m.contains("C64") || m.contains("complex64"),
        "dtype missing from: {m}"
    );
}

#[test]
fn ordering_and_extremes_are_refused() {
    let a = c64(&[(1.0, 2.0), (3.0, -1.0)], &[2]);
    let b = c64(&[(0.0, 1.0), (3.0, -1.0)], &[2]);
    refused(compare::lt_tensor(&a, &b), Some("lt"));
    refused(compare::ge_scalar(&a, &Scalar::Int(1)), Some("ge"));
    refused(binary::maximum(&a, &b), Some("maximum"));
    refused(overloads::clamp_tensor(&a, Some(&b), None), Some("clamp"));
    refused(minmax::max_dim(&a, 0, false), None);
    refused(sort::sort(&a, 0, false), None);
}

#[test]
fn rounding_division_and_in_place_abs_are_refused() {
    let a = c64(&[(1.0, 2.0), (3.0, -1.0)], &[2]);
    refused(
        binary::div_tensor_mode(&a, &a, Some("floor")),
        Some("floor"),
    );
    refused(unary::abs_(&a), Some("abs_"));
}

#[test]
fn reductions_into_a_real_dtype_keep_the_real_parts() {
    // PyTorch casts to a real `dtype=` first: sum(dtype=float32) of
    // [1+2i, 3-1i] is 4, mean(dtype=float64) 2.
    let a = c64(&[(1.0, 2.0), (3.0, -1.0)], &[2]);
    let s = sum::sum(&a, Some(DType::F32)).unwrap();
    assert_eq!(
        (s.dtype(), s.to_vec::<f32>().unwrap()),
        (DType::F32, vec![4.0])
    );
    let m = sum::mean_dim(&a, Some(&[0]), false, Some(DType::F64)).unwrap();
    assert_eq!(
        (m.dtype(), m.to_vec::<f64>().unwrap()),
        (DType::F64, vec![2.0])
    );
    // An integer `dtype=` keeps mean's own rule: it needs a floating result.
    assert!(sum::mean_dim(&a, Some(&[0]), false, Some(DType::I64)).is_err());
}

#[test]
fn equality_is_supported_and_ne_is_its_negation() {
    let a = c64(&[(1.0, 2.0), (f32::NAN, 0.0), (3.0, 0.0)], &[3]);
    let b = c64(&[(1.0, 2.0), (f32::NAN, 0.0), (3.0, 1.0)], &[3]);
    let eq = compare::eq_tensor(&a, &b).unwrap();
    let ne = compare::ne_tensor(&a, &b).unwrap();
    assert_eq!(eq.to_vec::<bool>().unwrap(), vec![true, false, false]);
    assert_eq!(ne.to_vec::<bool>().unwrap(), vec![false, true, true]);
}

#[test]
fn in_place_and_out_forms_keep_dtype_rules() {
    // In place into a complex tensor: a real operand promotes into it.
    let a = c64(&[(1.0, 2.0), (3.0, -1.0)], &[2]);
    let r = Tensor::from_slice(&[2.0f32, -1.0], &[2]).unwrap();
    binary::mul_(&a, &r).unwrap();
    assert_eq!(parts(&a), vec![(2.0, 4.0), (-3.0, 1.0)]);
    // In place into a real tensor: the complex result cannot be stored there.
    assert!(binary::add_(&r, &a, &Scalar::Int(1)).is_err());
    // abs writes a real out= tensor; a complex product does not fit a real one.
    let out = Tensor::from_slice(&[0.0f32; 2], &[2]).unwrap();
    unary::abs_out(&c64(&[(3.0, 4.0), (0.0, -2.0)], &[2]), &out).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![5.0, 2.0]);
    assert!(binary::mul_out(&a, &a, &out).is_err());
}

#[test]
fn casts_to_real_keep_the_real_part_and_bool_tests_both_parts() {
    let a = c64(&[(1.5, 2.0), (0.0, -1.0), (0.0, 0.0), (-2.7, 0.5)], &[4]);
    let f = copy::to_dtype(&a, DType::F64).unwrap();
    assert_eq!(
        f.to_vec::<f64>().unwrap(),
        vec![1.5, 0.0, 0.0, -2.700000047683716]
    );
    let b = copy::to_dtype(&a, DType::Bool).unwrap();
    assert_eq!(b.to_vec::<bool>().unwrap(), vec![true, true, false, true]);
    let i = copy::to_dtype(&a, DType::I32).unwrap();
    assert_eq!(i.to_vec::<i32>().unwrap(), vec![1, 0, 0, -2]);
}
