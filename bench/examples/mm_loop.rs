//! `mm_512_f32_us`'s work alone, for profilers and for timing against other GEMM
//! callers: N products of two 512x512 f32 `randn` matrices (default 200), printing
//! the median and fastest of batches of 20 calls.
//!
//! `cargo build --release -p opal-bench --example mm_loop`

use opal::{ops, DType};
use std::hint::black_box;
use std::time::Instant;

fn main() -> opal::Result<()> {
    let n = opal_bench::calls_from_args("mm_loop", 200);
    opal_bench::setup()?;
    let a = opal_bench::measures::data::randn(&[512, 512], DType::F32, 3)?;
    let b = opal_bench::measures::data::randn(&[512, 512], DType::F32, 4)?;
    ops::mm(&a, &b)?;
    let mut batches = Vec::new();
    for _ in 0..n.div_ceil(20) {
        let t0 = Instant::now();
        for _ in 0..20 {
            black_box(ops::mm(black_box(&a), black_box(&b))?);
        }
        batches.push(t0.elapsed().as_secs_f64() * 1e6 / 20.0);
    }
    batches.sort_by(f64::total_cmp);
    println!(
        "mm_512_f32 median {:.1} us, fastest {:.1} us over {} batches of 20",
        batches[batches.len() / 2],
        batches[0],
        batches.len()
    );
    Ok(())
}
