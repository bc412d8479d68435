//! Every model of the fixture directories runs on cpu, emu and meta: cpu and emu
//! outputs match PyTorch's (`output.N` of `NAME.io.safetensors`) within the
//! model's tolerances, meta outputs have the expected shapes and dtypes.
//!
//! Directories: `OPAL_MODELS_DIR` (default `../shared/fixtures/models`, every
//! model must run), this crate's `tests/fixtures/models` (every model must run),
//! and the repository's `tests/fixtures/models` (a model either runs correctly or,
//! when it names an operator Opal does not define, loading fails with an error
//! naming that operator).

use crate::common;

use common::{compare, dir_from_env, models, shared_dir, Model};
use opal_export::{device, io, ExportedProgram, LoadLimits, Support};
use std::path::Path;

fn run_on(m: &Model, program: &ExportedProgram, dev: &str) -> Result<(), String> {
    let d = device(dev).map_err(|e| e.to_string())?;
    let runner = program.to_device(d).map_err(|e| e.to_string())?;
    let inputs = io::read_indexed(&m.io, "input").map_err(|e| e.to_string())?;
    let expected = io::read_indexed(&m.io, "output").map_err(|e| e.to_string())?;
    // Twice: a runner is loaded once and run many times.
    for _ in 0..2 {
        let outs = runner.run(&inputs).map_err(|e| e.to_string())?;
        if outs.len() != m.outputs.len() || outs.len() != expected.len() {
            return Err(format!(
                "{} outputs, models.json lists {}, the io file has {}",
                outs.len(),
                m.outputs.len(),
                expected.len()
            ));
        }
        for (i, (o, (shape, dtype))) in outs.iter().zip(&m.outputs).enumerate() {
            if o.sizes() != shape.as_slice() || o.dtype() != *dtype {
                return Err(format!(
                    "output {i} is {} {:?}, models.json says {dtype} {shape:?}",
                    o.dtype(),
                    o.sizes()
                ));
            }
            if dev == "meta" {
                if !o.device().is_meta() {
                    return Err(format!("output {i} is on {}, not meta", o.device()));
                }
            } else {
                compare(o, &expected[i], m.atol, m.rtol).map_err(|e| format!("output {i}: {e}"))?;
            }
        }
    }
    Ok(())
}

/// Runs every model of `dir` on cpu, emu and meta against PyTorch's outputs.
fn run_dir(dir: &Path) {
    let mut failures = Vec::new();
    let mut ran = 0;
    for m in models(dir) {
        let program = match ExportedProgram::load(&m.path) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{}: {e}", m.name));
                continue;
            }
        };
        for dev in ["cpu", "emu", "meta"] {
            match run_on(&m, &program, dev) {
                Ok(()) => ran += 1,
                Err(e) => failures.push(format!("{} on {dev}: {e}", m.name)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{ran} model runs matched in {}", dir.display());
}

#[test]
fn shared_models_run_on_cpu_emu_and_meta() {
    run_dir(&shared_dir());
}

#[test]
fn own_models_run_on_cpu_emu_and_meta() {
    run_dir(&dir_from_env(
        "OPAL_EXPORT_MODELS_DIR",
        "export/tests/fixtures/models",
    ));
}

#[test]
fn extra_models_run_on_cpu_emu_and_meta() {
    run_dir(&dir_from_env(
        "OPAL_EXTRA_MODELS_DIR",
        "tests/fixtures/models",
    ));
}

#[test]
fn a_dynamic_dimension_outside_its_range_is_refused() {
    let dir = dir_from_env("OPAL_EXPORT_MODELS_DIR", "export/tests/fixtures/models");
    let p = ExportedProgram::load(dir.join("tied_mlp_dynamic.pt2")).unwrap();
    let spec = &p.inputs()[0];
    assert_eq!(spec.sizes[0], None, "the batch is dynamic");
    let r = p.to_device(device("cpu").unwrap()).unwrap();
    // Traced at 4 with min 2: 1 and 5 are outside, 2..=4 inside.
    for (batch, ok) in [(1, false), (2, true), (4, true), (5, false)] {
        let x = opal::Tensor::empty(&[batch, 8], opal::DType::F32, opal::Device::cpu()).unwrap();
        let res = r.run(&[x]);
        assert_eq!(res.is_ok(), ok, "batch {batch}: {res:?}");
        if let Err(e) = res {
            let msg = e.to_string();
            assert!(
                msg.contains("dimension 0") && msg.contains("range"),
                "{msg}"
            );
        }
    }
    let bad = opal::Tensor::empty(&[3, 7], opal::DType::F32, opal::Device::cpu()).unwrap();
    let msg = r.run(&[bad]).unwrap_err().to_string();
    assert!(
        msg.contains("dimension 1 is 7") && msg.contains("expects 8"),
        "{msg}"
    );
    let wrong = opal::Tensor::empty(&[3, 8], opal::DType::F64, opal::Device::cpu()).unwrap();
    let msg = r.run(&[wrong]).unwrap_err().to_string();
    assert!(msg.contains("float64") && msg.contains("float32"), "{msg}");
}

#[test]
fn tied_weights_are_read_once_and_share_storage() {
    let dir = dir_from_env("OPAL_EXPORT_MODELS_DIR", "export/tests/fixtures/models");
    let p = ExportedProgram::load(dir.join("tied_mlp_dynamic.pt2")).unwrap();
    // inp (8x16 + 16), norm (16 + 16), out (16x8, shared by head), back (16x8) in f32.
    assert_eq!(p.weight_bytes(), 4 * (128 + 16 + 16 + 16 + 128 + 128));
}

#[test]
fn inspect_lists_native_fallback_and_missing_ops() {
    let gpt2 = shared_dir().join("gpt2_tiny.pt2");
    let p = ExportedProgram::open(&gpt2, &LoadLimits::default()).unwrap();
    let cpu = p.inspect(device("cpu").unwrap());
    assert!(cpu
        .ops
        .iter()
        .any(|o| o.op.as_deref() == Some("aten::addmm") && o.count == 8));
    assert!(cpu.runnable() == p.check().is_ok(), "{cpu}");
    let emu = p.inspect(device("emu").unwrap());
    assert!(!emu.with(|s| *s == Support::Native).is_empty(), "{emu}");
    assert!(
        !emu.with(|s| *s == Support::CpuFallback).is_empty(),
        "{emu}"
    );
    let text = emu.to_string();
    assert!(
        text.contains("aten::view") && text.contains("device: emu"),
        "{text}"
    );
}

#[test]
fn a_runner_runs_from_several_threads() {
    fn shareable<T: Send + Sync>(_: &T) {}
    let dir = dir_from_env("OPAL_EXPORT_MODELS_DIR", "export/tests/fixtures/models");
    let m = &models(&dir)[0];
    let p = ExportedProgram::load(&m.path).unwrap();
    let r = p.to_device(device("cpu").unwrap()).unwrap();
    shareable(&r);
    let inputs = io::read_indexed(&m.io, "input").unwrap();
    let expected = io::read_indexed(&m.io, "output").unwrap();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .map(|_| s.spawn(|| r.run(&inputs).unwrap()))
            .collect();
        for h in hs {
            for (o, e) in h.join().unwrap().iter().zip(&expected) {
                compare(o, e, m.atol, m.rtol).unwrap();
            }
        }
    });
}

#[test]
fn the_cpu_plan_fuses_norms_and_runs_views_directly() {
    let llama = shared_dir().join("llama_tiny.pt2");
    let io_path = shared_dir().join("llama_tiny.io.safetensors");
    let r = ExportedProgram::load(&llama)
        .unwrap()
        .to_device(device("cpu").unwrap())
        .unwrap();
    let inputs = io::read_indexed(&io_path, "input").unwrap();
    let prof = r.profile(&inputs, 3).unwrap();
    let count = |what: &str| prof.steps.iter().filter(|s| s.what == what).count();
    // Two decoder layers of two norms each, and the final norm.
    assert_eq!(count("fused RMS norm"), 5, "{prof}");
    // The metadata asserts the trace answers are gone; the views run directly.
    assert_eq!(count("aten::_assert_tensor_metadata"), 0, "{prof}");
    assert_eq!(count("aten::view"), 0, "{prof}");
    assert!(count("aten::view (direct)") > 0, "{prof}");
    // The table names every kind of step it timed.
    let text = prof.to_string();
    assert!(
        text.contains("fused RMS norm") && text.contains("us per run"),
        "{text}"
    );
    // The emu runner keeps every node an operator call.
    let emu = ExportedProgram::load(&llama)
        .unwrap()
        .to_device(device("emu").unwrap())
        .unwrap();
    let prof = emu.profile(&inputs, 1).unwrap();
    assert!(
        prof.steps
            .iter()
            .all(|s| !s.what.contains("fused") && !s.what.contains("direct")),
        "{prof}"
    );
}

#[test]
fn fused_steps_that_write_over_their_input_match_the_unfused_graph() {
    // MobileNetV3's activations follow convolutions whose results nothing else
    // reads: on the CPU each writes over the convolution's buffer. Emu runs
    // every node as an operator call into a new tensor.
    let path = shared_dir().join("mobilenet_v3_tiny.pt2");
    let io_path = shared_dir().join("mobilenet_v3_tiny.io.safetensors");
    let program = ExportedProgram::load(&path).unwrap();
    let inputs = io::read_indexed(&io_path, "input").unwrap();
    let cpu = program.to_device(device("cpu").unwrap()).unwrap();
    let prof = cpu.profile(&inputs, 1).unwrap();
    let in_place = prof
        .steps
        .iter()
        .filter(|s| s.what == "fused element-wise (in place)")
        .count();
    assert!(in_place >= 10, "{prof}");
    let emu = program.to_device(device("emu").unwrap()).unwrap();
    let want = emu.run(&inputs).unwrap();
    // Several runs: a buffer given away must never be one the runner keeps.
    let first = cpu.run(&inputs).unwrap();
    for _ in 0..3 {
        let again = cpu.run(&inputs).unwrap();
        for (a, b) in again.iter().zip(&first) {
            assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        }
    }
    // The fixture's tolerance against PyTorch (models.json) is 1e-4.
    for (o, e) in first.iter().zip(&want) {
        compare(o, e, 1e-4, 1e-4).unwrap();
    }
}

#[test]
fn direct_convolution_and_layer_scale_steps_match_the_operator_calls() {
    // MobileNetV3's 1x1 convolutions, ConvNeXt's depthwise ones of
    // channels-last images, its patch ones (ViT's too) and its layer scales with
    // their residuals run as their own loops on the CPU, and ViT's batched
    // input projections as one product; emu runs each node as the operator.
    for (name, what, least) in [
        ("mobilenet_v3_tiny", "aten::convolution (1x1)", 40),
        (
            "convnext_tiny_cfg",
            "aten::convolution (depthwise, channels-last)",
            3,
        ),
        ("convnext_tiny_cfg", "fused layer scale and residual", 3),
        ("convnext_tiny_cfg", "aten::convolution (patches)", 3),
        ("vit_tiny", "aten::convolution (patches)", 1),
        ("vit_tiny", "aten::bmm (one matrix)", 2),
    ] {
        let path = shared_dir().join(format!("{name}.pt2"));
        let io_path = shared_dir().join(format!("{name}.io.safetensors"));
        let program = ExportedProgram::load(&path).unwrap();
        let inputs = io::read_indexed(&io_path, "input").unwrap();
        let cpu = program.to_device(device("cpu").unwrap()).unwrap();
        let prof = cpu.profile(&inputs, 1).unwrap();
        let n = prof.steps.iter().filter(|s| s.what == what).count();
        assert!(n >= least, "{name}: {n} steps '{what}'\n{prof}");
        let want = program
            .to_device(device("emu").unwrap())
            .unwrap()
            .run(&inputs)
            .unwrap();
        for (o, e) in cpu.run(&inputs).unwrap().iter().zip(&want) {
            compare(o, e, 1e-5, 1e-5).unwrap();
        }
    }
}
