//! The other speed targets, which the anchor script does not print (its
//! figures come from PyTorch on this machine, 2 threads): `softmax_256x1024_f32_us`
//! (`_softmax` over the last dim), `layer_norm_256x1024_f32_us` (`native_layer_norm`
//! over 1024 with weight and bias, like `nn.LayerNorm`) and
//! `conv2d_64x3x32x32_k3_16_f32_us` (`convolution` of a 64x3x32x32 input with 16
//! 3x3 filters and a bias, stride 1, padding 1, like `nn.Conv2d(3, 16, 3,
//! padding=1)`). All through the generated ops; iteration counts give each
//! repetition roughly the anchor's ~20 ms.

use super::data::randn;
use crate::harness::{median_ns, Config, Results, Unit};
use opal::{ops, DType, Result};
use std::hint::black_box;

/// Records the three keys.
pub fn run(cfg: &Config, out: &mut Results) -> Result<()> {
    let x = randn(&[256, 1024], DType::F32, 5)?;
    ops::_softmax(&x, -1, false)?;
    let ns = median_ns(cfg, 200, || ops::_softmax(black_box(&x), -1, false));
    out.put("softmax_256x1024_f32_us", ns / 1e3, Unit::Us);

    let (w, b) = (
        randn(&[1024], DType::F32, 6)?,
        randn(&[1024], DType::F32, 7)?,
    );
    let layer_norm = || ops::native_layer_norm(black_box(&x), &[1024], Some(&w), Some(&b), 1e-5);
    layer_norm()?;
    let ns = median_ns(cfg, 200, layer_norm);
    out.put("layer_norm_256x1024_f32_us", ns / 1e3, Unit::Us);

    let input = randn(&[64, 3, 32, 32], DType::F32, 8)?;
    let (weight, bias) = (
        randn(&[16, 3, 3, 3], DType::F32, 9)?,
        randn(&[16], DType::F32, 10)?,
    );
    let conv = || {
        let (one, zero) = (&[1, 1][..], &[0, 0][..]);
        ops::convolution(
            black_box(&input),
            &weight,
            Some(&bias),
            one,
            one,
            one,
            false,
            zero,
            1,
        )
    };
    conv()?;
    let ns = median_ns(cfg, 10, conv);
    out.put("conv2d_64x3x32x32_k3_16_f32_us", ns / 1e3, Unit::Us);
    Ok(())
}
