//! loom models of the fork-join protocol: every interleaving (up to loom's
//! preemption bound) of a caller forking onto a helper thread, with the real
//! [`Job`], [`Helper`] and [`run_job`] over loom's atomics, locks and parking.
//! Each chunk writes its own cell through a loom `UnsafeCell`, so a write the
//! caller could read without a happens-before edge (a missing Release/Acquire)
//! is a reported race; each chunk must run exactly once; the helper must never
//! be lost (parked with a job handed to it) or handed two jobs at once.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p opal-cpu --lib loom`.
//!
//! Owns: the models. Must not: be compiled outside `--cfg loom` tests.

use super::sync::{Arc, AtomicBool, AtomicUsize, Ordering};
use super::{run_job, Helper, Job};
use loom::cell::UnsafeCell;
use loom::thread;

/// Cells the chunks write, one per chunk.
struct Cells(Vec<UnsafeCell<usize>>);

// SAFETY: chunk `c` writes only cell `c`, and each chunk runs once (what the
// models check); the caller reads the cells after the join, and loom reports any
// access without a happens-before edge.
unsafe impl Sync for Cells {}

impl Cells {
    /// Cell `c` (a method, so closures capture the `Sync` whole, not the field).
    fn cell(&self, c: usize) -> &UnsafeCell<usize> {
        &self.0[c]
    }
}

/// A helper on its own loom thread, serving jobs until told to stop.
struct Served {
    helper: Arc<Helper>,
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<()>,
}

impl Served {
    fn start() -> Served {
        let helper = Arc::new(Helper::new());
        let stop = Arc::new(AtomicBool::new(false));
        let (h, st) = (Arc::clone(&helper), Arc::clone(&stop));
        let thread = thread::spawn(move || {
            while !st.load(Ordering::Acquire) {
                h.serve_one();
            }
        });
        helper.open(thread.thread().clone());
        Served {
            helper,
            stop,
            thread,
        }
    }

    /// Stops the helper: after `stop`, one more hire (of a job with nothing left
    /// to claim) wakes it wherever it waits; a helper still busy is retried.
    fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let empty: &(dyn Fn(usize) + Sync) = &|_| {};
        // SAFETY (lifetime): the job has no chunk to claim, so `work` is never
        // called.
        let empty = unsafe {
            std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync)>(
                empty,
            )
        };
        let drained = Arc::new(Job::new(0, empty));
        while !self.helper.try_hire(&drained) {
            thread::yield_now();
        }
        self.thread.join().unwrap();
    }
}

/// Forks `chunks` chunks onto the caller and `team` (extra helpers as loom
/// threads, joined before returning) and checks that each chunk ran once and
/// that its write is visible to the caller after the join.
fn fork_and_check(team: &[Arc<Helper>], helpers: usize, chunks: usize) {
    let cells = Cells((0..chunks).map(|_| UnsafeCell::new(0)).collect());
    let runs: Vec<AtomicUsize> = (0..chunks).map(|_| AtomicUsize::new(0)).collect();
    let f = |c: usize| {
        runs[c].fetch_add(1, Ordering::Relaxed);
        // SAFETY: chunk `c` is the only writer of cell `c` (see `Cells`).
        cells.cell(c).with_mut(|p| unsafe { *p = c + 1 });
    };
    let work: &(dyn Fn(usize) + Sync) = &f;
    // SAFETY (lifetime): `run_job` returns only after every chunk finished and
    // the extra threads are joined below, before `f` goes out of scope.
    let work = unsafe {
        std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync)>(
            work,
        )
    };
    let job = Arc::new(Job::new(chunks, work));
    let mut extra = Vec::new();
    let panic = run_job(&job, team, helpers, |j| {
        extra.push(thread::spawn(move || j.run_claimed(|| ())))
    });
    assert!(panic.is_none());
    for (c, r) in runs.iter().enumerate() {
        assert_eq!(r.load(Ordering::Relaxed), 1, "chunk {c} ran once");
        // SAFETY: no chunk runs any more (the join above); loom checks the edge.
        assert_eq!(cells.cell(c).with(|p| unsafe { *p }), c + 1);
    }
    for t in extra {
        t.join().unwrap();
    }
}

/// One fork of two chunks onto a warm or parked helper.
#[test]
fn loom_one_fork_with_a_helper() {
    loom::model(|| {
        let served = Served::start();
        fork_and_check(std::slice::from_ref(&served.helper), 1, 2);
        served.stop();
    });
}

/// Two forks back to back onto one helper: the second finds it still hired (a
/// stale job it has not picked up is replaced) or free again.
#[test]
fn loom_two_forks_reuse_the_helper() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(|| {
        let served = Served::start();
        let team = std::slice::from_ref(&served.helper);
        fork_and_check(team, 1, 2);
        fork_and_check(team, 1, 1);
        served.stop();
    });
}

/// A fork with no free helper: the rest of the work goes to a spawned thread.
#[test]
fn loom_a_fork_without_helpers_spawns() {
    loom::model(|| fork_and_check(&[], 1, 2));
}
