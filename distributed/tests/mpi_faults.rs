//! A rank that dies: the other must get an `Err` within the timeout, never hang.
//! Run as `OPAL_FAULT=exit|panic mpirun --enable-recovery -n 2` (see
//! `run-mpi-tests.sh`; without `--enable-recovery` mpirun ends the whole job when
//! a rank dies). Rank 1 is the one that dies: with `exit` before the collective
//! (rank 0's error names it as not arrived), with `panic` after the collective
//! has started (every rank arrived, the data never completes). Only rank 0
//! reports.

mod common;

use common::{e, Cases};
use opal::Tensor;
use opal_distributed::{init_process_group, ReduceOp};
use std::time::{Duration, Instant};

fn main() {
    opal_cpu::init().unwrap();
    let pg = init_process_group().expect("init_process_group");
    pg.set_timeout(Duration::from_secs(3));
    let mode = std::env::var("OPAL_FAULT").unwrap_or_else(|_| "exit".into());
    // Both ranks first show the group works.
    let x = Tensor::from_vec(vec![1.0f32; 1 << 20], &[1 << 20]).unwrap();
    pg.all_reduce(&x, ReduceOp::Sum).unwrap();
    if pg.rank() == 1 {
        if mode == "exit" {
            std::process::exit(3);
        }
        let _w = pg.all_reduce_async(&x, ReduceOp::Sum).unwrap();
        panic!("rank 1 panics mid-collective, as the test wants");
    }
    let mut c = Cases::new(0);
    c.run(
        &format!("a dead rank ({mode}) is an Err within the timeout"),
        || {
            let start = Instant::now();
            let err = pg.all_reduce(&x, ReduceOp::Sum).unwrap_err().to_string();
            let took = start.elapsed();
            if took > Duration::from_secs(20) {
                return Err(format!("took {took:?}"));
            }
            let want = if mode == "exit" {
                "all_reduce: timed out: rank(s) 1 did not arrive"
            } else {
                "all_reduce: timed out: every rank arrived, but the operation did not complete"
            };
            if !err.contains(want) {
                return Err(format!("error: {err}"));
            }
            Ok(())
        },
    );
    c.run("the group is aborted afterwards", || {
        let err = pg.barrier().unwrap_err().to_string();
        if !err.contains("aborted") {
            return Err(err);
        }
        if pg.aborted().is_none() || !opal_distributed::abandoned() {
            return Err("aborted() / abandoned() not set".into());
        }
        Ok(())
    });
    c.run("a single-process group still works", || {
        let solo = opal_distributed::ProcessGroup::single_process();
        solo.all_reduce(&x, ReduceOp::Max).map_err(e)
    });
    let code = c.finish(&format!("mpi_faults_{mode}"));
    std::process::exit(code);
}
