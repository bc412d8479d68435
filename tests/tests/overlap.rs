//! PyTorch's memory-overlap rules, checked at the entry of every op that writes a
//! tensor: a written tensor whose elements share memory (an expanded
//! tensor) is refused, an output that partly overlaps an input is refused, and the
//! same tensor as input and output works. Typed and boxed calls alike.

use opal::{ops, IValue, Scalar, Tensor};

fn init() {
    opal_cpu::init().expect("CPU backend registers");
}

fn iota(n: i64) -> Tensor {
    let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
    Tensor::from_slice(&v, &[n]).expect("tensor")
}

fn assert_err_mentions<T: std::fmt::Debug>(r: opal::Result<T>, parts: &[&str]) {
    let msg = r.expect_err("expected an error").to_string();
    for p in parts {
        assert!(msg.contains(p), "{msg:?} does not mention {p:?}");
    }
}

const INTERNAL: &str =
    "more than one element of the written-to tensor refers to a single memory location";
const PARTIAL: &str =
    "some elements of an input tensor and the written-to tensor refer to a single memory location";

#[test]
fn in_place_on_an_expanded_tensor_is_refused() {
    init();
    let x = Tensor::from_slice(&[1.0f32], &[1]).unwrap();
    let big = ops::expand(&x, &[1 << 20]).unwrap();
    assert_err_mentions(
        ops::add_scalar_(&big, &Scalar::Float(1.0)),
        &["add_.Scalar", INTERNAL],
    );
    // Nothing was written.
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![1.0]);
    let col = ops::expand(
        &Tensor::from_slice(&[1.0f32, 2.0], &[2, 1]).unwrap(),
        &[2, 3],
    )
    .unwrap();
    assert_err_mentions(ops::neg_(&col), &["neg_", INTERNAL]);
    assert_err_mentions(ops::mul_tensor_(&col, &col), &[INTERNAL]);
}

#[test]
fn shifted_views_of_one_storage_are_refused() {
    init();
    let a = iota(8);
    let tail = a.as_strided(&[7], &[1], 1).unwrap(); // a[1:]
    let head = a.as_strided(&[7], &[1], 0).unwrap(); // a[:-1]
    assert_err_mentions(ops::add_tensor_(&tail, &head), &["add_.Tensor", PARTIAL]);
    assert_eq!(
        a.to_vec::<f32>().unwrap(),
        (0..8).map(|i| i as f32).collect::<Vec<_>>()
    );
    // out= into a shifted view of an input.
    assert_err_mentions(ops::add_out(&head, &head, &tail), &["add.out", PARTIAL]);
}

#[test]
fn in_place_with_a_transposed_self_is_refused() {
    init();
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let at = ops::t(&a).unwrap();
    assert_err_mentions(ops::add_tensor_(&a, &at), &[PARTIAL]);
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn full_overlap_and_disjoint_views_work() {
    init();
    let a = iota(4);
    ops::add_tensor_(&a, &a).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![0.0, 2.0, 4.0, 6.0]);
    let b = iota(4);
    let out = ops::add_out(&a, &b, &a).unwrap();
    assert!(out.is_same(&a));
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![0.0, 3.0, 6.0, 9.0]);
    // Two halves of one storage do not overlap.
    let c = iota(8);
    let lo = c.as_strided(&[4], &[1], 0).unwrap();
    let hi = c.as_strided(&[4], &[1], 4).unwrap();
    ops::add_tensor_(&lo, &hi).unwrap();
    assert_eq!(lo.to_vec::<f32>().unwrap(), vec![4.0, 6.0, 8.0, 10.0]);
    // Geometry-only in-place ops are not writes: an expanded tensor may be transposed.
    let e = ops::expand(&Tensor::from_slice(&[1.0f32], &[1, 1]).unwrap(), &[3, 3]).unwrap();
    ops::transpose_(&e, 0, 1).unwrap();
    assert_eq!(e.sizes(), &[3, 3]);
}

#[test]
fn boxed_calls_apply_the_same_rules() {
    init();
    let x = Tensor::from_slice(&[1.0f32], &[1]).unwrap();
    let big = ops::expand(&x, &[16]).unwrap();
    let mut stack = vec![
        IValue::Tensor(big),
        IValue::Scalar(Scalar::Float(1.0)),
        IValue::Scalar(Scalar::Int(1)),
    ];
    let r = opal::dispatch::Dispatcher::global().call_boxed("aten::add_.Scalar", &mut stack);
    assert_err_mentions(r, &[INTERNAL]);
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![1.0]);
}

#[test]
fn overlap_classification() {
    use opal::tensor::{internal_overlap, overlap, Overlap};
    let a = iota(8);
    let v = a.as_strided(&[2, 2], &[1, 2], 0).unwrap(); // transposed 2x2 block
    let w = a.as_strided(&[2, 2], &[2, 1], 0).unwrap();
    assert_eq!(overlap(&v, &w), Overlap::Partial);
    assert_eq!(overlap(&w, &w.clone()), Overlap::Full);
    assert_eq!(
        overlap(&w, &a.as_strided(&[4], &[1], 4).unwrap()),
        Overlap::No
    );
    let gaps = a.as_strided(&[2], &[3], 0).unwrap();
    assert_eq!(overlap(&gaps, &w), Overlap::TooHard);
    assert_eq!(
        internal_overlap(&a.as_strided(&[3], &[0], 0).unwrap()),
        Overlap::Full
    );
    assert_eq!(internal_overlap(&gaps), Overlap::TooHard);
    assert_eq!(internal_overlap(&v), Overlap::No);
}

/// `cat.out` refuses an `out` that is one of its inputs or overlaps one, fully or
/// partly (PyTorch checks each input against `out`, not only partial overlap as
/// element-wise ops do), on CPU and on Meta, typed and boxed.
#[test]
fn cat_out_refuses_an_out_aliasing_an_input() {
    init();
    opal_meta::init().expect("Meta backend registers");
    for dev in [opal::Device::cpu(), opal::Device::meta()] {
        let out = opal::Tensor::empty(&[4], opal::DType::F32, dev).unwrap();
        let other = opal::Tensor::empty(&[4], opal::DType::F32, dev).unwrap();
        // The very tensor, a view of the same elements, and a window of it.
        let same_elements = out.as_strided(&[4], &[1], 0).unwrap();
        let window = out.as_strided(&[2], &[1], 1).unwrap();
        for (label, input) in [
            ("out itself", out.clone()),
            ("a view of out's elements", same_elements),
            ("a window of out", window),
        ] {
            let r = ops::cat_out::call(&[input.clone(), other.clone()], 0, &out);
            let msg = r.expect_err(label).to_string();
            assert!(msg.contains("cat"), "{label}: {msg}");
            assert!(
                msg.contains("refer to a single memory location"),
                "{label}: {msg}"
            );
        }
        // Boxed calls apply the same rule.
        let mut stack = vec![
            IValue::TensorList(vec![out.clone(), other.clone()]),
            IValue::Int(0),
            IValue::Tensor(out.clone()),
        ];
        let r = opal::dispatch::Dispatcher::global().call_boxed("aten::cat.out", &mut stack);
        assert!(
            r.is_err(),
            "boxed cat.out accepted an aliased out on {dev:?}"
        );
        // A disjoint out still works.
        let fresh = opal::Tensor::empty(&[8], opal::DType::F32, dev).unwrap();
        ops::cat_out::call(&[out.clone(), other.clone()], 0, &fresh).expect("disjoint out");
    }
}
