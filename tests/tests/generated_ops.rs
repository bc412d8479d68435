//! Behaviour of the operator layer generated into `opal` (from the runtime crate's
//! `native_functions.yaml`): typed stubs and options, methods, boxed calls served by
//! typed kernels, structured derivation of `add`/`add_` from an `add.out` kernel and
//! a Meta kernel, and BackendSelect routing of factory ops by `device`.
//!
//! The kernels here are test doubles registered for this process only (no backend
//! crate is initialised in this test binary).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

use opal::dispatch::{DispatchKey, DispatchKeySet, Dispatcher, Library};
use opal::ops::{self, TensorOps};
use opal::{Device, IValue, Result, Scalar, Tensor};

static OUT_CALLS: AtomicUsize = AtomicUsize::new(0);
static META_CALLS: AtomicUsize = AtomicUsize::new(0);

fn scalar_f32(s: &Scalar) -> f32 {
    match *s {
        Scalar::Int(i) => i as f32,
        Scalar::Float(f) => f as f32,
        Scalar::Bool(b) => f32::from(u8::from(b)),
        Scalar::Complex(re, _) => re as f32,
    }
}

/// `add.out` for same-shape f32 CPU tensors: `out = self + alpha * other`.
fn add_out_cpu(
    _ks: DispatchKeySet,
    this: &Tensor,
    other: &Tensor,
    alpha: &Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    OUT_CALLS.fetch_add(1, Ordering::SeqCst);
    let a = this.to_vec::<f32>()?;
    let b = other.to_vec::<f32>()?;
    let k = scalar_f32(alpha);
    let sum: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + k * y).collect();
    out.write::<f32>()?.copy_from(&sum)?;
    Ok(out.clone())
}

/// The Meta kernel of `add.Tensor` for 1-d inputs: the broadcast shape and the dtype.
fn add_meta(_ks: DispatchKeySet, this: &Tensor, other: &Tensor, _alpha: &Scalar) -> Result<Tensor> {
    META_CALLS.fetch_add(1, Ordering::SeqCst);
    assert!(
        this.device().is_meta(),
        "the meta function runs on meta tensors"
    );
    assert!(
        other.device().is_meta(),
        "the meta function runs on meta tensors"
    );
    let n = this.numel().max(other.numel());
    Tensor::empty(&[n], this.dtype(), Device::meta())
}

/// `zeros` on any backend: records which device it was asked for.
fn zeros_kernel(
    _ks: DispatchKeySet,
    size: &[i64],
    dtype: Option<opal::DType>,
    _layout: Option<opal::Layout>,
    device: Option<Device>,
    _pin: Option<bool>,
) -> Result<Tensor> {
    let t = Tensor::empty(
        size,
        dtype.unwrap_or(opal::DType::F32),
        device.unwrap_or(Device::cpu()),
    )?;
    if t.device().is_cpu() {
        t.write::<f32>()?.fill(0.0);
    }
    Ok(t)
}

fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        ops::init().expect("defs");
        let mut cpu = Library::new("aten", DispatchKey::CPU);
        cpu.impl_("add.out", ops::add_out::kernel(add_out_cpu))
            .and_then(|l| {
                l.impl_(
                    "add.Tensor",
                    ops::add_tensor::kernel(ops::add_tensor::structured),
                )
            })
            .and_then(|l| {
                l.impl_(
                    "add_.Tensor",
                    ops::add_tensor_::kernel(ops::add_tensor_::structured),
                )
            })
            .and_then(|l| l.impl_("zeros", ops::zeros::kernel(zeros_kernel)))
            .expect("cpu kernels");
        cpu.leak();
        let mut meta = Library::new("aten", DispatchKey::Meta);
        meta.impl_("add.Tensor", ops::add_tensor::kernel(add_meta))
            .and_then(|l| l.impl_("zeros", ops::zeros::kernel(zeros_kernel)))
            .expect("meta kernels");
        meta.leak();
    });
}

fn t(v: &[f32]) -> Tensor {
    Tensor::from_slice(v, &[v.len() as i64]).expect("tensor")
}

#[test]
fn structured_functional_from_out_kernel_and_meta() {
    register();
    let before = (
        OUT_CALLS.load(Ordering::SeqCst),
        META_CALLS.load(Ordering::SeqCst),
    );
    let c = ops::add_tensor(&t(&[1.0, 2.0]), &t(&[10.0, 20.0])).expect("add");
    assert_eq!(c.to_vec::<f32>().unwrap(), [11.0, 22.0]);
    assert_eq!(c.sizes(), &[2]);
    assert!(c.device().is_cpu());
    assert!(OUT_CALLS.load(Ordering::SeqCst) > before.0);
    assert!(META_CALLS.load(Ordering::SeqCst) > before.1);
}

#[test]
fn options_method_and_inplace_variant() {
    register();
    let a = t(&[1.0, 2.0]);
    let b = t(&[10.0, 20.0]);
    // Method form with options: alpha = 2.
    let c = a
        .add_tensor_with(&b, ops::add_tensor::Options::default().alpha(2))
        .expect("add with alpha");
    assert_eq!(c.to_vec::<f32>().unwrap(), [21.0, 42.0]);
    // In-place structured variant writes into `a` and hands it back.
    let r = a.add_tensor_(&b).expect("add_");
    assert_eq!(a.to_vec::<f32>().unwrap(), [11.0, 22.0]);
    assert_eq!(r.to_vec::<f32>().unwrap(), [11.0, 22.0]);
    // A shape that does not fit `self` is refused by the derived in-place kernel.
    let err = t(&[1.0]).add_tensor_(&t(&[1.0, 2.0]));
    assert!(err.is_err());
}

#[test]
fn typed_kernels_serve_boxed_calls_by_name() {
    register();
    let mut stack = vec![
        IValue::Tensor(t(&[1.0, 2.0])),
        IValue::Tensor(t(&[3.0, 4.0])),
        IValue::Scalar(Scalar::Int(1)),
    ];
    Dispatcher::global()
        .call_boxed("aten::add.Tensor", &mut stack)
        .expect("boxed call");
    assert_eq!(stack.len(), 1);
    match stack.pop() {
        Some(IValue::Tensor(r)) => assert_eq!(r.to_vec::<f32>().unwrap(), [4.0, 6.0]),
        other => panic!("unexpected return {other:?}"),
    }
}

#[test]
fn defaults_are_recorded_in_the_registry() {
    let def = &ops::add_tensor::DEF;
    assert_eq!(def.name, "aten::add.Tensor");
    let alpha = def.args.iter().find(|a| a.name == "alpha").expect("alpha");
    assert!(alpha.kwarg_only);
    let default = alpha.default.expect("alpha has a default");
    assert!(matches!(default(), IValue::Scalar(Scalar::Int(1))));
    assert!(ops::ALL_DEFS.iter().any(|d| d.name == "aten::add.out"));
}

#[test]
fn factory_ops_route_by_device_through_backend_select() {
    register();
    let z = ops::zeros(&[2, 3]).expect("zeros on the default device");
    assert!(z.device().is_cpu());
    assert_eq!(z.sizes(), &[2, 3]);
    assert_eq!(z.to_vec::<f32>().unwrap(), [0.0; 6]);
    let m = ops::zeros::with(&[4], ops::zeros::Options::default().device(Device::meta()))
        .expect("zeros on meta");
    assert!(m.device().is_meta());
    assert_eq!(m.sizes(), &[4]);
}
