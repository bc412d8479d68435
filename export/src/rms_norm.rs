//! RMS normalization as one step: the decomposition the exporter writes for
//! Llama-style `RMSNorm` (and T5's) is five nodes, and a sixth when a weight
//! scales the result:
//!
//! ```text
//! p = pow(x, 2); m = mean.dim(p, [-1], keepdim=True); a = add(m, eps);
//! r = rsqrt(a); y = mul(x, r); [z = mul(w, y)]
//! ```
//!
//! On the CPU these become one pass over each row
//! (`opal_cpu::fused_rows::rms_norm_f32`), with the same rounding steps: `x * r`
//! rounded, then the weight's product.
//!
//! Owns: recognising the pattern (consecutive nodes in the exporter's order,
//! intermediates read nowhere else, f32 over the last dimension of a static
//! contiguous shape, a weight of the last dimension's length) and running the
//! fused step. Must not: fuse anything else or change the result; at run time
//! any other dtype, layout or device takes the nodes' own operators.

use crate::error::{Error, Result};
use crate::graph::{arg, f32_contiguous, is, out, tensor_arg};
use crate::schema::{Arg, Program};
use opal::{DType, Tensor};
use std::collections::HashMap;
use std::ops::Range;

/// One recognised pattern.
pub(crate) struct Group {
    /// Node indices, consecutive.
    pub members: Range<usize>,
    pub input: String,
    /// The weight that scales the result, when the pattern has one.
    pub weight: Option<String>,
    pub output: String,
    pub eps: f64,
}

fn number(a: Option<&Arg>) -> Option<f64> {
    match a? {
        Arg::Int(i) => Some(*i as f64),
        Arg::Float(f) => Some(*f),
        _ => None,
    }
}

/// `mul(a, b)` with `a`, `b` in either order: the other operand.
fn times<'a>(node: &'a crate::schema::Node, one: &str) -> Option<&'a str> {
    let (s, o) = (tensor_arg(node, "self")?, tensor_arg(node, "other")?);
    if s == one {
        Some(o)
    } else if o == one {
        Some(s)
    } else {
        None
    }
}

/// The pattern starting at node `i`, if it is there.
fn at(p: &Program, i: usize, readers: &HashMap<&str, usize>) -> Option<Group> {
    let w = p.nodes.get(i..i + 5)?;
    let [pw, mean, add, rs, mul] = w else {
        return None;
    };
    let x = tensor_arg(pw, "self")?;
    let sizes = f32_contiguous(p, x)?;
    let last = sizes.len() as i64 - 1;
    let d = *sizes.last()?;
    let ok = is(pw, "pow.Tensor_Scalar")
        && number(arg(pw, "exponent")) == Some(2.0)
        && is(mean, "mean.dim")
        && tensor_arg(mean, "self") == out(pw)
        && matches!(arg(mean, "dim"), Some(Arg::Ints(v)) if v.len() == 1 && (v[0] == -1 || v[0] == last))
        && matches!(arg(mean, "keepdim"), Some(Arg::Bool(true)))
        && matches!(arg(mean, "dtype"), None | Some(Arg::None))
        && (is(add, "add.Tensor") || is(add, "add.Scalar"))
        && tensor_arg(add, "self") == out(mean)
        && matches!(arg(add, "alpha"), None | Some(Arg::Int(1)))
        && is(rs, "rsqrt.default")
        && tensor_arg(rs, "self") == out(add)
        && is(mul, "mul.Tensor")
        && times(mul, out(rs)?) == Some(x)
        && d > 0;
    if !ok {
        return None;
    }
    let eps = number(arg(add, "other"))?;
    let y = out(mul)?;
    if f32_contiguous(p, y)? != sizes {
        return None;
    }
    let once = |n: &str| readers.get(n).copied() == Some(1);
    if ![out(pw)?, out(mean)?, out(add)?, out(rs)?]
        .into_iter()
        .all(once)
    {
        return None;
    }
    // The weight's product, when it follows and only it reads `y`.
    if let Some(scale) = p.nodes.get(i + 5).filter(|n| is(n, "mul.Tensor")) {
        if let (Some(wname), Some(z), true) = (times(scale, y), out(scale), once(y)) {
            let weight_ok = f32_contiguous(p, wname).is_some_and(|s| s == [d]) && wname != y;
            if weight_ok && f32_contiguous(p, z).is_some_and(|s| s == sizes) {
                return Some(Group {
                    members: i..i + 6,
                    input: x.to_string(),
                    weight: Some(wname.to_string()),
                    output: z.to_string(),
                    eps,
                });
            }
        }
    }
    Some(Group {
        members: i..i + 5,
        input: x.to_string(),
        weight: None,
        output: y.to_string(),
        eps,
    })
}

/// Every occurrence of the pattern in `p`.
pub(crate) fn groups(p: &Program) -> Vec<Group> {
    let r = crate::graph::readers(p);
    crate::graph::scan_runs(p, |i| at(p, i, &r), |g| &g.members)
}

/// The fused step: `x * rsqrt(mean(x^2, -1) + eps)`, times `w` when given.
pub(crate) fn run(x: &Tensor, w: Option<&Tensor>, eps: f64) -> Result<Tensor> {
    let d = x.sizes().last().copied().unwrap_or(0).max(0) as usize;
    let fast = x.dtype() == DType::F32
        && d > 0
        && x.is_contiguous()
        && x.device().is_cpu()
        && w.is_none_or(|w| {
            w.dtype() == DType::F32
                && w.is_contiguous()
                && w.device().is_cpu()
                && w.sizes() == [d as i64].as_slice()
        });
    if !fast {
        // The nodes' own operators.
        let p = opal::ops::pow_tensor_scalar(x, &opal::Scalar::Int(2))?;
        let m = opal::ops::mean_dim::call(&p, Some(&[-1]), true, None)?;
        let a = opal::ops::add_scalar(&m, &opal::Scalar::Float(eps))?;
        let y = opal::ops::mul_tensor(x, &opal::ops::rsqrt(&a)?)?;
        return Ok(match w {
            Some(w) => opal::ops::mul_tensor(w, &y)?,
            None => y,
        });
    }
    let y = Tensor::empty(x.sizes(), DType::F32, opal::Device::cpu())?;
    {
        let xr = x.read::<f32>()?;
        let xs = xr
            .as_slice()
            .ok_or_else(|| Error::new("the RMS norm input is not contiguous"))?;
        let wr = w.map(|w| w.read::<f32>()).transpose()?;
        let ws = match &wr {
            Some(r) => Some(
                r.as_slice()
                    .ok_or_else(|| Error::new("the RMS norm weight is not contiguous"))?,
            ),
            None => None,
        };
        let mut yw = y.write::<f32>()?;
        let ys = yw
            .as_mut_slice()
            .ok_or_else(|| Error::new("the RMS norm result is not contiguous"))?;
        opal_cpu::fused_rows::rms_norm_f32(xs, ws, d, eps as f32, ys);
    }
    Ok(y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_decomposition_with_and_without_a_weight() {
        crate::program::init_backends().unwrap();
        let d = 37;
        let v: Vec<f32> = (0..3 * d)
            .map(|i| ((i * 7) % 23) as f32 * 0.3 - 3.1)
            .collect();
        let x = Tensor::from_vec(v, &[3, d as i64]).unwrap();
        let wv: Vec<f32> = (0..d).map(|i| 0.5 + i as f32 * 0.01).collect();
        let w = Tensor::from_vec(wv, &[d as i64]).unwrap();
        for weight in [None, Some(&w)] {
            let fused = run(&x, weight, 1e-6).unwrap().to_vec::<f32>().unwrap();
            // The same through the operators (the fallback path, on a copy that
            // is not contiguous so that it is taken).
            let xt = opal::ops::TensorOps::t(
                &opal::ops::TensorOps::contiguous(&opal::ops::TensorOps::t(&x).unwrap()).unwrap(),
            )
            .unwrap();
            assert!(!xt.is_contiguous());
            let want = run(&xt, weight, 1e-6).unwrap().to_vec::<f32>().unwrap();
            for (a, b) in fused.iter().zip(&want) {
                assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs {b}");
            }
        }
    }
}
