//! The torture test: threads mix geometry changes (`transpose_`,
//! `unsqueeze_`/`squeeze_.dim`, `set_geometry_`, `resize_`), in-place ops and
//! reading kernels on shared tensors, for a bounded time. Every call must be `Ok`
//! or a borrow-conflict `Err`, never a crash, another error, or a torn value.
//!
//! The shared tensors always hold one value in every element (writers change all
//! elements at once, geometry changes permute them), so every result has a shape of
//! value that a torn read would break: a sum is `numel * v`, a negation, a max, a
//! sort hold one value, a cumulative sum along a dim is `v, 2v, 3v, ...`.

use opal::{ops, ErrorKind, OpalError, Result, Scalar, Tensor};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SIDE: i64 = 48;
const NUMEL: i64 = SIDE * SIDE;

fn init() {
    opal_cpu::init().expect("CPU backend registers");
}

/// Ok values pass through; a borrow conflict is `None`; any other error fails.
fn ok_or_conflict<T>(what: &str, r: Result<T>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) if matches!(e.kind(), ErrorKind::BorrowConflict(_)) => None,
        Err(e) => panic!("{what}: unexpected error under contention: {e}"),
    }
}

fn one_value_i64(what: &str, v: &[i64]) -> i64 {
    assert!(!v.is_empty(), "{what}: empty");
    assert!(v.iter().all(|&x| x == v[0]), "{what}: torn values {v:?}");
    v[0]
}

fn one_value_f64(what: &str, v: &[f64]) -> f64 {
    assert!(!v.is_empty(), "{what}: empty");
    assert!(v.iter().all(|&x| x == v[0]), "{what}: torn values {v:?}");
    v[0]
}

/// One reading kernel on `x` (i64) and its invariant.
fn read_i64(x: &Tensor, round: usize) {
    let n = NUMEL;
    match round % 8 {
        0 => {
            if let Some(s) = ok_or_conflict("sum", ops::sum(x)) {
                let s = s.item().unwrap().to_i64();
                assert_eq!(s % n, 0, "sum {s} is not numel * value");
            }
        }
        1 => {
            if let Some(t) = ok_or_conflict("neg", ops::neg(x)) {
                one_value_i64("neg", &t.to_vec::<i64>().unwrap());
            }
        }
        2 => {
            if let Some(t) = ok_or_conflict("cumsum", ops::cumsum(x, 0)) {
                let v = t.to_vec::<i64>().unwrap();
                let d0 = t.sizes()[0];
                let inner = (v.len() as i64 / d0) as usize;
                let first = v[0];
                for (i, chunk) in v.chunks(inner).enumerate() {
                    one_value_i64("cumsum row", chunk);
                    assert_eq!(chunk[0], first * (i as i64 + 1), "cumsum torn at row {i}");
                }
            }
        }
        3 => {
            let amax = ops::amax::with(x, ops::amax::Options::default().dim(vec![0]));
            if let Some(t) = ok_or_conflict("amax", amax) {
                one_value_i64("amax over dim 0", &t.to_vec::<i64>().unwrap());
            }
        }
        4 => {
            if let Some((vals, idx)) = ok_or_conflict("max.dim", ops::max_dim(x, 0)) {
                one_value_i64("max.dim values", &vals.to_vec::<i64>().unwrap());
                assert!(idx.to_vec::<i64>().unwrap().iter().all(|&i| i >= 0));
            }
        }
        5 => {
            if let Some((vals, _)) = ok_or_conflict("sort", ops::sort(x)) {
                one_value_i64("sort", &vals.to_vec::<i64>().unwrap());
            }
        }
        6 => {
            if let Some((vals, _)) = ok_or_conflict("topk", ops::topk(x, 1)) {
                one_value_i64("topk", &vals.to_vec::<i64>().unwrap());
            }
        }
        _ => {
            if let Some(t) = ok_or_conflict("argmax", ops::argmax(x)) {
                let i = t.item().unwrap().to_i64();
                assert!((0..n).contains(&i), "argmax {i} out of range");
            }
        }
    }
}

/// One reading kernel on `y` (f64) and its invariant.
fn read_f64(y: &Tensor, round: usize) {
    match round % 3 {
        0 => {
            if let Some(s) = ok_or_conflict("sum f64", ops::sum(y)) {
                let s = s.item().unwrap().to_f64();
                let v = s / NUMEL as f64;
                assert_eq!(v, v.round(), "f64 sum {s} is not numel * an integer");
            }
        }
        1 => {
            if let Some(m) = ok_or_conflict("mean f64", ops::mean_dim(y, Some(&[0][..]))) {
                one_value_f64("mean.dim", &m.to_vec::<f64>().unwrap());
            }
        }
        _ => {
            if let Some(t) = ok_or_conflict("mse_loss", ops::mse_loss(y, y)) {
                assert_eq!(t.item().unwrap().to_f64(), 0.0);
            }
        }
    }
}

/// One geometry change or in-place write on `t`; keeps one value per element.
fn mutate(t: &Tensor, round: usize) {
    let r: Result<()> = match round % 7 {
        0 => ops::transpose_(t, 0, -1).map(drop),
        1 => ops::unsqueeze_(t, 0).map(drop),
        2 => ops::squeeze_dim_(t, 0).map(drop),
        3 => ops::add_scalar_(t, &Scalar::Int(1)).map(drop),
        4 => t.resize_(&[NUMEL]),
        5 => t.resize_(&[SIDE, SIDE]),
        _ => {
            let (sizes, strides) = (t.sizes().to_vec(), t.strides().to_vec());
            t.set_geometry_(&sizes, &strides)
        }
    };
    match r {
        Ok(()) => {}
        Err(e) if matches!(e.kind(), ErrorKind::BorrowConflict(_)) => {}
        // A dim that a concurrent change removed is the caller's race, reported
        // cleanly: squeeze/transpose of a dim that no longer has size 1 or exists.
        Err(e) if matches!(e.kind(), ErrorKind::Shape(_)) => {}
        Err(e) => panic!("mutation {}: unexpected error {e}", round % 7),
    }
}

fn run_for(d: Duration, stop: &AtomicBool, f: impl Fn(usize)) -> usize {
    let start = Instant::now();
    let mut round = 0;
    while start.elapsed() < d && !stop.load(Ordering::Relaxed) {
        f(round);
        round += 1;
    }
    round
}

#[test]
fn geometry_changes_writes_and_kernels_race_safely() {
    init();
    let x = Tensor::from_vec(vec![3i64; NUMEL as usize], &[SIDE, SIDE]).unwrap();
    let y = Tensor::from_vec(vec![2.0f64; NUMEL as usize], &[SIDE, SIDE]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let conflicts_seen = Arc::new(AtomicUsize::new(0));
    let budget = Duration::from_millis(1500);
    let mut workers = Vec::new();
    for w in 0..5usize {
        let (x, y, stop, seen) = (x.clone(), y.clone(), stop.clone(), conflicts_seen.clone());
        workers.push(std::thread::spawn(move || {
            let rounds = run_for(budget, &stop, |r| match w {
                0 => mutate(&x, r),
                1 => mutate(&y, r + 3),
                2 | 3 => read_i64(&x, r + w),
                _ => read_f64(&y, r),
            });
            seen.fetch_add(rounds, Ordering::Relaxed);
        }));
    }
    let mut panicked = None;
    for h in workers {
        if let Err(p) = h.join() {
            stop.store(true, Ordering::Relaxed);
            panicked = Some(p);
        }
    }
    if let Some(p) = panicked {
        std::panic::resume_unwind(p);
    }
    assert!(conflicts_seen.load(Ordering::Relaxed) > 0, "no rounds ran");
    // Still one value everywhere, and a whole number of `add_(1)`s on top of 3.
    one_value_i64("x after the race", &x.to_vec::<i64>().unwrap());
    one_value_f64("y after the race", &y.to_vec::<f64>().unwrap());
}

#[test]
fn a_kernel_holds_its_arguments_against_geometry_changes() {
    init();
    // While a reading op runs on another thread, restriding the tensor is refused
    // rather than changing the geometry under the kernel: hold a read guard as a
    // stand-in for a long kernel and check both directions of the conflict.
    let x = Tensor::from_vec(vec![1i64; 16], &[4, 4]).unwrap();
    let guard = x.read::<i64>().unwrap();
    let e: OpalError = ops::transpose_(&x, 0, 1).expect_err("restride while read");
    assert!(matches!(e.kind(), ErrorKind::BorrowConflict(_)), "{e}");
    assert!(matches!(
        x.resize_(&[16]).unwrap_err().kind(),
        ErrorKind::BorrowConflict(_)
    ));
    assert_eq!(x.sizes(), &[4, 4]);
    // Reads alongside a read are fine.
    assert_eq!(ops::sum(&x).unwrap().item().unwrap().to_i64(), 16);
    drop(guard);
    ops::transpose_(&x, 0, 1).unwrap();
    // A write guard on another thread refuses this thread's reading ops outright.
    let writer = x.write::<i64>().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let e = ops::sum(&x).expect_err("sum while written");
            assert!(matches!(e.kind(), ErrorKind::BorrowConflict(_)), "{e}");
        });
    });
    drop(writer);
}
