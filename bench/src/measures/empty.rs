//! `empty_1_ns`: creating and dropping a 1-element f32 CPU tensor (the anchor's
//! `at::empty({1})`, 300k iterations).

use crate::harness::{median_ns, Config, Results, Unit};
use opal::{DType, Device, Tensor};
use std::hint::black_box;

/// Records `empty_1_ns`.
pub fn run(cfg: &Config, out: &mut Results) {
    let ns = median_ns(cfg, 300_000, || {
        Tensor::empty(black_box(&[1]), DType::F32, Device::cpu())
    });
    out.put("empty_1_ns", ns, Unit::Ns);
}
