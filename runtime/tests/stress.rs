//! Concurrency: 8 threads dispatch (typed and boxed) while a ninth registers and
//! deregisters kernels, fallbacks and new ops; every result must come from a kernel
//! that was registered at some point, and no call may fail.

use crate::common;

use common::{call, typed, Sig};
use opal::dispatch::{DispatchKey, DispatchKeySet, Dispatcher, KernelFunction, OpSlot};
use opal::ivalue::pop;
use opal::{DType, Device, IValue, Result, Tensor};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

unary_def!(STRESS_DEF, "stress::op");
static OP: OpSlot<Sig> = OpSlot::new(&STRESS_DEF);

fn base(_: DispatchKeySet, _: &Tensor) -> Result<i64> {
    Ok(1)
}
fn override_k(_: DispatchKeySet, _: &Tensor) -> Result<i64> {
    Ok(2)
}

/// A boxed AutogradCPU fallback that redispatches below itself and adds 10.
fn plus_ten_fallback() -> KernelFunction {
    KernelFunction::from_boxed_fn(|op, ks, s| {
        op.redispatch_boxed(ks.below(DispatchKey::AutogradCPU), s)?;
        let v: i64 = pop(s)?;
        s.push(IValue::Int(v + 10));
        Ok(())
    })
}

#[test]
fn dispatch_while_registering() {
    let d = Dispatcher::global();
    d.def(&STRESS_DEF).unwrap();
    d.register_impl("stress::op", DispatchKey::CPU, typed(base))
        .unwrap()
        .leak();
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new([const { AtomicU64::new(0) }; 4]); // 1, 2, 11, 12
    let bad = Arc::new(AtomicU64::new(0));
    let calls = Arc::new(AtomicU64::new(0));
    let registrar_rounds = 300;
    std::thread::scope(|s| {
        for tid in 0..8 {
            let (stop, seen, bad, calls) = (stop.clone(), seen.clone(), bad.clone(), calls.clone());
            s.spawn(move || {
                let t = Tensor::empty(&[1], DType::F32, Device::cpu()).unwrap();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) || n < 1000 {
                    let r = if (n + tid).is_multiple_of(4) {
                        let mut st = vec![IValue::Tensor(t.clone())];
                        Dispatcher::global()
                            .call_boxed("stress::op", &mut st)
                            .and_then(|_| pop::<i64>(&mut st))
                    } else {
                        call(&OP, &t)
                    };
                    match r {
                        Ok(1) => seen[0].fetch_add(1, Ordering::Relaxed),
                        Ok(2) => seen[1].fetch_add(1, Ordering::Relaxed),
                        Ok(11) => seen[2].fetch_add(1, Ordering::Relaxed),
                        Ok(12) => seen[3].fetch_add(1, Ordering::Relaxed),
                        other => {
                            eprintln!("unexpected result: {other:?}");
                            bad.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                    n += 1;
                }
                calls.fetch_add(n, Ordering::Relaxed);
            });
        }
        let stop2 = stop.clone();
        s.spawn(move || {
            for i in 0..registrar_rounds {
                let h = d
                    .register_impl("stress::op", DispatchKey::CPU, typed(override_k))
                    .unwrap();
                let f = (i % 3 == 0).then(|| {
                    d.register_fallback(DispatchKey::AutogradCPU, plus_ten_fallback())
                        .unwrap()
                });
                // Unrelated ops appear meanwhile (the registry grows under readers).
                let other = d
                    .register_impl(
                        &format!("stress::other_{}", i % 16),
                        DispatchKey::CPU,
                        typed(base),
                    )
                    .unwrap();
                std::thread::yield_now();
                drop(h);
                drop(f);
                drop(other);
            }
            stop2.store(true, Ordering::Relaxed);
        });
    });
    assert_eq!(
        bad.load(Ordering::Relaxed),
        0,
        "every call returned a registered kernel's result"
    );
    let counts: Vec<u64> = seen.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    assert!(calls.load(Ordering::Relaxed) >= 8000);
    assert!(
        counts[0] > 0 && counts[1] > 0,
        "both kernels were observed: {counts:?}"
    );
    // Everything registered by the ninth thread is gone again.
    let t = Tensor::empty(&[1], DType::F32, Device::cpu()).unwrap();
    assert_eq!(call(&OP, &t).unwrap(), 1);
    let h = OP.get().unwrap().handle();
    assert_eq!(h.registered_keys(), vec![DispatchKey::CPU]);
}

#[test]
fn storage_borrows_are_mutually_exclusive_across_threads() {
    // Threads increment one element through write guards and through KernelAccess on
    // a view of the same storage; a refused borrow is retried. If two writers ever
    // overlapped, increments would be lost.
    let t = Tensor::from_slice(&[0i64, 0], &[2]).unwrap();
    let view = t.as_strided(&[1], &[1], 0).unwrap();
    let (done, refused) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for id in 0..4 {
            let (t, view, done, refused) = (&t, &view, &done, &refused);
            s.spawn(move || {
                let mut ok = 0;
                while ok < 2000 {
                    let r = if id % 2 == 0 {
                        t.write::<i64>().map(|mut w| {
                            let v = w.get(&[0]).unwrap();
                            std::hint::black_box(());
                            w.set(&[0], v + 1);
                        })
                    } else {
                        opal::tensor::KernelAccess::new(&[view], &[view]).and_then(|acc| {
                            let p = acc.write_ptr::<i64>(view)?;
                            // SAFETY: the storage is exclusively borrowed by `acc`.
                            unsafe { *p += 1 };
                            Ok(())
                        })
                    };
                    match r {
                        Ok(()) => ok += 1,
                        Err(_) => {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                done.fetch_add(ok, Ordering::Relaxed);
            });
        }
    });
    assert_eq!(done.load(Ordering::Relaxed), 8000);
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![8000, 0], "no lost updates");
}
