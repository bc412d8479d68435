//! Layer normalization over the last dimension as one step on the CPU, when the
//! graph reads only the normalized result of `native_layer_norm` (inference:
//! the mean and the reciprocal deviation it also returns are for the backward
//! pass). The operator allocates and fills those two as well; on rows of 16 to
//! 64 elements (ConvNeXt, GPT-2, BERT, ViT) that and its dispatch cost more
//! than the normalization.
//!
//! Owns: recognising such nodes and the row loop. Must not: take a node whose
//! mean or deviation something reads, a normalized shape of more than one
//! dimension, or change the result beyond rounding (same definition: biased
//! variance, `(x - mean) * rstd * weight + bias` in f32); any other dtype or
//! device at run time takes the operator.

use crate::error::{Error, Result};
use crate::graph::{arg, is, tensor_arg};
use crate::schema::{Arg, Node, Out, Program};
use opal::{DType, Tensor};
use std::collections::HashMap;

/// One recognised node.
pub(crate) struct Norm {
    pub input: String,
    pub weight: Option<String>,
    pub bias: Option<String>,
    pub output: String,
    pub eps: f64,
    pub dim: i64,
}

fn opt_tensor(node: &Node, name: &str) -> Option<Option<String>> {
    match arg(node, name) {
        None | Some(Arg::None) | Some(Arg::OptTensor(None)) => Some(None),
        Some(Arg::Tensor(n)) | Some(Arg::OptTensor(Some(n))) => Some(Some(n.clone())),
        _ => None,
    }
}

/// The node as a fused layer norm, when it qualifies.
pub(crate) fn lower(p: &Program, node: &Node, readers: &HashMap<&str, usize>) -> Option<Norm> {
    if !is(node, "native_layer_norm.default") {
        return None;
    }
    let [Out::Tensor(y), Out::Tensor(m), Out::Tensor(r)] = node.outputs.as_slice() else {
        return None;
    };
    if readers.contains_key(m.as_str()) || readers.contains_key(r.as_str()) {
        return None;
    }
    let x = tensor_arg(node, "input")?;
    let meta = p.tensor_meta.get(x)?;
    let dim = match arg(node, "normalized_shape")? {
        Arg::Ints(v) if v.len() == 1 && v[0] > 0 => v[0],
        _ => return None,
    };
    let eps = match arg(node, "eps")? {
        Arg::Float(e) => *e,
        Arg::Int(e) => *e as f64,
        _ => return None,
    };
    (meta.dtype == DType::F32).then_some(Norm {
        input: x.to_string(),
        weight: opt_tensor(node, "weight")?,
        bias: opt_tensor(node, "bias")?,
        output: y.clone(),
        eps,
        dim,
    })
}

/// The normalized `x` over its last `d` elements; anything but CPU f32 with a
/// last dimension of `d` and weight and bias of `d` contiguous elements takes
/// the operator.
pub(crate) fn run(
    x: &Tensor,
    w: Option<&Tensor>,
    b: Option<&Tensor>,
    d: i64,
    eps: f64,
) -> Result<Tensor> {
    let vec_ok = |t: Option<&Tensor>| {
        t.is_none_or(|t| {
            t.dtype() == DType::F32
                && t.is_contiguous()
                && t.device().is_cpu()
                && t.sizes() == [d].as_slice()
        })
    };
    let fast = x.dtype() == DType::F32
        && x.device().is_cpu()
        && x.sizes().last() == Some(&d)
        && vec_ok(w)
        && vec_ok(b);
    if !fast {
        let (y, _, _) = opal::ops::native_layer_norm(x, &[d], w, b, eps)?;
        return Ok(y);
    }
    let xc;
    let x = if x.is_contiguous() {
        x
    } else {
        xc = opal::ops::TensorOps::contiguous(x)?;
        &xc
    };
    let y = Tensor::empty(x.sizes(), DType::F32, opal::Device::cpu())?;
    let n = d as usize;
    let xr = x.read::<f32>()?;
    let not_contiguous = || Error::new("a layer norm operand is not contiguous");
    let xs = xr.as_slice().ok_or_else(not_contiguous)?;
    let (wr, br) = (
        w.map(|t| t.read::<f32>()).transpose()?,
        b.map(|t| t.read::<f32>()).transpose()?,
    );
    let ws = wr
        .as_ref()
        .map(|r| r.as_slice().ok_or_else(not_contiguous))
        .transpose()?;
    let bs = br
        .as_ref()
        .map(|r| r.as_slice().ok_or_else(not_contiguous))
        .transpose()?;
    let mut yw = y.write::<f32>()?;
    let ys = yw.as_mut_slice().ok_or_else(not_contiguous)?;
    for (yr, row) in ys.chunks_exact_mut(n).zip(xs.chunks_exact(n)) {
        norm_row(row, ws, bs, eps as f32, yr);
    }
    drop(yw);
    Ok(y)
}

/// One row: mean and biased variance in f32 (eight partial sums each, as a
/// vectorized reduction adds), then `(x - mean) * rstd * w + b`.
fn norm_row(x: &[f32], w: Option<&[f32]>, b: Option<&[f32]>, eps: f32, y: &mut [f32]) {
    const L: usize = 8;
    let n = x.len() as f32;
    let sum = |f: &dyn Fn(f32) -> f32| {
        let mut acc = [0.0f32; L];
        let mut it = x.chunks_exact(L);
        for c in &mut it {
            for (a, &v) in acc.iter_mut().zip(c) {
                *a += f(v);
            }
        }
        for (a, &v) in acc.iter_mut().zip(it.remainder()) {
            *a += f(v);
        }
        acc.iter().sum::<f32>()
    };
    let mean = sum(&|v| v) / n;
    let var = sum(&|v| (v - mean) * (v - mean)) / n;
    let rstd = 1.0 / (var + eps).sqrt();
    for (k, (o, &v)) in y.iter_mut().zip(x).enumerate() {
        let z = (v - mean) * rstd;
        let z = w.map_or(z, |w| z * w[k]);
        *o = b.map_or(z, |b| z + b[k]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_operator_with_and_without_affine_and_for_a_transposed_input() {
        crate::program::init_backends().unwrap();
        let d = 19;
        let x = Tensor::from_vec(
            (0..4 * d)
                .map(|i| ((i * 11) % 17) as f32 * 0.7 - 4.0)
                .collect(),
            &[4, d],
        )
        .unwrap();
        let w = Tensor::from_vec((0..d).map(|i| 0.5 + i as f32 * 0.1).collect(), &[d]).unwrap();
        let b = Tensor::from_vec((0..d).map(|i| i as f32 * -0.2).collect(), &[d]).unwrap();
        let xt = opal::ops::TensorOps::t(
            &opal::ops::TensorOps::contiguous(&opal::ops::TensorOps::t(&x).unwrap()).unwrap(),
        )
        .unwrap();
        for input in [&x, &xt] {
            for (wt, bt) in [(None, None), (Some(&w), Some(&b)), (Some(&w), None)] {
                let got = run(input, wt, bt, d, 1e-5)
                    .unwrap()
                    .to_vec::<f32>()
                    .unwrap();
                let (want, _, _) = opal::ops::native_layer_norm(input, &[d], wt, bt, 1e-5).unwrap();
                for (g, e) in got.iter().zip(want.to_vec::<f32>().unwrap()) {
                    assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "{g} vs {e}");
                }
            }
        }
    }
}
