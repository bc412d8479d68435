//! `empty_1_ns`: creating and dropping a 1-element f32 CPU tensor through the
//! generated `empty.memory_format` op (the anchor's `at::empty({1})`, 300k
//! iterations: BackendSelect picks the CPU kernel from the `device` option, the
//! kernel allocates), and `empty_1_raw_ns`: the same tensor from `Tensor::empty`,
//! without the dispatcher.

use crate::harness::{median_ns, Config, Results, Unit};
use opal::{ops, DType, Device, Result, Tensor};
use std::hint::black_box;

/// Records `empty_1_ns` and `empty_1_raw_ns`.
pub fn run(cfg: &Config, out: &mut Results) -> Result<()> {
    ops::empty_memory_format(&[1])?;
    let ns = median_ns(cfg, 300_000, || ops::empty_memory_format(black_box(&[1])));
    out.put("empty_1_ns", ns, Unit::Ns);
    let ns = median_ns(cfg, 300_000, || {
        Tensor::empty(black_box(&[1]), DType::F32, Device::cpu())
    });
    out.put("empty_1_raw_ns", ns, Unit::Ns);
    Ok(())
}
