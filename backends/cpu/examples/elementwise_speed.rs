//! Times the element-wise hot paths (`cargo run --release -p opal-cpu --example
//! elementwise_speed`): 1-element f32 add and 1M-element f32 add, calling the
//! kernels directly (no dispatcher). Prints medians.

use opal::{Scalar, Tensor};
use opal_cpu::elementwise::binary::add_tensor;
use std::time::Instant;

fn median_ns(mut f: impl FnMut(), iters: usize, reps: usize) -> f64 {
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        v.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[reps / 2]
}

fn main() -> opal::Result<()> {
    let one = Scalar::Int(1);
    let a1 = Tensor::from_slice(&[1.0f32], &[1])?;
    let b1 = Tensor::from_slice(&[2.0f32], &[1])?;
    let ns = median_ns(|| drop(add_tensor(&a1, &b1, &one)), 100_000, 21);
    println!("add_1elem_f32_ns {ns:.1}");
    let o1 = Tensor::empty(&[1], opal::DType::F32, opal::Device::cpu())?;
    let ns = median_ns(
        || drop(opal_cpu::elementwise::binary::add_out(&a1, &b1, &one, &o1)),
        100_000,
        21,
    );
    println!("add_out_1elem_f32_ns {ns:.1}");
    let ns = median_ns(
        || drop(Tensor::empty(&[1], opal::DType::F32, opal::Device::cpu())),
        100_000,
        21,
    );
    println!("empty_1_ns {ns:.1}");
    let ns = median_ns(
        || {
            drop(opal_cpu::iter::map2::<f32, f32, f32>(
                &o1,
                &a1,
                &b1,
                "add",
                |x, y| x + y,
            ))
        },
        100_000,
        21,
    );
    println!("map2_1elem_ns {ns:.1}");
    let n = 1 << 20;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let am = Tensor::from_slice(&a, &[n as i64])?;
    let bm = Tensor::from_slice(&a, &[n as i64])?;
    let ns = median_ns(|| drop(add_tensor(&am, &bm, &one)), 20, 21);
    println!("add_1m_f32_us {:.1}", ns / 1000.0);
    let out = Tensor::empty(&[n as i64], opal::DType::F32, opal::Device::cpu())?;
    let ns = median_ns(
        || drop(opal_cpu::elementwise::binary::add_out(&am, &bm, &one, &out)),
        20,
        21,
    );
    println!("add_1m_f32_out_us {:.1}", ns / 1000.0);
    let ns = median_ns(
        || {
            drop(Tensor::empty(
                &[n as i64],
                opal::DType::F32,
                opal::Device::cpu(),
            ))
        },
        20,
        21,
    );
    println!("empty_1m_f32_us {:.1}", ns / 1000.0);
    // Reference points under the same machine load: a plain serial slice loop and
    // the same split over rayon, with no tensor machinery at all.
    let (va, vb) = (a.clone(), a.clone());
    let mut vo = vec![0.0f32; n];
    let ns = median_ns(
        || {
            for ((o, x), y) in vo.iter_mut().zip(&va).zip(&vb) {
                *o = x + y;
            }
        },
        20,
        21,
    );
    println!("plain_serial_1m_us {:.1}", ns / 1000.0);
    use rayon::prelude::*;
    let ns = median_ns(
        || {
            vo.par_chunks_mut(1 << 16)
                .zip(va.par_chunks(1 << 16))
                .zip(vb.par_chunks(1 << 16))
                .for_each(|((o, x), y)| {
                    for ((o, x), y) in o.iter_mut().zip(x).zip(y) {
                        *o = x + y;
                    }
                })
        },
        20,
        21,
    );
    println!("plain_rayon_1m_us {:.1}", ns / 1000.0);
    Ok(())
}
