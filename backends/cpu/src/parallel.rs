//! Fork-join in which the calling thread does its share of the work.
//!
//! Owns: running `f(0..chunks)` on the calling thread plus rayon helpers, with
//! chunks claimed one at a time from a shared counter. Must not: know about
//! tensors, dtypes or ops, or choose chunk sizes (callers know their work).
//!
//! Why not `rayon::scope` from the caller: a thread outside the pool that opens a
//! scope hands the whole scope to a sleeping worker and then sleeps itself, so
//! every parallel kernel pays two thread wake-ups on its critical path, and a third
//! when the first worker has to wake a second one to share the work. On a VM a
//! wake-up of an idle CPU costs tens of microseconds, about a tenth of a
//! 512x512 GEMM or of a 1M-element add. Here the caller starts on chunk 0 at
//! once; the helpers, woken by `rayon::spawn`, claim whatever chunks are left when
//! they arrive. A late helper costs nothing but its own wake-up, and a pool that is
//! busy elsewhere leaves the caller to do every chunk itself, so no call can wait
//! on work that nobody runs.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Busy-wait rounds before the caller starts yielding its CPU while it waits for
/// helpers to finish their last chunks.
const SPIN_ROUNDS: u32 = 1 << 10;

/// One fork-join: the chunk counter, the completion count and the work.
struct Job {
    /// Next unclaimed chunk; values at or past `chunks` claim nothing.
    next: AtomicUsize,
    /// Chunks finished (normally or by panicking).
    done: AtomicUsize,
    chunks: usize,
    /// The caller's closure, with its lifetime erased: see the SAFETY note in
    /// [`fork_chunks`] for why it is only called while the caller waits.
    work: *const (dyn Fn(usize) + Sync),
    /// The first panic raised by a chunk, re-raised on the calling thread.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

// SAFETY: `work` points to a `Sync` closure, which may be called from any thread;
// it is dereferenced only for a claimed chunk, and every chunk is claimed and
// finished before `fork_chunks` returns (see there). The other fields are atomics
// and a mutex.
unsafe impl Send for Job {}
// SAFETY: as for Send.
unsafe impl Sync for Job {}

impl Job {
    /// Claims and runs chunks until none is left.
    fn run_claimed(&self) {
        loop {
            let chunk = self.next.fetch_add(1, Ordering::Relaxed);
            if chunk >= self.chunks {
                return;
            }
            // SAFETY: `chunk < chunks` was claimed by this thread, so the caller of
            // `fork_chunks` is still waiting for it and the closure is alive.
            let work = unsafe { &*self.work };
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| work(chunk))) {
                if let Ok(mut slot) = self.panic.lock() {
                    slot.get_or_insert(payload);
                }
            }
            // Release: the chunk's writes happen before the caller sees it done.
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// Runs `f(c)` for every `c` in `0..chunks`, each exactly once, spread over the
/// calling thread and up to `rayon::current_num_threads() - 1` helpers. Returns
/// once every chunk has finished; a panic in any chunk is re-raised here after all
/// of them have stopped.
pub(crate) fn fork_chunks(chunks: usize, f: impl Fn(usize) + Sync) {
    let helpers = rayon::current_num_threads().min(chunks).saturating_sub(1);
    if helpers == 0 {
        (0..chunks).for_each(f);
        return;
    }
    let work: &(dyn Fn(usize) + Sync) = &f;
    // SAFETY (lifetime erasure): the pointer outlives `f` inside helpers that
    // start late, but it is dereferenced only by a thread that has claimed a chunk
    // below `chunks`. The caller's own `run_claimed` returns only after the counter
    // has passed `chunks`, so every chunk has been claimed by then, and the wait
    // below returns only after every claimed chunk has finished. After that no
    // thread can claim a chunk, so `f` is never called again once this returns.
    let work = unsafe {
        std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync)>(
            work,
        )
    };
    let job = Arc::new(Job {
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        chunks,
        work,
        panic: Mutex::new(None),
    });
    for _ in 0..helpers {
        let job = Arc::clone(&job);
        rayon::spawn(move || job.run_claimed());
    }
    job.run_claimed();
    let mut rounds = 0u32;
    // Acquire: pairs with the Release in `run_claimed`, so every chunk's writes
    // are visible here.
    while job.done.load(Ordering::Acquire) < chunks {
        if rounds < SPIN_ROUNDS {
            rounds += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    let payload = job.panic.lock().ok().and_then(|mut slot| slot.take());
    if let Some(payload) = payload {
        resume_unwind(payload);
    }
}

#[cfg(test)]
mod tests {
    use super::fork_chunks;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_chunk_runs_exactly_once() {
        for chunks in [0, 1, 2, 3, 8, 64] {
            let hits: Vec<AtomicUsize> = (0..chunks).map(|_| AtomicUsize::new(0)).collect();
            fork_chunks(chunks, |c| {
                hits[c].fetch_add(1, Ordering::Relaxed);
            });
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "{chunks} chunks"
            );
        }
    }

    #[test]
    fn writes_of_every_chunk_are_visible_on_return() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        pool.install(|| {
            for _ in 0..50 {
                let cells: Vec<AtomicUsize> = (0..16).map(|_| AtomicUsize::new(0)).collect();
                fork_chunks(16, |c| {
                    // Enough work that helpers take part.
                    let v = (0..2000).fold(c, |a, i| a.wrapping_mul(31).wrapping_add(i));
                    cells[c].store(v | 1, Ordering::Relaxed);
                });
                assert!(cells.iter().all(|c| c.load(Ordering::Relaxed) & 1 == 1));
            }
        });
    }

    #[test]
    fn a_panicking_chunk_is_raised_after_the_others_finish() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let finished = AtomicUsize::new(0);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.install(|| {
                fork_chunks(8, |c| {
                    if c == 3 {
                        panic!("chunk three");
                    }
                    finished.fetch_add(1, Ordering::Relaxed);
                })
            })
        }));
        let payload = result.expect_err("the chunk's panic reaches the caller");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"chunk three"));
        assert_eq!(finished.load(Ordering::Relaxed), 7);
    }

    #[test]
    fn nested_forks_complete() {
        let total = AtomicUsize::new(0);
        fork_chunks(4, |_| {
            fork_chunks(4, |_| {
                total.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(total.load(Ordering::Relaxed), 16);
    }
}
