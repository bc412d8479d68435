//! Group b's core ops whose results are not tensors, which the golden harness cannot
//! express: the symbolic queries (`sym_size.int`, `sym_stride.int`, `sym_numel`,
//! `sym_storage_offset`, `sym_is_contiguous`), `_local_scalar_dense` and the graph
//! assertions (`_assert_scalar`, `sym_constrain_range_for_size`,
//! `_assert_async.msg`), on CPU and meta tensors, with the values PyTorch gives.

use opal::dispatch::{DispatchKey, DispatchKeySet};
use opal::{ops, DType, Device, MemoryFormat, Scalar, Tensor};

fn init() {
    opal_cpu::init().expect("CPU backend registers");
    opal_meta::init().expect("Meta backend registers");
}

#[test]
fn symbolic_queries_read_the_geometry() {
    init();
    let a = Tensor::from_vec((0..24).map(|v| v as f32).collect::<Vec<_>>(), &[2, 3, 4])
        .expect("tensor");
    assert_eq!(ops::sym_size_int(&a, 1).unwrap(), 3);
    assert_eq!(ops::sym_size_int(&a, -1).unwrap(), 4);
    assert!(ops::sym_size_int(&a, 3).is_err());
    assert_eq!(ops::sym_stride_int(&a, 0).unwrap(), 12);
    assert_eq!(ops::sym_numel(&a).unwrap(), 24);
    assert_eq!(ops::sym_storage_offset(&a).unwrap(), 0);
    assert!(ops::sym_is_contiguous(&a).unwrap());
    let t = ops::transpose_int(&a, 0, 2).unwrap();
    assert_eq!(ops::sym_stride_int(&t, 0).unwrap(), 1);
    assert!(!ops::sym_is_contiguous(&t).unwrap());
    let s = ops::select_int(&a, 0, 1).unwrap();
    assert_eq!(ops::sym_storage_offset(&s).unwrap(), 12);
    // A 4-d NHWC-dense tensor is channels-last contiguous, not row-major.
    let n = Tensor::from_vec(vec![0f32; 2 * 3 * 4 * 5], &[2, 4, 5, 3]).unwrap();
    let cl = ops::permute(&n, &[0, 3, 1, 2]).unwrap();
    let q = ops::sym_is_contiguous::with(
        &cl,
        ops::sym_is_contiguous::Options::default().memory_format(MemoryFormat::ChannelsLast),
    );
    assert!(q.unwrap());
    assert!(!ops::sym_is_contiguous(&cl).unwrap());
    let zero_d = Tensor::from_slice(&[1f32], &[]).unwrap();
    assert!(ops::sym_size_int(&zero_d, 0).is_err());
    let m = Tensor::empty(&[5, 6], DType::F32, Device::meta()).unwrap();
    assert_eq!(ops::sym_size_int(&m, 1).unwrap(), 6);
    assert_eq!(ops::sym_numel(&m).unwrap(), 30);
}

#[test]
fn local_scalar_dense_and_assertions() {
    init();
    let one = Tensor::from_slice(&[2.5f64], &[1, 1]).unwrap();
    assert_eq!(ops::_local_scalar_dense(&one).unwrap().to_f64(), 2.5);
    let two = Tensor::from_slice(&[1i64, 2], &[2]).unwrap();
    assert!(ops::_local_scalar_dense(&two).is_err());
    let m = Tensor::empty(&[], DType::F32, Device::meta()).unwrap();
    assert!(ops::_local_scalar_dense(&m).is_err());

    // These two take no tensor, so a plain call has no dispatch key; PyTorch runs
    // its CompositeExplicitAutograd kernel for the empty key set, Opal's dispatcher
    // does not (yet), so the kernels are reached with the CPU key set here.
    let cpu = DispatchKeySet::from_key(DispatchKey::CPU);
    let r = ops::_assert_scalar::redispatch(cpu, &Scalar::Bool(true), "fine");
    assert!(r.is_ok(), "{r:?}");
    let e = ops::_assert_scalar::redispatch(cpu, &Scalar::Int(0), "u0 >= 2").unwrap_err();
    assert!(e.to_string().contains("u0 >= 2"));
    let range = |v: i64, min: Option<i64>, max: Option<i64>| {
        ops::sym_constrain_range_for_size::redispatch(cpu, &Scalar::Int(v), min, max)
    };
    assert!(range(3, None, None).is_ok());
    assert!(range(-1, None, None).is_err());
    assert!(range(5, Some(2), Some(4)).is_err());
    assert!(range(4, Some(2), Some(4)).is_ok());
    assert!(range(1, Some(-1), None).is_err());

    let t = Tensor::from_slice(&[true], &[]).unwrap();
    assert!(ops::_assert_async_msg(&t, "ok").is_ok());
    let f = Tensor::from_slice(&[0f32], &[1]).unwrap();
    let e = ops::_assert_async_msg(&f, "must be positive").unwrap_err();
    assert!(e.to_string().contains("must be positive"));
    assert!(ops::_assert_async_msg(&two, "x").is_err());
}
