//! Training parity with PyTorch: each model of `../shared/fixtures/training`
//! (`OPAL_TRAINING_DIR=<dir>`: another set of the same format, relative to the
//! repository root) is trained with SGD in every dtype of its spec, on cpu and on
//! emu; every step's loss and the final parameters must match PyTorch's within the
//! spec's tolerances (`loss_rtol`; `param_rtol`, `param_atol`).
//!
//! Owns: the comparison. Must not: hard-code a size (the fixture gives them all).

use opal::Device;
use opal_demo::training::{dtype_of, train, Fixture};
use opal_tests::golden::{fixture_dir, values_f64};

fn models() -> Vec<std::path::PathBuf> {
    let dir = fixture_dir("OPAL_TRAINING_DIR", "../shared/fixtures/training");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|d| d.ok().map(|d| d.path()))
        .filter(|p| p.join("spec.json").is_file())
        .collect();
    v.sort();
    v
}

fn check(model_dir: &std::path::Path, device: Device) -> Vec<String> {
    let fx = Fixture::load(model_dir).expect("fixture loads");
    let mut errs = Vec::new();
    let dtypes: Vec<String> = fx.spec["dtypes"]
        .as_array()
        .expect("spec.json: dtypes")
        .iter()
        .filter_map(|d| d.as_str().map(String::from))
        .collect();
    for dt in &dtypes {
        let label = format!("{} {dt} on {device}", fx.model);
        let run = match train(&fx, dtype_of(dt).unwrap(), device, None) {
            Ok(r) => r,
            Err(e) => {
                errs.push(format!("{label}: {e}"));
                continue;
            }
        };
        let expected = fx.losses(dt).unwrap();
        let rtol = fx.tolerance(dt, "loss_rtol").unwrap();
        assert_eq!(run.losses.len(), expected.len(), "{label}: step count");
        for (i, (a, b)) in run.losses.iter().zip(&expected).enumerate() {
            if (a - b).abs() > rtol * b.abs() {
                errs.push(format!(
                    "{label}: step {i} loss {a} != PyTorch {b} (rtol {rtol})"
                ));
                break;
            }
        }
        let (prt, pat) = (
            fx.tolerance(dt, "param_rtol").unwrap(),
            fx.tolerance(dt, "param_atol").unwrap(),
        );
        for (name, want) in fx.final_params(dt).unwrap() {
            let Some(got) = run.params.get(&name) else {
                errs.push(format!("{label}: no parameter {name}"));
                continue;
            };
            let (g, w) = (values_f64(got).unwrap(), values_f64(&want).unwrap());
            if let Some(i) = (0..w.len()).find(|&i| (g[i] - w[i]).abs() > pat + prt * w[i].abs()) {
                errs.push(format!(
                    "{label}: final {name}[{i}] = {} != PyTorch {}",
                    g[i], w[i]
                ));
            }
        }
        println!(
            "{label}: {} steps, loss {:.6} -> {:.6}",
            run.losses.len(),
            run.losses[0],
            run.losses.last().unwrap()
        );
    }
    errs
}

fn run_all(device: Device) {
    let errs: Vec<String> = models().iter().flat_map(|m| check(m, device)).collect();
    for e in &errs {
        println!("FAIL {e}");
    }
    assert!(errs.is_empty(), "{} training mismatches", errs.len());
}

#[test]
fn training_matches_pytorch_on_cpu() {
    opal_cpu::init().unwrap();
    run_all(Device::cpu());
}

#[test]
fn training_matches_pytorch_on_emu() {
    opal_cpu::init().unwrap();
    opal_emu::init().unwrap();
    run_all(Device::parse("emu:0").unwrap());
}
