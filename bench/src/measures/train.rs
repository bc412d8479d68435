//! `train_{mlp,cnn,gpt}_step_us` and `autograd_add_1elem_ns`: the training step of
//! `../shared/anchors/train_bench.py` (forward, backward through the generated
//! autograd kernels, plain SGD; f32 on the CPU, batch 0 of each fixture, 5 warm-up
//! steps, median of 30), and a 1-element add with grad, forward + backward.
//!
//! The fixtures are read from `OPAL_TRAINING_DIR` or `../shared/fixtures/training`
//! (from the repository root); a missing fixture skips its key with a message.

use crate::harness::{median_ns, Config, Results, Unit};
use opal::autograd::{self, GradOptions};
use opal::{ops, DType, Device, OpalError, Result, Tensor};
use opal_demo::training::{init_params, step, Fixture};
use std::hint::black_box;
use std::path::PathBuf;

fn dir() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    match std::env::var_os("OPAL_TRAINING_DIR").map(PathBuf::from) {
        Some(d) if d.is_absolute() => d,
        Some(d) => root.join(d),
        None => root.join("../shared/fixtures/training"),
    }
}

/// Records the keys.
pub fn run(cfg: &Config, out: &mut Results) -> Result<()> {
    for model in ["mlp", "cnn", "gpt"] {
        let fx = match Fixture::load(&dir().join(model))
            .and_then(|f| f.with_data_as(DType::F32, Device::cpu()))
        {
            Ok(f) => f,
            Err(e) => {
                eprintln!("opal-bench: train_{model}_step_us skipped: {e}");
                continue;
            }
        };
        let mut params = init_params(&fx, DType::F32, Device::cpu()).map_err(OpalError::msg)?;
        let runs = (30 / cfg.iter_divisor).max(3);
        let warm = if cfg.iter_divisor > 1 { 1 } else { 5 };
        let mut times = Vec::with_capacity(runs);
        for i in 0..warm + runs {
            let t = std::time::Instant::now();
            params = step(&fx, &params, 0, DType::F32, Device::cpu())
                .map_err(OpalError::msg)?
                .1;
            if i >= warm {
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        times.sort_by(f64::total_cmp);
        out.put(
            &format!("train_{model}_step_us"),
            times[times.len() / 2],
            Unit::Us,
        );
    }

    let (a, b) = (
        Tensor::from_slice(&[1.0f32], &[1])?,
        Tensor::from_slice(&[1.0f32], &[1])?,
    );
    a.set_requires_grad(true)?;
    b.set_requires_grad(true)?;
    let one = Tensor::from_slice(&[1.0f32], &[1])?;
    let once = || -> Result<Vec<Option<Tensor>>> {
        let c = ops::add_tensor(black_box(&a), black_box(&b))?;
        autograd::grad(
            &[c],
            &[a.clone(), b.clone()],
            std::slice::from_ref(&one),
            GradOptions::default(),
        )
    };
    once()?;
    let ns = median_ns(cfg, 20_000, once);
    out.put("autograd_add_1elem_ns", ns, Unit::Ns);
    Ok(())
}
