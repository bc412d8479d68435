//! Unit tests of the element-wise kernels and the iterator/out= infrastructure
//! they run on, through the public kernel functions.

use opal::{DType, Scalar, Tensor};
use opal_cpu::elementwise::{activation, backward, binary, select, ternary, unary};
use opal_cpu::{compare, copy};

fn t32(v: &[f32], shape: &[i64]) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}
fn v32(t: &Tensor) -> Vec<f32> {
    copy::to_vec_as::<f32>(t).unwrap()
}
fn close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!(
            (x - y).abs() <= 1e-5 * (1.0 + y.abs()) || (x.is_nan() && y.is_nan()),
            "{a:?} vs {b:?}"
        );
    }
}

#[test]
fn add_broadcast_alpha_and_promotion() {
    let a = t32(&[1.0, 2.0, 3.0], &[3, 1]);
    let b = t32(&[10.0, 20.0], &[2]);
    let r = binary::add_tensor(&a, &b, &Scalar::Int(2)).unwrap();
    assert_eq!(r.sizes(), &[3, 2]);
    assert_eq!(v32(&r), vec![21.0, 41.0, 22.0, 42.0, 23.0, 43.0]);
    // int + float scalar -> default float; int + int tensor stays int
    let i = Tensor::from_slice(&[1i32, 2], &[2]).unwrap();
    let r = binary::add_scalar(&i, &Scalar::Float(0.5), &Scalar::Int(1)).unwrap();
    assert_eq!(r.dtype(), DType::F32);
    assert_eq!(v32(&r), vec![1.5, 2.5]);
    let l = Tensor::from_slice(&[5i64, 6], &[2]).unwrap();
    let r = binary::add_tensor(&i, &l, &Scalar::Int(1)).unwrap();
    assert_eq!(r.dtype(), DType::I64);
    // zero-dim f64 tensor does not widen a dimensioned f32 tensor
    let z = Tensor::from_slice(&[1.0f64], &[]).unwrap();
    assert_eq!(
        binary::add_tensor(&a, &z, &Scalar::Int(1)).unwrap().dtype(),
        DType::F32
    );
    // float alpha with integer tensors is an error naming the op
    let e = binary::add_tensor(&i, &i, &Scalar::Float(1.5)).unwrap_err();
    assert!(e.to_string().contains("add"), "{e}");
    // bool subtraction is rejected
    let bt = Tensor::from_slice(&[true], &[1]).unwrap();
    assert!(binary::sub_tensor(&bt, &bt, &Scalar::Int(1)).is_err());
    // broadcast failure names the op
    let e = binary::mul_tensor(&t32(&[1.0, 2.0, 3.0], &[3]), &b).unwrap_err();
    assert!(e.to_string().contains("mul"), "{e}");
}

#[test]
fn strided_and_zero_size_inputs() {
    // a transposed view: [[1,3],[2,4]]
    let base = t32(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let tr = base.as_strided(&[2, 2], &[1, 2], 0).unwrap();
    let r = binary::mul_tensor(&tr, &t32(&[1.0, 10.0], &[2])).unwrap();
    assert_eq!(v32(&r), vec![1.0, 30.0, 2.0, 40.0]);
    let e = Tensor::empty(&[0, 3], DType::F32, opal::Device::cpu()).unwrap();
    let r = unary::exp(&e).unwrap();
    assert_eq!(r.sizes(), &[0, 3]);
    let r = binary::add_tensor(&e, &t32(&[1.0, 2.0, 3.0], &[3]), &Scalar::Int(1)).unwrap();
    assert_eq!(r.sizes(), &[0, 3]);
}

#[test]
fn large_parallel_add_matches_serial() {
    let n = 100_003;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| (2 * i) as f32).collect();
    let r = binary::add_tensor(
        &t32(&a, &[n as i64]),
        &t32(&b, &[n as i64]),
        &Scalar::Int(1),
    )
    .unwrap();
    let v = v32(&r);
    assert!(v.iter().enumerate().all(|(i, &x)| x == (3 * i) as f32));
    // non-contiguous large: every other element
    let big = t32(&a, &[n as i64]);
    let view = big.as_strided(&[(n as i64) / 2], &[2], 0).unwrap();
    let r = unary::neg(&view).unwrap();
    let v = v32(&r);
    assert!(v.iter().enumerate().all(|(i, &x)| x == -((2 * i) as f32)));
}

#[test]
fn out_and_inplace_rules() {
    let a = t32(&[1.0, 2.0], &[2]);
    // wrong-size out is resized
    let o = Tensor::empty(&[5], DType::F32, opal::Device::cpu()).unwrap();
    let r = binary::add_out(&a, &a, &Scalar::Int(1), &o).unwrap();
    assert_eq!(o.sizes(), &[2]);
    assert_eq!(v32(&r), vec![2.0, 4.0]);
    // float result into an int out is refused
    let oi = Tensor::empty(&[2], DType::I64, opal::Device::cpu()).unwrap();
    assert!(binary::add_out(&a, &a, &Scalar::Int(1), &oi).is_err());
    // int result into a float out is cast
    let i = Tensor::from_slice(&[3i64, 4], &[2]).unwrap();
    let of = Tensor::empty(&[2], DType::F64, opal::Device::cpu()).unwrap();
    binary::mul_out(&i, &i, &of).unwrap();
    assert_eq!(of.to_vec::<f64>().unwrap(), vec![9.0, 16.0]);
    // in-place keeps the handle and checks the shape
    let x = t32(&[1.0, 4.0], &[2]);
    let r = unary::sqrt_(&x).unwrap();
    assert!(r.is_same(&x));
    assert_eq!(v32(&x), vec![1.0, 2.0]);
    assert!(binary::add_(&x, &t32(&[1.0, 2.0, 3.0, 4.0], &[2, 2]), &Scalar::Int(1)).is_err());
    assert!(opal::rules::can_cast(DType::Bool, DType::F16));
}

#[test]
fn division_modes_and_remainder() {
    let a = Tensor::from_slice(&[7i64, -7, 7, -7], &[4]).unwrap();
    let b = Tensor::from_slice(&[2i64, 2, -2, -2], &[4]).unwrap();
    let r = binary::div_tensor(&a, &b).unwrap();
    assert_eq!(r.dtype(), DType::F32);
    assert_eq!(v32(&r), vec![3.5, -3.5, -3.5, 3.5]);
    let r = binary::div_tensor_mode(&a, &b, Some("floor")).unwrap();
    assert_eq!(r.to_vec::<i64>().unwrap(), vec![3, -4, -4, 3]);
    let r = binary::div_tensor_mode(&a, &b, Some("trunc")).unwrap();
    assert_eq!(r.to_vec::<i64>().unwrap(), vec![3, -3, -3, 3]);
    assert!(binary::div_tensor_mode(&a, &b, Some("round")).is_err());
    let z = Tensor::from_slice(&[0i64, 1, 1, 1], &[4]).unwrap();
    assert!(binary::div_tensor_mode(&a, &z, Some("floor")).is_err());
    let r = binary::remainder_tensor(&a, &b).unwrap();
    assert_eq!(r.to_vec::<i64>().unwrap(), vec![1, 1, -1, -1]);
    let fa = t32(&[-7.5, 7.5], &[2]);
    let r = binary::remainder_tensor(&fa, &t32(&[2.0, -2.0], &[2])).unwrap();
    assert_eq!(v32(&r), vec![0.5, -0.5]);
    let r = binary::div_tensor_mode(&fa, &t32(&[2.0, -2.0], &[2]), Some("floor")).unwrap();
    assert_eq!(v32(&r), vec![-4.0, -4.0]);
}

#[test]
fn pow_min_max_nan() {
    let a = t32(&[2.0, f32::NAN, -1.0], &[3]);
    close(
        &v32(&binary::pow_tensor_scalar(&a, &Scalar::Int(2)).unwrap()),
        &[4.0, f32::NAN, 1.0],
    );
    let i = Tensor::from_slice(&[2i32, 3], &[2]).unwrap();
    let r = binary::pow_tensor_scalar(&i, &Scalar::Int(3)).unwrap();
    assert_eq!(r.to_vec::<i32>().unwrap(), vec![8, 27]);
    assert!(binary::pow_tensor_scalar(&i, &Scalar::Int(-1)).is_err());
    let b = t32(&[1.0, 0.0, f32::NAN], &[3]);
    let m = v32(&binary::maximum(&a, &b).unwrap());
    assert_eq!(m[0], 2.0);
    assert!(m[1].is_nan() && m[2].is_nan());
}

#[test]
fn unary_math_and_int_promotion() {
    let i = Tensor::from_slice(&[1i64, 4], &[2]).unwrap();
    let r = unary::sqrt(&i).unwrap();
    assert_eq!(r.dtype(), DType::F32);
    assert_eq!(v32(&r), vec![1.0, 2.0]);
    assert!(unary::sqrt_(&i).is_err()); // float result can't go into int64 in place
    let x = t32(&[-1.5, 0.5, 2.5, -0.0], &[4]);
    assert_eq!(v32(&unary::round(&x).unwrap()), vec![-2.0, 0.0, 2.0, -0.0]);
    assert_eq!(v32(&unary::sign(&x).unwrap()), vec![-1.0, 1.0, 1.0, 0.0]);
    assert_eq!(v32(&unary::abs(&x).unwrap()), vec![1.5, 0.5, 2.5, 0.0]);
    close(
        &v32(&unary::erf(&t32(&[0.5], &[1])).unwrap()),
        &[0.520_499_9],
    );
    let h = copy::to_dtype(&x, DType::F16).unwrap();
    let r = unary::exp(&h).unwrap();
    assert_eq!(r.dtype(), DType::F16);
    let bt = Tensor::from_slice(&[true], &[1]).unwrap();
    assert!(unary::neg(&bt).is_err());
}

#[test]
fn activations_and_backward() {
    let x = t32(&[-2.0, 0.0, 3.0], &[3]);
    assert_eq!(v32(&activation::relu(&x).unwrap()), vec![0.0, 0.0, 3.0]);
    close(
        &v32(&activation::gelu(&x, "none").unwrap()),
        &[-0.045_500_26, 0.0, 2.995_950_5],
    );
    close(
        &v32(&activation::gelu(&x, "tanh").unwrap()),
        &[-0.045_402_3, 0.0, 2.996_362_7],
    );
    assert!(activation::gelu(&x, "fast").is_err());
    close(
        &v32(&activation::leaky_relu(&x, &Scalar::Float(0.1)).unwrap()),
        &[-0.2, 0.0, 3.0],
    );
    close(
        &v32(&activation::hardtanh(&x, &Scalar::Int(-1), &Scalar::Int(1)).unwrap()),
        &[-1.0, 0.0, 1.0],
    );
    close(
        &v32(&activation::softplus(&x, &Scalar::Int(1), &Scalar::Int(20)).unwrap()),
        &[0.126_928_01, std::f32::consts::LN_2, 3.048_587_4],
    );
    let g = t32(&[1.0, 1.0, 1.0], &[3]);
    assert_eq!(
        v32(&backward::threshold_backward(&g, &x, &Scalar::Int(0)).unwrap()),
        vec![0.0, 0.0, 1.0]
    );
    close(
        &v32(&backward::tanh_backward(&g, &t32(&[0.5, 0.0, -0.5], &[3])).unwrap()),
        &[0.75, 1.0, 0.75],
    );
    close(
        &v32(&backward::gelu_backward(&g, &x, "none").unwrap()),
        &[-0.085_231_94, 0.5, 1.011_937_2],
    );
}

#[test]
fn comparisons_logical_select() {
    let a = t32(&[1.0, 2.0, f32::NAN], &[3]);
    let b = t32(&[1.0, 1.0, f32::NAN], &[3]);
    assert_eq!(
        compare::eq_tensor(&a, &b)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        vec![true, false, false]
    );
    assert_eq!(
        compare::ne_tensor(&a, &b)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        vec![false, true, true]
    );
    assert_eq!(
        compare::gt_scalar(&a, &Scalar::Float(1.5))
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        vec![false, true, false]
    );
    let m = compare::lt_tensor(&b, &a).unwrap();
    let r = select::where_self(&m, &a, &t32(&[0.0], &[1])).unwrap();
    assert_eq!(v32(&r)[..2], [0.0, 2.0]);
    let r = select::masked_fill_scalar(&a, &m, &Scalar::Int(-1)).unwrap();
    assert_eq!(v32(&r)[..2], [1.0, -1.0]);
    let i = Tensor::from_slice(&[0i32, 3], &[2]).unwrap();
    assert_eq!(
        compare::logical_not(&i).unwrap().to_vec::<bool>().unwrap(),
        vec![true, false]
    );
    let j = Tensor::from_slice(&[6i32, 5], &[2]).unwrap();
    assert_eq!(
        compare::bitwise_and_tensor(&i, &j)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        vec![0, 1]
    );
    assert!(compare::bitwise_and_tensor(&a, &a).is_err());
    assert_eq!(
        select::isnan(&a).unwrap().to_vec::<bool>().unwrap(),
        vec![false, false, true]
    );
    let c = select::clamp(&a, Some(&Scalar::Float(1.5)), None).unwrap();
    let c = v32(&c);
    assert_eq!(c[..2], [1.5, 2.0]);
    assert!(c[2].is_nan());
    assert!(select::clamp(&a, None, None).is_err());
    let inf = t32(&[f32::INFINITY, f32::NAN, f32::NEG_INFINITY], &[3]);
    assert_eq!(
        v32(&select::nan_to_num(&inf, None, None, Some(-5.0)).unwrap()),
        vec![f32::MAX, 0.0, -5.0]
    );
}

#[test]
fn ternary_ops() {
    let s = t32(&[1.0, 1.0], &[2]);
    let a = t32(&[2.0, 3.0], &[2]);
    let b = t32(&[4.0, 6.0], &[2]);
    assert_eq!(
        v32(&ternary::addcmul(&s, &a, &b, &Scalar::Float(0.5)).unwrap()),
        vec![5.0, 10.0]
    );
    assert_eq!(
        v32(&ternary::addcdiv(&s, &a, &b, &Scalar::Int(2)).unwrap()),
        vec![2.0, 2.0]
    );
    assert_eq!(
        v32(&ternary::lerp_scalar(&s, &a, &Scalar::Float(0.5)).unwrap()),
        vec![1.5, 2.0]
    );
    let i = Tensor::from_slice(&[1i64], &[1]).unwrap();
    assert!(ternary::addcdiv(&i, &i, &i, &Scalar::Int(1)).is_err());
}

/// A one-element operand on either side of a contiguous one (the flat-loop path of
/// the strided element-wise loop), against the same product with the operand
/// expanded, for a scalar, a 0-d and a [1, 1] tensor, in place too.
#[test]
fn one_element_operands_on_either_side_match_the_expanded_operand() {
    let n = 37;
    let x = t32(
        &(0..n).map(|i| i as f32 * 0.25 - 3.0).collect::<Vec<_>>(),
        &[n as i64],
    );
    let want_mul: Vec<f32> = v32(&x).iter().map(|v| v * -1.5).collect();
    let want_rsub: Vec<f32> = v32(&x).iter().map(|v| -1.5 - v).collect();
    close(
        &v32(&binary::mul_scalar(&x, &Scalar::Float(-1.5)).unwrap()),
        &want_mul,
    );
    for shape in [&[][..], &[1][..]] {
        let s = t32(&[-1.5], shape);
        close(&v32(&binary::mul_tensor(&x, &s).unwrap()), &want_mul);
        close(&v32(&binary::mul_tensor(&s, &x).unwrap()), &want_mul);
        let r = binary::sub_tensor(&s, &x, &Scalar::Int(1)).unwrap();
        assert_eq!(r.sizes(), &[n as i64]);
        close(&v32(&r), &want_rsub);
    }
    // A [1, 1] operand broadcasts x to [1, n]: the result is not x's shape.
    let s = t32(&[-1.5], &[1, 1]);
    let r = binary::mul_tensor(&x, &s).unwrap();
    assert_eq!(r.sizes(), &[1, n as i64]);
    close(&v32(&r), &want_mul);
    // In place: out is x itself.
    let y = t32(&v32(&x), &[n as i64]);
    binary::mul_(&y, &t32(&[-1.5], &[])).unwrap();
    close(&v32(&y), &want_mul);
}

/// Same-dtype copies between strided layouts move bytes (whole short rows at a
/// time): every element size, rows of 1 to 20 elements, transposed, permuted and
/// broadcast sources, a strided destination, and a tensor copied onto itself all
/// give what walking the indices gives.
#[test]
fn strided_copies_of_every_element_size_match_the_index_walk() {
    let flat: Vec<i64> = (0..4000).map(|i| (i * 37 + 11) % 251).collect();
    let base = Tensor::from_slice(&flat, &[4000]).unwrap();
    // The element at `index` of the view (sizes, strides, offset) of `flat`.
    let walk = |sizes: &[i64], strides: &[i64], offset: i64| -> Vec<i64> {
        let n: i64 = sizes.iter().product();
        (0..n)
            .map(|mut lin| {
                let mut at = offset;
                for (s, st) in sizes.iter().zip(strides).rev() {
                    at += (lin % s) * st;
                    lin /= s;
                }
                flat[at as usize]
            })
            .collect()
    };
    let mut views: Vec<(Vec<i64>, Vec<i64>, i64)> = vec![
        (vec![3, 4], vec![1, 3], 0),                  // transposed
        (vec![2, 4, 3, 5], vec![60, 5, 20, 1], 0),    // permuted, rows of 5
        (vec![2, 16, 4, 8], vec![512, 8, 128, 1], 0), // an attention head's transpose
        (vec![3, 4, 5], vec![0, 5, 1], 2),            // broadcast outer dim
        (vec![6, 7], vec![7, 0], 1),                  // broadcast inner dim
        (vec![4, 8, 16], vec![1, 64, 4], 0),          // inner dim strided
        // Tiled transposes: sides that are not multiples of the tile, batches of
        // planes, an offset.
        (vec![20, 37], vec![1, 20], 0),
        (vec![40, 90], vec![1, 40], 5),
        (vec![3, 17, 70], vec![1, 210, 3], 0),
        (vec![2, 30, 33], vec![990, 1, 30], 0),
    ];
    for len in 1..=20 {
        views.push((vec![5, len], vec![len + 3, 1], 1)); // rows of `len` elements
        views.push((vec![3, 2, len], vec![2 * len + 9, len + 4, 1], 3));
    }
    for dtype in [DType::U8, DType::I16, DType::F32, DType::F64] {
        let src_all = copy::to_dtype(&base, dtype).unwrap();
        for (sizes, strides, offset) in &views {
            let view = src_all.as_strided(sizes, strides, *offset).unwrap();
            let want = walk(sizes, strides, *offset);
            let got = copy::to_vec_as::<i64>(&copy::contiguous(&view).unwrap()).unwrap();
            assert_eq!(got, want, "{dtype:?} {sizes:?} {strides:?}");
            // Into a strided destination: the transpose of a contiguous buffer.
            let numel: i64 = sizes.iter().product();
            let dst_buf = copy::to_dtype(
                &Tensor::from_slice(&vec![0i64; numel as usize], &[numel]).unwrap(),
                dtype,
            )
            .unwrap();
            // Column-major: dim d's stride is the product of the sizes before it.
            let col_major: Vec<i64> = (0..sizes.len())
                .map(|d| sizes[..d].iter().product())
                .collect();
            let dst = dst_buf.as_strided(sizes, &col_major, 0).unwrap();
            copy::copy_into(&dst, &view, "test").unwrap();
            assert_eq!(
                copy::to_vec_as::<i64>(&dst).unwrap(),
                want,
                "{dtype:?} {sizes:?} into a transposed destination"
            );
            // A non-contiguous tensor copied onto itself is unchanged.
            copy::copy_into(&dst, &dst, "test").unwrap();
            assert_eq!(
                copy::to_vec_as::<i64>(&dst).unwrap(),
                want,
                "{dtype:?} {sizes:?} onto itself"
            );
        }
    }
}

/// GELU and its gradient on a contiguous f32 tensor large enough to be split
/// across threads (with a short last piece) agree with the element-by-element
/// path that a strided view of the same values takes.
#[test]
fn split_gelu_matches_the_strided_path() {
    let n = 3 * opal_cpu::iter::COSTLY_GRAIN + 123;
    let vals: Vec<f32> = (0..2 * n).map(|i| (i as f32 * 0.37).sin() * 6.0).collect();
    let spread = t32(&vals, &[2 * n as i64]);
    // Every other value: strided, so the generic element loop runs.
    let strided = spread.as_strided(&[n as i64], &[2], 0).unwrap();
    let dense = t32(&v32(&strided), &[n as i64]);
    let grads: Vec<f32> = (0..n).map(|i| 1.0 + (i % 7) as f32 * 0.25).collect();
    let g = t32(&grads, &[n as i64]);
    close(
        &v32(&activation::gelu(&dense, "none").unwrap()),
        &v32(&activation::gelu(&strided, "none").unwrap()),
    );
    close(
        &v32(&backward::gelu_backward(&g, &dense, "none").unwrap()),
        &v32(&backward::gelu_backward(&g, &strided, "none").unwrap()),
    );
}
