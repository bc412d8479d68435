//! Criterion benches for part-2 nn kernels at the sizes of the libtorch anchors
//! (2 threads): `_softmax` and `native_layer_norm` on 256x1024 f32 (90 us, 107 us)
//! and `convolution` of a 64x3x32x32 input with 16 3x3 filters (4.0 ms).
//!
//! Owns: only bench setup. Must not: assert correctness (tests do).

use criterion::{criterion_group, criterion_main, Criterion};
use opal::Tensor;
use std::hint::black_box;

fn data(n: usize, seed: f32) -> Vec<f32> {
    (0..n)
        .map(|i| (i as f32 * 0.618 + seed).sin() * 3.0)
        .collect()
}

fn bench_nn(c: &mut Criterion) {
    let x = Tensor::from_vec(data(256 * 1024, 0.3), &[256, 1024]).unwrap();
    c.bench_function("softmax_256x1024_f32", |b| {
        b.iter(|| {
            black_box(
                opal::rules::softmax::_softmax(&x, -1, false)
                    .and_then(opal_cpu::nn::_softmax)
                    .unwrap(),
            )
        })
    });
    let w = Tensor::from_vec(data(1024, 1.0), &[1024]).unwrap();
    let bias = Tensor::from_vec(data(1024, 2.0), &[1024]).unwrap();
    c.bench_function("layer_norm_256x1024_f32", |b| {
        b.iter(|| {
            black_box(
                opal::rules::norm::native_layer_norm(&x, &[1024], Some(&w), Some(&bias), 1e-5)
                    .and_then(opal_cpu::nn::native_layer_norm)
                    .unwrap(),
            )
        })
    });
    let input = Tensor::from_vec(data(64 * 3 * 32 * 32, 0.5), &[64, 3, 32, 32]).unwrap();
    let weight = Tensor::from_vec(data(16 * 3 * 3 * 3, 0.9), &[16, 3, 3, 3]).unwrap();
    let cb = Tensor::from_vec(data(16, 0.2), &[16]).unwrap();
    c.bench_function("conv2d_64x3x32x32_k3_16", |b| {
        b.iter(|| {
            black_box(
                opal::rules::conv::convolution(
                    &input,
                    &weight,
                    Some(&cb),
                    &[1, 1],
                    &[1, 1],
                    &[1, 1],
                    false,
                    &[0, 0],
                    1,
                )
                .and_then(opal_cpu::nn::convolution)
                .unwrap(),
            )
        })
    });
}

criterion_group!(benches, bench_nn);
criterion_main!(benches);
