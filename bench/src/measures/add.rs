//! `add_1elem_f32_ns` and `add_1m_f32_us`: `add.Tensor` of two f32 tensors through the
//! dispatcher by the generated op, the output allocated by the kernel (the anchor's
//! `at::add(a, b)` on `ones({1})`, 300k iterations, and on two `randn({1 << 20})`,
//! 200 iterations; 7 repetitions, medians).

use super::data::randn;
use crate::harness::{median_ns, Config, Results, Unit};
use opal::{ops, DType, Result, Tensor};
use std::hint::black_box;

/// Records `add_1elem_f32_ns` and `add_1m_f32_us`.
pub fn run(cfg: &Config, out: &mut Results) -> Result<()> {
    let (a, b) = (
        Tensor::from_slice(&[1.0f32], &[1])?,
        Tensor::from_slice(&[1.0f32], &[1])?,
    );
    // Fail before timing rather than time the error path.
    ops::add_tensor(&a, &b)?;
    let ns = median_ns(cfg, 300_000, || {
        ops::add_tensor(black_box(&a), black_box(&b))
    });
    out.put("add_1elem_f32_ns", ns, Unit::Ns);

    let (x, y) = (
        randn(&[1 << 20], DType::F32, 1)?,
        randn(&[1 << 20], DType::F32, 2)?,
    );
    ops::add_tensor(&x, &y)?;
    let ns = median_ns(cfg, 200, || ops::add_tensor(black_box(&x), black_box(&y)));
    out.put("add_1m_f32_us", ns / 1e3, Unit::Us);
    Ok(())
}
