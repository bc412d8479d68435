//! Input tensors for the measurements: normally distributed values from a seeded
//! [`Generator`], so every run times the same data (the anchor uses `at::randn`).

use opal::{DType, Device, Generator, Result, Tensor};

/// A contiguous CPU tensor of `shape` in `dtype` with standard normal values drawn
/// from a generator seeded with `seed`.
pub fn randn(shape: &[i64], dtype: DType, seed: u64) -> Result<Tensor> {
    let g = Generator::new(Device::cpu());
    g.manual_seed(seed);
    let n: i64 = shape.iter().product();
    let v: Vec<f32> = g.with_state(|s| (0..n).map(|_| s.next_normal() as f32).collect());
    let t = Tensor::from_vec(v, shape)?;
    match dtype {
        DType::F32 => Ok(t),
        // Values are drawn in f32 and rounded once, so every dtype sees the same numbers.
        _ => opal::ops::_to_copy::with(&t, opal::ops::_to_copy::Options::default().dtype(dtype)),
    }
}
