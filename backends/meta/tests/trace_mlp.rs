//! Shape tracing: a small MLP (linear -> relu -> linear -> log_softmax -> nll_loss,
//! plus the backward of its second layer) called through Opal's generated ops on
//! meta tensors, as a user would: the dispatcher routes every call to the Meta
//! backend. Nothing is allocated or computed; every intermediate's sizes and dtype
//! come out as PyTorch would produce them, and a wrong layer size is caught as an
//! error naming the op.

use opal::ops;
use opal::{DType, Device, Result, Scalar, Tensor};

fn meta(sizes: &[i64], dtype: DType) -> Tensor {
    Tensor::empty(sizes, dtype, Device::meta()).unwrap()
}

struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

/// Forward pass; returns every traced intermediate by name.
fn forward(m: &Mlp, x: &Tensor, target: &Tensor) -> Result<Vec<(&'static str, Tensor)>> {
    let h = ops::linear::call(x, &m.w1, Some(&m.b1))?;
    let a = ops::relu(&h)?;
    let logits = ops::linear::call(&a, &m.w2, Some(&m.b2))?;
    let logp = ops::_log_softmax(&logits, 1, false)?;
    let (loss, total_weight) = ops::nll_loss_forward(&logp, target, None, 1, -100)?;
    // Backward of the second layer, to trace gradient shapes too.
    let grad_logp = ops::nll_loss_backward(&loss, &logp, target, None, 1, -100, &total_weight)?;
    let grad_logits = ops::_log_softmax_backward_data(&grad_logp, &logp, 1, DType::F32)?;
    let grad_w2 = ops::mm(&ops::t(&grad_logits)?, &a)?;
    let grad_b2 = ops::sum_dim_intlist::call(&grad_logits, Some(&[0]), false, None)?;
    let grad_a = ops::mm(&grad_logits, &m.w2)?;
    let grad_h = ops::threshold_backward(&grad_a, &a, &Scalar::Int(0))?;
    Ok(vec![
        ("hidden", h),
        ("relu", a),
        ("logits", logits),
        ("log_probs", logp),
        ("loss", loss),
        ("grad_w2", grad_w2),
        ("grad_b2", grad_b2),
        ("grad_hidden", grad_h),
    ])
}

fn mlp(inp: i64, hidden: i64, out: i64) -> Mlp {
    Mlp {
        w1: meta(&[hidden, inp], DType::F32),
        b1: meta(&[hidden], DType::F32),
        w2: meta(&[out, hidden], DType::F32),
        b2: meta(&[out], DType::F32),
    }
}

#[test]
fn traces_mlp_shapes_without_data() {
    opal_meta::init().unwrap();
    let m = mlp(784, 256, 10);
    let x = meta(&[32, 784], DType::F32);
    let target = meta(&[32], DType::I64);
    let trace = forward(&m, &x, &target).unwrap();
    let shapes: Vec<(&str, Vec<i64>)> = trace
        .iter()
        .map(|(n, t)| (*n, t.sizes().to_vec()))
        .collect();
    for (name, t) in &trace {
        println!("{name:>12}: {:?} {}", t.sizes(), t.dtype().name());
        assert!(t.device().is_meta());
        assert_eq!(t.dtype(), DType::F32);
    }
    assert_eq!(
        shapes,
        vec![
            ("hidden", vec![32, 256]),
            ("relu", vec![32, 256]),
            ("logits", vec![32, 10]),
            ("log_probs", vec![32, 10]),
            ("loss", vec![]),
            ("grad_w2", vec![10, 256]),
            ("grad_b2", vec![10]),
            ("grad_hidden", vec![32, 256]),
        ]
    );
}

#[test]
fn tracing_catches_a_layer_size_mismatch() {
    opal_meta::init().unwrap();
    let mut m = mlp(784, 256, 10);
    m.w2 = meta(&[10, 128], DType::F32); // second layer expects 128 inputs
    let err = match forward(&m, &meta(&[32, 784], DType::F32), &meta(&[32], DType::I64)) {
        Ok(_) => panic!("a mismatched layer must fail"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("linear") && err.contains("32x256 and 128x10"),
        "{err}"
    );
}
