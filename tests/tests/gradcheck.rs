//! f64 numerical gradient checks of the generated autograd kernels: every case of
//! the golden-grad set whose op has a derivative formula is rerun in float64 (float
//! inputs cast), and the gradient autograd computes for `sum_k <out_k, cot_k>` is
//! compared with central finite differences (step 1e-6) element by element.
//! Independent of PyTorch's numbers: it checks the formulas themselves. Cases
//! with complex tensors (the FFTs) check `Re sum_k <cot_k, out_k>` instead, the
//! cotangents given to autograd, and differentiate real and imaginary parts
//! separately (PyTorch's convention for complex gradients).
//!
//! `OPAL_GOLDEN_GRAD_DIR` selects another case set, as for `golden_grad.rs`.
//!
//! Owns: the numerical check. Must not: special-case an op beyond the listed
//! the listed reasons.

use opal::autograd::{self, GradOptions, NoGradGuard};
use opal::dispatch::Dispatcher;
use opal::{DType, IValue, Stack, Tensor};
use opal_tests::golden::{case_dirs, load, to_ivalue, values_f64, Golden, Target};
use serde_json::Value;

/// Ops not checked, with why.
const NOT_CHECKED: &[(&str, &str)] = &[(
    "native_dropout",
    "random: every evaluation draws another mask",
)];

/// Cases not checked, with why: their gradient is by definition not the derivative,
/// or finite differences cannot measure it.
const NOT_CHECKED_CASES: &[(&str, &str)] = &[
    (
        "embedding/1",
        "padding_idx: that row's gradient is zero by definition",
    ),
    ("embedding/2", "scale_grad_by_freq: scaled by definition"),
    (
        "embedding_dense_backward/2",
        "scale_grad_by_freq: scaled by definition",
    ),
    (
        "_to_copy/0",
        "casts to float32: differences would measure rounding",
    ),
    (
        "nan_to_num/0",
        "infinities become the largest float: differences vanish",
    ),
    (
        "_softmax_backward_data/2",
        "input_dtype is half: an f64 run changes the op",
    ),
    (
        "_log_softmax_backward_data/2",
        "input_dtype is half: an f64 run changes the op",
    ),
];

fn f64_of(t: &Tensor) -> Result<Tensor, String> {
    if t.dtype().is_floating_point() {
        t.to_dtype(DType::F64).map_err(|e| e.to_string())
    } else if t.dtype().is_complex() {
        t.to_dtype(DType::C128).map_err(|e| e.to_string())
    } else {
        Ok(t.clone())
    }
}

/// A tensor of `like`'s sizes and dtype (f64 or complex128) holding `v` (for
/// complex128: real and imaginary parts interleaved, as [`values_f64`] reads them).
fn with_values(v: &[f64], like: &Tensor) -> Result<Tensor, String> {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
    Tensor::from_bytes(&bytes, like.sizes(), like.dtype()).map_err(|e| e.to_string())
}

/// The outputs of `stack`'s op that have a cotangent, each with it.
fn outputs_with_cots(
    name: &str,
    mut stack: Stack,
    cots: &[Vec<Tensor>],
) -> Result<Vec<(Tensor, Tensor)>, String> {
    Dispatcher::global()
        .call_boxed(name, &mut stack)
        .map_err(|e| e.to_string())?;
    let mut pairs = Vec::new();
    for (v, cs) in stack.iter().zip(cots) {
        let ts: Vec<Tensor> = match v {
            IValue::Tensor(t) => vec![t.clone()],
            IValue::TensorList(ts) => ts.clone(),
            _ => Vec::new(),
        };
        pairs.extend(ts.into_iter().zip(cs.iter().cloned()));
    }
    Ok(pairs)
}

/// `Re sum_k <cot_k, out_k>` from the values: with real and imaginary parts
/// interleaved, a plain dot product. Its gradient, in PyTorch's convention for
/// complex tensors (d/d(re) + i d/d(im)), is what autograd returns for the
/// cotangents `cot_k`; element by element in the interleaved layout, it is what
/// central differences of the parts measure.
fn real_objective(name: &str, stack: Stack, cots: &[Vec<Tensor>]) -> Result<f64, String> {
    let mut total = 0.0;
    for (o, c) in outputs_with_cots(name, stack, cots)? {
        let (ov, cv) = (values_f64(&o)?, values_f64(&c)?);
        total += ov.iter().zip(&cv).map(|(a, b)| a * b).sum::<f64>();
    }
    Ok(total)
}

/// The case's arguments in f64, and the indices of the tensors that require grad.
fn args(g: &Golden, case: &Value) -> Result<(String, Stack, Vec<usize>), String> {
    let op = case["op"].as_str().ok_or("no op")?;
    let name = format!("aten::{op}");
    let def = Dispatcher::global()
        .find(&name)
        .and_then(|h| h.def())
        .ok_or_else(|| format!("{name} is not defined"))?;
    let rg = case["requires_grad"].as_array().ok_or("no requires_grad")?;
    let mut stack = Stack::new();
    let mut wants = Vec::new();
    for (i, (v, a)) in case["args"]
        .as_array()
        .ok_or("no args")?
        .iter()
        .zip(def.args)
        .enumerate()
    {
        let iv = match to_ivalue(g, v, a, Target::Cpu)? {
            IValue::Tensor(t) => IValue::Tensor(f64_of(&t)?),
            IValue::TensorList(ts) => {
                IValue::TensorList(ts.iter().map(f64_of).collect::<Result<Vec<_>, _>>()?)
            }
            other => other,
        };
        if rg.get(i).and_then(Value::as_bool) == Some(true) && matches!(iv, IValue::Tensor(_)) {
            wants.push(i);
        }
        stack.push(iv);
    }
    Ok((name, stack, wants))
}

/// `sum_k <out_k, cot_k>` and the output tensors, for `stack`.
fn objective(
    name: &str,
    stack: Stack,
    cots: &[Vec<Tensor>],
) -> Result<(Tensor, Vec<Tensor>), String> {
    let mut total: Option<Tensor> = None;
    let mut outs = Vec::new();
    for (t, c) in outputs_with_cots(name, stack, cots)? {
        let term = opal::ops::sum(&opal::ops::mul_tensor(&t, &c).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        total = Some(match total {
            None => term,
            Some(s) => opal::ops::add_tensor(&s, &term).map_err(|e| e.to_string())?,
        });
        outs.push(t);
    }
    Ok((total.ok_or("no differentiable output")?, outs))
}

fn check(g: &Golden, case: &Value) -> Result<(), String> {
    let (name, stack, wants) = args(g, case)?;
    if wants.is_empty() {
        return Ok(());
    }
    let cot = |k: &Value| g.tensor(k, Target::Cpu).and_then(|t| f64_of(&t));
    let mut cots: Vec<Vec<Tensor>> = Vec::new();
    for c in case["cotangents"].as_array().ok_or("no cotangents")? {
        cots.push(match (c.get("tensor"), c.get("tensor_list")) {
            (Some(k), _) => vec![cot(k)?],
            (_, Some(ks)) => ks
                .as_array()
                .ok_or("bad list")?
                .iter()
                .map(cot)
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        });
    }
    // Analytic: autograd through the generated kernels.
    let mut st = stack.clone();
    let mut leaves = Vec::new();
    for &i in &wants {
        if let IValue::Tensor(t) = &st[i] {
            let l = t.detach().map_err(|e| e.to_string())?;
            l.set_requires_grad(true).map_err(|e| e.to_string())?;
            st[i] = IValue::Tensor(l.clone());
            leaves.push(l);
        }
    }
    // Complex tensors: the cotangents go to autograd as the outputs' gradients
    // (their inner product would need complex arithmetic autograd refuses).
    let complex = stack
        .iter()
        .any(|v| matches!(v, IValue::Tensor(t) if t.dtype().is_complex()))
        || cots.iter().flatten().any(|c| c.dtype().is_complex());
    let grads = if complex {
        let (outs, cs): (Vec<Tensor>, Vec<Tensor>) =
            outputs_with_cots(&name, st, &cots)?.into_iter().unzip();
        autograd::grad(&outs, &leaves, &cs, GradOptions::default()).map_err(|e| e.to_string())?
    } else {
        let (obj, _) = objective(&name, st, &cots)?;
        autograd::grad(&[obj], &leaves, &[], GradOptions::default()).map_err(|e| e.to_string())?
    };
    // Numerical: central differences, one element at a time.
    let _ng = NoGradGuard::new();
    let eps = 1e-6;
    for (k, &i) in wants.iter().enumerate() {
        let IValue::Tensor(x) = &stack[i] else {
            continue;
        };
        let base = values_f64(x)?;
        let analytic = match &grads[k] {
            Some(t) => values_f64(t)?,
            None => vec![0.0; base.len()],
        };
        for j in 0..base.len() {
            let eval = |delta: f64| -> Result<f64, String> {
                let mut v = base.clone();
                v[j] += delta;
                let mut s = stack.clone();
                s[i] = IValue::Tensor(with_values(&v, x)?);
                if complex {
                    return real_objective(&name, s, &cots);
                }
                Ok(values_f64(&objective(&name, s, &cots)?.0)?[0])
            };
            let numeric = (eval(eps)? - eval(-eps)?) / (2.0 * eps);
            let a = analytic[j];
            if (a - numeric).abs() > 1e-4 + 1e-3 * numeric.abs() {
                return Err(format!(
                    "argument {i}, element {j}: autograd {a}, finite differences {numeric}"
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn generated_formulas_match_finite_differences_in_f64() {
    opal_cpu::init().unwrap();
    let (mut checked, mut failures) = (0, Vec::new());
    for (dir, _) in case_dirs(
        "OPAL_GOLDEN_GRAD_DIR",
        "../shared/fixtures/golden-grad",
        "golden-grad-core",
        "grad_cases.json",
    ) {
        let g = load(&dir, "grad_cases.json");
        for case in &g.cases {
            let id = case["id"].as_str().unwrap_or("?");
            let op = case["op"].as_str().unwrap_or("?");
            if NOT_CHECKED.iter().any(|(o, _)| *o == op)
                || NOT_CHECKED_CASES.iter().any(|(c, _)| *c == id)
                || case.get("gradcheck_skip").is_some()
            {
                continue;
            }
            checked += 1;
            if let Err(e) = check(&g, case) {
                failures.push(format!("{}: {id}: {e}", dir.display()));
            }
        }
    }
    println!(
        "gradcheck: {checked} cases checked, {} failed",
        failures.len()
    );
    for f in &failures {
        println!("  FAIL {f}");
    }
    assert!(
        failures.is_empty(),
        "{} gradient checks failed",
        failures.len()
    );
}
