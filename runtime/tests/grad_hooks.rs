//! Post-accumulate-grad hooks: called once per backward pass per leaf, after the
//! leaf's whole gradient (from every use) is in `.grad`; removed with the handle.

use opal::autograd::register_post_accumulate_grad_hook;
use opal::{ops, Tensor};
use std::sync::{Arc, Mutex};

#[test]
fn hook_sees_the_final_gradient_once_per_pass() {
    opal_cpu::init().unwrap();
    let x = Tensor::from_slice(&[1.0f64, 2.0], &[2]).unwrap();
    x.set_requires_grad(true).unwrap();
    let seen: Arc<Mutex<Vec<Vec<f64>>>> = Arc::default();
    let s = seen.clone();
    let handle = register_post_accumulate_grad_hook(&x, move |leaf| {
        s.lock()
            .unwrap()
            .push(leaf.grad().unwrap().to_vec::<f64>()?);
        Ok(())
    })
    .unwrap();
    // x is used three times: d/dx sum(x*x + x) = 2x + 1, reached by three edges.
    let loss = ops::sum(&ops::add_tensor(&ops::mul_tensor(&x, &x).unwrap(), &x).unwrap()).unwrap();
    loss.backward().unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![vec![3.0, 5.0]]);
    drop(handle);
    let loss = ops::sum(&x).unwrap();
    loss.backward().unwrap();
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "a dropped handle removes the hook"
    );
}

#[test]
fn hook_error_ends_backward_and_non_leaves_are_refused() {
    opal_cpu::init().unwrap();
    let x = Tensor::from_slice(&[1.0f64], &[1]).unwrap();
    x.set_requires_grad(true).unwrap();
    let _h = register_post_accumulate_grad_hook(&x, |_| Err(opal::OpalError::msg("hook says no")))
        .unwrap();
    let err = ops::sum(&ops::exp(&x).unwrap())
        .unwrap()
        .backward()
        .unwrap_err();
    assert!(err.to_string().contains("hook says no"), "{err}");
    let y = ops::exp(&x).unwrap();
    assert!(register_post_accumulate_grad_hook(&y, |_| Ok(())).is_err());
    let plain = Tensor::from_slice(&[1.0f64], &[1]).unwrap();
    assert!(register_post_accumulate_grad_hook(&plain, |_| Ok(())).is_err());
}
