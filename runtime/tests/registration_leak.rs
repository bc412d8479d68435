//! Registering a kernel or a fallback and dropping its handle frees what the
//! registration allocated: many register/drop cycles leave the heap flat.
//!
//! A dedicated test binary (one test) so that the counting allocator sees no other
//! test's allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::any::TypeId;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use opal::dispatch::{
    ArgDef, DispatchKey, DispatchKeySet, Dispatcher, KernelFunction, OpDef, OperatorHandle,
};
use opal::{IValue, Result, Stack};

/// Bytes currently allocated through the global allocator.
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: forwards to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: `p` came from `System.alloc` with layout `l` (see `alloc`).
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

static ARGS: [ArgDef; 1] = [ArgDef {
    name: "x",
    ty: "int",
    default: None,
    kwarg_only: false,
    out: false,
    mutable: false,
}];
type Sig = fn(DispatchKeySet, i64) -> Result<i64>;
static DEF: OpDef = OpDef {
    name: "leaktest::twice",
    schema: "leaktest::twice(int x) -> int",
    args: &ARGS,
    returns: &["int"],
    signature: TypeId::of::<Sig>,
};

fn twice(_: DispatchKeySet, x: i64) -> Result<i64> {
    Ok(2 * x)
}

fn boxed_twice(_: &OperatorHandle, _: DispatchKeySet, s: &mut Stack) -> Result<()> {
    match s.pop() {
        Some(IValue::Int(x)) => {
            s.push(IValue::Int(2 * x));
            Ok(())
        }
        _ => Err(opal::OpalError::msg("leaktest::twice: expected an int")),
    }
}

/// One register/drop cycle of each kind: a typed kernel, a boxed kernel, and a
/// backend fallback.
fn cycle(d: &Dispatcher) {
    let k = KernelFunction::typed(twice as Sig, Arc::new(boxed_twice));
    drop(
        d.register_impl(DEF.name, DispatchKey::CPU, k)
            .expect("typed kernel"),
    );
    let k = KernelFunction::from_boxed_fn(boxed_twice);
    drop(
        d.register_impl(DEF.name, DispatchKey::Meta, k)
            .expect("boxed kernel"),
    );
    let k = KernelFunction::from_boxed_fn(boxed_twice);
    drop(
        d.register_fallback(DispatchKey::PrivateUse3, k)
            .expect("fallback"),
    );
}

#[test]
fn register_then_drop_leaves_memory_flat() {
    let d = Dispatcher::global();
    d.def(&DEF).expect("def");
    // Warm up: lazily created state (tables, registration lists' capacity,
    // reclamation bookkeeping) reaches its steady size.
    for _ in 0..500 {
        cycle(d);
    }
    let before = LIVE.load(Ordering::Relaxed);
    const N: isize = 4000;
    for _ in 0..N {
        cycle(d);
    }
    let grown = LIVE.load(Ordering::Relaxed) - before;
    // A leak of even 8 bytes a cycle would show as 32,000 bytes; deferred
    // reclamation may hold back a bounded batch of entries at any moment.
    assert!(
        grown < 8 * N,
        "{N} register/drop cycles grew the heap by {grown} bytes"
    );

    // The registrations really were live and really are gone.
    let h = d
        .register_impl(
            DEF.name,
            DispatchKey::CPU,
            KernelFunction::typed(twice as Sig, Arc::new(boxed_twice)),
        )
        .expect("typed kernel");
    let op = d.find(DEF.name).expect("defined");
    let cpu = DispatchKeySet::from_key(DispatchKey::CPU);
    let mut s: Stack = vec![IValue::Int(21)];
    op.redispatch_boxed(cpu, &mut s).expect("call");
    assert!(matches!(s.as_slice(), [IValue::Int(42)]));
    drop(h);
    let mut s: Stack = vec![IValue::Int(21)];
    assert!(op.redispatch_boxed(cpu, &mut s).is_err());
}
