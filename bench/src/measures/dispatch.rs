//! `dispatch_noop_ns`, `direct_call_ns`, `dispatch_overhead_ns`: a no-op kernel on
//! two tensors through a typed op handle vs. called directly (the anchor's
//! `anchor::noop`, 2M iterations per repetition, 7 repetitions each, medians;
//! overhead = difference of the medians). Unlike the anchor, the repetitions of the
//! two alternate, which keeps the difference meaningful on a busy machine.
//!
//! The op is defined and called exactly the way generated code does it (an
//! `OpDef`, a static `OpSlot`, `dispatch_keyset`, `lookup`, typed call or boxing).

use crate::harness::{median_pair_ns, Config, Results, Unit};
use opal::dispatch::{
    dispatch_keyset, ArgDef, DispatchKey, DispatchKeySet, Kernel, KernelFunction, Library, OpDef,
    OpSlot, OperatorHandle,
};
use opal::ivalue::pop;
use opal::{DType, Device, IntoIValue, Result, Stack, Tensor};
use std::any::TypeId;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};

/// Counts kernel calls so the kernel has an observable effect (the anchor's `sink`).
pub static SINK: AtomicU64 = AtomicU64::new(0);

/// Typed kernel signature of `bench::noop(Tensor a, Tensor b) -> Tensor`.
pub type NoopSig = fn(DispatchKeySet, &Tensor, &Tensor) -> Result<Tensor>;

fn noop_signature() -> TypeId {
    TypeId::of::<NoopSig>()
}

/// Definition of `bench::noop`.
pub static NOOP_DEF: OpDef = OpDef {
    name: "bench::noop",
    schema: "bench::noop(Tensor a, Tensor b) -> Tensor",
    args: &[
        ArgDef {
            name: "a",
            ty: "Tensor",
            default: None,
            kwarg_only: false,
            out: false,
            mutable: false,
        },
        ArgDef {
            name: "b",
            ty: "Tensor",
            default: None,
            kwarg_only: false,
            out: false,
            mutable: false,
        },
    ],
    returns: &["Tensor"],
    signature: noop_signature,
};

/// The CPU kernel: bumps the sink, returns `a`.
#[inline(never)]
pub fn noop_cpu(_ks: DispatchKeySet, a: &Tensor, _b: &Tensor) -> Result<Tensor> {
    // Plain load + store (not an atomic RMW), like the anchor's non-atomic `sink++`.
    SINK.store(SINK.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    Ok(a.clone())
}

fn noop_boxed(_op: &OperatorHandle, ks: DispatchKeySet, s: &mut Stack) -> Result<()> {
    let b: Tensor = pop(s)?;
    let a: Tensor = pop(s)?;
    let r = noop_cpu(ks, &a, &b)?;
    s.push(r.into_ivalue());
    Ok(())
}

/// Registers the CPU kernel once (kept for the process lifetime).
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let mut lib = Library::new("bench", DispatchKey::CPU);
        // Registration of a known-good kernel; a failure here is a bug in this file.
        lib.def(&NOOP_DEF).expect("define bench::noop");
        lib.impl_(
            "noop",
            KernelFunction::typed(noop_cpu as NoopSig, Arc::new(noop_boxed)),
        )
        .expect("register bench::noop");
        lib.leak();
    });
}

/// The typed entry point, as generated code writes it.
#[inline(never)]
pub fn noop(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    static OP: OpSlot<NoopSig> = OpSlot::new(&NOOP_DEF);
    let ks = dispatch_keyset(DispatchKeySet::empty().with_tensor(a).with_tensor(b));
    let op = OP.get()?;
    match op.lookup(ks)? {
        Kernel::Typed(f) => f(ks, a, b),
        Kernel::Boxed(k) => {
            let mut s = vec![a.into_ivalue(), b.into_ivalue()];
            k(op.handle(), ks, &mut s)?;
            pop(&mut s)
        }
    }
}

/// Records `dispatch_noop_ns`, `direct_call_ns` and `dispatch_overhead_ns`.
pub fn run(cfg: &Config, out: &mut Results) -> Result<()> {
    register();
    let a = Tensor::from_slice(&[1.0f32], &[1])?;
    let b = Tensor::empty(&[1], DType::F32, Device::cpu())?;
    let ks = DispatchKeySet::from_key(DispatchKey::CPU);
    // Repetitions alternate between the two, so both see the same machine load.
    let (noop_ns, direct_ns) = median_pair_ns(
        cfg,
        2_000_000,
        || noop(black_box(&a), black_box(&b)),
        || noop_cpu(black_box(ks), black_box(&a), black_box(&b)),
    );
    out.put("dispatch_noop_ns", noop_ns, Unit::Ns);
    out.put("direct_call_ns", direct_ns, Unit::Ns);
    out.put("dispatch_overhead_ns", noop_ns - direct_ns, Unit::Ns);
    Ok(())
}
