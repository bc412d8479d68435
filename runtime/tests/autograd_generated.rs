//! The generated autograd kernels through the public op API: gradients of op
//! chains, in-place variants, the refusals (in-place on a leaf or a view, saved
//! tensors changed in place, ops without a formula), grad mode, and backward on
//! separate graphs from several threads.

use opal::autograd::{self, GradOptions, NoGradGuard};
use opal::{ops, Scalar, Tensor};

fn leaf(v: &[f64], sizes: &[i64]) -> Tensor {
    opal_cpu::init().expect("CPU backend registers");
    let x = Tensor::from_slice(v, sizes).unwrap();
    x.set_requires_grad(true).unwrap();
    x
}

fn vals(x: &Tensor) -> Vec<f64> {
    x.to_vec::<f64>().unwrap()
}

#[test]
fn chain_of_generated_ops() {
    // loss = sum(exp(x) * y + x / y) ; d/dx = exp(x) * y + 1/y ; d/dy = exp(x) - x/y^2
    let x = leaf(&[0.5, -1.0], &[2]);
    let y = leaf(&[2.0, 4.0], &[2]);
    let l = ops::sum(
        &ops::add_tensor(
            &ops::mul_tensor(&ops::exp(&x).unwrap(), &y).unwrap(),
            &ops::div_tensor(&x, &y).unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(l.grad_fn().unwrap().name(), "SumBackward0");
    l.backward().unwrap();
    let (gx, gy) = (vals(&x.grad().unwrap()), vals(&y.grad().unwrap()));
    for i in 0..2 {
        let (xv, yv) = ([0.5f64, -1.0][i], [2.0f64, 4.0][i]);
        assert!((gx[i] - (xv.exp() * yv + 1.0 / yv)).abs() < 1e-12);
        assert!((gy[i] - (xv.exp() - xv / (yv * yv))).abs() < 1e-12);
    }
}

#[test]
fn broadcasting_and_matmul() {
    let a = leaf(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = leaf(&[1.0, 0.0, -1.0], &[3]);
    let w = leaf(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    let l = ops::sum(&ops::mm(&ops::add_tensor(&a, &b).unwrap(), &w).unwrap()).unwrap();
    l.backward().unwrap();
    // d/da = ones(2,2) @ w^T = row sums of w, for every row of a.
    assert_eq!(
        vals(&a.grad().unwrap()),
        vec![3.0, 7.0, 11.0, 3.0, 7.0, 11.0]
    );
    assert_eq!(b.grad().unwrap().sizes(), &[3], "summed back to b's shape");
    assert_eq!(vals(&b.grad().unwrap()), vec![6.0, 14.0, 22.0]);
}

#[test]
fn in_place_ops_are_differentiated() {
    let x = leaf(&[3.0, -2.0], &[2]);
    let y = ops::mul_tensor(&x, &x).unwrap();
    ops::mul_scalar_(&y, &Scalar::Int(2)).unwrap();
    assert!(y.grad_fn().unwrap().name().ends_with('_'));
    ops::sum(&y).unwrap().backward().unwrap();
    assert_eq!(
        vals(&x.grad().unwrap()),
        vec![12.0, -8.0],
        "d(2x^2)/dx = 4x"
    );

    // An in-place op whose formula reads `self` uses the value before the write.
    let x = leaf(&[0.5], &[1]);
    let y = ops::mul_scalar(&x, &Scalar::Int(1)).unwrap();
    ops::exp_(&y).unwrap();
    ops::sum(&y).unwrap().backward().unwrap();
    assert!((vals(&x.grad().unwrap())[0] - 0.5f64.exp()).abs() < 1e-12);
}

#[test]
fn in_place_refusals() {
    let x = leaf(&[1.0, 2.0], &[2]);
    let e = ops::add_scalar_(&x, &Scalar::Int(1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("leaf") && e.contains("add_"), "{e}");
    assert_eq!(vals(&x), vec![1.0, 2.0], "refused before writing");
    {
        let _g = NoGradGuard::new();
        ops::add_scalar_(&x, &Scalar::Int(1)).unwrap();
    }
    assert_eq!(
        vals(&x),
        vec![2.0, 3.0],
        "allowed without grad mode (an optimizer step)"
    );

    // A view of a tensor in the graph, and the tensor a recorded view was taken of.
    let y = ops::mul_scalar(&x, &Scalar::Int(2)).unwrap();
    let v = ops::view(&y, &[2, 1]).unwrap();
    let e = ops::mul_scalar_(&v, &Scalar::Int(3))
        .unwrap_err()
        .to_string();
    assert!(e.contains("view"), "{e}");
    let e = ops::mul_scalar_(&y, &Scalar::Int(3))
        .unwrap_err()
        .to_string();
    assert!(e.contains("views"), "{e}");
}

#[test]
fn a_saved_tensor_changed_in_place_makes_backward_an_error() {
    let x = leaf(&[1.0], &[1]);
    let y = ops::exp(&ops::mul_scalar(&x, &Scalar::Int(1)).unwrap()).unwrap();
    let z = ops::mul_tensor(&y, &y).unwrap(); // saves y
    ops::add_scalar_(&y, &Scalar::Int(1)).unwrap();
    let e = ops::sum(&z).unwrap().backward().unwrap_err().to_string();
    assert!(e.contains("modified by an inplace operation"), "{e}");
}

#[test]
fn an_op_without_a_formula_is_refused_not_silently_detached() {
    // native_dropout_backward has no derivatives.yaml entry (no double backward).
    let x = leaf(&[1.0, f64::NAN], &[2]);
    let mask = Tensor::from_slice(&[true, false], &[2]).unwrap();
    let e = ops::native_dropout_backward(&x, &mask, 2.0)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("native_dropout_backward") && e.contains("AutogradCPU") && e.contains("cpu"),
        "{e}"
    );
    // Results that cannot carry a gradient pass.
    let m = ops::isnan(&x).unwrap();
    assert!(!m.requires_grad());
    // And without grad mode the op simply runs.
    let _g = NoGradGuard::new();
    assert!(!ops::native_dropout_backward(&x, &mask, 2.0)
        .unwrap()
        .requires_grad());
}

#[test]
fn no_grad_records_nothing() {
    let x = leaf(&[1.0], &[1]);
    let _g = NoGradGuard::new();
    let y = ops::mul_tensor(&x, &x).unwrap();
    assert!(!y.requires_grad() && y.grad_fn().is_none());
}

/// `_to_copy`'s gradient is the incoming one itself when the input already had its
/// dtype and device (a reshape that had to copy), and converted back otherwise.
#[test]
fn to_copy_passes_a_matching_gradient_through_and_converts_others() {
    use opal::DType;
    let x = leaf(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let copied =
        ops::_to_copy::call(&ops::t(&x).unwrap(), None, None, None, None, false, None).unwrap();
    let g = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let gs = autograd::grad(
        std::slice::from_ref(&copied),
        std::slice::from_ref(&x),
        std::slice::from_ref(&g),
        GradOptions::default(),
    )
    .unwrap();
    let gx = gs[0].as_ref().unwrap();
    // The transpose's backward transposes the passed-through gradient back.
    assert_eq!(vals(gx), vec![1.0, 3.0, 2.0, 4.0]);
    assert!(
        gx.shares_storage(&g),
        "no copy of a gradient already in f64"
    );

    let x32 = ops::_to_copy::call(&x, Some(DType::F32), None, None, None, false, None).unwrap();
    let g32 = Tensor::from_slice(&[0.5f32, 1.5, 2.5, 3.5], &[2, 2]).unwrap();
    let gs = autograd::grad(
        &[x32],
        std::slice::from_ref(&x),
        &[g32],
        GradOptions::default(),
    )
    .unwrap();
    let gx = gs[0].as_ref().unwrap();
    assert_eq!(gx.dtype(), DType::F64);
    assert_eq!(vals(gx), vec![0.5, 1.5, 2.5, 3.5]);
}

#[test]
fn retain_graph_and_grad() {
    let x = leaf(&[2.0], &[1]);
    let y = ops::pow_tensor_scalar(&x, &Scalar::Int(3)).unwrap();
    let g1 = autograd::grad(
        std::slice::from_ref(&y),
        std::slice::from_ref(&x),
        &[],
        GradOptions { retain_graph: true },
    )
    .unwrap();
    assert_eq!(vals(g1[0].as_ref().unwrap()), vec![12.0]);
    let g2 = autograd::grad(
        std::slice::from_ref(&y),
        std::slice::from_ref(&x),
        &[],
        GradOptions::default(),
    )
    .unwrap();
    assert_eq!(vals(g2[0].as_ref().unwrap()), vec![12.0]);
    let e = autograd::grad(&[y], &[x], &[], GradOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("second time"), "{e}");
}

#[test]
fn backward_on_separate_graphs_from_several_threads() {
    opal_cpu::init().unwrap();
    let handles: Vec<_> = (0..4)
        .map(|k| {
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let x = leaf(&[k as f64, 1.0], &[2]);
                    let y = ops::sum(&ops::mul_tensor(&x, &x).unwrap()).unwrap();
                    y.backward().unwrap();
                    assert_eq!(vals(&x.grad().unwrap()), vec![2.0 * k as f64, 2.0]);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}
