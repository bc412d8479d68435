//! Meta kernels on real meta tensors: sizes, strides, storage offsets and dtypes of
//! results, `out=` resizing and in-place checks, and errors naming the op.

use opal::{DType, Device, MemoryFormat, Scalar, Tensor};
use opal_meta::kernels::{factory, index, nn, pointwise as pw, reduce, view};

fn meta(sizes: &[i64], dtype: DType) -> Tensor {
    Tensor::empty(sizes, dtype, Device::meta()).unwrap()
}

fn meta_strided(sizes: &[i64], strides: &[i64], dtype: DType) -> Tensor {
    Tensor::empty_strided(sizes, strides, dtype, Device::meta()).unwrap()
}

fn geo(t: &Tensor) -> (Vec<i64>, Vec<i64>, DType) {
    (t.sizes().to_vec(), t.strides().to_vec(), t.dtype())
}

#[test]
fn results_live_on_meta_and_promote() {
    let a = meta(&[3, 1, 5], DType::F32);
    let b = meta(&[4, 1], DType::I64);
    let r = pw::add_tensor(&a, &b, &Scalar::Int(1)).unwrap();
    assert!(r.device().is_meta());
    assert_eq!(geo(&r), (vec![3, 4, 5], vec![20, 5, 1], DType::F32));
    // Integer tensor with a float scalar: the default float dtype.
    let i = meta(&[2], DType::I32);
    assert_eq!(
        pw::mul_scalar(&i, &Scalar::Float(0.5)).unwrap().dtype(),
        DType::F32
    );
    assert_eq!(pw::div_tensor(&i, &i).unwrap().dtype(), DType::F32);
    assert_eq!(
        pw::div_tensor_mode(&i, &i, Some("floor")).unwrap().dtype(),
        DType::I32
    );
    assert_eq!(pw::eq_tensor(&a, &b).unwrap().dtype(), DType::Bool);
    assert_eq!(pw::exp(&i).unwrap().dtype(), DType::F32);
    assert_eq!(pw::floor(&i).unwrap().dtype(), DType::I32);
    let e = pw::add_tensor(&i, &i, &Scalar::Float(0.5))
        .unwrap_err()
        .to_string();
    assert!(e.contains("add") && e.contains("alpha"), "{e}");
    let e = pw::add_tensor(
        &meta(&[3], DType::F32),
        &meta(&[4], DType::F32),
        &Scalar::Int(1),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("add") && e.contains("non-singleton dimension 0"),
        "{e}"
    );
}

#[test]
fn elementwise_results_follow_input_layout() {
    let xt = meta_strided(&[3, 2], &[1, 3], DType::F32); // a transposed [2, 3]
    assert_eq!(pw::neg(&xt).unwrap().strides(), &[1, 3]);
    assert_eq!(
        pw::add_tensor(&xt, &meta(&[2], DType::F32), &Scalar::Int(1))
            .unwrap()
            .strides(),
        &[1, 3]
    );
}

#[test]
fn out_resizes_and_checks_casts() {
    let a = meta(&[2, 3], DType::F32);
    let out = meta(&[0], DType::F64);
    let r = pw::add_out(&a, &a, &Scalar::Int(1), &out).unwrap();
    assert!(r.is_same(&out));
    assert_eq!(out.sizes(), &[2, 3]);
    let bad = meta(&[2, 3], DType::I64);
    let e = pw::add_out(&a, &a, &Scalar::Int(1), &bad)
        .unwrap_err()
        .to_string();
    assert!(e.contains("can't be cast"), "{e}");
    // Matrix products need the exact dtype (`mm.out` is derived from `backend.yaml`,
    // so called through the dispatcher).
    opal_meta::init().unwrap();
    let mm_out = |o: &Tensor| opal::ops::mm_out::call(&a, &meta(&[3, 4], DType::F32), o);
    assert!(mm_out(&meta(&[0], DType::F64)).is_err());
    mm_out(&meta(&[0], DType::F32)).unwrap();
    // Reductions without a requested dtype compute in out's dtype.
    let o = meta(&[], DType::F64);
    reduce::sum_intlist_out(&a, None, false, None, &o).unwrap();
    assert_eq!(o.sizes(), &[] as &[i64]);
}

#[test]
fn inplace_cannot_broadcast_self() {
    let small = meta(&[3], DType::F32);
    let big = meta(&[2, 3], DType::F32);
    assert!(pw::add_tensor_(&big, &small, &Scalar::Int(1))
        .unwrap()
        .is_same(&big));
    let e = pw::add_tensor_(&small, &big, &Scalar::Int(1))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("add_.Tensor") && e.contains("broadcast shape"),
        "{e}"
    );
    let ints = meta(&[3], DType::I64);
    assert!(pw::div_tensor_(&ints, &ints).is_err());
}

#[test]
fn reductions() {
    let x = meta(&[2, 3, 4], DType::F32);
    assert_eq!(
        geo(&reduce::sum_dim_intlist(&x, Some(&[1]), true, None).unwrap()),
        (vec![2, 1, 4], vec![4, 4, 1], DType::F32)
    );
    assert_eq!(
        reduce::sum(&meta(&[4], DType::Bool), None).unwrap().dtype(),
        DType::I64
    );
    assert!(reduce::mean_dim(&meta(&[4], DType::I64), None, false, None).is_err());
    let (v, i) = reduce::max_dim(&x, -1, false).unwrap();
    assert_eq!((v.sizes(), i.dtype()), (&[2i64, 3][..], DType::I64));
    assert_eq!(
        reduce::argmax(&x, None, false).unwrap().sizes(),
        &[] as &[i64]
    );
    assert_eq!(
        reduce::var_correction(&x, Some(&[0, 2]), None, false)
            .unwrap()
            .sizes(),
        &[3]
    );
    assert!(reduce::amax(&meta(&[0, 3], DType::F32), &[0], false).is_err());
    let (v, _) = reduce::topk(&x, 2, 1, true, true).unwrap();
    assert_eq!(v.sizes(), &[2, 2, 4]);
    let f16 = meta(&[3, 6], DType::F16);
    let s = opal::rules::softmax::_softmax(&f16, 1, true).and_then(reduce::softmax);
    assert_eq!(s.unwrap().dtype(), DType::F32);
}

#[test]
fn views_share_storage_with_correct_strides() {
    let x = meta(&[4, 6], DType::F32);
    let s = opal::rules::view::slice_tensor(&x, 1, Some(1), None, 2)
        .and_then(view::pick)
        .unwrap();
    assert_eq!(
        (s.sizes(), s.strides(), s.storage_offset()),
        (&[4i64, 3][..], &[6i64, 2][..], 1)
    );
    assert!(s.shares_storage(&x));
    let t = view::t(&x).unwrap();
    assert_eq!(t.strides(), &[1, 6]);
    // Viewing a transposed tensor flat is impossible; reshape copies.
    assert!(view::view(&t, &[24]).is_err());
    let r = view::reshape(&t, &[24]).unwrap();
    assert!(!r.shares_storage(&x));
    let e = view::expand(&meta(&[3, 1], DType::F32), &[2, 3, 4], false).unwrap();
    assert_eq!(e.strides(), &[0, 1, 0]);
    let parts = view::split_tensor(&x, 4, 1).unwrap();
    assert_eq!(
        parts.iter().map(|p| p.storage_offset()).collect::<Vec<_>>(),
        vec![0, 4]
    );
    assert_eq!(parts[1].sizes(), &[4, 2]);
    assert!(view::contiguous(&x, MemoryFormat::Contiguous)
        .unwrap()
        .is_same(&x));
    let c = view::contiguous(&t, MemoryFormat::Contiguous).unwrap();
    assert_eq!(c.strides(), &[4, 1]);
}

#[test]
fn nn_shapes() {
    let input = meta(&[2, 3, 8, 8], DType::F32);
    let w = meta(&[4, 3, 3, 3], DType::F32);
    let b = meta(&[4], DType::F32);
    let y = opal::rules::conv::convolution(
        &input,
        &w,
        Some(&b),
        &[2, 2],
        &[1, 1],
        &[1, 1],
        false,
        &[0, 0],
        1,
    )
    .and_then(nn::convolution)
    .unwrap();
    assert_eq!(y.sizes(), &[2, 4, 4, 4]);
    assert!(opal::rules::conv::convolution(
        &input,
        &meta(&[4, 3, 3, 3], DType::F64),
        None,
        &[1],
        &[0],
        &[1],
        false,
        &[0],
        1
    )
    .and_then(nn::convolution)
    .is_err());
    let (v, i) = opal::rules::pool::max_pool2d_with_indices(&input, &[2], &[], &[0], &[1], false)
        .and_then(opal_meta::kernels::pool::max_pool)
        .unwrap();
    assert_eq!((v.sizes(), i.dtype()), (&[2i64, 3, 4, 4][..], DType::I64));
    let (o, m, r) = opal::rules::norm::native_layer_norm(
        &meta(&[2, 3, 4], DType::BF16),
        &[4],
        None,
        None,
        1e-5,
    )
    .and_then(opal_meta::kernels::norm::native_layer_norm)
    .unwrap();
    assert_eq!(
        (o.sizes(), m.sizes(), r.dtype()),
        (&[2i64, 3, 4][..], &[2i64, 3, 1][..], DType::BF16)
    );
    let (_, sm, _) =
        opal::rules::norm::native_batch_norm(&input, None, None, None, None, true, 0.1, 1e-5)
            .and_then(opal_meta::kernels::norm::native_batch_norm)
            .unwrap();
    assert_eq!(sm.sizes(), &[3]);
    let (out, tw) = opal::rules::loss::nll_loss_forward(
        &meta(&[6, 5], DType::F32),
        &meta(&[6], DType::I64),
        None,
        0,
        -100,
    )
    .and_then(opal_meta::kernels::loss::nll_loss_forward)
    .unwrap();
    assert_eq!((out.sizes(), tw.sizes()), (&[6i64][..], &[] as &[i64]));
    assert!(nn::one_hot(&meta(&[3], DType::I64), -1).is_err());
    assert_eq!(
        nn::one_hot(&meta(&[3], DType::I64), 5).unwrap().sizes(),
        &[3, 5]
    );
}

#[test]
fn channels_last_propagates() {
    let cl = meta_strided(&[2, 3, 4, 5], &[60, 1, 15, 3], DType::F32);
    assert_eq!(pw::relu(&cl).unwrap().strides(), &[60, 1, 15, 3]);
    let w = meta(&[8, 3, 3, 3], DType::F32);
    let y = opal::rules::conv::convolution(&cl, &w, None, &[1], &[1], &[1], false, &[0], 1)
        .and_then(nn::convolution)
        .unwrap();
    assert_eq!(y.strides(), &[160, 1, 40, 8]);
}

#[test]
fn index_and_join() {
    let x = meta(&[2, 3, 4], DType::F64);
    let i1 = meta(&[4, 1], DType::I64);
    let i2 = meta(&[3], DType::I64);
    let r = index::index_tensor(&x, &[Some(i1), Some(i2)]).unwrap();
    assert_eq!(r.sizes(), &[4, 3, 4]);
    assert!(index::index_tensor(&x, &[Some(meta(&[2], DType::Bool))]).is_err());
    let c = index::cat(&[meta(&[2, 3], DType::F32), meta(&[2, 1], DType::F64)], 1).unwrap();
    assert_eq!(geo(&c), (vec![2, 4], vec![4, 1], DType::F64));
    assert_eq!(
        index::stack(&[meta(&[2], DType::F32), meta(&[2], DType::F32)], 1)
            .unwrap()
            .sizes(),
        &[2, 2]
    );
    assert_eq!(
        index::constant_pad_nd(&x, &[1, 1], &Scalar::Int(0))
            .unwrap()
            .sizes(),
        &[2, 3, 6]
    );
}

#[test]
fn factories() {
    let m = Some(Device::meta());
    assert_eq!(
        opal::rules::factory::full(&[2, 3], &Scalar::Bool(true), None, None, m, None)
            .and_then(factory::filled)
            .unwrap()
            .dtype(),
        DType::Bool
    );
    assert_eq!(
        opal::rules::factory::arange_start_step(
            &Scalar::Int(0),
            &Scalar::Int(10),
            &Scalar::Int(3),
            None,
            None,
            m,
            None
        )
        .and_then(factory::arange_start_step)
        .unwrap()
        .sizes(),
        &[4]
    );
    let f = opal::rules::factory::arange_start_step(
        &Scalar::Int(0),
        &Scalar::Float(1.0),
        &Scalar::Float(0.1),
        None,
        None,
        m,
        None,
    )
    .and_then(factory::arange_start_step)
    .unwrap();
    assert_eq!((f.sizes(), f.dtype()), (&[10i64][..], DType::F32));
    assert!(
        opal::rules::factory::zeros(&[2], None, None, Some(Device::cpu()), None)
            .and_then(factory::filled)
            .is_err()
    );
    assert!(factory::rand(&[2], Some(DType::I64), None, m, None).is_err());
    let xt = meta_strided(&[3, 2], &[1, 3], DType::F32);
    assert_eq!(
        factory::zeros_like(&xt, None, None, None, None, None)
            .unwrap()
            .strides(),
        &[1, 3]
    );
}

#[test]
fn autogen_out_forms_resize_with_the_result_dtype() {
    // Generated from `backend.yaml`'s `out_copy:` rule, so called through the
    // dispatcher.
    use opal::ops;
    opal_meta::init().unwrap();
    let x = meta(&[2, 3], DType::F32);
    let out = meta(&[0], DType::F32);
    ops::relu_out::call(&x, &out).unwrap();
    assert_eq!(out.sizes(), &[2, 3]);
    let o = meta(&[5], DType::F32);
    ops::sum_out::call(&x, None, &o).unwrap();
    assert_eq!(o.sizes(), &[] as &[i64]);
    // The derived out= copy does not convert: an int64 `out` for a float sum is an
    // error (as in PyTorch), while `_to_copy.out` converts to `out`'s dtype.
    assert!(ops::sum_out::call(&x, None, &meta(&[0], DType::I64)).is_err());
    let c = meta(&[0], DType::I64);
    ops::_to_copy_out::call(&x, false, None, &c).unwrap();
    assert_eq!((c.sizes(), c.dtype()), (&[2i64, 3][..], DType::I64));
    // Outputs the mask did not request are left as given.
    let (g, i, w) = (
        meta(&[2, 4, 6, 6], DType::F32),
        meta(&[2, 3, 8, 8], DType::F32),
        meta(&[4, 3, 3, 3], DType::F32),
    );
    let outs = [
        meta(&[0], DType::F32),
        meta(&[0], DType::F32),
        meta(&[0], DType::F32),
    ];
    let (a, _, c) = ops::convolution_backward_out::call(
        &g,
        &i,
        &w,
        None,
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
    )
    .unwrap();
    assert_eq!(
        (a.sizes(), outs[1].sizes(), c.sizes()),
        (&[2i64, 3, 8, 8][..], &[0i64][..], &[4i64][..])
    );
}

#[test]
fn wrapped_numbers_promote_like_scalars() {
    // A Python number passed as a tensor (a zero-dim CPU wrapped number) may meet
    // meta tensors and promotes like a scalar, unlike a zero-dim float64 tensor.
    let ints = meta(&[3], DType::I32);
    let wrapped = Tensor::wrapped_number(&Scalar::Float(2.5)).unwrap();
    assert_eq!(pw::mul_tensor(&ints, &wrapped).unwrap().dtype(), DType::F32);
    let zero_dim = meta(&[], DType::F64);
    assert_eq!(
        pw::mul_tensor(&ints, &zero_dim).unwrap().dtype(),
        DType::F64
    );
    // Other CPU tensors cannot mix with meta ones.
    let cpu = Tensor::empty(&[3], DType::F32, Device::cpu()).unwrap();
    assert!(pw::mul_tensor(&ints, &cpu).is_err());
}

#[test]
fn unrequested_gradients_are_undefined_and_undefined_inputs_are_refused() {
    let (g, i, w) = (
        meta(&[2, 4, 6, 6], DType::F32),
        meta(&[2, 3, 8, 8], DType::F32),
        meta(&[4, 3, 3, 3], DType::F32),
    );
    let conv = |g: &Tensor, mask: &[bool]| {
        opal::rules::conv::convolution_backward(
            g,
            &i,
            &w,
            None,
            &[1, 1],
            &[0, 0],
            &[1, 1],
            false,
            &[0, 0],
            1,
            mask,
        )
        .and_then(nn::convolution_backward)
    };
    let (a, b, c) = conv(&g, &[true, false, true]).unwrap();
    assert!(a.is_defined() && !b.is_defined() && c.is_defined());
    assert_eq!((a.sizes(), c.sizes()), (&[2i64, 3, 8, 8][..], &[4i64][..]));
    let (x, mean) = (meta(&[2, 5], DType::F32), meta(&[2, 1], DType::F32));
    let (a, b, c) = opal::rules::norm::native_layer_norm_backward(
        &x,
        &x,
        &[5],
        &mean,
        &mean,
        None,
        None,
        &[false, true, false],
    )
    .and_then(opal_meta::kernels::norm::native_layer_norm_backward)
    .unwrap();
    assert!(!a.is_defined() && b.is_defined() && !c.is_defined());
    // Laid out like an empty meta tensor, an undefined input must not pass for one.
    let e = conv(&Tensor::undefined(), &[true, true, true]).unwrap_err();
    assert!(e.to_string().contains("undefined"), "{e}");
}
