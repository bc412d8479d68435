//! The process-global key set and backend fallbacks registered through a Library
//! (own test binary: both are process-wide state).

use crate::common;

use common::{boxed_const, call, typed, Sig};
use opal::dispatch::tls::{global_include, global_keyset, global_remove};
use opal::dispatch::{
    dispatch_keyset, DispatchKey, DispatchKeySet, KernelFunction, Library, OpSlot,
};
use opal::{DType, Device, Result, Tensor};

unary_def!(G_DEF, "global::op");
static OP: OpSlot<Sig> = OpSlot::new(&G_DEF);

fn cpu_k(_: DispatchKeySet, _: &Tensor) -> Result<i64> {
    Ok(1)
}

#[test]
fn global_keys_and_library_fallbacks() {
    let t = Tensor::empty(&[1], DType::F32, Device::cpu()).unwrap();
    let mut lib = Library::new("global", DispatchKey::CPU);
    lib.impl_("op", typed(cpu_k)).unwrap();
    assert_eq!(call(&OP, &t).unwrap(), 1);

    // A fallback for a mode key, enabled process-wide through the global set.
    let mut modes = Library::new("_", DispatchKey::FuncTorchBatched);
    modes.fallback(boxed_const(99)).unwrap();
    assert_eq!(call(&OP, &t).unwrap(), 1, "not in any key set yet");
    global_include(DispatchKeySet::from_key(DispatchKey::FuncTorchBatched));
    assert!(global_keyset().has(DispatchKey::FuncTorchBatched));
    let seen = std::thread::spawn(move || call(&OP, &t).unwrap())
        .join()
        .unwrap();
    assert_eq!(seen, 99, "global keys apply on every thread");
    global_remove(DispatchKeySet::from_keys(&[
        DispatchKey::FuncTorchBatched,
        DispatchKey::BackendSelect,
    ]));
    assert!(
        global_keyset().has(DispatchKey::BackendSelect),
        "BackendSelect always stays"
    );
    let t = Tensor::empty(&[1], DType::F32, Device::cpu()).unwrap();
    assert_eq!(call(&OP, &t).unwrap(), 1);

    // Dropping the library removes its fallback: back to the default fallthrough.
    global_include(DispatchKeySet::from_key(DispatchKey::FuncTorchBatched));
    assert_eq!(call(&OP, &t).unwrap(), 99);
    drop(modes);
    assert_eq!(call(&OP, &t).unwrap(), 1);
    // A fallthrough registered as a fallback explicitly is a fallthrough too.
    let ft = opal::dispatch::Dispatcher::global()
        .register_fallback(DispatchKey::FuncTorchBatched, KernelFunction::fallthrough())
        .unwrap();
    assert_eq!(call(&OP, &t).unwrap(), 1);
    drop(ft);
    global_remove(DispatchKeySet::from_key(DispatchKey::FuncTorchBatched));
    assert!(!dispatch_keyset(t.key_set()).has(DispatchKey::FuncTorchBatched));
    // Library misuse is an error, not a panic.
    let mut defs = Library::fragment("global");
    assert!(defs.impl_("op", typed(cpu_k)).is_err(), "no key");
    assert!(defs.fallback(boxed_const(1)).is_err());
    assert!(
        defs.def(common_other_ns_def()).is_err(),
        "namespace checked"
    );
    assert!(defs.is_empty());
    lib.leak();
}

unary_def!(OTHER_NS_DEF, "elsewhere::op");
fn common_other_ns_def() -> &'static opal::dispatch::OpDef {
    &OTHER_NS_DEF
}
