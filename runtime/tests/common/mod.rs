//! Hand-written stand-ins for what generated code provides: op definitions, typed
//! stubs and per-op boxed adapters for a unary test signature.
#![allow(dead_code)]

use opal::dispatch::{
    dispatch_keyset, DispatchKeySet, Kernel, KernelFunction, OpSlot, OperatorHandle,
};
use opal::ivalue::pop;
use opal::{IntoIValue, Result, Stack, Tensor};
use std::sync::Arc;

/// `test::*(Tensor self) -> int`.
pub type Sig = fn(DispatchKeySet, &Tensor) -> Result<i64>;

/// Defines a static `OpDef` for a unary op named `$name` with signature `$sig`.
#[macro_export]
macro_rules! unary_def {
    ($def:ident, $name:literal) => {
        $crate::unary_def!($def, $name, $crate::common::Sig);
    };
    ($def:ident, $name:literal, $sig:ty) => {
        static $def: opal::dispatch::OpDef = opal::dispatch::OpDef {
            name: $name,
            schema: concat!($name, "(Tensor self) -> int"),
            args: &[opal::dispatch::ArgDef {
                name: "self",
                ty: "Tensor",
                default: None,
                kwarg_only: false,
                out: false,
                mutable: false,
            }],
            returns: &["int"],
            signature: || std::any::TypeId::of::<$sig>(),
        };
    };
}

/// The boxed adapter of `Sig` (pops the tensor, calls, pushes the int).
pub fn adapter(f: Sig) -> Arc<opal::dispatch::BoxedKernelFn> {
    Arc::new(
        move |_op: &OperatorHandle, ks: DispatchKeySet, s: &mut Stack| {
            let t: Tensor = pop(s)?;
            let r = f(ks, &t)?;
            s.push(r.into_ivalue());
            Ok(())
        },
    )
}

/// A typed kernel with its adapter.
pub fn typed(f: Sig) -> KernelFunction {
    KernelFunction::typed(f, adapter(f))
}

/// A boxed kernel that ignores its argument and returns `v`.
pub fn boxed_const(v: i64) -> KernelFunction {
    KernelFunction::from_boxed_fn(move |_op, _ks, s| {
        let _t: Tensor = pop(s)?;
        s.push(opal::IValue::Int(v));
        Ok(())
    })
}

/// The typed stub, as generated code writes it.
pub fn call(slot: &OpSlot<Sig>, t: &Tensor) -> Result<i64> {
    let ks = dispatch_keyset(DispatchKeySet::empty().with_tensor(t));
    redispatch(slot, ks, t)
}

/// The typed redispatch entry point (explicit key set).
pub fn redispatch(slot: &OpSlot<Sig>, ks: DispatchKeySet, t: &Tensor) -> Result<i64> {
    let op = slot.get()?;
    match op.lookup(ks)? {
        Kernel::Typed(f) => f(ks, t),
        Kernel::Boxed(k) => {
            let mut s = vec![t.into_ivalue()];
            k(op.handle(), ks, &mut s)?;
            pop(&mut s)
        }
    }
}
