//! The CPU backend through the dispatcher: `opal_cpu::init()` registers the kernels
//! of `backend.yaml`, and generated entry points (`opal::ops::…`, boxed calls by
//! name) reach them with correct values — functional, view, out= and in-place ops.

use opal::dispatch::{DispatchKey, Dispatcher};
use opal::{ops, DType, IValue, Result, Scalar, Tensor};

fn init() {
    opal_cpu::init().expect("CPU backend registers");
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().expect("f32 tensor")
}

#[test]
fn init_is_idempotent_and_registers_at_the_cpu_key() -> Result<()> {
    init();
    opal_cpu::init()?;
    let d = Dispatcher::global();
    for name in [
        "aten::add.Tensor",
        "aten::mm",
        "aten::add.Scalar_out",
        "aten::zeros",
    ] {
        let op = d.find(name).expect("defined by init");
        assert!(
            op.has_kernel_for(DispatchKey::CPU),
            "{name}: {}",
            op.dump_table()
        );
    }
    Ok(())
}

#[test]
fn add_with_broadcasting_and_alpha() -> Result<()> {
    init();
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    let b = Tensor::from_slice(&[10.0f32, 20.0], &[2])?;
    assert_eq!(f32s(&ops::add_tensor(&a, &b)?), [11.0, 22.0, 13.0, 24.0]);
    let c = ops::add_tensor::with(&a, &b, ops::add_tensor::Options::default().alpha(2))?;
    assert_eq!(f32s(&c), [21.0, 42.0, 23.0, 44.0]);
    // Type promotion: i64 + f32 -> f32.
    let i = Tensor::from_slice(&[1i64, 2], &[2])?;
    let p = ops::add_tensor(&i, &b)?;
    assert_eq!(p.dtype(), DType::F32);
    assert_eq!(f32s(&p), [11.0, 22.0]);
    Ok(())
}

#[test]
fn mm_sum_and_softmax() -> Result<()> {
    init();
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    let b = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2])?;
    let m = ops::mm(&a, &b)?;
    assert_eq!(m.sizes(), [2, 2]);
    assert_eq!(f32s(&m), [4.0, 5.0, 10.0, 11.0]);

    assert_eq!(ops::sum(&a)?.item()?, Scalar::Float(21.0));
    let rows = ops::sum_dim_intlist::call(&a, Some(&[1][..]), false, None)?;
    assert_eq!(f32s(&rows), [6.0, 15.0]);

    let x = Tensor::from_slice(&[0.0f32, 0.0, 1.0f32.ln(), 2.0f32.ln()], &[2, 2])?;
    let s = ops::_softmax(&x, 1, false)?;
    let v = f32s(&s);
    for (got, want) in v.iter().zip([0.5, 0.5, 1.0 / 3.0, 2.0 / 3.0]) {
        assert!((got - want).abs() < 1e-6, "{v:?}");
    }
    Ok(())
}

#[test]
fn views_share_storage() -> Result<()> {
    init();
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    let t = ops::transpose_int(&a, 0, 1)?;
    assert_eq!(t.sizes(), [3, 2]);
    assert_eq!(t.strides(), [1, 3]);
    assert_eq!(f32s(&t), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    // A write through the original shows through the view.
    ops::mul_scalar_(&a, &Scalar::Int(10))?;
    assert_eq!(f32s(&t), [10.0, 40.0, 20.0, 50.0, 30.0, 60.0]);
    let col = ops::select_int(&a, 1, 2)?;
    assert_eq!(f32s(&col), [30.0, 60.0]);
    Ok(())
}

#[test]
fn out_and_in_place_variants() -> Result<()> {
    init();
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
    let b = Tensor::from_slice(&[4.0f32, 5.0, 6.0], &[3])?;
    // out= resizes an empty `out` and returns a handle to it.
    let out = Tensor::empty(&[0], DType::F32, opal::Device::cpu())?;
    let r = ops::mul_out(&a, &b, &out)?;
    assert_eq!(out.sizes(), [3]);
    assert_eq!(f32s(&out), [4.0, 10.0, 18.0]);
    assert_eq!(f32s(&r), [4.0, 10.0, 18.0]);
    // The autogen out= op with a CPU kernel.
    let out2 = Tensor::empty(&[3], DType::F32, opal::Device::cpu())?;
    ops::add_scalar_out::call(&a, &Scalar::Float(0.5), &Scalar::Int(2), &out2)?;
    assert_eq!(f32s(&out2), [2.0, 3.0, 4.0]);
    // In place: mutates `a`, returns it.
    let r = ops::add_tensor_(&a, &b)?;
    assert_eq!(f32s(&a), [5.0, 7.0, 9.0]);
    assert_eq!(f32s(&r), [5.0, 7.0, 9.0]);
    // In place may not change the shape of self.
    let wide = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    assert!(ops::add_tensor_(&a, &wide).is_err());
    Ok(())
}

#[test]
fn factories_and_boxed_calls_by_name() -> Result<()> {
    init();
    let z = ops::zeros::call(&[2, 2], Some(DType::I64), None, None, None)?;
    assert_eq!(z.dtype(), DType::I64);
    assert_eq!(z.to_vec::<i64>()?, [0, 0, 0, 0]);

    let a = Tensor::from_slice(&[1.0f64, 2.0], &[2])?;
    let mut stack = vec![
        IValue::Tensor(a.clone()),
        IValue::Tensor(a),
        IValue::Scalar(Scalar::Int(3)),
    ];
    Dispatcher::global().call_boxed("aten::add.Tensor", &mut stack)?;
    let [IValue::Tensor(r)] = stack.as_slice() else {
        panic!("one tensor returned, got {stack:?}");
    };
    assert_eq!(r.to_vec::<f64>()?, [4.0, 8.0]);
    Ok(())
}

#[test]
fn bad_input_is_an_error() -> Result<()> {
    init();
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
    let b = Tensor::from_slice(&[1.0f32, 2.0], &[2])?;
    assert!(ops::add_tensor(&a, &b).is_err());
    let m = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    assert!(ops::mm(&m, &a).is_err());
    assert!(ops::view(&m, &[3]).is_err());
    Ok(())
}

/// The operators no kernel serves for CPU tensors after `init` (no CPU kernel and
/// no composite kernel in the runtime): none. The list is asserted exactly, so an op
/// added to the YAML without a CPU or composite kernel fails this test until it gets
/// one (or is listed here on purpose).
const MISSING_ON_CPU: &[&str] = &[];

#[test]
fn every_op_but_the_listed_ones_has_a_kernel_for_cpu_tensors() -> Result<()> {
    init();
    let keys = opal::dispatch::dispatch_keyset(Tensor::from_slice(&[0.0f32], &[1])?.key_set());
    let d = Dispatcher::global();
    let mut missing: Vec<&str> = ops::ALL_DEFS
        .iter()
        .map(|def| def.name)
        .filter(|name| {
            let op = d.find(name).expect("defined by init");
            op.resolve_key(keys).is_err()
        })
        .collect();
    missing.sort_unstable();
    let mut listed = MISSING_ON_CPU.to_vec();
    listed.sort_unstable();
    assert_eq!(missing, listed);
    assert_eq!(ops::ALL_DEFS.len(), 423);
    Ok(())
}
