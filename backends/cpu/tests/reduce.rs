//! Unit tests of the reduction, scan and sort kernels: dtype rules, keepdim, dim
//! wrapping, NaN handling, empty reductions and out= forms.

use opal::{DType, Device, Scalar, Tensor};
use opal_cpu::reduce::{minmax, scan, sort, sum};

fn t32(v: &[f32], shape: &[i64]) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}
fn v32(t: &Tensor) -> Vec<f32> {
    opal_cpu::copy::to_vec_as::<f32>(t).unwrap()
}

#[test]
fn sum_dtypes_dims_keepdim() {
    let x = t32(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    assert_eq!(v32(&sum::sum(&x, None).unwrap()), vec![21.0]);
    let r = sum::sum_dim_intlist(&x, Some(&[-1]), true, None).unwrap();
    assert_eq!(r.sizes(), &[2, 1]);
    assert_eq!(v32(&r), vec![6.0, 15.0]);
    let r = sum::sum_dim_intlist(&x, Some(&[0]), false, None).unwrap();
    assert_eq!(v32(&r), vec![5.0, 7.0, 9.0]);
    // empty dim list reduces everything
    assert_eq!(
        sum::sum_dim_intlist(&x, Some(&[]), false, None)
            .unwrap()
            .sizes(),
        &[] as &[i64]
    );
    // integers and bool sum into int64; dtype= overrides
    let b = Tensor::from_slice(&[true, true, false], &[3]).unwrap();
    let r = sum::sum(&b, None).unwrap();
    assert_eq!(r.dtype(), DType::I64);
    assert_eq!(r.to_vec::<i64>().unwrap(), vec![2]);
    assert_eq!(sum::sum(&x, Some(DType::F64)).unwrap().dtype(), DType::F64);
    // repeated or out-of-range dims are errors naming the op
    assert!(sum::sum_dim_intlist(&x, Some(&[1, -1]), false, None).is_err());
    let e = sum::sum_dim_intlist(&x, Some(&[2]), false, None).unwrap_err();
    assert!(e.to_string().contains("sum"), "{e}");
    // empty reduction gives the identity
    let z = Tensor::empty(&[0, 2], DType::F32, Device::cpu()).unwrap();
    assert_eq!(
        v32(&sum::sum_dim_intlist(&z, Some(&[0]), false, None).unwrap()),
        vec![0.0, 0.0]
    );
    assert_eq!(v32(&sum::prod(&z, None).unwrap()), vec![1.0]);
    // out= resizes
    let o = Tensor::empty(&[7], DType::F32, Device::cpu()).unwrap();
    sum::sum_intlist_out(&x, Some(&[1]), false, None, &o).unwrap();
    assert_eq!(v32(&o), vec![6.0, 15.0]);
}

#[test]
fn mean_var_std_norm_logsumexp() {
    let x = t32(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    assert_eq!(
        v32(&sum::mean_dim(&x, None, false, None).unwrap()),
        vec![2.5]
    );
    let i = Tensor::from_slice(&[1i64, 2], &[2]).unwrap();
    assert!(sum::mean_dim(&i, None, false, None).is_err());
    assert_eq!(
        v32(&sum::mean_dim(&i, None, false, Some(DType::F32)).unwrap()),
        vec![1.5]
    );
    let z = Tensor::empty(&[0], DType::F32, Device::cpu()).unwrap();
    assert!(v32(&sum::mean_dim(&z, None, false, None).unwrap())[0].is_nan());
    let v = v32(&sum::var_correction(&x, Some(&[1]), None, false).unwrap());
    assert_eq!(v, vec![0.5, 0.5]);
    let v = v32(&sum::var_correction(&x, None, Some(&Scalar::Int(0)), false).unwrap());
    assert_eq!(v, vec![1.25]);
    let s = v32(&sum::std_correction(&x, Some(&[0]), None, true).unwrap());
    assert!((s[0] - std::f32::consts::SQRT_2).abs() < 1e-6);
    let n =
        v32(
            &sum::linalg_vector_norm(&t32(&[3.0, -4.0], &[2]), &Scalar::Int(2), None, false, None)
                .unwrap(),
        );
    assert_eq!(n, vec![5.0]);
    let n = v32(&sum::linalg_vector_norm(
        &t32(&[3.0, -4.0], &[2]),
        &Scalar::Float(f64::INFINITY),
        None,
        false,
        None,
    )
    .unwrap());
    assert_eq!(n, vec![4.0]);
    let n = v32(&sum::linalg_vector_norm(
        &t32(&[3.0, -4.0, 0.0], &[3]),
        &Scalar::Int(0),
        None,
        false,
        None,
    )
    .unwrap());
    assert_eq!(n, vec![2.0]);
    let l = v32(&sum::logsumexp(&t32(&[1000.0, 1000.0], &[2]), &[0], false).unwrap());
    assert!((l[0] - (1000.0 + std::f32::consts::LN_2)).abs() < 1e-3);
    let l = v32(&sum::logsumexp(
        &t32(&[f32::NEG_INFINITY, f32::NEG_INFINITY], &[2]),
        &[0],
        false,
    )
    .unwrap());
    assert_eq!(l, vec![f32::NEG_INFINITY]);
}

#[test]
fn truth_reductions() {
    let b = Tensor::from_slice(&[1.0f32, 0.0], &[2]).unwrap();
    assert_eq!(sum::all(&b).unwrap().to_vec::<bool>().unwrap(), vec![false]);
    assert_eq!(sum::any(&b).unwrap().to_vec::<bool>().unwrap(), vec![true]);
    let u = Tensor::from_slice(&[3u8, 1], &[2]).unwrap();
    let r = sum::all(&u).unwrap();
    assert_eq!(r.dtype(), DType::U8);
    assert_eq!(r.to_vec::<u8>().unwrap(), vec![1]);
    let z = Tensor::empty(&[0], DType::F32, Device::cpu()).unwrap();
    assert_eq!(sum::all(&z).unwrap().to_vec::<bool>().unwrap(), vec![true]);
    assert_eq!(sum::any(&z).unwrap().to_vec::<bool>().unwrap(), vec![false]);
}

#[test]
fn extremes_nan_ties_and_empty() {
    let x = t32(&[1.0, 3.0, 3.0, f32::NAN, 0.0, -1.0], &[2, 3]);
    let (v, i) = minmax::max_dim(&x, 1, false).unwrap();
    let v = v32(&v);
    assert_eq!(v[0], 3.0);
    assert!(v[1].is_nan());
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 0]);
    let (v, i) = minmax::min_dim(&x, -1, true).unwrap();
    assert_eq!(v.sizes(), &[2, 1]);
    assert_eq!(v32(&v)[0], 1.0);
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 0]);
    assert_eq!(
        minmax::argmax(&x, None, false)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![3]
    );
    let y = t32(&[2.0, 5.0, 5.0, 1.0], &[2, 2]);
    assert_eq!(
        minmax::argmax(&y, Some(0), false)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![1, 0]
    );
    assert_eq!(minmax::argmin(&y, Some(1), true).unwrap().sizes(), &[2, 1]);
    assert_eq!(v32(&minmax::amax(&y, &[], false).unwrap()), vec![5.0]);
    assert_eq!(v32(&minmax::amin(&y, &[0], false).unwrap()), vec![2.0, 1.0]);
    let z = Tensor::empty(&[0, 2], DType::F32, Device::cpu()).unwrap();
    let e = minmax::amax(&z, &[0], false).unwrap_err();
    assert!(e.to_string().contains("amax"), "{e}");
    assert_eq!(minmax::amax(&z, &[1], false).unwrap().sizes(), &[0]);
    // integer and bool inputs keep their dtype
    let i = Tensor::from_slice(&[3i32, -2], &[2]).unwrap();
    assert_eq!(
        minmax::amin(&i, &[], false)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        vec![-2]
    );
    // wrong index dtype on the out= form
    let (vo, io) = (
        Tensor::empty(&[2], DType::F32, Device::cpu()).unwrap(),
        Tensor::empty(&[2], DType::I32, Device::cpu()).unwrap(),
    );
    assert!(minmax::max_dim_max(&y, 1, false, &vo, &io).is_err());
}

#[test]
fn cumsum_sort_topk() {
    let x = t32(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    assert_eq!(
        v32(&scan::cumsum(&x, 0, None).unwrap()),
        vec![1.0, 2.0, 4.0, 6.0]
    );
    assert_eq!(
        v32(&scan::cumsum(&x, -1, None).unwrap()),
        vec![1.0, 3.0, 3.0, 7.0]
    );
    let i = Tensor::from_slice(&[1i32, 2, 3], &[3]).unwrap();
    let r = scan::cumsum(&i, 0, None).unwrap();
    assert_eq!(r.dtype(), DType::I64);
    assert_eq!(r.to_vec::<i64>().unwrap(), vec![1, 3, 6]);
    let y = t32(&[3.0, f32::NAN, 1.0, 3.0], &[4]);
    let (v, idx) = sort::sort(&y, 0, false).unwrap();
    let v = v32(&v);
    assert_eq!(&v[..3], &[1.0, 3.0, 3.0]);
    assert!(v[3].is_nan());
    assert_eq!(idx.to_vec::<i64>().unwrap(), vec![2, 0, 3, 1]);
    let (_, idx) = sort::sort(&y, 0, true).unwrap();
    assert_eq!(idx.to_vec::<i64>().unwrap(), vec![1, 0, 3, 2]);
    let m = t32(&[5.0, 1.0, 4.0, 2.0, 8.0, 0.0], &[2, 3]);
    let (v, idx) = sort::topk(&m, 2, 1, true, true).unwrap();
    assert_eq!(v.sizes(), &[2, 2]);
    assert_eq!(v32(&v), vec![5.0, 4.0, 8.0, 2.0]);
    assert_eq!(idx.to_vec::<i64>().unwrap(), vec![0, 2, 1, 0]);
    let (v, _) = sort::topk(&m, 1, 0, false, true).unwrap();
    assert_eq!(v32(&v), vec![2.0, 1.0, 0.0]);
    assert!(sort::topk(&m, 4, 1, true, true).is_err());
}
