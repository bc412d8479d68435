//! `model_<name>_us`, `model_<name>_load_us` and `model_<name>_peak_bytes`: each exported model of
//! `models.json` in `OPAL_MODELS_DIR` (default `../shared/fixtures/models`, from
//! the repository root) run by `opal-export` on the CPU with its fixture inputs:
//! the median single inference (no grad, after 3 warm-up runs, like
//! `../shared/anchors/export_models.py --bench`'s `eager_us`), and the median
//! load (`ExportedProgram::load` + `to_device(cpu)`), and the bytes one run
//! allocates beyond what was live before it (outputs and kernel scratch
//! included, the CPU block cache bypassed; [`crate::alloc_count`]).
//!
//! A model that cannot be loaded or run is named in the error after the others
//! have run.

use crate::harness::{Config, Results, Unit};
use opal::{OpalError, Result};
use opal_export::{io, ExportedProgram};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn dir() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    match std::env::var_os("OPAL_MODELS_DIR").map(PathBuf::from) {
        Some(d) if d.is_absolute() => d,
        Some(d) => root.join(d),
        None => root.join("../shared/fixtures/models"),
    }
}

fn median_us(
    runs: usize,
    mut f: impl FnMut() -> opal_export::Result<()>,
) -> opal_export::Result<f64> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn one(cfg: &Config, dir: &Path, name: &str, out: &mut Results) -> opal_export::Result<()> {
    let path = dir.join(format!("{name}.pt2"));
    let cpu = opal_export::device("cpu")?;
    let load_runs = if cfg.iter_divisor > 1 { 1 } else { 7 };
    let load = median_us(load_runs, || {
        ExportedProgram::load(&path)?.to_device(cpu).map(drop)
    })?;
    let runner = ExportedProgram::load(&path)?.to_device(cpu)?;
    let inputs = io::read_indexed(dir.join(format!("{name}.io.safetensors")), "input")?;
    for _ in 0..3 {
        runner.run(&inputs)?;
    }
    let runs = (100 / cfg.iter_divisor).max(3);
    let run = median_us(runs, || runner.run(&inputs).map(drop))?;
    // One more run, counted: outputs are kept until after `stop`, like the
    // outputs PyTorch's peak includes. The CPU kernels' block cache is off for
    // it: a block reused from an earlier run is memory the run uses that the
    // counting allocator would not see allocated.
    opal_cpu::alloc::set_bypass(true);
    crate::alloc_count::start();
    let outs = runner.run(&inputs);
    let peak = crate::alloc_count::stop();
    let done = outs.map(drop);
    opal_cpu::alloc::set_bypass(false);
    done?;
    out.put(
        &format!("model_{name}_peak_bytes"),
        peak as f64,
        Unit::Other("B"),
    );
    out.put(&format!("model_{name}_load_us"), load, Unit::Us);
    out.put(&format!("model_{name}_us"), run, Unit::Us);
    Ok(())
}

/// Records the keys.
pub fn run(cfg: &Config, out: &mut Results) -> Result<()> {
    let dir = dir();
    let manifest = dir.join("models.json");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| OpalError::msg(format!("{}: {e}", manifest.display())))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| OpalError::msg(format!("{}: {e}", manifest.display())))?;
    let names: Vec<String> = v["models"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let mut failed = Vec::new();
    for name in &names {
        if let Err(e) = one(cfg, &dir, name, out) {
            failed.push(format!("{name}: {e}"));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(OpalError::msg(failed.join("; ")))
    }
}
