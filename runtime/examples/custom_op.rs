//! A custom operator: defines `myops::scaled_add(Tensor self, Tensor other,
//! float scale) -> Tensor` with a hand-written `OpDef`, registers a CPU kernel for
//! it, and calls it both typed (through an `OpSlot`, as generated stubs do) and
//! boxed (by name, with an `IValue` stack).
//!
//! Run: `cargo run --release -p opal-runtime --example custom_op`

use std::sync::Arc;

use opal::dispatch::{
    dispatch_keyset, ArgDef, DispatchKey, DispatchKeySet, Dispatcher, Kernel, KernelFunction,
    Library, OpDef, OpSlot, OperatorHandle,
};
use opal::ivalue::pop;
use opal::{ops, IValue, IntoIValue, Result, Scalar, Stack, Tensor};

/// The typed kernel signature: the dispatch key set, then the schema's arguments.
type Sig = fn(DispatchKeySet, &Tensor, &Tensor, f64) -> Result<Tensor>;

/// One positional argument without a default.
const fn arg(name: &'static str, ty: &'static str) -> ArgDef {
    ArgDef {
        name,
        ty,
        default: None,
        kwarg_only: false,
        out: false,
        mutable: false,
    }
}

/// The operator's definition, as generated code would emit it.
static SCALED_ADD: OpDef = OpDef {
    name: "myops::scaled_add",
    schema: "scaled_add(Tensor self, Tensor other, float scale) -> Tensor",
    args: &[
        arg("self", "Tensor"),
        arg("other", "Tensor"),
        arg("scale", "float"),
    ],
    returns: &["Tensor"],
    signature: || std::any::TypeId::of::<Sig>(),
};

/// The CPU kernel: `self + scale * other`, composed from existing ops (which
/// bring broadcasting, promotion and their own error messages).
fn scaled_add_cpu(_ks: DispatchKeySet, a: &Tensor, b: &Tensor, scale: f64) -> Result<Tensor> {
    let alpha = Scalar::Float(scale);
    ops::add_tensor::with(a, b, ops::add_tensor::Options::default().alpha(alpha))
}

/// The boxed adapter: lets the typed kernel serve boxed calls (pops the
/// arguments in reverse order, calls, pushes the result).
fn boxed(f: Sig) -> KernelFunction {
    KernelFunction::typed(
        f,
        Arc::new(
            move |_op: &OperatorHandle, ks: DispatchKeySet, s: &mut Stack| {
                let scale: f64 = pop(s)?;
                let other: Tensor = pop(s)?;
                let self_: Tensor = pop(s)?;
                let out = f(ks, &self_, &other, scale)?;
                s.push(out.into_ivalue());
                Ok(())
            },
        ),
    )
}

/// The typed entry point, as a generated stub writes it: resolve the op once,
/// compute the key set from the tensor arguments, call the kernel found.
fn scaled_add(a: &Tensor, b: &Tensor, scale: f64) -> Result<Tensor> {
    static SLOT: OpSlot<Sig> = OpSlot::new(&SCALED_ADD);
    let op = SLOT.get()?;
    let ks = dispatch_keyset(DispatchKeySet::empty().with_tensor(a).with_tensor(b));
    match op.lookup(ks)? {
        Kernel::Typed(f) => f(ks, a, b, scale),
        Kernel::Boxed(k) => {
            let mut s = vec![
                a.clone().into_ivalue(),
                b.clone().into_ivalue(),
                scale.into_ivalue(),
            ];
            k(op.handle(), ks, &mut s)?;
            pop(&mut s)
        }
    }
}

fn main() -> Result<()> {
    opal_cpu::init()?;
    let mut lib = Library::fragment("myops");
    lib.def(&SCALED_ADD)?;
    lib.impl_for("scaled_add", DispatchKey::CPU, boxed(scaled_add_cpu))?;

    let a = Tensor::try_from(vec![1.0f32, 2.0, 3.0])?;
    let b = Tensor::try_from(vec![10.0f32, 20.0, 30.0])?;

    // Typed.
    let typed = scaled_add(&a, &b, 0.5)?;
    println!("typed: scaled_add(a, b, 0.5) = {typed}");
    assert_eq!(typed.to_vec::<f32>()?, vec![6.0, 12.0, 18.0]);

    // Boxed, by name.
    let mut stack = vec![
        a.clone().into_ivalue(),
        b.clone().into_ivalue(),
        IValue::Double(-1.0),
    ];
    Dispatcher::global().call_boxed("myops::scaled_add", &mut stack)?;
    let boxed: Tensor = pop(&mut stack)?;
    println!("boxed: scaled_add(a, b, -1)  = {boxed}");
    assert_eq!(boxed.to_vec::<f32>()?, vec![-9.0, -18.0, -27.0]);

    // Misuse is an error: a wrong boxed argument, a device without a kernel.
    let mut bad = vec![a.clone().into_ivalue(), IValue::Int(3), IValue::Double(1.0)];
    let err = Dispatcher::global()
        .call_boxed("myops::scaled_add", &mut bad)
        .unwrap_err();
    println!("bad boxed call -> error: {err}");
    opal_meta::init()?;
    let m = ops::zeros::with(
        &[3],
        ops::zeros::Options::default().device(opal::Device::meta()),
    )?;
    let err = scaled_add(&m, &m, 1.0).unwrap_err();
    println!("meta call      -> error: {err}");
    assert!(err.to_string().contains("myops::scaled_add"));

    // Registrations end when the library is dropped (the definition stays).
    drop(lib);
    assert!(scaled_add(&a, &b, 1.0).is_err());
    Ok(())
}

#[cfg(test)]
#[test]
fn example_runs() -> Result<()> {
    main()
}
