//! Dispatch keys, TLS, the dispatcher's table precedence, registration policy,
//! typed and boxed calling, adapters, redispatch and errors.

use crate::common;

use common::{boxed_const, call, redispatch, typed, Sig};
use opal::dispatch::{
    dispatch_keyset, DispatchKey, DispatchKeySet, Dispatcher, ExcludeGuard, IncludeGuard,
    KernelFunction, Library, OpSlot,
};
use opal::tensor::{register_allocator, CpuAllocator};
use opal::{DType, Device, DeviceType, ErrorKind, IValue, Result, Tensor};

fn cpu() -> Tensor {
    Tensor::empty(&[1], DType::F32, Device::cpu()).unwrap()
}
fn meta() -> Tensor {
    Tensor::empty(&[1], DType::F32, Device::meta()).unwrap()
}
/// `t` made to require grad: its key set then has its device's autograd key
/// (plain tensors do not, so their ops never visit autograd kernels).
fn grad(t: Tensor) -> Tensor {
    t.set_requires_grad(true).unwrap();
    t
}
fn emu() -> Tensor {
    static A: CpuAllocator = CpuAllocator;
    opal::register_privateuse_backend(DispatchKey::PrivateUse1, "emu").unwrap();
    register_allocator(DeviceType::PrivateUse1, &A);
    Tensor::empty(&[1], DType::F32, Device::parse("emu").unwrap()).unwrap()
}
fn npu() -> Tensor {
    static A: CpuAllocator = CpuAllocator;
    opal::register_privateuse_backend(DispatchKey::PrivateUse2, "npu").unwrap();
    register_allocator(DeviceType::PrivateUse2, &A);
    Tensor::empty(&[1], DType::F32, Device::parse("npu").unwrap()).unwrap()
}

fn k1(_: DispatchKeySet, _: &Tensor) -> Result<i64> {
    Ok(1)
}
fn k2(_: DispatchKeySet, _: &Tensor) -> Result<i64> {
    Ok(2)
}
fn k3(_: DispatchKeySet, _: &Tensor) -> Result<i64> {
    Ok(3)
}
fn k7(_: DispatchKeySet, _: &Tensor) -> Result<i64> {
    Ok(7)
}

#[test]
fn keyset_order_and_highest() {
    let ks = DispatchKeySet::from_keys(&[
        DispatchKey::CPU,
        DispatchKey::AutogradCPU,
        DispatchKey::BackendSelect,
    ]);
    assert_eq!(ks.highest(), Some(DispatchKey::AutogradCPU));
    assert_eq!(
        ks.below(DispatchKey::AutogradCPU).highest(),
        Some(DispatchKey::BackendSelect)
    );
    assert_eq!(
        ks.at_and_below(DispatchKey::CPU).highest(),
        Some(DispatchKey::CPU)
    );
    assert_eq!(DispatchKeySet::empty().highest(), None);
    assert_eq!(
        ks.keys().collect::<Vec<_>>(),
        vec![
            DispatchKey::AutogradCPU,
            DispatchKey::BackendSelect,
            DispatchKey::CPU
        ]
    );
    assert_eq!(
        format!("{ks:?}"),
        "DispatchKeySet(AutogradCPU, BackendSelect, CPU)"
    );
    // Every runtime key round-trips through its bit and name; priorities are strictly ordered.
    for w in DispatchKey::RUNTIME.windows(2) {
        assert!(DispatchKeySet::from_keys(w).highest() == Some(w[1]));
    }
    for &k in DispatchKey::RUNTIME.iter().chain(DispatchKey::ALIASES) {
        assert_eq!(DispatchKey::from_name(k.name()), Some(k));
    }
    assert!(DispatchKey::CompositeImplicitAutograd.is_alias());
    assert!(DispatchKeySet::from_key(DispatchKey::CompositeImplicitAutograd).is_empty());
    let cia = DispatchKey::CompositeImplicitAutograd.alias_expansion();
    assert!(
        cia.has(DispatchKey::CPU)
            && cia.has(DispatchKey::AutogradPrivateUse1)
            && !cia.has(DispatchKey::BackendSelect)
    );
    let cea = DispatchKey::CompositeExplicitAutograd.alias_expansion();
    assert!(cea.has(DispatchKey::Meta) && !cea.has(DispatchKey::AutogradCPU));
    assert!(!DispatchKey::CompositeExplicitAutogradNonFunctional
        .alias_expansion()
        .has(DispatchKey::SparseCPU));
    assert_eq!(
        DispatchKey::PrivateUse2.autograd_key(),
        Some(DispatchKey::AutogradPrivateUse2)
    );
    assert!(DispatchKey::AutogradCPU
        .backends_of_autograd()
        .has(DispatchKey::SparseCPU));
    // Keys used in native_functions.yaml dispatch sections all parse.
    for n in [
        "SparseCsrMeta",
        "NestedTensorHPU",
        "MkldnnCPU",
        "QuantizedCUDA",
        "ZeroTensor",
        "MTIA",
        "XPU",
        "MPS",
    ] {
        assert!(DispatchKey::from_name(n).is_some(), "{n}");
    }
}

#[test]
fn tls_guards_nest_and_restore() {
    let cpu_ks = DispatchKeySet::from_key(DispatchKey::CPU);
    let base = dispatch_keyset(cpu_ks);
    assert!(
        base.has(DispatchKey::BackendSelect),
        "global set has BackendSelect"
    );
    {
        let _i = IncludeGuard::new(DispatchKey::AutocastCPU);
        assert!(dispatch_keyset(cpu_ks).has(DispatchKey::AutocastCPU));
        {
            let _e = ExcludeGuard::new(DispatchKeySet::from_keys(&[
                DispatchKey::AutocastCPU,
                DispatchKey::CPU,
            ]));
            let ks = dispatch_keyset(cpu_ks);
            assert!(!ks.has(DispatchKey::AutocastCPU) && !ks.has(DispatchKey::CPU));
        }
        assert!(dispatch_keyset(cpu_ks).has(DispatchKey::CPU));
        // Another thread does not see this thread's include set.
        std::thread::spawn(move || assert!(!dispatch_keyset(cpu_ks).has(DispatchKey::AutocastCPU)))
            .join()
            .unwrap();
    }
    assert_eq!(dispatch_keyset(cpu_ks), base);
    // The alias Autograd expands when excluded.
    let _e = ExcludeGuard::new(DispatchKey::Autograd);
    assert!(
        !dispatch_keyset(DispatchKeySet::from_key(DispatchKey::AutogradCPU))
            .has(DispatchKey::AutogradCPU)
    );
}

unary_def!(PREC_DEF, "test::prec");
#[test]
fn precedence_direct_then_cea_then_cia() {
    static OP: OpSlot<Sig> = OpSlot::new(&PREC_DEF);
    let d = Dispatcher::global();
    let _h1 = d
        .register_impl("test::prec", DispatchKey::CPU, typed(k1))
        .unwrap();
    let _h2 = d
        .register_impl(
            "test::prec",
            DispatchKey::CompositeExplicitAutograd,
            typed(k2),
        )
        .unwrap();
    let _h3 = d
        .register_impl(
            "test::prec",
            DispatchKey::CompositeImplicitAutograd,
            typed(k3),
        )
        .unwrap();
    assert_eq!(call(&OP, &cpu()).unwrap(), 1, "direct kernel wins");
    assert_eq!(
        call(&OP, &meta()).unwrap(),
        2,
        "CEA beats CIA for backend keys"
    );
    assert_eq!(call(&OP, &emu()).unwrap(), 2);
    drop(_h2);
    // Without CEA: meta has no backend kernel, so CIA serves AutogradMeta; CPU has a
    // kernel, so AutogradCPU must not decompose: the autograd fallback serves it,
    // which runs the CPU kernel (and would refuse a differentiable result).
    let op = OP.get().unwrap().handle();
    assert_eq!(
        op.resolve_key(grad(meta()).key_set()).unwrap(),
        DispatchKey::AutogradMeta
    );
    assert_eq!(
        op.resolve_key(grad(cpu()).key_set()).unwrap(),
        DispatchKey::AutogradCPU
    );
    assert_eq!(call(&OP, &grad(meta())).unwrap(), 3);
    assert_eq!(
        call(&OP, &meta()).unwrap(),
        3,
        "CIA serves a plain meta tensor too"
    );
    assert_eq!(call(&OP, &grad(cpu())).unwrap(), 1);
    assert_eq!(call(&OP, &cpu()).unwrap(), 1);
    drop(_h3);
    let e = call(&OP, &meta()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "could not run 'test::prec' for dispatch key Meta (device 'meta'); kernels exist for: CPU"
    );
    assert!(op.dump_table().contains("CPU: typed"));
}

unary_def!(ERR_DEF, "test::err");
#[test]
fn error_names_op_key_device_and_kernels() {
    static OP: OpSlot<Sig> = OpSlot::new(&ERR_DEF);
    let mut lib = Library::new("test", DispatchKey::CPU);
    lib.impl_("err", typed(k1)).unwrap();
    lib.impl_for("err", DispatchKey::Meta, typed(k2)).unwrap();
    lib.impl_for("err", DispatchKey::AutogradCPU, typed(k7))
        .unwrap();
    let e = call(&OP, &emu()).unwrap_err();
    assert!(matches!(
        e.kind(),
        ErrorKind::NoKernel {
            key: DispatchKey::PrivateUse1,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "could not run 'test::err' for dispatch key PrivateUse1 (device 'emu'); kernels exist for: CPU, Meta, AutogradCPU"
    );
    // Boxed calls report the same.
    let mut s = vec![IValue::Tensor(emu())];
    assert_eq!(
        Dispatcher::global()
            .call_boxed("test::err", &mut s)
            .unwrap_err()
            .to_string(),
        e.to_string()
    );
    drop(lib);
    let e = call(&OP, &cpu()).unwrap_err();
    assert!(e.to_string().ends_with("kernels exist for: (none)"), "{e}");
}

unary_def!(CIA_DEF, "test::cia_only");
#[test]
fn cia_only_runs_at_autograd_key_and_exclusion_moves_it() {
    static OP: OpSlot<Sig> = OpSlot::new(&CIA_DEF);
    let _h = Dispatcher::global()
        .register_impl(
            "test::cia_only",
            DispatchKey::CompositeImplicitAutograd,
            typed(k3),
        )
        .unwrap();
    let op = OP.get().unwrap().handle();
    assert_eq!(
        op.resolve_key(dispatch_keyset(grad(cpu()).key_set()))
            .unwrap(),
        DispatchKey::AutogradCPU
    );
    // A plain tensor has no autograd key: the CIA kernel serves the backend key.
    assert_eq!(
        op.resolve_key(dispatch_keyset(cpu().key_set())).unwrap(),
        DispatchKey::CPU
    );
    let _e = ExcludeGuard::new(DispatchKey::Autograd);
    assert_eq!(
        op.resolve_key(dispatch_keyset(grad(cpu()).key_set()))
            .unwrap(),
        DispatchKey::CPU
    );
    assert_eq!(call(&OP, &grad(cpu())).unwrap(), 3);
    assert_eq!(call(&OP, &cpu()).unwrap(), 3);
}

unary_def!(DUP_DEF, "test::dup");
#[test]
fn duplicates_stack_latest_wins_and_drop_restores() {
    static OP: OpSlot<Sig> = OpSlot::new(&DUP_DEF);
    let d = Dispatcher::global();
    let first = d
        .register_impl("test::dup", DispatchKey::CPU, typed(k1))
        .unwrap();
    let second = d
        .register_impl("test::dup", DispatchKey::CPU, typed(k7))
        .unwrap();
    assert_eq!(call(&OP, &cpu()).unwrap(), 7);
    drop(second);
    assert_eq!(call(&OP, &cpu()).unwrap(), 1);
    let third = d
        .register_impl("test::dup", DispatchKey::CPU, typed(k2))
        .unwrap();
    drop(first); // dropping an older one keeps the latest
    assert_eq!(call(&OP, &cpu()).unwrap(), 2);
    drop(third);
    assert!(call(&OP, &cpu()).is_err());
    d.register_impl("test::dup", DispatchKey::CPU, typed(k3))
        .unwrap()
        .leak();
    assert_eq!(call(&OP, &cpu()).unwrap(), 3);
}

type WrongSig = fn(DispatchKeySet, &Tensor, &Tensor) -> Result<i64>;
fn wrong(_: DispatchKeySet, _: &Tensor, _: &Tensor) -> Result<i64> {
    Ok(0)
}
unary_def!(SIG_DEF, "test::sig");
unary_def!(LATE_DEF, "test::late");
unary_def!(LATE_OTHER_DEF, "test::late", WrongSig);
#[test]
fn typed_kernels_with_wrong_signature_are_rejected() {
    let d = Dispatcher::global();
    d.def(&SIG_DEF).unwrap();
    d.def(&SIG_DEF).unwrap(); // idempotent
    let wrong_k = KernelFunction::typed(wrong as WrongSig, common::adapter(k1));
    let e = d
        .register_impl("test::sig", DispatchKey::CPU, wrong_k)
        .unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::SignatureMismatch { .. }));
    let msg = e.to_string();
    assert!(
        msg.contains("test::sig")
            && msg.contains("`fn(DispatchKeySet, &Tensor, &Tensor) -> Result<i64, OpalError>`"),
        "{msg}"
    );
    // A typed handle of the wrong type is refused too, and an OpSlot reports it.
    assert!(d.find("test::sig").unwrap().typed::<WrongSig>().is_err());
    static BAD_SLOT: OpSlot<WrongSig> = OpSlot::new(&SIG_DEF);
    assert!(BAD_SLOT.get().is_err());
    // Impl before def: the def checks the kernels registered so far.
    let h = d
        .register_impl(
            "test::late",
            DispatchKey::CPU,
            KernelFunction::typed(wrong as WrongSig, common::adapter(k1)),
        )
        .unwrap();
    assert!(d.find("test::late").is_none());
    assert!(matches!(
        d.def(&LATE_DEF).unwrap_err().kind(),
        ErrorKind::SignatureMismatch { .. }
    ));
    drop(h);
    d.def(&LATE_DEF).unwrap();
    // A different definition under the same name is a conflict.
    assert!(matches!(
        d.def(&LATE_OTHER_DEF).unwrap_err().kind(),
        ErrorKind::ConflictingDef { .. }
    ));
    // Non-fn-pointer "typed" kernels and bad keys/names are errors, not panics.
    let big = [0u64; 4];
    let k = KernelFunction::typed(big, common::adapter(k1));
    assert!(d.register_impl("test::late", DispatchKey::CPU, k).is_err());
    assert!(d
        .register_impl("test::late", DispatchKey::Undefined, typed(k1))
        .is_err());
    assert!(d
        .register_impl("late", DispatchKey::CPU, typed(k1))
        .is_err());
    assert!(d
        .register_fallback(DispatchKey::Autograd, KernelFunction::fallthrough())
        .is_err());
}

unary_def!(FB_DEF, "test::fallback");
#[test]
fn boxed_fallback_serves_typed_calls_and_typed_kernel_serves_boxed_calls() {
    static OP: OpSlot<Sig> = OpSlot::new(&FB_DEF);
    let d = Dispatcher::global();
    let _cpu = d
        .register_impl("test::fallback", DispatchKey::CPU, typed(k1))
        .unwrap();
    assert!(call(&OP, &npu()).is_err());
    let fb = d
        .register_fallback(DispatchKey::PrivateUse2, boxed_const(42))
        .unwrap();
    assert_eq!(
        call(&OP, &npu()).unwrap(),
        42,
        "boxed fallback through the typed stub"
    );
    assert_eq!(call(&OP, &cpu()).unwrap(), 1, "a kernel beats the fallback");
    // A boxed kernel registered for the op also beats the fallback.
    let own = d
        .register_impl("test::fallback", DispatchKey::PrivateUse2, boxed_const(5))
        .unwrap();
    assert_eq!(call(&OP, &npu()).unwrap(), 5);
    drop(own);
    // Typed kernel through boxed calling by name.
    let mut s = vec![IValue::Tensor(cpu())];
    d.call_boxed("test::fallback", &mut s).unwrap();
    assert!(matches!(s.as_slice(), [IValue::Int(1)]));
    let mut s = vec![IValue::Int(9), IValue::Tensor(npu())];
    d.call_boxed("test::fallback", &mut s).unwrap();
    assert!(
        matches!(s.as_slice(), [IValue::Int(9), IValue::Int(42)]),
        "values below the args stay"
    );
    drop(fb);
    assert!(call(&OP, &npu()).is_err());
    // Boxed misuse is an error, never a panic.
    assert!(matches!(
        d.call_boxed("test::nope", &mut vec![]).unwrap_err().kind(),
        ErrorKind::UnknownOp(_)
    ));
    assert!(d.call_boxed("test::fallback", &mut vec![]).is_err());
    let mut s = vec![IValue::Str("not a tensor".into())];
    assert!(d.call_boxed("test::fallback", &mut s).is_err());
}

unary_def!(RE_DEF, "test::redispatch");
static RE_OP: OpSlot<Sig> = OpSlot::new(&RE_DEF);
fn autograd_k(ks: DispatchKeySet, t: &Tensor) -> Result<i64> {
    // Like an autograd kernel: do our part, then redispatch below our key.
    Ok(50 + redispatch(&RE_OP, ks.below(DispatchKey::AutogradCPU), t)?)
}
fn autocast_k(ks: DispatchKeySet, t: &Tensor) -> Result<i64> {
    Ok(100 + redispatch(&RE_OP, ks.below(DispatchKey::AutocastCPU), t)?)
}
#[test]
fn redispatch_and_fallthrough_kernels() {
    let mut lib = Library::new("test", DispatchKey::CPU);
    lib.impl_("redispatch", typed(k1)).unwrap();
    lib.impl_for("redispatch", DispatchKey::Autograd, typed(autograd_k))
        .unwrap();
    lib.impl_for("redispatch", DispatchKey::AutocastCPU, typed(autocast_k))
        .unwrap();
    assert_eq!(call(&RE_OP, &grad(cpu())).unwrap(), 51);
    assert_eq!(
        call(&RE_OP, &cpu()).unwrap(),
        1,
        "plain tensors skip autograd"
    );
    {
        let _g = IncludeGuard::new(DispatchKey::AutocastCPU);
        assert_eq!(call(&RE_OP, &grad(cpu())).unwrap(), 151);
    }
    // A fallthrough registered for the op at AutogradCPU beats the Autograd alias.
    let ft = Dispatcher::global()
        .register_impl(
            "test::redispatch",
            DispatchKey::AutogradCPU,
            KernelFunction::fallthrough(),
        )
        .unwrap();
    assert_eq!(call(&RE_OP, &grad(cpu())).unwrap(), 1);
    drop(ft);
    assert_eq!(call(&RE_OP, &grad(cpu())).unwrap(), 51);
    // Boxed redispatch goes through the same table.
    let op = RE_OP.get().unwrap().handle();
    let mut s = vec![IValue::Tensor(cpu())];
    op.redispatch_boxed(DispatchKeySet::from_key(DispatchKey::CPU), &mut s)
        .unwrap();
    assert!(matches!(s.as_slice(), [IValue::Int(1)]));
    assert_eq!(lib.len(), 3);
}

type FactorySig = fn(DispatchKeySet, i64) -> Result<i64>;
static FACTORY_DEF: opal::dispatch::OpDef = opal::dispatch::OpDef {
    name: "test::factory",
    schema: "test::factory(int n) -> int",
    args: &[opal::dispatch::ArgDef {
        name: "n",
        ty: "int",
        default: Some(|| IValue::Int(4)),
        kwarg_only: false,
        out: false,
        mutable: false,
    }],
    returns: &["int"],
    signature: || std::any::TypeId::of::<FactorySig>(),
};
fn factory_bs(ks: DispatchKeySet, n: i64) -> Result<i64> {
    assert_eq!(ks.highest(), Some(DispatchKey::BackendSelect));
    Ok(n * 2)
}
#[test]
fn factory_ops_dispatch_to_backend_select() {
    static OP: OpSlot<FactorySig> = OpSlot::new(&FACTORY_DEF);
    let ks = dispatch_keyset(DispatchKeySet::empty());
    let op = OP.get().unwrap();
    let e = op.lookup(ks).err().unwrap();
    assert!(
        e.to_string().contains("could not run 'test::factory'"),
        "{e}"
    );
    let adapter: std::sync::Arc<opal::dispatch::BoxedKernelFn> =
        std::sync::Arc::new(|_op, ks, s| {
            let n: i64 = opal::ivalue::pop(s)?;
            s.push(IValue::Int(factory_bs(ks, n)?));
            Ok(())
        });
    let _h = Dispatcher::global()
        .register_impl(
            "test::factory",
            DispatchKey::BackendSelect,
            KernelFunction::typed(factory_bs as FactorySig, adapter),
        )
        .unwrap();
    match op.lookup(ks).unwrap() {
        opal::dispatch::Kernel::Typed(f) => assert_eq!(f(ks, 21).unwrap(), 42),
        opal::dispatch::Kernel::Boxed(_) => panic!("expected the typed kernel"),
    }
    let mut s = vec![((FACTORY_DEF.args[0].default.unwrap())())];
    Dispatcher::global()
        .call_boxed("test::factory", &mut s)
        .unwrap();
    assert!(matches!(s.as_slice(), [IValue::Int(8)]));
    assert!(Dispatcher::global()
        .op_names()
        .contains(&"test::factory".to_string()));
}
