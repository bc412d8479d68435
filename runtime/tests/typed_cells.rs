//! Typed lookups read the typed kernel from a cell that outlives its registration:
//! what they return is always a value that was registered, whatever its type (the
//! public API accepts any small `Copy + Eq` value as a "typed kernel" for an op
//! whose signature is that type, padded structs included), and dropping
//! registrations restores the previous one on the lock-free path too.

use crate::common;

use common::typed;
use opal::dispatch::{
    DispatchKey, DispatchKeySet, Dispatcher, Kernel, KernelFunction, OpSlot, RegistrationHandle,
};
use opal::{Result, Tensor};

/// Not a fn pointer: one word with three bytes of padding.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
struct Padded(u8, u32);

unary_def!(PADDED_DEF, "cells::padded", Padded);
static PADDED: OpSlot<Padded> = OpSlot::new(&PADDED_DEF);

unary_def!(STACK_DEF, "cells::stack");
static STACK: OpSlot<common::Sig> = OpSlot::new(&STACK_DEF);

fn one(_: DispatchKeySet, _: &Tensor) -> Result<i64> {
    Ok(1)
}

fn two(_: DispatchKeySet, _: &Tensor) -> Result<i64> {
    Ok(2)
}

fn typed_value<F: Copy + 'static>(slot: &'static OpSlot<F>, ks: DispatchKeySet) -> F {
    match slot
        .get()
        .expect("typed handle")
        .lookup(ks)
        .expect("lookup")
    {
        Kernel::Typed(f) => f,
        Kernel::Boxed(_) => panic!("expected a typed kernel"),
    }
}

fn register_padded(v: Padded) -> RegistrationHandle {
    let k = KernelFunction::typed(v, common::adapter(one));
    Dispatcher::global()
        .register_impl(PADDED_DEF.name, DispatchKey::CPU, k)
        .expect("padded kernel")
}

#[test]
fn any_registered_value_comes_back_whole() {
    let d = Dispatcher::global();
    d.def(&PADDED_DEF).expect("def");
    let ks = DispatchKeySet::from_key(DispatchKey::CPU);
    let a = register_padded(Padded(1, 10));
    assert_eq!(typed_value(&PADDED, ks), Padded(1, 10));
    let b = register_padded(Padded(2, 20));
    assert_eq!(typed_value(&PADDED, ks), Padded(2, 20));
    drop(b);
    assert_eq!(typed_value(&PADDED, ks), Padded(1, 10));
    // An equal value registered again shares the first one's cell; still correct.
    let c = register_padded(Padded(1, 10));
    assert_eq!(typed_value(&PADDED, ks), Padded(1, 10));
    drop(c);
    drop(a);
    assert!(PADDED.get().expect("handle").lookup(ks).is_err());
}

#[test]
fn dropping_registrations_restores_the_previous_typed_kernel() {
    let d = Dispatcher::global();
    d.def(&STACK_DEF).expect("def");
    let t = Tensor::from_slice(&[1.0f32], &[1]).expect("tensor");
    let ks = DispatchKeySet::from_key(DispatchKey::CPU);
    let a = d
        .register_impl(STACK_DEF.name, DispatchKey::CPU, typed(one))
        .expect("one");
    let b = d
        .register_impl(STACK_DEF.name, DispatchKey::CPU, typed(two))
        .expect("two");
    let f = typed_value(&STACK, ks);
    assert_eq!(f(ks, &t).expect("call"), 2);
    drop(b);
    // A fn pointer looked up before the drop stays callable.
    assert_eq!(f(ks, &t).expect("call"), 2);
    assert_eq!(typed_value(&STACK, ks)(ks, &t).expect("call"), 1);
    // A boxed-only kernel on top: the typed word is null, the slow path hands out
    // the boxed kernel.
    let c = d
        .register_impl(STACK_DEF.name, DispatchKey::CPU, common::boxed_const(5))
        .expect("boxed");
    assert!(matches!(
        STACK.get().expect("handle").lookup(ks),
        Ok(Kernel::Boxed(_))
    ));
    drop(c);
    assert_eq!(typed_value(&STACK, ks)(ks, &t).expect("call"), 1);
    drop(a);
}
