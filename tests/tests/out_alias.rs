//! Memory overlap between the tensors an op writes and the ones it reads, for every
//! `out=` and in-place op, against PyTorch:
//!
//! - `pytorch_overlap_rules_are_opal_rules` replays `tests/fixtures/out-alias`
//!   (made by `make.py` there from PyTorch's own behaviour): each case writes into
//!   an input itself (full overlap) or into a view shifted by one element over the
//!   input's buffer (partial overlap). Where PyTorch refuses, Opal must refuse with
//!   an error naming the op and "single memory location"; where PyTorch accepts a
//!   full overlap, Opal must accept and write PyTorch's values.
//! - `every_out_op_refuses_a_partially_overlapping_out` needs no fixture of its own:
//!   it walks every `out=` op the dispatcher defines (`ops::ALL_DEFS`, generated from
//!   the schema list, so new ops are covered without new test code), runs its
//!   functional sibling on a golden case for the output's shape and dtype, and
//!   requires the `out=` form to refuse an `out` laid over an input shifted by one
//!   element.
//!
//! Both print what they covered and every case or op they could not check, with
//! the reason.

use opal::dispatch::{ArgDef, Dispatcher, OpDef};
use opal::{ops, DType, Device, IValue, Tensor};
use opal_tests::golden::{self, Golden, Target};
use serde_json::Value;
use std::collections::BTreeMap;

const ALIAS: &str = "single memory location";

/// Ops PyTorch lets write an output into an input that feeds the other outputs
/// (`native_batch_norm.out` with `save_mean` as `weight`): what the other outputs
/// then hold depends on the order the kernel writes and reads, which neither
/// PyTorch nor Opal specifies. Their acceptance is checked, their values are not.
const ORDER_DEPENDENT: &[&str] = &["native_batch_norm.out"];

fn init() {
    opal_cpu::init().expect("CPU backend registers");
}

/// A tensor with its own copy of `t`'s elements (fixture tensors are shared handles;
/// in-place cases must not write into them).
fn own(t: &Tensor) -> Tensor {
    if !t.is_defined() {
        return t.clone();
    }
    let bytes = t.to_bytes().expect("tensor bytes");
    Tensor::from_bytes(&bytes, t.sizes(), t.dtype()).expect("tensor copy")
}

fn own_value(v: IValue) -> IValue {
    match v {
        IValue::Tensor(t) => IValue::Tensor(own(&t)),
        IValue::TensorList(ts) => IValue::TensorList(ts.iter().map(own).collect()),
        IValue::OptionalTensorList(ts) => {
            IValue::OptionalTensorList(ts.iter().map(|t| t.as_ref().map(own)).collect())
        }
        v => v,
    }
}

fn contiguous_strides(sizes: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; sizes.len()];
    for i in (0..sizes.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * sizes[i + 1].max(1);
    }
    strides
}

/// `(input, written)`: `input` holds `src`'s elements at the start of a fresh buffer
/// and `written` (of `written_sizes`, `src`'s dtype) starts one element later.
fn shifted_pair(src: &Tensor, written_sizes: &[i64]) -> (Tensor, Tensor) {
    let n = src.numel() as usize;
    let m: usize = written_sizes.iter().product::<i64>() as usize;
    let es = src.element_size();
    let mut bytes = src.to_bytes().expect("tensor bytes");
    bytes.resize(es * (n.max(m + 1) + 1), 0);
    let len = (bytes.len() / es) as i64;
    let buf = Tensor::from_bytes(&bytes, &[len], src.dtype()).expect("buffer");
    let input = buf
        .as_strided(src.sizes(), &contiguous_strides(src.sizes()), 0)
        .expect("input view");
    let written = buf
        .as_strided(written_sizes, &contiguous_strides(written_sizes), 1)
        .expect("written view");
    (input, written)
}

fn def_of(op: &str) -> &'static OpDef {
    Dispatcher::global()
        .find(&format!("aten::{op}"))
        .and_then(|h| h.def())
        .unwrap_or_else(|| panic!("aten::{op} is not defined"))
}

fn arg_index(def: &OpDef, name: &str) -> usize {
    def.args
        .iter()
        .position(|a| a.name == name)
        .unwrap_or_else(|| panic!("{}: no argument {name}", def.name))
}

fn tensor_at(v: &IValue, index: Option<usize>) -> Tensor {
    match (v, index) {
        (IValue::Tensor(t), None) => t.clone(),
        (IValue::TensorList(ts), Some(j)) => ts[j].clone(),
        (IValue::OptionalTensorList(ts), Some(j)) => ts[j].clone().expect("defined element"),
        (v, i) => panic!("no tensor at {i:?} of {}", golden::ivalue_kind(v)),
    }
}

fn set_tensor_at(v: &mut IValue, index: Option<usize>, t: Tensor) {
    match (v, index) {
        (IValue::Tensor(x), None) => *x = t,
        (IValue::TensorList(ts), Some(j)) => ts[j] = t,
        (IValue::OptionalTensorList(ts), Some(j)) => ts[j] = Some(t),
        (v, i) => panic!("no tensor at {i:?} of {}", golden::ivalue_kind(v)),
    }
}

/// The arguments of one fixture case, with the aliasing it asks for applied, and
/// the indices of the written arguments.
fn case_stack(g: &Golden, c: &Value, def: &OpDef) -> Result<(Vec<IValue>, Vec<usize>), String> {
    let mut out_dtypes = c["out_dtypes"].as_array().into_iter().flatten();
    let mut stack = Vec::with_capacity(def.args.len());
    for (v, a) in c["args"].as_array().ok_or("no args")?.iter().zip(def.args) {
        if v.get("out").is_some() {
            let dt = out_dtypes
                .next()
                .and_then(|d| d.as_str())
                .ok_or("out dtype")?;
            let dt = DType::parse(dt).map_err(|e| e.to_string())?;
            stack.push(IValue::Tensor(
                Tensor::empty(&[0], dt, Device::cpu()).map_err(|e| e.to_string())?,
            ));
        } else {
            stack.push(own_value(golden::to_ivalue(g, v, a, Target::Cpu)?));
        }
    }
    let w = arg_index(def, c["written"].as_str().ok_or("written")?);
    // The tensors whose values the fixture records: the outputs of an out= op, the
    // written `self` of an in-place op.
    let mut written: Vec<usize> = (0..def.args.len()).filter(|&i| def.args[i].out).collect();
    if written.is_empty() {
        written.push(w);
    }
    let i = arg_index(def, c["input"].as_str().ok_or("input")?);
    let j = c["index"].as_u64().map(|j| j as usize);
    let input = tensor_at(&stack[i], j);
    match c["kind"].as_str() {
        Some("full") if def.args[w].out => stack[w] = IValue::Tensor(input),
        Some("full") => {
            let t = tensor_at(&stack[w], None);
            set_tensor_at(&mut stack[i], j, t);
        }
        Some("partial") => {
            let (inp, wr) = shifted_pair(&input, input.sizes());
            set_tensor_at(&mut stack[i], j, inp);
            stack[w] = IValue::Tensor(wr);
        }
        k => return Err(format!("unknown kind {k:?}")),
    }
    Ok((stack, written))
}

#[test]
fn pytorch_overlap_rules_are_opal_rules() {
    init();
    let dir = golden::repo_root().join("tests/fixtures/out-alias");
    let g = golden::load(&dir, "cases.json");
    let (mut refused, mut accepted) = (0, 0);
    let mut ops_seen = std::collections::BTreeSet::new();
    let mut exceptions: Vec<String> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for c in &g.cases {
        let id = c["id"].as_str().unwrap_or("?").to_string();
        let op = c["op"].as_str().expect("op");
        ops_seen.insert(op.to_string());
        let def = def_of(op);
        let (mut stack, written) = match case_stack(&g, c, def) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{id}: cannot build the arguments: {e}"));
                continue;
            }
        };
        let kept: Vec<Tensor> = written
            .iter()
            .map(|&w| tensor_at(&stack[w], None))
            .collect();
        let r = Dispatcher::global().call_boxed(def.name, &mut stack);
        let pytorch_accepts = c["accepted"].as_bool().expect("accepted");
        let partial = c["kind"] == "partial";
        match (pytorch_accepts, r) {
            (false, Err(e)) => {
                let msg = e.to_string();
                if msg.contains(op) && msg.contains(ALIAS) {
                    refused += 1;
                } else {
                    failures.push(format!(
                        "{id}: refused, but the error does not name the op and the overlap: {msg}"
                    ));
                }
            }
            (false, Ok(())) => failures.push(format!(
                "{id}: Opal accepts, PyTorch refuses: {}",
                c["message"].as_str().unwrap_or("")
            )),
            // Opal refuses every partial overlap of a written tensor (PyTorch's
            // element-wise rule, applied to every op): what PyTorch writes there
            // depends on the order its kernel visits the elements.
            (true, Err(e)) if partial && e.to_string().contains(ALIAS) => {
                exceptions.push(format!(
                    "{id}: PyTorch accepts a partial overlap, Opal refuses it"
                ));
            }
            (true, Err(e)) => failures.push(format!("{id}: PyTorch accepts, Opal refuses: {e}")),
            (true, Ok(())) if partial => accepted += 1,
            (true, Ok(())) if ORDER_DEPENDENT.contains(&op) => {
                accepted += 1;
                exceptions.push(format!(
                    "{id}: accepted as in PyTorch; values not compared (order-dependent)"
                ));
            }
            (true, Ok(())) => {
                let expected = c["written_values"].as_array().expect("written_values");
                let (atol, rtol) = (
                    c["atol"].as_f64().unwrap_or(1e-6),
                    c["rtol"].as_f64().unwrap_or(1e-6),
                );
                let mut ok = true;
                for (t, e) in kept.iter().zip(expected) {
                    let want = g
                        .tensor(&e["tensor"], Target::Cpu)
                        .expect("expected tensor");
                    if let Err(why) =
                        golden::compare_tensor(&want, &IValue::Tensor(t.clone()), atol, rtol, true)
                    {
                        failures.push(format!("{id}: written values: {why}"));
                        ok = false;
                    }
                }
                if ok {
                    accepted += 1;
                }
            }
        }
    }
    println!(
        "out-alias: {} cases over {} ops: {refused} refused as PyTorch refuses, {accepted} \
         accepted as PyTorch accepts (full overlaps with PyTorch's values)",
        g.cases.len(),
        ops_seen.len()
    );
    println!("exceptions ({}):", exceptions.len());
    for e in &exceptions {
        println!("  {e}");
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The type text without alias annotations (`Tensor(a!)` -> `Tensor`).
fn bare(ty: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for ch in ty.chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

fn base_name(def: &OpDef) -> &str {
    let n = def.name.strip_prefix("aten::").unwrap_or(def.name);
    n.split('.').next().unwrap_or(n)
}

/// The functional op with `def`'s arguments but its outputs.
fn functional_sibling(def: &OpDef) -> Option<&'static OpDef> {
    let ins: Vec<(&str, String)> = def
        .args
        .iter()
        .filter(|a| !a.out)
        .map(|a| (a.name, bare(a.ty)))
        .collect();
    ops::ALL_DEFS.iter().copied().find(|d| {
        d.name != def.name
            && base_name(d) == base_name(def)
            && d.args.iter().all(|a| !a.out)
            && d.args.len() == ins.len()
            && d.args
                .iter()
                .zip(&ins)
                .all(|(a, (n, t))| a.name == *n && bare(a.ty) == *t)
    })
}

fn stack_of(g: &Golden, c: &Value, args: &[ArgDef]) -> Result<Vec<IValue>, String> {
    c["args"]
        .as_array()
        .ok_or("no args")?
        .iter()
        .zip(args)
        .map(|(v, a)| golden::to_ivalue(g, v, a, Target::Cpu).map(own_value))
        .collect()
}

/// Every tensor of a value with its list position.
fn tensors_of(v: &IValue) -> Vec<(Option<usize>, Tensor)> {
    match v {
        IValue::Tensor(t) if t.is_defined() => vec![(None, t.clone())],
        IValue::TensorList(ts) => ts
            .iter()
            .cloned()
            .enumerate()
            .map(|(j, t)| (Some(j), t))
            .collect(),
        IValue::OptionalTensorList(ts) => ts
            .iter()
            .enumerate()
            .filter_map(|(j, t)| t.clone().map(|t| (Some(j), t)))
            .collect(),
        _ => Vec::new(),
    }
}

/// Tries one golden case of the functional sibling: `Ok(true)` when an `out` laid
/// over an input was refused, `Ok(false)` when the case offers no such pair.
fn partial_out_refused(g: &Golden, c: &Value, def: &OpDef, sib: &OpDef) -> Result<bool, String> {
    let mut stack = stack_of(g, c, sib.args)?;
    let inputs = stack.clone();
    Dispatcher::global()
        .call_boxed(sib.name, &mut stack)
        .map_err(|e| format!("functional call failed: {e}"))?;
    let results: Vec<Tensor> = stack
        .iter()
        .filter_map(|v| match v {
            IValue::Tensor(t) => Some(t.clone()),
            _ => None,
        })
        .collect();
    let outs: Vec<usize> = (0..def.args.len()).filter(|&i| def.args[i].out).collect();
    if results.len() != outs.len() {
        return Ok(false);
    }
    for (k, r) in results.iter().enumerate() {
        if r.numel() < 1 {
            continue;
        }
        for (i, v) in inputs.iter().enumerate() {
            for (j, x) in tensors_of(v) {
                if x.dtype() != r.dtype() || x.numel() < 2 {
                    continue;
                }
                // The input keeps its values at the start of one buffer; `out`
                // starts one element later, so they share all but one element.
                let (input, out) = shifted_pair(&x, r.sizes());
                let mut call = inputs.clone();
                set_tensor_at(&mut call[i], j, input);
                for (kk, &o) in outs.iter().enumerate() {
                    let t = if kk == k {
                        out.clone()
                    } else {
                        Tensor::empty(&[0], results[kk].dtype(), Device::cpu())
                            .map_err(|e| e.to_string())?
                    };
                    call.insert(o, IValue::Tensor(t));
                }
                return match Dispatcher::global().call_boxed(def.name, &mut call) {
                    Err(e) if e.to_string().contains(ALIAS) => Ok(true),
                    Err(e) => Err(format!("refused for another reason: {e}")),
                    Ok(()) => Err(format!(
                        "accepted an out over argument {} shifted by one element",
                        sib.args[i].name
                    )),
                };
            }
        }
    }
    Ok(false)
}

#[test]
fn every_out_op_refuses_a_partially_overlapping_out() {
    init();
    let mut by_op: BTreeMap<String, Vec<(usize, Value)>> = BTreeMap::new();
    let sets: Vec<Golden> = golden::case_dirs(
        "OPAL_GOLDEN_DIR",
        "../shared/fixtures/golden",
        "golden-core",
        "cases.json",
    )
    .into_iter()
    .map(|(d, _)| golden::load(&d, "cases.json"))
    .collect();
    for (si, g) in sets.iter().enumerate() {
        for c in &g.cases {
            if c.get("check").and_then(|v| v.as_str()).unwrap_or("values") == "values" {
                let op = c["op"].as_str().unwrap_or("").to_string();
                by_op.entry(op).or_default().push((si, c.clone()));
            }
        }
    }
    let mut covered = Vec::new();
    let mut exceptions = Vec::new();
    let mut failures = Vec::new();
    for def in ops::ALL_DEFS
        .iter()
        .copied()
        .filter(|d| d.args.iter().any(|a| a.out))
    {
        let Some(sib) = functional_sibling(def) else {
            exceptions.push(format!(
                "{}: no functional sibling to take a case from",
                def.name
            ));
            continue;
        };
        let short = sib.name.strip_prefix("aten::").unwrap_or(sib.name);
        let Some(cases) = by_op.get(short) else {
            exceptions.push(format!("{}: no golden case of {short}", def.name));
            continue;
        };
        let mut done = false;
        let mut errors = Vec::new();
        for (si, c) in cases {
            match partial_out_refused(&sets[*si], c, def, sib) {
                Ok(true) => {
                    done = true;
                    break;
                }
                Ok(false) => {}
                Err(e) => errors.push(format!("{}: {e}", c["id"].as_str().unwrap_or("?"))),
            }
        }
        if done {
            covered.push(def.name);
        } else if let Some(e) = errors
            .into_iter()
            .find(|e| !e.contains("functional call failed"))
        {
            failures.push(format!("{}: {e}", def.name));
        } else {
            exceptions.push(format!(
                "{}: no golden case of {short} has an input with an output's dtype and two \
                 elements or more",
                def.name
            ));
        }
    }
    println!(
        "out= ops refusing a partially overlapping out: {} of {} ({})",
        covered.len(),
        covered.len() + exceptions.len() + failures.len(),
        covered.join(", ")
    );
    println!("not checked ({}):", exceptions.len());
    for e in &exceptions {
        println!("  {e}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(!covered.is_empty(), "no out= op was checked");
}
