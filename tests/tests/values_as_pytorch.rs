//! Values as PyTorch gives them: scalar conversions that would
//! overflow the target dtype, complex `alpha` on real tensors, out-of-range gather /
//! scatter indices, integer `arange` bounds that overflow, transposed convolution's
//! `output_padding`, undefined tensors in `cat`, and bool tensors over bytes other
//! than 0 and 1 are refused with an `Err` naming the op and the value, where PyTorch
//! refuses them.

use opal::{ops, DType, Device, Scalar, Storage, Tensor};

fn init() {
    opal_cpu::init().expect("CPU backend registers");
    opal_meta::init().expect("Meta backend registers");
}

fn full(v: Scalar, dt: DType) -> opal::Result<Tensor> {
    ops::full::with(&[2], &v, ops::full::Options::default().dtype(dt))
}

/// The error message of `r`, which must be an `Err`.
fn msg<T: std::fmt::Debug>(r: opal::Result<T>) -> String {
    r.expect_err("PyTorch refuses this input").to_string()
}

#[test]
fn full_refuses_values_that_overflow_the_dtype() {
    init();
    let m = msg(full(Scalar::Int(300), DType::U8));
    assert!(
        m.contains("full") && m.contains("300") && m.contains("uint8"),
        "{m}"
    );
    let m = msg(full(Scalar::Float(f64::NAN), DType::I64));
    assert!(
        m.contains("full") && m.contains("NaN") && m.contains("int64"),
        "{m}"
    );
    assert!(full(Scalar::Float(f64::INFINITY), DType::I32).is_err());
    assert!(full(Scalar::Int(128), DType::I8).is_err());
    assert!(full(Scalar::Int(-129), DType::I8).is_err());
    assert!(full(Scalar::Int(1 << 40), DType::I32).is_err());
    assert!(full(Scalar::Float(1e300), DType::F32).is_err());
    assert!(full(Scalar::Float(70000.0), DType::F16).is_err());
    assert!(full(Scalar::Complex(1.0, 2.0), DType::F32).is_err());
    assert!(full(Scalar::Float(-256.5), DType::U8).is_err());
}

#[test]
fn full_keeps_values_pytorch_accepts() {
    init();
    // Negative values wrap into unsigned types (PyTorch allows -1 for uint8).
    let t = full(Scalar::Int(-1), DType::U8).unwrap();
    assert_eq!(t.to_vec::<u8>().unwrap(), vec![255, 255]);
    // Any value converts to bool (non-zero is true), NaN included.
    let b = full(Scalar::Float(f64::NAN), DType::Bool).unwrap();
    assert_eq!(b.to_vec::<bool>().unwrap(), vec![true, true]);
    let b = full(Scalar::Int(300), DType::Bool).unwrap();
    assert_eq!(b.to_vec::<bool>().unwrap(), vec![true, true]);
    // Infinities and NaN fit floating dtypes; floats truncate into integer dtypes.
    let f = full(Scalar::Float(f64::INFINITY), DType::F16).unwrap();
    assert!(f.to_vec::<half::f16>().unwrap()[0].is_infinite());
    let i = full(Scalar::Float(-2.75), DType::I8).unwrap();
    assert_eq!(i.to_vec::<i8>().unwrap(), vec![-2, -2]);
    let c = full(Scalar::Complex(1.0, 0.0), DType::F64).unwrap();
    assert_eq!(c.to_vec::<f64>().unwrap(), vec![1.0, 1.0]);
    let edge = full(Scalar::Int(i64::MIN), DType::I64).unwrap();
    assert_eq!(edge.to_vec::<i64>().unwrap(), vec![i64::MIN; 2]);
}

#[test]
fn fills_refuse_overflowing_values() {
    init();
    let t = Tensor::from_slice(&[1u8, 2], &[2]).unwrap();
    let m = msg(ops::full_like(&t, &Scalar::Int(256)));
    assert!(m.contains("full_like") && m.contains("256"), "{m}");
    let mask = Tensor::from_slice(&[true, false], &[2]).unwrap();
    let m = msg(ops::masked_fill_scalar(&t, &mask, &Scalar::Int(-300)));
    assert!(m.contains("masked_fill") && m.contains("-300"), "{m}");
    let m = msg(ops::masked_fill_scalar_(&t, &mask, &Scalar::Int(1000)));
    assert!(m.contains("masked_fill_") && m.contains("1000"), "{m}");
    assert_eq!(
        t.to_vec::<u8>().unwrap(),
        vec![1, 2],
        "a refused fill writes nothing"
    );
    let m = msg(ops::clamp::with(
        &t,
        ops::clamp::Options::default().min(Scalar::Int(300)),
    ));
    assert!(m.contains("clamp") && m.contains("300"), "{m}");
    let h = Tensor::from_slice(&[half::f16::from_f32(1.0)], &[1]).unwrap();
    let opts = ops::clamp::Options::default().max(Scalar::Float(1e5));
    assert!(ops::clamp::with(&h, opts).is_err());
    let c = ops::clamp::with(&t, ops::clamp::Options::default().max(Scalar::Int(1))).unwrap();
    assert_eq!(c.to_vec::<u8>().unwrap(), vec![1, 1]);
    let i = Tensor::from_slice(&[1i32, 2], &[2]).unwrap();
    let m = msg(ops::constant_pad_nd::with(
        &i,
        &[1, 1],
        ops::constant_pad_nd::Options::default().value(Scalar::Float(f64::NAN)),
    ));
    assert!(m.contains("constant_pad_nd"), "{m}");
}

#[test]
fn complex_alpha_is_refused_for_real_tensors() {
    init();
    let a = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let opts = ops::add_tensor::Options::default().alpha(Scalar::Complex(1.0, 1.0));
    let m = msg(ops::add_tensor::with(&a, &a, opts));
    assert!(m.contains("add") && m.contains("complex"), "{m}");
    let opts = ops::sub_tensor::Options::default().alpha(Scalar::Complex(2.0, 0.5));
    assert!(ops::sub_tensor::with(&a, &a, opts).is_err());
    // Integer tensors refuse a float alpha, non-bool results a bool alpha.
    let i = Tensor::from_slice(&[1i64, 2], &[2]).unwrap();
    let opts = ops::add_tensor::Options::default().alpha(Scalar::Float(0.5));
    assert!(ops::add_tensor::with(&i, &i, opts).is_err());
    let opts = ops::add_tensor::Options::default().alpha(Scalar::Bool(true));
    assert!(ops::add_tensor::with(&a, &a, opts).is_err());
}

#[test]
fn gather_and_scatter_refuse_negative_indices() {
    init();
    let src = Tensor::from_slice(&[10.0f32, 20.0, 30.0], &[3]).unwrap();
    let idx = Tensor::from_slice(&[-1i64], &[1]).unwrap();
    let m = msg(ops::gather(&src, 0, &idx));
    assert!(
        m.contains("gather") && m.contains("-1") && m.contains("size 3"),
        "{m}"
    );
    let one = Tensor::from_slice(&[5.0f32], &[1]).unwrap();
    assert!(ops::scatter_src(&src, 0, &idx, &one).is_err());
    assert!(ops::scatter_add(&src, 0, &idx, &one).is_err());
    let m = msg(ops::index_select(&src, 0, &idx));
    assert!(m.contains("index_select") && m.contains("-1"), "{m}");
    // In range: unchanged.
    let ok = Tensor::from_slice(&[2i64, 0], &[2]).unwrap();
    let g = ops::gather(&src, 0, &ok).unwrap();
    assert_eq!(g.to_vec::<f32>().unwrap(), vec![30.0, 10.0]);
}

#[test]
fn arange_counts_extreme_integer_ranges_exactly() {
    init();
    let step = |s: i64| ops::arange_start_step::Options::default().step(Scalar::Int(s));
    // ceil((2^64 - 1) / (2^63 - 1)) = 3 elements, all of them int64 values.
    let t = ops::arange_start_step::with(
        &Scalar::Int(i64::MIN),
        &Scalar::Int(i64::MAX),
        step(i64::MAX),
    )
    .unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![i64::MIN, -1, i64::MAX - 1]);
    let t = ops::arange_start_step::with(
        &Scalar::Int(i64::MAX),
        &Scalar::Int(i64::MIN),
        step(i64::MIN),
    )
    .unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![i64::MAX, -1]);
    let t = ops::arange_start_step(&Scalar::Int(i64::MAX - 2), &Scalar::Int(i64::MAX)).unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![i64::MAX - 2, i64::MAX - 1]);
    // Meta computes the same length.
    let meta = ops::arange_start_step::with(
        &Scalar::Int(i64::MIN),
        &Scalar::Int(i64::MAX),
        step(i64::MAX).device(Device::meta()),
    )
    .unwrap();
    assert_eq!(meta.sizes(), &[3]);
    let meta = ops::arange_start_step::with(
        &Scalar::Int(i64::MIN),
        &Scalar::Int(i64::MAX),
        step(1).device(Device::meta()),
    );
    assert!(meta.is_err(), "2^64 - 1 elements cannot be a size");
    let m = msg(ops::arange_start_step::with(
        &Scalar::Float(0.0),
        &Scalar::Float(1.0),
        ops::arange_start_step::Options::default().step(Scalar::Float(f64::NAN)),
    ));
    assert!(m.contains("arange"), "{m}");
}

#[test]
fn transposed_conv_refuses_output_padding_not_below_stride_or_dilation() {
    init();
    let x = Tensor::from_slice(&[1.0f32; 4], &[1, 1, 4]).unwrap();
    let w = Tensor::from_slice(&[1.0f32; 2], &[1, 1, 2]).unwrap();
    let conv = |stride: i64, dilation: i64, op: i64| {
        ops::convolution(&x, &w, None, &[stride], &[0], &[dilation], true, &[op], 1)
    };
    let m = msg(conv(2, 1, 2));
    assert!(m.contains("output padding") && m.contains("stride"), "{m}");
    assert!(conv(1, 1, 1).is_err());
    assert!(conv(2, 2, 3).is_err());
    let ok = conv(2, 1, 1).unwrap();
    assert_eq!(ok.sizes(), &[1, 1, 9]);
    // Meta agrees.
    let xm = ops::empty_memory_format::with(
        &[1, 1, 4],
        ops::empty_memory_format::Options::default().device(Device::meta()),
    )
    .unwrap();
    let wm = ops::empty_memory_format::with(
        &[1, 1, 2],
        ops::empty_memory_format::Options::default().device(Device::meta()),
    )
    .unwrap();
    assert!(ops::convolution(&xm, &wm, None, &[2], &[0], &[1], true, &[2], 1).is_err());
}

#[test]
fn cat_refuses_undefined_tensors() {
    init();
    let a = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let m = msg(ops::cat(&[a.clone(), Tensor::undefined()]));
    assert!(m.contains("cat") && m.contains("undefined"), "{m}");
    assert!(ops::cat(&[Tensor::undefined()]).is_err());
    assert!(ops::stack(&[a, Tensor::undefined()]).is_err());
}

#[test]
fn bool_tensors_hold_only_zero_and_one() {
    init();
    let bytes = Tensor::from_slice(&[2u8, 255, 0, 1], &[4]).unwrap();
    let r = Tensor::from_storage(bytes.storage_handle(), &[4], &[1], 0, DType::Bool);
    let m = msg(r);
    assert!(m.contains("bool"), "{m}");
    // Not even over 0/1 bytes: the u8 tensor could write a 2 later.
    let ok = Tensor::from_slice(&[0u8, 1], &[2]).unwrap();
    assert!(Tensor::from_storage(ok.storage_handle(), &[2], &[1], 0, DType::Bool).is_err());
    // A bool view of a bool tensor's storage is fine.
    let src = Tensor::from_slice(&[false, true], &[2]).unwrap();
    let b = Tensor::from_storage(src.storage_handle(), &[2], &[1], 0, DType::Bool).unwrap();
    let n = ops::logical_not(&b).unwrap();
    assert_eq!(n.to_vec::<bool>().unwrap(), vec![true, false]);
    let fresh = Storage::new(4, Device::cpu()).unwrap();
    assert!(Tensor::from_storage(fresh, &[4], &[1], 0, DType::Bool).is_ok());
    assert!(Tensor::from_bytes(&[2], &[1], DType::Bool).is_err());
}
