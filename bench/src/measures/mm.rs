//! `mm_512_f32_us`, `mm_512_f32_gflops` (the anchor's `at::mm` of two `randn({512,
//! 512})`, 20 iterations) and `mm_512_bf16_us` (the same in bf16, which the anchor
//! cannot run on this machine: its bf16 GEMM dies with an illegal instruction).

use super::data::randn;
use crate::harness::{median_ns, Config, Results, Unit};
use opal::{ops, DType, Result};
use std::hint::black_box;

/// Floating-point operations of one 512x512 by 512x512 product.
const FLOPS: f64 = 2.0 * 512.0 * 512.0 * 512.0;

/// Records `mm_512_f32_us`, `mm_512_f32_gflops` and `mm_512_bf16_us`.
pub fn run(cfg: &Config, out: &mut Results) -> Result<()> {
    for (dtype, key) in [
        (DType::F32, "mm_512_f32_us"),
        (DType::BF16, "mm_512_bf16_us"),
    ] {
        let (m, n) = (randn(&[512, 512], dtype, 3)?, randn(&[512, 512], dtype, 4)?);
        ops::mm(&m, &n)?;
        let ns = median_ns(cfg, 20, || ops::mm(black_box(&m), black_box(&n)));
        out.put(key, ns / 1e3, Unit::Us);
        if dtype == DType::F32 {
            // FLOP per ns = GFLOP/s, as the anchor computes it.
            out.put("mm_512_f32_gflops", FLOPS / ns, Unit::Other("GFLOP/s"));
        }
    }
    Ok(())
}
