//! `add_1elem_f32_ns`'s work alone, for profilers: N one-element `add.Tensor` calls
//! (default 100000) and nothing else, so `valgrind --tool=callgrind` or `perf record`
//! see the per-call cost without the harness's other measurements. Two runs with
//! different N give the instructions of one call from the difference of their totals.
//!
//! `cargo build --release -p opal-bench --example add_1elem_loop`

use opal::{ops, Tensor};
use std::hint::black_box;

fn main() -> opal::Result<()> {
    let n = opal_bench::calls_from_args("add_1elem_loop", 100_000);
    opal_bench::setup()?;
    let a = Tensor::from_slice(&[1.0f32], &[1])?;
    let b = Tensor::from_slice(&[1.0f32], &[1])?;
    for _ in 0..n {
        black_box(ops::add_tensor(black_box(&a), black_box(&b))?);
    }
    Ok(())
}
