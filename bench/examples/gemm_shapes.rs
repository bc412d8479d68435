//! The f32 products of one step of the small GPT training fixture (each linear
//! layer's forward, input-gradient and weight-gradient product), timed one by one:
//! median of batches of 200 calls per shape, with the multiply-adds per ns, for
//! tuning the CPU backend's GEMM paths. `OPAL_GEMM_MODEL=mlp` times the MLP
//! fixture's layers instead.
//!
//! `cargo build --release -p opal-bench --example gemm_shapes`

use opal::{ops, DType, Tensor};
use std::hint::black_box;
use std::time::Instant;

/// `(m, n, k)` of `x @ Wᵀ`-shaped linear layers of the fixture (`m` rows of input).
const GPT_LINEARS: [(usize, usize, usize); 5] = [
    (128, 96, 32),
    (128, 32, 32),
    (128, 128, 32),
    (128, 32, 128),
    (128, 64, 32),
];

/// The MLP fixture's two layers (batch 64: 256 -> 128 -> 10).
const MLP_LINEARS: [(usize, usize, usize); 2] = [(64, 128, 256), (64, 10, 128)];

fn operand(rows: usize, cols: usize, transposed: bool, seed: u64) -> opal::Result<Tensor> {
    if transposed {
        ops::t(&opal_bench::measures::data::randn(
            &[cols as i64, rows as i64],
            DType::F32,
            seed,
        )?)
    } else {
        opal_bench::measures::data::randn(&[rows as i64, cols as i64], DType::F32, seed)
    }
}

fn main() -> opal::Result<()> {
    let n_batches = opal_bench::calls_from_args("gemm_shapes", 15);
    opal_cpu::init()?; // rayon sizes its pool from RAYON_NUM_THREADS (default: every CPU)
    let linears: &[(usize, usize, usize)] = match std::env::var("OPAL_GEMM_MODEL").as_deref() {
        Ok("mlp") => &MLP_LINEARS,
        _ => &GPT_LINEARS,
    };
    let mut total = 0.0;
    for &(m, n, k) in linears {
        // forward x @ Wᵀ, input gradient dY @ W, weight gradient dYᵀ @ X
        for (name, (pm, pn, pk, at, bt)) in [
            ("fwd", (m, n, k, false, true)),
            ("dx", (m, k, n, false, false)),
            ("dw", (n, k, m, true, false)),
        ] {
            let a = operand(pm, pk, at, 3)?;
            let b = operand(pk, pn, bt, 4)?;
            ops::mm(&a, &b)?;
            let mut batches = Vec::new();
            for _ in 0..n_batches {
                let t0 = Instant::now();
                for _ in 0..200 {
                    black_box(ops::mm(black_box(&a), black_box(&b))?);
                }
                batches.push(t0.elapsed().as_secs_f64() * 1e9 / 200.0);
            }
            batches.sort_by(f64::total_cmp);
            let ns = batches[batches.len() / 2];
            total += ns;
            println!(
                "{name:>3} {pm:>4}x{pn:<4}x{pk:<4} {ns:>8.0} ns  {:>5.1} MAC/ns",
                (pm * pn * pk) as f64 / ns
            );
        }
    }
    println!("sum {:.1} us", total / 1e3);
    Ok(())
}
