//! The autograd engine and tensor state, driven by ops recorded with
//! `autograd::record` (custom functions, whose forward runs without recording): graph order, accumulation, broadcasting,
//! saved-tensor versions, grad mode, in-place rules, `grad()`, threads.

use opal::autograd::{self, check_inplace, GradOptions, NoGradGuard, SavedTensor};
use opal::dispatch::DispatchKey;
use opal::{ops, DType, Result, Tensor};

fn t(v: &[f32], sizes: &[i64]) -> Tensor {
    opal_cpu::init().expect("CPU backend registers");
    Tensor::from_slice(v, sizes).unwrap()
}

fn leaf(v: &[f32], sizes: &[i64]) -> Tensor {
    let x = t(v, sizes);
    x.set_requires_grad(true).unwrap();
    x
}

fn vals(x: &Tensor) -> Vec<f32> {
    x.to_vec::<f32>().unwrap()
}

/// Runs a custom function's forward ops without recording them (as PyTorch's
/// `autograd.Function` does): the function records its own node.
fn forward<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    let _g = NoGradGuard::new();
    f()
}

/// `a * b` with its backward (saves both inputs).
fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let out = forward(|| ops::mul_tensor(a, b))?;
    let (sa, sb) = (
        SavedTensor::input(a, "MulBackward", "self"),
        SavedTensor::input(b, "MulBackward", "other"),
    );
    autograd::record(
        "MulBackward",
        &[a, b],
        &[&out],
        Box::new(move |g| {
            let g = g[0].clone().expect("one output");
            Ok(vec![
                Some(ops::mul_tensor(&g, &sb.get()?)?),
                Some(ops::mul_tensor(&g, &sa.get()?)?),
            ])
        }),
    )?;
    Ok(out)
}

/// `a + b` with its backward (broadcasting is summed away by the engine).
fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let out = forward(|| ops::add_tensor(a, b))?;
    autograd::record(
        "AddBackward",
        &[a, b],
        &[&out],
        Box::new(|g| Ok(vec![g[0].clone(), g[0].clone()])),
    )?;
    Ok(out)
}

/// `exp(a)`, whose backward uses its own output.
fn exp(a: &Tensor) -> Result<Tensor> {
    let out = forward(|| ops::exp(a))?;
    let saved = SavedTensor::output(&out, "ExpBackward", "result")?;
    autograd::record(
        "ExpBackward",
        &[a],
        &[&out],
        Box::new(move |g| {
            let g = g[0].clone().expect("one output");
            Ok(vec![Some(ops::mul_tensor(&g, &saved.get()?)?)])
        }),
    )?;
    Ok(out)
}

/// `sum(a)` to one element.
fn sum(a: &Tensor) -> Result<Tensor> {
    let out = forward(|| ops::sum(a))?;
    let sizes = a.sizes().to_vec();
    autograd::record(
        "SumBackward",
        &[a],
        &[&out],
        Box::new(move |g| {
            let g = g[0].clone().expect("one output");
            Ok(vec![Some(ops::expand(&g, &sizes)?)])
        }),
    )?;
    Ok(out)
}

/// `a.mul_(2)` in place, recorded as an in-place op.
fn double_(a: &Tensor) -> Result<Tensor> {
    check_inplace(a, "mul_")?;
    forward(|| ops::mul_scalar_(a, &opal::Scalar::Int(2)))?;
    autograd::record(
        "MulBackward_",
        &[a],
        &[a],
        Box::new(|g| {
            Ok(vec![Some(ops::mul_scalar(
                g[0].as_ref().unwrap(),
                &opal::Scalar::Int(2),
            )?)])
        }),
    )?;
    Ok(a.clone())
}

#[test]
fn product_rule_through_a_sum() {
    let a = leaf(&[1.0, 2.0, 3.0], &[3]);
    let b = leaf(&[4.0, 5.0, 6.0], &[3]);
    let loss = sum(&mul(&a, &b).unwrap()).unwrap();
    assert!(loss.requires_grad() && !loss.is_leaf());
    assert_eq!(loss.grad_fn().unwrap().name(), "SumBackward");
    loss.backward().unwrap();
    assert_eq!(vals(&a.grad().unwrap()), vec![4.0, 5.0, 6.0]);
    assert_eq!(vals(&b.grad().unwrap()), vec![1.0, 2.0, 3.0]);
}

#[test]
fn broadcast_gradients_are_summed_back_to_the_input_shape() {
    let a = leaf(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = leaf(&[10.0, 20.0, 30.0], &[3]);
    let c = leaf(&[7.0], &[1, 1]);
    let y = add(&add(&a, &b).unwrap(), &c).unwrap();
    sum(&y).unwrap().backward().unwrap();
    assert_eq!(vals(&a.grad().unwrap()), vec![1.0; 6]);
    assert_eq!(b.grad().unwrap().sizes(), &[3]);
    assert_eq!(vals(&b.grad().unwrap()), vec![2.0; 3]);
    assert_eq!(c.grad().unwrap().sizes(), &[1, 1]);
    assert_eq!(vals(&c.grad().unwrap()), vec![6.0]);
}

#[test]
fn a_diamond_sums_both_paths_and_runs_each_node_once() {
    // z = x*x + exp(x): dz/dx = 2x + exp(x).
    let x = leaf(&[0.0, 1.0], &[2]);
    let z = sum(&add(&mul(&x, &x).unwrap(), &exp(&x).unwrap()).unwrap()).unwrap();
    z.backward().unwrap();
    let g = vals(&x.grad().unwrap());
    assert!(
        (g[0] - 1.0).abs() < 1e-6 && (g[1] - (2.0 + 1f32.exp())).abs() < 1e-5,
        "{g:?}"
    );
}

#[test]
fn grads_accumulate_and_a_freed_graph_refuses_a_second_pass() {
    let x = leaf(&[3.0], &[1]);
    let y = mul(&x, &x).unwrap();
    autograd::backward(
        std::slice::from_ref(&y),
        &[],
        GradOptions { retain_graph: true },
    )
    .unwrap();
    assert_eq!(vals(&x.grad().unwrap()), vec![6.0]);
    y.backward().unwrap();
    assert_eq!(vals(&x.grad().unwrap()), vec![12.0], "accumulated");
    let e = y.backward().unwrap_err().to_string();
    assert!(
        e.contains("second time") && e.contains("MulBackward"),
        "{e}"
    );
    x.set_grad(None);
    assert!(x.grad().is_none());
}

#[test]
fn modifying_a_saved_tensor_in_place_makes_backward_an_error() {
    let a = leaf(&[1.0, 2.0], &[2]);
    let b = t(&[3.0, 4.0], &[2]);
    let y = sum(&mul(&a, &b).unwrap()).unwrap();
    ops::add_scalar_(&b, &opal::Scalar::Int(1)).unwrap(); // b was saved by mul
    let e = y.backward().unwrap_err().to_string();
    assert!(
        e.contains("modified by an inplace operation")
            && e.contains("MulBackward")
            && e.contains("other"),
        "{e}"
    );
    // An output saved by exp, changed through a view of its storage, is caught too.
    let x = leaf(&[0.5], &[1]);
    let ex = exp(&x).unwrap();
    let view = ex.detach().unwrap();
    ops::add_scalar_(&view, &opal::Scalar::Int(1)).unwrap();
    let e = sum(&ex).unwrap().backward().unwrap_err().to_string();
    assert!(e.contains("ExpBackward") && e.contains("result"), "{e}");
}

#[test]
fn in_place_on_a_leaf_that_requires_grad_is_refused_unless_grad_is_off() {
    let w = leaf(&[1.0, 2.0], &[2]);
    let e = double_(&w).unwrap_err().to_string();
    assert!(e.contains("leaf") && e.contains("mul_"), "{e}");
    assert_eq!(vals(&w), vec![1.0, 2.0], "refused before writing");
    {
        let _g = NoGradGuard::new();
        double_(&w).unwrap();
        assert!(w.is_leaf(), "nothing recorded without grad mode");
    }
    assert_eq!(vals(&w), vec![2.0, 4.0]);
    // In place on a non-leaf records on top of its history: d(2*(x*x))/dx = 4x.
    let x = leaf(&[3.0], &[1]);
    let y = mul(&x, &x).unwrap();
    double_(&y).unwrap();
    assert_eq!(y.grad_fn().unwrap().name(), "MulBackward_");
    sum(&y).unwrap().backward().unwrap();
    assert_eq!(vals(&x.grad().unwrap()), vec![12.0]);
}

#[test]
fn no_grad_records_nothing_and_restores_on_drop() {
    let x = leaf(&[1.0], &[1]);
    assert!(autograd::is_grad_enabled());
    {
        let _g = NoGradGuard::new();
        assert!(!autograd::is_grad_enabled());
        let y = mul(&x, &x).unwrap();
        assert!(!y.requires_grad() && y.is_leaf());
        {
            let _on = autograd::GradModeGuard::new(true);
            assert!(
                mul(&x, &x).unwrap().requires_grad(),
                "enable_grad inside no_grad"
            );
        }
        assert!(!autograd::is_grad_enabled());
    }
    assert!(autograd::is_grad_enabled());
    let r = std::panic::catch_unwind(|| {
        let _g = NoGradGuard::new();
        panic!("inside no_grad");
    });
    assert!(r.is_err());
    assert!(autograd::is_grad_enabled(), "restored on unwind");
}

#[test]
fn requires_grad_rules_and_key_sets() {
    opal_cpu::init().unwrap();
    let i = Tensor::from_slice(&[1i64, 2], &[2]).unwrap();
    let e = i.set_requires_grad(true).unwrap_err().to_string();
    assert!(e.contains("floating point") && e.contains("int64"), "{e}");
    let x = leaf(&[1.0], &[1]);
    assert!(x.key_set().has(DispatchKey::AutogradCPU));
    let plain = t(&[1.0], &[1]);
    assert!(
        !plain.key_set().has(DispatchKey::AutogradCPU),
        "plain tensors skip autograd"
    );
    let y = mul(&x, &x).unwrap();
    assert!(y.key_set().has(DispatchKey::AutogradCPU));
    let e = y.set_requires_grad(false).unwrap_err().to_string();
    assert!(e.contains("leaf") && e.contains("MulBackward"), "{e}");
    let d = y.detach().unwrap();
    assert!(!d.requires_grad() && d.is_leaf() && d.shares_storage(&y));
    x.set_requires_grad(false).unwrap();
    assert!(!x.requires_grad());
    assert_eq!(x.dtype(), DType::F32);
}

#[test]
fn backward_refuses_what_it_cannot_differentiate() {
    let plain = t(&[1.0], &[1]);
    let e = plain.backward().unwrap_err().to_string();
    assert!(e.contains("does not require grad"), "{e}");
    let x = leaf(&[1.0, 2.0], &[2]);
    let y = mul(&x, &x).unwrap();
    let e = y.backward().unwrap_err().to_string();
    assert!(e.contains("one-element") && e.contains("[2]"), "{e}");
    let e = autograd::backward(
        std::slice::from_ref(&y),
        &[t(&[1.0], &[1])],
        GradOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("shape"), "{e}");
    // With an explicit gradient it works.
    autograd::backward(&[y], &[t(&[1.0, 10.0], &[2])], GradOptions::default()).unwrap();
    assert_eq!(vals(&x.grad().unwrap()), vec![2.0, 40.0]);
}

#[test]
fn grad_returns_gradients_without_touching_dot_grad() {
    let x = leaf(&[2.0], &[1]);
    let h = mul(&x, &x).unwrap(); // a non-leaf input
    let z = sum(&mul(&h, &x).unwrap()).unwrap(); // x^3
    let gs = autograd::grad(&[z], &[x.clone(), h.clone()], &[], GradOptions::default()).unwrap();
    assert_eq!(vals(gs[0].as_ref().unwrap()), vec![12.0], "3x^2");
    assert_eq!(vals(gs[1].as_ref().unwrap()), vec![2.0], "dz/dh = x");
    assert!(x.grad().is_none(), "grad() leaves .grad alone");
    let other = leaf(&[1.0], &[1]);
    let z2 = sum(&mul(&x, &x).unwrap()).unwrap();
    let gs = autograd::grad(&[z2], &[other], &[], GradOptions::default()).unwrap();
    assert!(gs[0].is_none(), "an unrelated input gets no gradient");
    let e = autograd::grad(
        &[t(&[1.0], &[1])],
        &[t(&[1.0], &[1])],
        &[],
        GradOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("does not require grad"), "{e}");
}

#[test]
fn separate_graphs_backward_on_several_threads() {
    let handles: Vec<_> = (0..4)
        .map(|k| {
            std::thread::spawn(move || {
                for step in 0..50 {
                    let v = (k * 100 + step) as f32;
                    let x = leaf(&[v, 1.0], &[2]);
                    let y = sum(&mul(&exp(&x).unwrap(), &x).unwrap()).unwrap();
                    y.backward().unwrap();
                    // d(x e^x)/dx = e^x (1 + x)
                    let g = vals(&x.grad().unwrap());
                    let want = 1f32.exp() * 2.0;
                    assert!((g[1] - want).abs() < 1e-4, "{g:?}");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn dropping_the_outputs_frees_the_graph() {
    let x = leaf(&[1.0], &[1]);
    let weak = {
        let y = mul(&x, &x).unwrap();
        let f = y.grad_fn().unwrap();
        std::sync::Arc::downgrade(&f)
    };
    assert!(weak.upgrade().is_none(), "no cycle keeps the node alive");
    let weak = {
        let y = exp(&x).unwrap(); // saves its own output, detached
        std::sync::Arc::downgrade(&y.grad_fn().unwrap())
    };
    assert!(
        weak.upgrade().is_none(),
        "a saved output does not keep its node alive"
    );
}
