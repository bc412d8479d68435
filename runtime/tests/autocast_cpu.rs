//! Autocast on the CPU: the policy's three cast kinds, per-device enable and dtype,
//! guards that nest and restore (the included key included), unsupported dtypes and
//! device types as errors, and composition with autograd (gradients come back in
//! the parameters' dtype) through autograd kernels this test registers itself.

use opal::autocast::{self, AutocastGuard};
use opal::dispatch::{tls, DispatchKey, DispatchKeySet};
use opal::{autograd, ops, DType, DeviceType, Tensor};

fn init() {
    opal_cpu::init().unwrap();
}

fn f32s(v: &[f32], shape: &[i64]) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}

#[test]
fn lower_precision_ops_run_in_the_autocast_dtype() {
    init();
    let a = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = f32s(&[0.5, 0.25, 2.0, 1.0], &[2, 2]);
    assert_eq!(ops::mm(&a, &b).unwrap().dtype(), DType::F32);
    {
        let _g = AutocastGuard::new(DeviceType::Cpu).unwrap();
        let c = ops::mm(&a, &b).unwrap();
        assert_eq!(c.dtype(), DType::F16);
        let back = c.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(back, [4.5, 2.25, 9.5, 4.75]);
        // Composite `linear` casts once and its inner ops do not cast again.
        let l = ops::linear(&a, &b).unwrap();
        assert_eq!(l.dtype(), DType::F16);
        // float64 is never cast; integer tensors neither.
        let d = a.to_dtype(DType::F64).unwrap();
        assert_eq!(ops::mm(&d, &d).unwrap().dtype(), DType::F64);
    }
    assert_eq!(ops::mm(&a, &b).unwrap().dtype(), DType::F32);
}

#[test]
fn fp32_and_promote_ops() {
    init();
    let h = f32s(&[1.0, 2.0], &[2]).to_dtype(DType::F16).unwrap();
    let f = f32s(&[3.0, 4.0], &[2]);
    let _g = AutocastGuard::with_dtype(DeviceType::Cpu, DType::BF16).unwrap();
    let s = ops::sum(&h).unwrap();
    assert_eq!(s.dtype(), DType::F32);
    assert_eq!(s.item().unwrap().to_f64(), 3.0);
    let sm = ops::_softmax(&h, 0, false).unwrap();
    assert_eq!(sm.dtype(), DType::F32);
    // cat of float16 and float32 runs in float32 (the widest); of float16 alone
    // in float16.
    let c = ops::cat(&[h.clone(), f.clone()]).unwrap();
    assert_eq!(c.dtype(), DType::F32);
    assert_eq!(c.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(
        ops::cat(&[h.clone(), h.clone()]).unwrap().dtype(),
        DType::F16
    );
    // lower precision ops use the guard's dtype.
    let m = ops::mm(&f32s(&[3.0, 4.0], &[1, 2]), &f32s(&[3.0, 4.0], &[2, 1])).unwrap();
    assert_eq!(m.dtype(), DType::BF16);
    // An op outside the policy is untouched.
    assert_eq!(ops::add_tensor(&h, &h).unwrap().dtype(), DType::F16);
}

#[test]
fn guards_nest_and_restore_state_and_included_keys() {
    init();
    let key = DispatchKeySet::from_key(DispatchKey::AutocastCPU);
    assert!(!autocast::is_autocast_enabled(DeviceType::Cpu));
    assert!(!tls::tls_included().intersects(key));
    {
        let _outer = AutocastGuard::with_dtype(DeviceType::Cpu, DType::BF16).unwrap();
        assert!(autocast::is_autocast_enabled(DeviceType::Cpu));
        assert_eq!(autocast::autocast_dtype(DeviceType::Cpu), DType::BF16);
        assert!(tls::tls_included().contains(key));
        {
            let _off = AutocastGuard::disabled(DeviceType::Cpu).unwrap();
            assert!(!autocast::is_autocast_enabled(DeviceType::Cpu));
            assert!(!tls::tls_included().intersects(key));
            let a = f32s(&[1.0], &[1, 1]);
            assert_eq!(ops::mm(&a, &a).unwrap().dtype(), DType::F32);
            {
                let _inner = AutocastGuard::new(DeviceType::Cpu).unwrap();
                // `new` keeps the dtype in force (bfloat16 from the outer guard).
                assert_eq!(autocast::autocast_dtype(DeviceType::Cpu), DType::BF16);
                assert_eq!(ops::mm(&a, &a).unwrap().dtype(), DType::BF16);
            }
            assert!(!autocast::is_autocast_enabled(DeviceType::Cpu));
        }
        assert!(autocast::is_autocast_enabled(DeviceType::Cpu));
        assert_eq!(autocast::autocast_dtype(DeviceType::Cpu), DType::BF16);
    }
    assert!(!autocast::is_autocast_enabled(DeviceType::Cpu));
    assert_eq!(
        autocast::autocast_dtype(DeviceType::Cpu),
        autocast::DEFAULT_DTYPE
    );
    assert!(!tls::tls_included().intersects(key));
    // Restored on unwinding too.
    let r = std::panic::catch_unwind(|| {
        let _g = AutocastGuard::new(DeviceType::Cpu).unwrap();
        panic!("inside autocast");
    });
    assert!(r.is_err());
    assert!(!autocast::is_autocast_enabled(DeviceType::Cpu));
    assert!(!tls::tls_included().intersects(key));
}

#[test]
fn autocast_state_is_per_thread() {
    init();
    let _g = AutocastGuard::new(DeviceType::Cpu).unwrap();
    let other = std::thread::spawn(|| {
        let a = f32s(&[2.0], &[1, 1]);
        (
            autocast::is_autocast_enabled(DeviceType::Cpu),
            ops::mm(&a, &a).unwrap().dtype(),
        )
    })
    .join()
    .unwrap();
    assert_eq!(other, (false, DType::F32));
}

#[test]
fn unsupported_dtypes_and_devices_are_errors() {
    init();
    let m = AutocastGuard::with_dtype(DeviceType::Cpu, DType::F64)
        .err()
        .unwrap()
        .to_string();
    assert!(
        m.contains("device 'cpu'") && m.contains("float64") && m.contains("float16, bfloat16"),
        "{m}"
    );
    let m = autocast::set_autocast_dtype(DeviceType::Cpu, DType::I32)
        .unwrap_err()
        .to_string();
    assert!(
        m.contains("int32") && m.contains("supports float16, bfloat16"),
        "{m}"
    );
    assert_eq!(
        autocast::autocast_dtype(DeviceType::Cpu),
        autocast::DEFAULT_DTYPE
    );
    let m = AutocastGuard::new(DeviceType::Meta)
        .err()
        .unwrap()
        .to_string();
    assert!(
        m.contains("'meta'") && m.contains("autocast keys exist for cpu"),
        "{m}"
    );
    // A device type with an autocast key but no device runtime.
    let m = AutocastGuard::new(DeviceType::PrivateUse3)
        .err()
        .unwrap()
        .to_string();
    assert!(m.contains("no device runtime registered"), "{m}");
    assert_eq!(
        autocast::supported_dtypes(DeviceType::Cpu).unwrap(),
        [DType::F16, DType::BF16]
    );
    // The raw setters: on and off without a guard.
    autocast::set_autocast_enabled(DeviceType::Cpu, true).unwrap();
    assert!(autocast::is_autocast_enabled(DeviceType::Cpu));
    autocast::set_autocast_enabled(DeviceType::Cpu, false).unwrap();
    assert!(!autocast::is_autocast_enabled(DeviceType::Cpu));
    assert!(autocast::policy().contains(&"aten::mm"));
}

#[test]
fn autocast_composes_with_autograd_gradients_in_the_parameters_dtype() {
    // Through the autograd kernels generated from derivatives.yaml: the casts
    // autocast inserts (`_to_copy`) are differentiated like any op.
    init();
    let w = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    w.set_requires_grad(true).unwrap();
    let x = f32s(&[1.0, 1.0, 0.5, 2.0], &[2, 2]);
    let y = {
        let _g = AutocastGuard::new(DeviceType::Cpu).unwrap();
        ops::mm(&x, &w).unwrap()
    };
    assert_eq!(y.dtype(), DType::F16);
    assert_eq!(y.grad_fn().unwrap().name(), "MmBackward0");
    let yf = y.to_dtype(DType::F32).unwrap();
    let ones = f32s(&[1.0; 4], &[2, 2]);
    autograd::backward(&[yf], &[ones], autograd::GradOptions::default()).unwrap();
    let g = w.grad().expect("w has a gradient");
    assert_eq!(
        g.dtype(),
        DType::F32,
        "the gradient has the parameter's dtype"
    );
    // d(sum(x @ w))/dw, with ones as the output gradient, = x^T @ ones.
    assert_eq!(g.to_vec::<f32>().unwrap(), [1.5, 1.5, 3.0, 3.0]);
}
