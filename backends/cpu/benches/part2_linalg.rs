//! Criterion benches for part-2 linear algebra: `mm` 512x512 in f32 (the libtorch
//! anchor measures 857 us with 2 threads on the reference machine) and bf16.
//!
//! Owns: only bench setup. Must not: assert correctness (tests do).

use criterion::{criterion_group, criterion_main, Criterion};
use opal::Tensor;
use std::hint::black_box;

fn matrix(n: usize, seed: f32) -> Vec<f32> {
    (0..n * n)
        .map(|i| (i as f32 * 0.618 + seed).sin())
        .collect()
}

fn bench_mm(c: &mut Criterion) {
    let n = 512usize;
    let a = Tensor::from_vec(matrix(n, 0.1), &[n as i64, n as i64]).unwrap();
    let b = Tensor::from_vec(matrix(n, 0.7), &[n as i64, n as i64]).unwrap();
    c.bench_function("mm_512_f32", |bch| {
        bch.iter(|| black_box(opal_cpu::linalg::mm(&a, &b).unwrap()))
    });
    let to_bf16 = |t: &Tensor| {
        let v: Vec<half::bf16> = t
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|&x| half::bf16::from_f32(x))
            .collect();
        Tensor::from_vec(v, t.sizes()).unwrap()
    };
    let (ab, bb) = (to_bf16(&a), to_bf16(&b));
    c.bench_function("mm_512_bf16", |bch| {
        bch.iter(|| black_box(opal_cpu::linalg::mm(&ab, &bb).unwrap()))
    });
}

criterion_group!(benches, bench_mm);
criterion_main!(benches);
