//! `cargo run --release -p opal-demo`: runs the demo's MLP and CNN forward passes
//! on the CPU and on the example out-of-tree device `emu`, and prints the results,
//! how far the two devices agree, their timings and emu's dispatch path.

use std::process::ExitCode;

use opal::{ops, Device, Result};
use opal_demo::training;
use opal_demo::{max_abs_diff, run, Demo};

fn main() -> ExitCode {
    match demo() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("opal-demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn demo() -> Result<()> {
    opal_demo::init()?;
    if let Err(e) = exported_model_demo() {
        println!("  (skipped: {e})\n");
    }
    let model = Demo::new(0)?;
    println!("Opal demo: MLP 256-128-10 + NLL loss (batch 64), CNN conv3x3(3->16)-relu-maxpool-linear (batch 16, 3x32x32); seed 0\n");

    let cpu = run(&model, Device::cpu(), 20)?;
    let emu = run(&model, Device::parse("emu")?, 20)?;
    for r in [&cpu, &emu] {
        let classes = ops::argmax::with(&r.outputs.probs, ops::argmax::Options::default().dim(1))?;
        println!(
            "[{}] MLP loss {:.6}   CNN classes {:?}",
            r.device,
            r.outputs.loss.item()?.to_f64(),
            classes.to_vec::<i64>()?
        );
        println!(
            "      time: MLP {:.3} ms, CNN {:.3} ms (median of 20)",
            r.mlp_time.as_secs_f64() * 1e3,
            r.cnn_time.as_secs_f64() * 1e3
        );
    }

    let (a, b) = (&cpu.outputs, &emu.outputs);
    println!(
        "\nmax |cpu - emu|: log-probs {:.2e}, loss {:.2e}, CNN probs {:.2e}",
        max_abs_diff(&a.log_probs, &b.log_probs)?,
        max_abs_diff(&a.loss, &b.loss)?,
        max_abs_diff(&a.probs, &b.probs)?
    );

    println!("\ndispatch on emu (native emu kernels / CPU-fallback calls per step):");
    for s in &emu.steps {
        let path = match (s.native, s.fallback) {
            (0, 0) => "no kernel (view)",
            (_, 0) => "native",
            (0, _) => "CPU fallback",
            _ => "mixed",
        };
        println!(
            "  {:<26} {:>2} / {:<2} {path}",
            s.name, s.native, s.fallback
        );
    }
    train_demo();
    Ok(())
}

/// Trains the MLP and the small GPT of `../shared/fixtures/training` (or
/// `OPAL_TRAINING_DIR`) in f32 on cpu and emu, side by side with PyTorch's losses.
fn train_demo() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::var_os("OPAL_TRAINING_DIR")
        .map(std::path::PathBuf::from)
        .map(|d| if d.is_absolute() { d } else { root.join(d) })
        .unwrap_or_else(|| root.join("../shared/fixtures/training"));
    println!(
        "
training (SGD, f32; generated autograd), from {}:",
        dir.display()
    );
    for model in ["mlp", "gpt"] {
        let fx = match training::Fixture::load(&dir.join(model)) {
            Ok(f) => f,
            Err(e) => {
                println!("  {model}: skipped ({e})");
                continue;
            }
        };
        let torch = fx.losses("float32").unwrap_or_default();
        for device in [Device::cpu(), Device::parse("emu").unwrap_or(Device::cpu())] {
            match training::train(&fx, opal::DType::F32, device, None) {
                Ok(r) => {
                    let mut t = r.step_us.clone();
                    t.sort_by(f64::total_cmp);
                    let median = t.get(t.len() / 2).copied().unwrap_or(0.0);
                    println!(
                        "  {model:<4} [{device}] loss {:.4} -> {:.4} over {} steps (PyTorch {:.4} -> {:.4}); median step {:.2} ms",
                        r.losses.first().copied().unwrap_or(f64::NAN),
                        r.losses.last().copied().unwrap_or(f64::NAN),
                        r.losses.len(),
                        torch.first().copied().unwrap_or(f64::NAN),
                        torch.last().copied().unwrap_or(f64::NAN),
                        median / 1e3
                    );
                }
                Err(e) => println!("  {model} [{device}]: {e}"),
            }
        }
    }
}

/// Runs PyTorch's own export of a small GPT-2 (`gpt2_tiny.pt2` of
/// `../shared/fixtures/models`, or of `OPAL_MODELS_DIR`) on cpu and emu, beside
/// the outputs PyTorch computed for the same inputs.
fn exported_model_demo() -> std::result::Result<(), String> {
    use opal_export::{device, io, ExportedProgram};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::var_os("OPAL_MODELS_DIR")
        .map(std::path::PathBuf::from)
        .map(|d| if d.is_absolute() { d } else { root.join(d) })
        .unwrap_or_else(|| root.join("../shared/fixtures/models"));
    let (pt2, io_file) = (
        dir.join("gpt2_tiny.pt2"),
        dir.join("gpt2_tiny.io.safetensors"),
    );
    println!(
        "exported PyTorch model (torch.export, core ATen opset): {}",
        pt2.display()
    );
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let program = ExportedProgram::load(&pt2).map_err(|e| text(&e))?;
    let inputs = io::read_indexed(&io_file, "input").map_err(|e| text(&e))?;
    let expected = io::read_indexed(&io_file, "output").map_err(|e| text(&e))?;
    for name in ["cpu", "emu"] {
        let runner = program
            .to_device(device(name).map_err(|e| text(&e))?)
            .map_err(|e| text(&e))?;
        let mut times = Vec::new();
        let mut outputs = Vec::new();
        for _ in 0..11 {
            let start = std::time::Instant::now();
            outputs = runner.run(&inputs).map_err(|e| text(&e))?;
            times.push(start.elapsed());
        }
        times.sort();
        let on = outputs[0].device();
        let logits = outputs[0].to(Device::cpu()).map_err(|e| text(&e))?;
        let diff = max_abs_diff(&logits, &expected[0]).map_err(|e| text(&e))?;
        let last = ops::select_int(&logits, 1, logits.sizes()[1] - 1)
            .and_then(|t| ops::argmax::with(&t, ops::argmax::Options::default().dim(-1)))
            .and_then(|t| t.to_vec::<i64>())
            .map_err(|e| text(&e))?;
        println!(
            "  [{on}] logits {:?}, max |opal - pytorch| {diff:.2e}, next token {last:?}, median run {:.3} ms",
            logits.sizes(),
            times[times.len() / 2].as_secs_f64() * 1e3
        );
    }
    println!();
    Ok(())
}
