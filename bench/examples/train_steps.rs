//! Runs training steps of one fixture model on the CPU in f32 (for profilers):
//! `cargo run --release -p opal-bench --example train_steps -- gpt 200`.

// Linked for its global allocator (mimalloc), like every opal-bench binary.
extern crate opal_bench;

use opal::{DType, Device};
use opal_demo::training::{init_params, step, Fixture};

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let model = args.next().unwrap_or_else(|| "mlp".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    opal_cpu::init().map_err(|e| e.to_string())?;
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/training");
    let fx = Fixture::load(&root.join(&model))?.with_data_as(DType::F32, Device::cpu())?;
    let mut p = init_params(&fx, DType::F32, Device::cpu())?;
    let t = std::time::Instant::now();
    for _ in 0..n {
        p = step(&fx, &p, 0, DType::F32, Device::cpu())?.1;
    }
    println!(
        "{model}: {:.1} us/step",
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    Ok(())
}
