//! Allocations sized by user input fail with an `Err` naming the op and the bytes
//!: never an abort (allocation failure) or a capacity-overflow
//! panic, and quickly, without touching the memory asked for.

use opal::{ops, Scalar, Tensor};
use std::time::{Duration, Instant};

fn init() {
    opal_cpu::init().expect("CPU backend registers");
    opal_meta::init().expect("Meta backend registers");
}

/// `f` fails within seconds with a message naming `op` (and `bytes`, when the size
/// is a number of bytes at all rather than an overflow of i64).
fn refused<T: std::fmt::Debug>(op: &str, f: impl FnOnce() -> opal::Result<T>) -> String {
    let t0 = Instant::now();
    let e = f()
        .expect_err("a huge allocation must be refused")
        .to_string();
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "{op} took {:?}",
        t0.elapsed()
    );
    assert!(e.contains(op), "error for {op} does not name it: {e}");
    e
}

/// [`refused`], with the number of bytes in the message.
fn fails_fast<T: std::fmt::Debug>(op: &str, f: impl FnOnce() -> opal::Result<T>) -> String {
    let e = refused(op, f);
    assert!(
        e.contains("bytes"),
        "error for {op} does not give the bytes: {e}"
    );
    e
}

#[test]
fn to_vec_of_a_huge_expanded_view_is_an_error() {
    init();
    let one = Tensor::from_slice(&[1.0f32], &[1]).unwrap();
    let big = ops::expand(&one, &[1 << 40]).unwrap();
    fails_fast("to_vec", || big.to_vec::<f32>());
    fails_fast("to_bytes", || big.to_bytes());
    let huge = ops::expand(&one, &[1 << 62]).unwrap();
    fails_fast("to_vec", || huge.to_vec::<f32>());
}

#[test]
fn huge_factories_are_errors() {
    init();
    let arange = |end: i64| ops::arange_start_step(&Scalar::Int(0), &Scalar::Int(end));
    fails_fast("arange", || arange(1 << 40));
    fails_fast("arange", || arange(i64::MAX));
    refused("arange", || {
        ops::arange_start_step::with(
            &Scalar::Float(0.0),
            &Scalar::Float(1e300),
            ops::arange_start_step::Options::default().step(Scalar::Float(1e-300)),
        )
    });
    fails_fast("eye", || ops::eye(1 << 21));
    fails_fast("eye", || ops::eye(1 << 31));
    refused("eye", || ops::eye(i64::MAX));
    fails_fast("linspace", || {
        ops::linspace(&Scalar::Int(0), &Scalar::Int(1), 1 << 40)
    });
    fails_fast("rand", || ops::rand(&[1 << 40]));
    fails_fast("randn", || ops::randn(&[1 << 40]));
    fails_fast("full", || ops::full(&[1 << 40], &Scalar::Int(1)));
    refused("full", || ops::full(&[1 << 32, 1 << 32], &Scalar::Int(1)));
    refused("zeros", || ops::zeros(&[1 << 30, 1 << 30, 1 << 30]));
}

#[test]
fn cat_of_huge_expanded_tensors_is_an_error() {
    init();
    let one = Tensor::from_slice(&[1.0f32], &[1]).unwrap();
    let big = ops::expand(&one, &[1 << 40]).unwrap();
    fails_fast("cat", || ops::cat(&[big.clone(), big.clone()]));
    let max = ops::expand(&one, &[i64::MAX]).unwrap();
    refused("cat", || ops::cat(&[max.clone(), max]));
}

#[test]
fn kernels_over_huge_expanded_inputs_are_errors() {
    init();
    let one = Tensor::from_slice(&[1.0f32], &[1]).unwrap();
    let big = ops::expand(&one, &[1 << 40]).unwrap();
    fails_fast("add", || ops::add_tensor(&big, &big));
    fails_fast("repeat", || ops::repeat(&one, &[1 << 40]));
    let two = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    refused("repeat", || ops::repeat(&two, &[i64::MAX]));
    refused("repeat", || ops::repeat(&two, &[1 << 40, 1 << 40]));
    let idx = ops::expand(&Tensor::from_slice(&[0i64], &[1]).unwrap(), &[1 << 40]).unwrap();
    fails_fast("gather", || ops::gather(&one, 0, &idx));
    fails_fast("index_select", || ops::index_select(&one, 0, &idx));
    let classes = Tensor::from_slice(&[0i64, 1], &[2]).unwrap();
    // one_hot is a composite over `zeros`, whose error this is.
    fails_fast("zeros", || {
        ops::one_hot::with(
            &classes,
            ops::one_hot::Options::default().num_classes(1i64 << 60),
        )
    });
    let top = Tensor::from_slice(&[i64::MAX], &[1]).unwrap();
    refused("one_hot", || ops::one_hot(&top));
    let grad = Tensor::from_slice(&[1.0f32; 4], &[2, 2]).unwrap();
    fails_fast("embedding_dense_backward", || {
        ops::embedding_dense_backward(&grad, &classes, 1i64 << 61, -1, true)
    });
}
