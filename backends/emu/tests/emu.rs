//! The emu devices at run time: separate memory reached only by copies, native
//! kernels computing on the device (including ops derived from out= kernels), a
//! pinned kernel behind its adapter, the CPU fallback for everything else (with
//! in-place/out= write-back), and two PrivateUse backends in one process.
//!
//! CPU kernels the fallback needs are registered here as small boxed kernels, so
//! these tests do not depend on the CPU backend's registration.

use std::sync::{Arc, Mutex, Once};

use opal::dispatch::{DispatchKey, KernelFunction, Library, OperatorHandle};
use opal::ops;
use opal::{DType, Device, IValue, Result, Scalar, Stack, Tensor};

/// Every test holds this: several of them compare `opal::fallback::calls()` before and
/// after, the counter is process-wide, and the harness runs tests on several threads,
/// so a neighbour's fallback call would otherwise show up in another test's count.
static FALLBACK_COUNTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Serializes tests that read the process-wide fallback counter.
static COUNTER: Mutex<()> = Mutex::new(());

fn emu() -> Device {
    setup();
    Device::parse("emu:0").expect("emu is registered")
}

fn emu2() -> Device {
    setup();
    Device::parse("emu2:0").expect("emu2 is registered")
}

/// A CPU kernel for tests: computes in f64 on host values.
fn cpu_kernel(f: impl Fn(&mut Stack) -> Result<()> + Send + Sync + 'static) -> KernelFunction {
    KernelFunction::boxed(Arc::new(move |_: &OperatorHandle, _, s: &mut Stack| f(s)))
}

fn tensor_arg(v: IValue) -> Tensor {
    match v {
        IValue::Tensor(t) => t,
        other => panic!("expected a tensor, got {}", other.type_name()),
    }
}

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        opal_emu::init().expect("emu init");
        opal_emu::init_emu2().expect("emu2 init");
        let mut cpu = Library::new("aten", DispatchKey::CPU);
        // sum(Tensor self, *, ScalarType? dtype=None) -> Tensor
        cpu.impl_(
            "sum",
            cpu_kernel(|s| {
                let dtype = s.pop();
                let t = tensor_arg(s.pop().expect("self"));
                let total: f64 = t.to_vec::<f32>()?.iter().map(|&x| f64::from(x)).sum();
                let dt = match dtype {
                    Some(IValue::DType(d)) => d,
                    _ => t.dtype(),
                };
                s.push(IValue::Tensor(Tensor::scalar_tensor(
                    &Scalar::Float(total),
                    dt,
                    Device::cpu(),
                )?));
                Ok(())
            }),
        )
        .expect("cpu sum");
        // neg.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
        cpu.impl_(
            "neg.out",
            cpu_kernel(|s| {
                let out = tensor_arg(s.pop().expect("out"));
                let t = tensor_arg(s.pop().expect("self"));
                let v: Vec<f32> = t.to_vec::<f32>()?.iter().map(|x| -x).collect();
                out.resize_(t.sizes())?;
                out.write::<f32>()?.copy_from(&v)?;
                s.push(IValue::Tensor(out));
                Ok(())
            }),
        )
        .expect("cpu neg.out");
        // _to_copy(Tensor self, *, dtype, layout, device, pin_memory, non_blocking,
        // memory_format): host -> device through the device's registered transfer,
        // the generic path a CPU `_to_copy` kernel uses for any device.
        cpu.impl_(
            "_to_copy",
            cpu_kernel(|s| {
                let args: Vec<IValue> = s.split_off(s.len() - 7);
                let mut it = args.into_iter();
                let t = tensor_arg(it.next().expect("self"));
                let device = match it.nth(2) {
                    Some(IValue::Device(d)) => d,
                    _ => Device::cpu(),
                };
                let r = if device.is_cpu() {
                    t.clone()
                } else {
                    opal::fallback::copy_to_device(&t, device)?
                };
                s.push(IValue::Tensor(r));
                Ok(())
            }),
        )
        .expect("cpu _to_copy");
        cpu.leak();
    });
}

fn to_cpu(t: &Tensor) -> Tensor {
    ops::_to_copy::call(t, None, None, Some(Device::cpu()), None, false, None).expect("to cpu")
}

fn values(t: &Tensor) -> Vec<f32> {
    to_cpu(t).to_vec::<f32>().expect("f32 values")
}

fn arange(n: i64, device: Device) -> Tensor {
    ops::arange_start_step::call(
        &Scalar::Int(0),
        &Scalar::Int(n),
        &Scalar::Int(1),
        Some(DType::F32),
        None,
        Some(device),
        None,
    )
    .expect("arange")
}

#[test]
fn memory_is_a_separate_pool_reached_only_by_copies() {
    let _serial = FALLBACK_COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    let dev = emu();
    let before = opal_emu::stats(dev).unwrap();
    let t = ops::full::call(
        &[2, 3],
        &Scalar::Float(1.5),
        Some(DType::F32),
        None,
        Some(dev),
        None,
    )
    .unwrap();
    assert_eq!(t.device(), dev);
    // The host cannot read device memory...
    let err = t.to_vec::<f32>().unwrap_err().to_string();
    assert!(err.contains("emu"), "{err}");
    // ...only an explicit copy can.
    assert_eq!(values(&t), vec![1.5; 6]);
    let after = opal_emu::stats(dev).unwrap();
    assert!(after.d2h_bytes >= before.d2h_bytes + 24);
    assert!(after.allocations > before.allocations);
    // Copies to the device go through the emu `_to_copy` kernel.
    let host = Tensor::from_slice(&[1.0f32, -2.0, 3.0], &[3]).unwrap();
    let on = ops::_to_copy::call(&host, None, None, Some(dev), None, false, None).unwrap();
    assert_eq!(on.device(), dev);
    assert_eq!(values(&on), vec![1.0, -2.0, 3.0]);
}

#[test]
fn native_kernels_run_on_the_device() {
    let _serial = FALLBACK_COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    let _g = COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    let dev = emu();
    let fallbacks = opal::fallback::calls();
    let launches = opal_emu::stats(dev).unwrap().launches;
    let a = ops::view::call(&arange(6, dev), &[2, 3]).unwrap();
    let b = ops::full::call(
        &[2, 3],
        &Scalar::Float(2.0),
        Some(DType::F32),
        None,
        Some(dev),
        None,
    )
    .unwrap();
    // add.Tensor / mul.Tensor are derived from emu's add.out / mul.out kernels.
    let sum = ops::add_tensor::call(&a, &b, &Scalar::Int(1)).unwrap();
    assert_eq!(sum.device(), dev);
    assert_eq!(values(&sum), vec![2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    let prod = ops::mul_tensor::call(&a, &b).unwrap();
    assert_eq!(values(&prod), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
    let diff = ops::sub_tensor::call(&a, &b, &Scalar::Float(2.0)).unwrap();
    assert_eq!(values(&diff), vec![-4.0, -3.0, -2.0, -1.0, 0.0, 1.0]);
    assert_eq!(
        values(&ops::relu::call(&diff).unwrap()),
        vec![0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    );
    // In place, through the derived add_ kernel: writes into `a` on the device.
    let r = ops::add_tensor_::call(&a, &b, &Scalar::Int(1)).unwrap();
    assert!(r.is_same(&a));
    assert_eq!(values(&a), vec![2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    let m = ops::view::call(&arange(6, dev), &[3, 2]).unwrap();
    let mm = ops::mm::call(&a, &m).unwrap();
    assert_eq!(mm.sizes(), &[2, 2]);
    assert_eq!(values(&mm), vec![22.0, 31.0, 40.0, 58.0]);
    // sum(x): the pinned kernel, dtype at its default.
    let s = ops::sum::call(&a, None).unwrap();
    assert_eq!(values(&s), vec![27.0]);
    assert_eq!(
        opal::fallback::calls(),
        fallbacks,
        "nothing went to the CPU"
    );
    assert!(opal_emu::stats(dev).unwrap().launches >= launches + 8);
}

#[test]
fn pinned_kernel_gets_defaults_and_the_fallback_gets_the_rest() {
    let _serial = FALLBACK_COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    let _g = COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    let dev = emu();
    let x = arange(4, dev);
    let before = opal::fallback::calls();
    let native = ops::sum::call(&x, None).unwrap();
    assert_eq!(native.dtype(), DType::F32);
    assert_eq!(opal::fallback::calls(), before);
    // dtype=F64 is a value the pinned kernel predates: the adapter sends the call,
    // with every argument, to the CPU fallback; the result comes back to emu.
    let promoted = ops::sum::call(&x, Some(DType::F64)).unwrap();
    assert_eq!(opal::fallback::calls(), before + 1);
    assert_eq!(promoted.device(), dev);
    assert_eq!(promoted.dtype(), DType::F64);
    assert_eq!(to_cpu(&promoted).to_vec::<f64>().unwrap(), vec![6.0]);
}

#[test]
fn unsupported_ops_run_on_the_cpu_and_mutations_come_back() {
    let _serial = FALLBACK_COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    let _g = COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    let dev = emu();
    let x = arange(3, dev);
    let out = ops::full::call(
        &[1],
        &Scalar::Float(0.0),
        Some(DType::F32),
        None,
        Some(dev),
        None,
    )
    .unwrap();
    let before = opal::fallback::calls();
    let h2d = opal_emu::stats(dev).unwrap().h2d_bytes;
    // neg.out has no emu kernel: CPU fallback; `out` (wrong size) is resized and
    // written on the device, and the returned handle is the caller's tensor.
    let r = ops::neg_out::call(&x, &out).unwrap();
    assert_eq!(opal::fallback::calls(), before + 1);
    assert!(r.is_same(&out));
    assert_eq!(out.sizes(), &[3]);
    assert_eq!(out.device(), dev);
    assert_eq!(values(&out), vec![0.0, -1.0, -2.0]);
    assert!(opal_emu::stats(dev).unwrap().h2d_bytes >= h2d + 12);
}

#[test]
fn two_private_use_backends_coexist() {
    let _serial = FALLBACK_COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    let (e1, e2) = (emu(), emu2());
    assert_eq!(e1.to_string(), "emu:0");
    assert_eq!(e2.to_string(), "emu2:0");
    let a = ops::full::call(
        &[4],
        &Scalar::Float(1.0),
        Some(DType::F32),
        None,
        Some(e2),
        None,
    )
    .unwrap();
    let b = ops::full::call(
        &[4],
        &Scalar::Float(2.5),
        Some(DType::F32),
        None,
        Some(e2),
        None,
    )
    .unwrap();
    let launches = opal_emu::stats(e2).unwrap().launches;
    // add.Tensor on emu2: derived from emu2's own add.out kernel, in emu2's pool.
    let c = ops::add_tensor::call(&a, &b, &Scalar::Int(1)).unwrap();
    assert_eq!(c.device(), e2);
    assert!(opal_emu::stats(e2).unwrap().launches > launches);
    assert_eq!(values(&c), vec![3.5; 4]);
    // Moving between the two devices is a device-to-device copy.
    let on_emu = ops::_to_copy::call(&c, None, None, Some(e1), None, false, None).unwrap();
    assert_eq!(on_emu.device(), e1);
    assert_eq!(values(&on_emu), vec![3.5; 4]);
    // emu2 has no relu and no fallback: the dispatcher's error names op and device.
    let err = ops::relu::call(&c).unwrap_err().to_string();
    assert!(err.contains("aten::relu") && err.contains("emu2"), "{err}");
    // emu has a fallback, emu2 does not: each backend keeps its own.
    assert!(ops::relu::call(&on_emu).is_ok());
}
