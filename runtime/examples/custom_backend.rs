//! A custom backend from outside the tree: names the PrivateUse3 slot `toy`,
//! gives it an allocator, registers kernels for `add.Tensor` and `relu` through
//! `opal::dispatch::Library`, and runs those ops on `toy` tensors. An op without a
//! `toy` kernel is an error naming the op, the key and the device.
//!
//! Run: `cargo run --release -p opal-runtime --example custom_backend`

use opal::dispatch::{DispatchKey, DispatchKeySet, Library};
use opal::tensor::{register_allocator, CpuAllocator};
use opal::{ops, DType, Device, DeviceType, IntoIValue, OpalError, Result, Scalar, Tensor};

/// The toy device keeps its memory on the host (a real backend would allocate on
/// its accelerator and copy through `opal::fallback::register_transfer`).
static TOY_MEMORY: CpuAllocator = CpuAllocator;

/// `f32` only, same shapes only: anything else is an `Err` naming the op.
fn check(op: &str, ts: &[&Tensor]) -> Result<()> {
    for t in ts {
        if t.dtype() != DType::F32 || t.sizes() != ts[0].sizes() {
            return Err(OpalError::msg(format!(
                "{op} on toy: f32 tensors of one shape only, got {} {:?} and {} {:?}",
                ts[0].dtype(),
                ts[0].sizes(),
                t.dtype(),
                t.sizes()
            )));
        }
    }
    Ok(())
}

/// `aten::add.Tensor` on toy: `self + alpha * other`, element by element.
fn toy_add(_ks: DispatchKeySet, a: &Tensor, b: &Tensor, alpha: &Scalar) -> Result<Tensor> {
    check("add.Tensor", &[a, b])?;
    let alpha = alpha.to_f64() as f32;
    let out = Tensor::empty(a.sizes(), DType::F32, a.device())?;
    let values: Vec<f32> = {
        let (ra, rb) = (a.read::<f32>()?, b.read::<f32>()?);
        ra.iter()
            .zip(rb.iter())
            .map(|(x, y)| x + alpha * y)
            .collect()
    };
    out.write::<f32>()?.copy_from(&values)?;
    Ok(out)
}

/// `aten::relu` on toy.
fn toy_relu(_ks: DispatchKeySet, a: &Tensor) -> Result<Tensor> {
    check("relu", &[a])?;
    let out = Tensor::empty(a.sizes(), DType::F32, a.device())?;
    let values: Vec<f32> = a.read::<f32>()?.iter().map(|x| x.max(0.0)).collect();
    out.write::<f32>()?.copy_from(&values)?;
    Ok(out)
}

/// Registers the toy backend; the registrations live as long as the returned
/// library (a backend crate's `init()` would `leak()` it).
fn register_toy() -> Result<Library> {
    opal::register_privateuse_backend(DispatchKey::PrivateUse3, "toy")?;
    register_allocator(DeviceType::PrivateUse3, &TOY_MEMORY);
    let mut lib = Library::new("aten", DispatchKey::PrivateUse3);
    lib.impl_("add.Tensor", ops::add_tensor::kernel(toy_add))?
        .impl_("relu", ops::relu::kernel(toy_relu))?;
    Ok(lib)
}

/// A toy tensor holding `values`.
fn toy_tensor(device: Device, values: &[f32]) -> Result<Tensor> {
    let t = Tensor::empty(&[values.len() as i64], DType::F32, device)?;
    t.write::<f32>()?.copy_from(values)?;
    Ok(t)
}

fn main() -> Result<()> {
    let _toy = register_toy()?;
    let device: Device = "toy:0".parse()?;
    let a = toy_tensor(device, &[1.0, -2.0, 3.0])?;
    let b = toy_tensor(device, &[0.5, 0.5, -4.0])?;

    // Typed calls dispatch on the tensors' key set to the toy kernels.
    let c = ops::add_tensor::with(&a, &b, ops::add_tensor::Options::default().alpha(2))?;
    let r = ops::relu(&c)?;
    println!("a + 2 b       = {:?} on {}", c.to_vec::<f32>()?, c.device());
    println!("relu(a + 2 b) = {:?}", r.to_vec::<f32>()?);
    assert_eq!(c.device(), device);
    assert_eq!(c.to_vec::<f32>()?, vec![2.0, -1.0, -5.0]);
    assert_eq!(r.to_vec::<f32>()?, vec![2.0, 0.0, 0.0]);

    // The `std::ops` operators go through the same dispatcher.
    assert_eq!((&a + &b)?.to_vec::<f32>()?, vec![1.5, -1.5, -1.0]);

    // Boxed calls by name reach the same typed kernel.
    let mut stack = vec![
        a.clone().into_ivalue(),
        b.clone().into_ivalue(),
        Scalar::Int(1).into_ivalue(),
    ];
    opal::dispatch::Dispatcher::global().call_boxed("aten::add.Tensor", &mut stack)?;
    let boxed: Tensor = opal::ivalue::pop(&mut stack)?;
    println!("boxed add     = {:?}", boxed.to_vec::<f32>()?);
    assert_eq!(boxed.to_vec::<f32>()?, vec![1.5, -1.5, -1.0]);

    // No toy kernel for mul: a clear error, not a panic.
    let err = ops::mul_tensor(&a, &b).unwrap_err();
    println!("mul on toy    -> error: {err}");
    assert!(err.to_string().contains("PrivateUse3"));
    // A kernel's own checks are errors too.
    let wrong = toy_tensor(device, &[1.0])?;
    assert!(ops::add_tensor(&a, &wrong).is_err());
    Ok(())
}

#[cfg(test)]
#[test]
fn example_runs() -> Result<()> {
    main()
}
