//! A boxed kernel handed out by a typed lookup stays safe to call after its
//! registration is dropped (registrations are freed on drop): the call runs what is
//! registered now, or reports that nothing is.

use crate::common;

use common::{boxed_const, redispatch, typed};
use opal::dispatch::{DispatchKey, DispatchKeySet, Dispatcher, Kernel, OpSlot};
use opal::{IValue, Result, Stack, Tensor};

unary_def!(DEF, "lifetime::op");
static SLOT: OpSlot<common::Sig> = OpSlot::new(&DEF);

fn seven(_: DispatchKeySet, _: &Tensor) -> Result<i64> {
    Ok(7)
}

fn call_looked_up(k: Kernel<'_, common::Sig>, ks: DispatchKeySet, t: &Tensor) -> Result<i64> {
    let op = SLOT.get()?;
    match k {
        Kernel::Typed(f) => f(ks, t),
        Kernel::Boxed(k) => {
            let mut s: Stack = vec![IValue::Tensor(t.clone())];
            k(op.handle(), ks, &mut s)?;
            opal::ivalue::pop(&mut s)
        }
    }
}

#[test]
fn a_boxed_lookup_outliving_its_registration_runs_what_is_registered_now() {
    let d = Dispatcher::global();
    d.def(&DEF).expect("def");
    let t = Tensor::from_slice(&[1.0f32], &[1]).expect("tensor");
    let ks = DispatchKeySet::from_key(DispatchKey::CPU);
    let op = SLOT.get().expect("typed handle");

    let h = d
        .register_impl(DEF.name, DispatchKey::CPU, boxed_const(3))
        .expect("boxed kernel");
    let k = op.lookup(ks).expect("lookup");
    assert!(matches!(k, Kernel::Boxed(_)));
    drop(h);
    // Nothing registered now: an error naming the op, not a call into freed memory.
    let e = call_looked_up(k, ks, &t).expect_err("no kernel left");
    assert!(e.to_string().contains("lifetime::op"), "{e}");

    let h = d
        .register_impl(DEF.name, DispatchKey::CPU, boxed_const(3))
        .expect("boxed kernel");
    let k = op.lookup(ks).expect("lookup");
    drop(h);
    let base = d
        .register_impl(DEF.name, DispatchKey::CPU, typed(seven))
        .expect("typed kernel");
    assert_eq!(call_looked_up(k, ks, &t).expect("call"), 7);
    assert_eq!(redispatch(&SLOT, ks, &t).expect("call"), 7);
    drop(base);
}
