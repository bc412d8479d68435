//! The treadmill test: `build.rs` copies the root native YAML, adds new defaulted
//! arguments to ops emu and emu2 implement (`add.out` gains `fast_math=False`,
//! `mul.out` `rounding=0`, `relu` `cap=None`, `sum` `mode="fast"`) and regenerates
//! both backends against it (namespace `evolved`). Here the unchanged kernel sources
//! (`src/kernels.rs`, `src/emu2.rs`) are compiled against the evolved traits — so
//! the backend compiles unchanged — and the evolved ops are run: the defaults reach
//! the old kernels, a non-default value reaches emu's CPU fallback with the real
//! arguments, and emu2 (no fallback) fails with an error naming op, argument, value
//! and backend.

use std::sync::{Arc, Mutex, Once};

use opal::dispatch::{DispatchKey, KernelFunction, Library, OperatorHandle};
use opal::{DType, Device, IValue, Scalar, Stack, Tensor};

// The kernel sources name their surroundings as `super::{device, generated,
// generated2, kernels}`: here those are the device layer of `opal_emu` and the
// code generated from the evolved YAML.
use opal_emu::device;

/// Generated from `emu.yaml` against the evolved YAML.
mod generated {
    include!(concat!(env!("OUT_DIR"), "/backend_emu_evolved.rs"));
}

/// Generated from `emu2.yaml` against the evolved YAML.
mod generated2 {
    include!(concat!(env!("OUT_DIR"), "/backend_emu2_evolved.rs"));
}

/// emu's kernels, unchanged, compiled against the evolved `EmuKernels`.
#[path = "../src/kernels.rs"]
mod kernels;

/// emu2's kernels, unchanged, compiled against the evolved `Emu2Kernels`.
#[path = "../src/emu2.rs"]
mod emu2;

use generated::ops;

/// `fast_math` values the CPU kernel of `evolved::add.out` received.
static SEEN: Mutex<Vec<bool>> = Mutex::new(Vec::new());

/// Held by the tests that compare `opal::fallback::calls()` before and after: the
/// counter is process-wide and the test harness runs tests on several threads, so an
/// unserialised neighbour's fallback call would show up in the other's count.
static FALLBACK_COUNTER: Mutex<()> = Mutex::new(());

fn setup() -> (Device, Device) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        opal_emu::init().expect("emu");
        opal_emu::init_emu2().expect("emu2");
        generated::register::<kernels::Emu>()
            .expect("evolved emu registers")
            .leak();
        generated2::register::<emu2::Emu2>()
            .expect("evolved emu2 registers")
            .leak();
        // The CPU kernel the fallback reaches: honours the new argument and records it.
        let mut cpu = Library::new("evolved", DispatchKey::CPU);
        cpu.impl_(
            "add.out",
            KernelFunction::boxed(Arc::new(|_: &OperatorHandle, _, s: &mut Stack| {
                let args = s.split_off(s.len() - 5);
                let [IValue::Tensor(a), IValue::Tensor(b), IValue::Scalar(alpha), IValue::Bool(fast), IValue::Tensor(out)] =
                    <[IValue; 5]>::try_from(args).map_err(|_| opal::OpalError::msg("5 arguments"))?
                else {
                    return Err(opal::OpalError::msg("unexpected argument types"));
                };
                SEEN.lock().unwrap_or_else(|e| e.into_inner()).push(fast);
                let (x, y) = (a.to_vec::<f32>()?, b.to_vec::<f32>()?);
                let al = alpha.to_f64() as f32;
                let v: Vec<f32> = x.iter().zip(&y).map(|(p, q)| p + al * q).collect();
                out.resize_(a.sizes())?;
                out.write::<f32>()?.copy_from(&v)?;
                s.push(IValue::Tensor(out));
                Ok(())
            })),
        )
        .expect("cpu evolved::add.out");
        cpu.leak();
    });
    (
        Device::parse("emu:0").unwrap(),
        Device::parse("emu2:0").unwrap(),
    )
}

fn on(device: Device, v: &[f32]) -> Tensor {
    let host = Tensor::from_slice(v, &[v.len() as i64]).unwrap();
    kernels::to_copy(&host, None, Some(device)).unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    device::copy_to_host(t).unwrap().to_vec::<f32>().unwrap()
}

#[test]
fn evolved_schemas_are_registered() {
    let _serial = FALLBACK_COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    setup();
    let add = opal::dispatch::Dispatcher::global()
        .find("evolved::add.out")
        .expect("defined");
    assert_eq!(
        add.schema(),
        Some("add.out(Tensor self, Tensor other, *, Scalar alpha=1, bool fast_math=False, Tensor(a!) out) -> Tensor(a!)")
    );
    assert!(add.has_kernel_for(DispatchKey::PrivateUse1));
    assert!(add.has_kernel_for(DispatchKey::PrivateUse2));
}

#[test]
fn defaults_reach_the_unchanged_kernels() {
    let _serial = FALLBACK_COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    let (emu, _) = setup();
    let calls = opal::fallback::calls();
    let a = on(emu, &[1.0, 2.0, -3.0]);
    let b = on(emu, &[10.0, 20.0, 30.0]);
    let out = on(emu, &[0.0; 3]);
    ops::add_out::call(&a, &b, &Scalar::Int(2), false, &out).unwrap();
    assert_eq!(values(&out), vec![21.0, 42.0, 57.0]);
    ops::mul_out::call(&a, &b, 0, &out).unwrap();
    assert_eq!(values(&out), vec![10.0, 40.0, -90.0]);
    let r = ops::relu::call(&a, None).unwrap();
    assert_eq!(values(&r), vec![1.0, 2.0, 0.0]);
    let s = ops::sum::call(&a, None, "fast").unwrap();
    assert_eq!(values(&s), vec![0.0]);
    assert_eq!(opal::fallback::calls(), calls, "all ran on the emu kernels");
}

#[test]
fn a_non_default_value_reaches_the_fallback_with_the_real_arguments() {
    let _serial = FALLBACK_COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    let (emu, _) = setup();
    let a = on(emu, &[1.0, 2.0]);
    let b = on(emu, &[0.5, 0.25]);
    let out = on(emu, &[0.0; 2]);
    let calls = opal::fallback::calls();
    let r = ops::add_out::call(&a, &b, &Scalar::Int(4), true, &out).unwrap();
    assert!(opal::fallback::calls() > calls);
    assert!(r.is_same(&out));
    assert_eq!(values(&out), vec![3.0, 3.0]);
    assert_eq!(
        *SEEN.lock().unwrap(),
        vec![true],
        "the CPU kernel saw fast_math=true"
    );
}

#[test]
fn without_a_fallback_the_error_names_op_argument_value_and_backend() {
    let _serial = FALLBACK_COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    let (_, emu2) = setup();
    let a = on(emu2, &[1.0]);
    let out = on(emu2, &[0.0]);
    ops::add_out::call(&a, &a, &Scalar::Int(1), false, &out).unwrap();
    assert_eq!(values(&out), vec![2.0]);
    let err = ops::add_out::call(&a, &a, &Scalar::Int(1), true, &out)
        .unwrap_err()
        .to_string();
    for part in [
        "evolved::add.out",
        "fast_math",
        "true",
        "Emu2",
        "no fallback",
    ] {
        assert!(err.contains(part), "{part:?} not in: {err}");
    }
    let _ = DType::F32;
}
