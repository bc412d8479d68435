//! The `out=` operators that `native_functions.yaml` derives with `autogen:`, plus
//! `native_batch_norm.out` and the composite `linear.out`, called through the
//! generated API on CPU tensors and checked against their functional op.
//!
//! The rule under test is PyTorch's for generated out= kernels: the functional
//! result decides shape and dtype, `out` is resized to it (a wrongly sized `out`
//! too) and must already have the result's dtype — the copy never converts — except
//! where the functional op takes its dtype from `out` (`_to_copy`, `*_like`).

use opal::dispatch::{DispatchKey, Dispatcher};
use opal::{ops, DType, Device, IValue, Result, Scalar, Tensor};

fn init() {
    opal_cpu::init().expect("CPU backend registers");
    opal_meta::init().expect("Meta backend registers");
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().expect("f32 tensor")
}

/// Values `v, v+1, ...` of `shape` as f32, shifted so that some are negative.
fn ramp(shape: &[i64], v: f32) -> Tensor {
    let n: i64 = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| v + i as f32).collect();
    Tensor::from_slice(&data, shape).expect("tensor")
}

fn empty(shape: &[i64], dtype: DType) -> Tensor {
    Tensor::empty(shape, dtype, Device::cpu()).expect("empty tensor")
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-5)
}

#[test]
fn every_autogen_out_op_has_a_cpu_kernel() {
    init();
    let d = Dispatcher::global();
    for name in [
        "aten::add.Scalar_out",
        "aten::mul.Scalar_out",
        "aten::masked_fill.Scalar_out",
        "aten::isnan.out",
        "aten::relu.out",
        "aten::sum.out",
        "aten::prod.out",
        "aten::convolution.out",
        "aten::convolution_backward.out",
        "aten::_adaptive_avg_pool2d.out",
        "aten::native_layer_norm.out",
        "aten::native_layer_norm_backward.out",
        "aten::native_batch_norm.out",
        "aten::native_dropout.out",
        "aten::native_dropout_backward.out",
        "aten::embedding.out",
        "aten::embedding_dense_backward.out",
        "aten::flip.out",
        "aten::roll.out",
        "aten::repeat.out",
        "aten::constant_pad_nd.out",
        "aten::_to_copy.out",
        "aten::zeros_like.out",
        "aten::ones_like.out",
        "aten::full_like.out",
    ] {
        let op = d.find(name).expect("defined by init");
        assert!(
            op.has_kernel_for(DispatchKey::CPU),
            "{name}: {}",
            op.dump_table()
        );
    }
    // linear.out is one composite for every backend, not a CPU kernel.
    let op = d.find("aten::linear.out").expect("defined");
    assert!(op.has_kernel_for(DispatchKey::CompositeExplicitAutograd));
    assert!(!op.has_kernel_for(DispatchKey::CPU));
}

#[test]
fn out_of_the_right_size_receives_the_functional_result() -> Result<()> {
    init();
    let x = ramp(&[2, 3], -2.0);
    let out = empty(&[2, 3], DType::F32);
    let r = ops::relu_out(&x, &out)?;
    assert_eq!(f32s(&out), f32s(&ops::relu(&x)?));
    assert!(r.is_same(&out), "returns `out` itself");

    let out = empty(&[3, 2], DType::F32);
    ops::flip_out(&x, &[0, 1], &out)?;
    assert_eq!(out.sizes(), [2, 3], "resized to the result's shape");
    assert_eq!(f32s(&out), f32s(&ops::flip(&x, &[0, 1])?));

    let out = empty(&[2], DType::F32);
    ops::repeat_out(&x, &[2, 1], &out)?;
    assert_eq!(out.sizes(), [4, 3]);
    assert_eq!(f32s(&out), f32s(&ops::repeat(&x, &[2, 1])?));

    let out = empty(&[0], DType::F32);
    ops::constant_pad_nd_out::call(&x, &[1, 1], &Scalar::Float(9.0), &out)?;
    let want = ops::constant_pad_nd::call(&x, &[1, 1], &Scalar::Float(9.0))?;
    assert_eq!(out.sizes(), [2, 5]);
    assert_eq!(f32s(&out), f32s(&want));

    let nan = Tensor::from_slice(&[1.0f32, f32::NAN], &[2])?;
    let out = empty(&[7], DType::Bool);
    ops::isnan_out(&nan, &out)?;
    assert_eq!(out.to_vec::<bool>()?, [false, true]);
    Ok(())
}

#[test]
fn fold_and_masked_scatter_outs_match_their_functional_ops() -> Result<()> {
    init();
    // im2col of a 1x2x4x4 image with 2x2 patches: 8 rows, 9 patch positions.
    let img = ramp(&[1, 2, 4, 4], -5.0);
    let (k, dil, pad, st) = ([2, 2], [1, 1], [0, 0], [1, 1]);
    let cols = ops::im2col(&img, &k, &dil, &pad, &st)?;
    let out = empty(&[3], DType::F32);
    ops::im2col_out(&img, &k, &dil, &pad, &st, &out)?;
    assert_eq!(out.sizes(), [1, 8, 9]);
    assert_eq!(f32s(&out), f32s(&cols));

    let out = empty(&[1, 2, 4, 4], DType::F32);
    ops::col2im_out(&cols, &[4, 4], &k, &dil, &pad, &st, &out)?;
    assert_eq!(
        f32s(&out),
        f32s(&ops::col2im(&cols, &[4, 4], &k, &dil, &pad, &st)?)
    );
    let wrong = empty(&[1, 2, 4, 4], DType::F64);
    assert!(ops::col2im_out(&cols, &[4, 4], &k, &dil, &pad, &st, &wrong).is_err());

    let x = ramp(&[2, 3], 0.0);
    let mask = Tensor::from_slice(&[true, false, true, false, false, true], &[2, 3])?;
    let src = ramp(&[6], 100.0);
    let out = empty(&[0], DType::F32);
    ops::masked_scatter_out(&x, &mask, &src, &out)?;
    assert_eq!(f32s(&out), [100.0, 1.0, 101.0, 3.0, 4.0, 102.0]);
    assert_eq!(f32s(&out), f32s(&ops::masked_scatter(&x, &mask, &src)?));
    Ok(())
}

#[test]
fn a_non_contiguous_out_is_written_through_its_strides() -> Result<()> {
    init();
    let x = ramp(&[2, 3], 1.0);
    let base = empty(&[3, 2], DType::F32);
    let out = ops::transpose_int(&base, 0, 1)?; // [2, 3], not contiguous
    ops::roll_out::call(&x, &[1], &[1], &out)?;
    assert_eq!(
        f32s(&ops::contiguous(&out)?),
        f32s(&ops::roll::call(&x, &[1], &[1])?)
    );
    assert_eq!(f32s(&base), [3.0, 6.0, 1.0, 4.0, 2.0, 5.0]);
    Ok(())
}

#[test]
fn sum_out_takes_the_dtype_of_the_functional_result() -> Result<()> {
    init();
    let x = ramp(&[2, 3], 0.0);
    // Wrongly sized: a scalar result, `out` had 4 elements.
    let out = empty(&[4], DType::F32);
    ops::sum_out(&x, &out)?;
    assert_eq!(out.sizes(), [] as [i64; 0]);
    assert_eq!(f32s(&out), [15.0]);

    // An integer sum is i64; an i64 `out` takes it, an i32 one is an error that
    // names the op and leaves `out` as it was.
    let i = Tensor::from_slice(&[1i32, 2, 3], &[3])?;
    let out = empty(&[0], DType::I64);
    ops::sum_out(&i, &out)?;
    assert_eq!(out.to_vec::<i64>()?, [6]);
    let bad = empty(&[2], DType::I32);
    let e = ops::sum_out(&i, &bad).expect_err("i64 result into an i32 out");
    assert!(e.to_string().contains("sum.out"), "{e}");
    assert_eq!(bad.sizes(), [2]);

    // The dtype option: `out` must have the requested dtype.
    let out = empty(&[0], DType::F64);
    ops::sum_out::call(&x, Some(DType::F64), &out)?;
    assert_eq!(out.to_vec::<f64>()?, [15.0]);
    Ok(())
}

#[test]
fn a_castable_but_different_dtype_is_still_an_error() -> Result<()> {
    // Structured out= kernels cast into any dtype the result can be cast to; the
    // generated ones do not (PyTorch's copy for them demands the same dtype).
    init();
    let x = ramp(&[3], -1.0);
    let out = empty(&[3], DType::F64);
    let e = ops::relu_out(&x, &out).expect_err("f32 result into an f64 out");
    assert!(e.to_string().contains("relu.out"), "{e}");
    let e = ops::prod_out(&x, &out).expect_err("f32 result into an f64 out");
    assert!(e.to_string().contains("prod.out"), "{e}");
    // add.Scalar_out and mul.Scalar_out are generated too.
    let e = ops::add_scalar_out::call(&x, &Scalar::Int(1), &Scalar::Int(1), &out)
        .expect_err("f32 result into an f64 out");
    assert!(e.to_string().contains("add.Scalar_out"), "{e}");
    let same = empty(&[0], DType::F32);
    ops::mul_scalar_out::call(&x, &Scalar::Float(2.0), &same)?;
    assert_eq!(f32s(&same), [-2.0, 0.0, 2.0]);
    // ... while the structured `add.out` casts.
    ops::add_out(&x, &x, &out)?;
    assert_eq!(out.to_vec::<f64>()?, [-2.0, 0.0, 2.0]);
    Ok(())
}

#[test]
fn factory_like_ops_take_the_dtype_from_out() -> Result<()> {
    init();
    let x = Tensor::from_slice(&[1.5f32, -2.5, 3.0, 4.0], &[2, 2])?;
    let out = empty(&[1], DType::F64);
    ops::_to_copy_out(&x, &out)?;
    assert_eq!(out.sizes(), [2, 2]);
    assert_eq!(out.to_vec::<f64>()?, [1.5, -2.5, 3.0, 4.0]);
    let out = empty(&[0], DType::I64);
    ops::_to_copy_out(&x, &out)?;
    assert_eq!(out.to_vec::<i64>()?, [1, -2, 3, 4]);

    let out = empty(&[3], DType::I32);
    ops::full_like_out(&x, &Scalar::Int(7), &out)?;
    assert_eq!(out.sizes(), [2, 2]);
    assert_eq!(out.to_vec::<i32>()?, [7; 4]);
    let out = empty(&[0], DType::F64);
    ops::ones_like_out(&x, &out)?;
    assert_eq!(out.to_vec::<f64>()?, [1.0; 4]);
    ops::zeros_like_out(&x, &out)?;
    assert_eq!(out.to_vec::<f64>()?, [0.0; 4]);
    Ok(())
}

#[test]
fn native_layer_norm_out_fills_three_outs() -> Result<()> {
    init();
    let x = ramp(&[2, 4], -3.0);
    let w = Tensor::from_slice(&[1.0f32, 2.0, 0.5, -1.0], &[4])?;
    let b = Tensor::from_slice(&[0.0f32, 1.0, 0.0, 1.0], &[4])?;
    let (y, mean, rstd) = ops::native_layer_norm(&x, &[4], Some(&w), Some(&b), 1e-5)?;
    let outs = [
        empty(&[0], DType::F32),
        empty(&[5], DType::F32),
        empty(&[2, 1], DType::F32),
    ];
    let (o0, o1, o2) = ops::native_layer_norm_out(
        &x,
        &[4],
        Some(&w),
        Some(&b),
        1e-5,
        &outs[0],
        &outs[1],
        &outs[2],
    )?;
    for ((o, r), want) in [o0, o1, o2].iter().zip(&outs).zip([&y, &mean, &rstd]) {
        assert!(o.is_same(r));
        assert_eq!(o.sizes(), want.sizes());
        assert!(close(&f32s(o), &f32s(want)));
    }
    // One bad out: an error, and none of the three is touched.
    let outs = [
        empty(&[0], DType::F32),
        empty(&[0], DType::F64),
        empty(&[0], DType::F32),
    ];
    let e = ops::native_layer_norm_out(&x, &[4], None, None, 1e-5, &outs[0], &outs[1], &outs[2])
        .expect_err("an f64 mean out");
    assert!(e.to_string().contains("native_layer_norm.out"), "{e}");
    assert!(outs.iter().all(|o| o.sizes() == [0]));
    Ok(())
}

#[test]
fn backward_out_writes_only_the_requested_gradients() -> Result<()> {
    init();
    let x = ramp(&[1, 1, 3, 3], 0.0);
    let w = ramp(&[1, 1, 2, 2], 1.0);
    let go = ramp(&[1, 1, 2, 2], -1.0);
    let (gi, _, gb) = ops::convolution_backward::call(
        &go,
        &x,
        &w,
        Some(&[1][..]),
        &[1, 1],
        &[0, 0],
        &[1, 1],
        false,
        &[0, 0],
        1,
        &[true, false, true],
    )?;
    let outs = [
        empty(&[0], DType::F32),
        empty(&[2], DType::F32),
        empty(&[0], DType::F32),
    ];
    ops::convolution_backward_out::call(
        &go,
        &x,
        &w,
        Some(&[1][..]),
        &[1, 1],
        &[0, 0],
        &[1, 1],
        false,
        &[0, 0],
        1,
        &[true, false, true],
        &outs[0],
        &outs[1],
        &outs[2],
    )?;
    assert_eq!(outs[0].sizes(), [1, 1, 3, 3]);
    assert!(close(&f32s(&outs[0]), &f32s(&gi)));
    assert_eq!(outs[1].sizes(), [2], "not requested: left as given");
    assert!(close(&f32s(&outs[2]), &f32s(&gb)));
    Ok(())
}

/// Runs `native_batch_norm` and `native_batch_norm.out` (into `outs`) on the same
/// input, each with its own copy of the running statistics, and checks that both
/// give the same results and leave the same running statistics.
fn batch_norm_both_ways(training: bool, affine: bool, outs: [&Tensor; 3]) -> Result<()> {
    let x = ramp(&[2, 3, 2], -4.0);
    let w = Tensor::from_slice(&[1.0f32, 0.5, 2.0], &[3])?;
    let b = Tensor::from_slice(&[0.0f32, 1.0, -1.0], &[3])?;
    let (w, b) = if affine {
        (Some(&w), Some(&b))
    } else {
        (None, None)
    };
    let stats = || -> Result<(Tensor, Tensor)> {
        Ok((
            Tensor::from_slice(&[0.0f32, 0.5, 1.0], &[3])?,
            Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])?,
        ))
    };
    let (rm, rv) = stats()?;
    let (y, sm, si) = ops::native_batch_norm(&x, w, b, Some(&rm), Some(&rv), training, 0.1, 1e-5)?;
    let (rm2, rv2) = stats()?;
    let [o0, o1, o2] = outs;
    let r = ops::native_batch_norm_out(
        &x,
        w,
        b,
        Some(&rm2),
        Some(&rv2),
        training,
        0.1,
        1e-5,
        o0,
        o1,
        o2,
    )?;
    for ((got, o), want) in [r.0, r.1, r.2].iter().zip(outs).zip([&y, &sm, &si]) {
        assert!(got.is_same(o));
        assert_eq!(o.sizes(), want.sizes());
        assert!(close(&f32s(o), &f32s(want)));
    }
    assert!(close(&f32s(&rm2), &f32s(&rm)));
    assert!(close(&f32s(&rv2), &f32s(&rv)));
    Ok(())
}

#[test]
fn native_batch_norm_out_matches_the_functional_op() -> Result<()> {
    init();
    // Training: batch statistics, running statistics updated in place.
    let outs = [
        empty(&[0], DType::F32),
        empty(&[9], DType::F32),
        empty(&[0], DType::F32),
    ];
    batch_norm_both_ways(true, true, [&outs[0], &outs[1], &outs[2]])?;
    assert_eq!(outs[1].sizes(), [3]);
    // Evaluation: running statistics (the saved ones come back as the functional's).
    let outs = [
        empty(&[2, 3, 2], DType::F32),
        empty(&[3], DType::F32),
        empty(&[3], DType::F32),
    ];
    batch_norm_both_ways(false, false, [&outs[0], &outs[1], &outs[2]])?;
    // An out of another dtype is an error that names the op.
    let f64_out = empty(&[0], DType::F64);
    let e = batch_norm_both_ways(false, true, [&f64_out, &outs[1], &outs[2]]).expect_err("f64 out");
    assert!(e.to_string().contains("native_batch_norm.out"), "{e}");
    Ok(())
}

#[test]
fn linear_out_with_and_without_bias() -> Result<()> {
    init();
    let w = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0], &[2, 3])?;
    let bias = Tensor::from_slice(&[10.0f32, 20.0], &[2])?;
    for shape in [&[2, 3][..], &[2, 2, 3], &[3]] {
        let x = ramp(shape, -1.0);
        for b in [None, Some(&bias)] {
            let want = ops::linear::call(&x, &w, b)?;
            let out = empty(&[5], DType::F32);
            let r = ops::linear_out::call(&x, &w, b, &out)?;
            assert!(r.is_same(&out));
            assert_eq!(out.sizes(), want.sizes(), "{shape:?} bias {}", b.is_some());
            assert_eq!(f32s(&out), f32s(&want), "{shape:?} bias {}", b.is_some());
        }
    }
    // Shapes on meta tensors.
    let m = |s: &[i64]| Tensor::empty(s, DType::F32, Device::meta());
    let out = m(&[0])?;
    ops::linear_out::call(&m(&[4, 5, 3])?, &m(&[2, 3])?, Some(&m(&[2])?), &out)?;
    assert_eq!(out.sizes(), [4, 5, 2]);
    assert!(out.device().is_meta());
    ops::linear_out(&m(&[3])?, &m(&[2, 3])?, &out)?;
    assert_eq!(out.sizes(), [2]);
    // Mismatched inner sizes are an error, not a panic.
    assert!(ops::linear_out(&ramp(&[2, 4], 0.0), &w, &empty(&[0], DType::F32)).is_err());
    Ok(())
}

#[test]
fn boxed_call_by_name() -> Result<()> {
    init();
    let x = ramp(&[2, 2], 1.0);
    let out = empty(&[3], DType::F32);
    let mut stack = vec![
        IValue::Tensor(x.clone()),
        IValue::None,
        IValue::Tensor(out.clone()),
    ];
    Dispatcher::global().call_boxed("aten::sum.out", &mut stack)?;
    assert_eq!(stack.len(), 1);
    match stack.pop() {
        Some(IValue::Tensor(r)) => {
            assert!(r.is_same(&out));
            assert_eq!(f32s(&r), [10.0]);
        }
        other => panic!("unexpected return {other:?}"),
    }
    Ok(())
}
