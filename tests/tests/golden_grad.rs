//! Golden gradients: every case of `grad_cases.json` + `tensors.safetensors`
//! (PyTorch 2.15's reverse-mode gradients, see `../shared/README.md`) is run by op
//! name through boxed calling with the marked arguments requiring grad, then
//! differentiated with `autograd::grad(outputs, inputs, cotangents)`; each gradient
//! is compared with PyTorch's (dtype, shape, values within the case's tolerances).
//! An expected `none` passes when Opal gives no gradient or an all-zero one (PyTorch's
//! `allow_unused` gives `None` where Opal's engine may give zeros). Every case must
//! pass.
//!
//! Runs on CPU (`golden_grad_cpu`) and on the emu device (`golden_grad_emu`: inputs
//! moved to `emu:0`, gradients moved back to compare). The directory is
//! `OPAL_GOLDEN_GRAD_DIR` (relative: from the repository root), default
//! `../shared/fixtures/golden-grad`:
//! `OPAL_GOLDEN_GRAD_DIR=<dir> cargo test -p opal-tests --test integration golden_grad::`.
//!
//! Owns: the gradient run of a case. Must not: special-case an op to make it pass.

use opal::autograd::{self, GradOptions};
use opal::dispatch::Dispatcher;
use opal::{Device, IValue, Stack, Tensor};
use opal_tests::golden::{case_dirs, compare_tensor, load, to_ivalue, values_f64, Golden, Target};
use serde_json::Value;

/// Moves `t` to `dev` as a fresh leaf that requires grad when `rg`.
fn input(t: &Tensor, dev: Device, rg: bool) -> Result<Tensor, String> {
    let t = t
        .to(dev)
        .map_err(|e| e.to_string())?
        .detach()
        .map_err(|e| e.to_string())?;
    if rg {
        t.set_requires_grad(true).map_err(|e| e.to_string())?;
    }
    Ok(t)
}

fn run_case(g: &Golden, case: &Value, dev: Device) -> Result<(), String> {
    let op = case["op"].as_str().ok_or("case without op")?;
    let name = format!("aten::{op}");
    let def = Dispatcher::global()
        .find(&name)
        .and_then(|h| h.def())
        .ok_or_else(|| format!("operator {name} is not defined"))?;
    let args = case["args"].as_array().ok_or("case without args")?;
    let rg = case["requires_grad"].as_array().ok_or("no requires_grad")?;
    let mut stack: Stack = Vec::new();
    let mut inputs: Vec<(usize, Vec<Tensor>)> = Vec::new();
    for (i, (v, a)) in args.iter().zip(def.args).enumerate() {
        let wants = rg.get(i).and_then(Value::as_bool).unwrap_or(false);
        let iv =
            to_ivalue(g, v, a, Target::Cpu).map_err(|e| format!("argument '{}': {e}", a.name))?;
        let iv = match iv {
            IValue::Tensor(t) => {
                let t = input(&t, dev, wants)?;
                if wants {
                    inputs.push((i, vec![t.clone()]));
                }
                IValue::Tensor(t)
            }
            IValue::TensorList(ts) => {
                let ts = ts
                    .iter()
                    .map(|t| input(t, dev, wants))
                    .collect::<Result<Vec<_>, _>>()?;
                if wants {
                    inputs.push((i, ts.clone()));
                }
                IValue::TensorList(ts)
            }
            IValue::OptionalTensorList(ts) => IValue::OptionalTensorList(
                ts.iter()
                    .map(|t| t.as_ref().map(|t| input(t, dev, false)).transpose())
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            other => other,
        };
        stack.push(iv);
    }
    Dispatcher::global()
        .call_boxed(&name, &mut stack)
        .map_err(|e| format!("forward: {e}"))?;
    let cots = case["cotangents"].as_array().ok_or("no cotangents")?;
    let (mut outs, mut gouts) = (Vec::new(), Vec::new());
    for (out, cot) in stack.iter().zip(cots) {
        match (out, cot.get("tensor"), cot.get("tensor_list")) {
            (IValue::Tensor(t), Some(k), _) => {
                outs.push(t.clone());
                gouts.push(input(&g.tensor(k, Target::Cpu)?, dev, false)?);
            }
            (IValue::TensorList(ts), _, Some(ks)) => {
                for (t, k) in ts.iter().zip(ks.as_array().ok_or("bad tensor_list")?) {
                    outs.push(t.clone());
                    gouts.push(input(&g.tensor(k, Target::Cpu)?, dev, false)?);
                }
            }
            _ => {}
        }
    }
    let flat: Vec<Tensor> = inputs.iter().flat_map(|(_, ts)| ts.clone()).collect();
    let grads = autograd::grad(&outs, &flat, &gouts, GradOptions::default())
        .map_err(|e| format!("backward: {e}"))?;
    let expected = case["grads"].as_array().ok_or("no grads")?;
    let atol = case["atol"].as_f64().unwrap_or(0.0);
    let rtol = case["rtol"].as_f64().unwrap_or(0.0);
    let mut k = 0;
    for (i, ts) in &inputs {
        let exp = &expected[*i];
        let keys: Vec<Value> = match (exp.get("tensor"), exp.get("tensor_list")) {
            (Some(t), _) => vec![t.clone()],
            (_, Some(l)) => l.as_array().cloned().unwrap_or_default(),
            _ => vec![Value::Null; ts.len()],
        };
        for (j, key) in keys.iter().enumerate() {
            let got = grads.get(k + j).cloned().flatten();
            let label = format!("grad of argument {i}[{j}]");
            match (key.is_null(), got) {
                (true, None) => {}
                (true, Some(t)) => {
                    let v = values_f64(&t.to(Device::cpu()).map_err(|e| e.to_string())?)?;
                    if v.iter().any(|x| *x != 0.0) {
                        return Err(format!("{label}: expected none, got a nonzero gradient"));
                    }
                }
                (false, None) => return Err(format!("{label}: no gradient")),
                (false, Some(t)) => {
                    let t = t.to(Device::cpu()).map_err(|e| e.to_string())?;
                    compare_tensor(
                        &g.tensor(key, Target::Cpu)?,
                        &IValue::Tensor(t),
                        atol,
                        rtol,
                        true,
                    )
                    .map_err(|e| format!("{label}: {e}"))?;
                }
            }
        }
        k += ts.len();
    }
    Ok(())
}

fn run_all(dev: Device, label: &str) {
    let dirs = case_dirs(
        "OPAL_GOLDEN_GRAD_DIR",
        "../shared/fixtures/golden-grad",
        "golden-grad-core",
        "grad_cases.json",
    );
    let (mut total, mut failed) = (0, 0);
    for (dir, _) in dirs {
        let g = load(&dir, "grad_cases.json");
        let mut failures = Vec::new();
        for case in &g.cases {
            let id = case["id"].as_str().unwrap_or("?").to_string();
            if let Err(e) = run_case(&g, case, dev) {
                failures.push((id, e));
            }
        }
        let n = g.cases.len();
        println!(
            "golden-grad ({label}) {}: {} passed, {} failed",
            dir.display(),
            n - failures.len(),
            failures.len()
        );
        for (id, why) in &failures {
            println!("  FAIL {id}: {why}");
        }
        total += n;
        failed += failures.len();
    }
    assert!(
        failed == 0,
        "golden-grad ({label}): {failed} of {total} cases failed"
    );
}

#[test]
fn golden_grad_cpu() {
    opal_cpu::init().expect("registering the CPU backend");
    run_all(Device::cpu(), "cpu");
}

#[test]
fn golden_grad_emu() {
    opal_cpu::init().expect("registering the CPU backend");
    opal_emu::init().expect("registering emu");
    run_all(Device::parse("emu:0").expect("emu device"), "emu");
}
