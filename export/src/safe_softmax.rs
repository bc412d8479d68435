//! The "safe" softmax of decomposed attention as one step: PyTorch's exporter
//! writes `softmax(x)` followed by six nodes that replace each row whose inputs
//! are all `-inf` (a fully masked query) by zeros:
//!
//! ```text
//! s = _softmax(x, d, False); e = eq(x, -inf); n = logical_not(e);
//! a = any(n, d, keepdim=True); m = logical_not(a); z = full_like(s, 0);
//! out = where(m, z, s)
//! ```
//!
//! On the CPU these seven nodes become one step: the softmax, then the rows of
//! `x` that are all `-inf` zeroed in its result. GPT-2, Llama, BERT and ViT have
//! this once per attention layer.
//!
//! Owns: recognising the pattern (seven consecutive nodes in the exporter's
//! order, intermediates read nowhere else, f32 over the last dimension) and
//! running the fused step. Must not: fuse anything else, or change the result
//! (any other dtype, layout or device at run time takes the seven ops' path).

use crate::error::Result;
use crate::graph::{arg, is, out, readers, tensor_arg};
use crate::schema::{Arg, Program};
use opal::{DType, Scalar, Tensor};
use std::collections::HashMap;
use std::ops::Range;

/// One recognised pattern.
pub(crate) struct Group {
    /// Node indices, consecutive.
    pub members: Range<usize>,
    pub input: String,
    pub output: String,
    pub dim: i64,
}

fn int_is(a: Option<&Arg>, want: i64) -> bool {
    matches!(a, Some(Arg::Int(i)) if *i == want)
}

fn is_zero(a: Option<&Arg>) -> bool {
    match a {
        Some(Arg::Int(0)) => true,
        Some(Arg::Float(f)) => *f == 0.0,
        _ => false,
    }
}

/// The pattern starting at node `i`, if it is there.
fn at(p: &Program, i: usize, readers: &HashMap<&str, usize>) -> Option<Group> {
    let w = p.nodes.get(i..i + 7)?;
    let [sm, eq, not1, any, not2, zeros, wh] = w else {
        return None;
    };
    let x = tensor_arg(sm, "self")?;
    let s = out(sm)?;
    let dim = match arg(sm, "dim")? {
        Arg::Int(d) => *d,
        _ => return None,
    };
    let meta = p.tensor_meta.get(x)?;
    let rank = meta.sizes.len() as i64;
    let last = dim == -1 || (rank > 0 && dim == rank - 1);
    let chain = is(sm, "_softmax.default")
        && matches!(arg(sm, "half_to_float"), Some(Arg::Bool(false)))
        && meta.dtype == DType::F32
        && last
        && is(eq, "eq.Scalar")
        && tensor_arg(eq, "self") == Some(x)
        && matches!(arg(eq, "other"), Some(Arg::Float(f)) if *f == f64::NEG_INFINITY)
        && is(not1, "logical_not.default")
        && tensor_arg(not1, "self") == out(eq)
        && is(any, "any.dim")
        && tensor_arg(any, "self") == out(not1)
        && (int_is(arg(any, "dim"), -1) || int_is(arg(any, "dim"), rank - 1))
        && matches!(arg(any, "keepdim"), Some(Arg::Bool(true)))
        && is(not2, "logical_not.default")
        && tensor_arg(not2, "self") == out(any)
        && is(zeros, "full_like.default")
        && tensor_arg(zeros, "self") == Some(s)
        && is_zero(arg(zeros, "fill_value"))
        && [None, Some(&Arg::None)].contains(&arg(zeros, "dtype"))
        && is(wh, "where.self")
        && tensor_arg(wh, "condition") == out(not2)
        && tensor_arg(wh, "self") == out(zeros)
        && tensor_arg(wh, "other") == Some(s);
    if !chain {
        return None;
    }
    // Every intermediate is read only inside the pattern.
    let inside = [
        (s, 2),
        (out(eq)?, 1),
        (out(not1)?, 1),
        (out(any)?, 1),
        (out(not2)?, 1),
        (out(zeros)?, 1),
    ];
    if inside
        .iter()
        .any(|(n, k)| readers.get(n).copied().unwrap_or(0) != *k)
    {
        return None;
    }
    Some(Group {
        members: i..i + 7,
        input: x.to_string(),
        output: out(wh)?.to_string(),
        dim,
    })
}

/// Every occurrence of the pattern in `p`.
pub(crate) fn groups(p: &Program) -> Vec<Group> {
    let r = readers(p);
    crate::graph::scan(p, |i| {
        at(p, i, &r).map(|g| {
            let end = g.members.end;
            (g, end)
        })
    })
}

/// The fused step: `softmax(x, dim)` with the rows of `x` that are all `-inf`
/// as zeros.
pub(crate) fn run(x: &Tensor, dim: i64) -> Result<Tensor> {
    let y = opal::ops::_softmax(x, dim, false)?;
    let last = x.dim() as i64 - 1;
    let n = x.sizes().last().copied().unwrap_or(1).max(0) as usize;
    if x.dtype() != DType::F32
        || (dim != -1 && dim != last)
        || n == 0
        || !x.is_contiguous()
        || !y.is_contiguous()
        || !x.device().is_cpu()
    {
        // The seven ops themselves.
        let keep = opal::ops::eq_scalar(x, &Scalar::Float(f64::NEG_INFINITY))?;
        let keep = opal::ops::logical_not(&keep)?;
        let any = opal::ops::any_dim::with(
            &keep,
            dim,
            opal::ops::any_dim::Options::default().keepdim(true),
        )?;
        let masked = opal::ops::logical_not(&any)?;
        let zeros = opal::ops::zeros_like(&y)?;
        return Ok(opal::ops::where_self(&masked, &zeros, &y)?);
    }
    let xr = x.read::<f32>()?;
    let xs = xr
        .as_slice()
        .ok_or_else(|| crate::error::Error::new("the softmax input is not contiguous"))?;
    let mut masked = xs
        .chunks_exact(n)
        .enumerate()
        .filter(|(_, row)| row.iter().all(|&v| v == f32::NEG_INFINITY))
        .map(|(r, _)| r)
        .peekable();
    if masked.peek().is_some() {
        let mut yw = y.write::<f32>()?;
        let ys = yw
            .as_mut_slice()
            .ok_or_else(|| crate::error::Error::new("the softmax result is not contiguous"))?;
        for r in masked {
            ys[r * n..(r + 1) * n].fill(0.0);
        }
    }
    Ok(y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opal::ops::TensorOps;

    #[test]
    fn fully_masked_rows_are_zero_and_others_are_the_softmax() {
        crate::program::init_backends().unwrap();
        let inf = f32::NEG_INFINITY;
        let v = vec![0.0, 1.0, inf, inf, inf, inf, 2.0, 2.0, inf];
        let x = Tensor::from_vec(v.clone(), &[3, 3]).unwrap();
        let want = |x: &Tensor| {
            let keep = opal::ops::logical_not(
                &opal::ops::eq_scalar(x, &Scalar::Float(f64::NEG_INFINITY)).unwrap(),
            )
            .unwrap();
            let any = opal::ops::any_dim::with(
                &keep,
                -1,
                opal::ops::any_dim::Options::default().keepdim(true),
            )
            .unwrap();
            let y = opal::ops::_softmax(x, -1, false).unwrap();
            let zeros = opal::ops::zeros_like(&y).unwrap();
            opal::ops::where_self(&opal::ops::logical_not(&any).unwrap(), &zeros, &y)
                .unwrap()
                .to_vec::<f32>()
                .unwrap()
        };
        let fused = run(&x, -1).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(fused[3..6], [0.0, 0.0, 0.0]);
        assert_eq!(fused, want(&x));
        // A transposed (non-contiguous) input takes the ops' path, same values.
        let xt = x.t().unwrap();
        assert!(!xt.is_contiguous());
        assert_eq!(run(&xt, 1).unwrap().to_vec::<f32>().unwrap(), want(&xt));
    }
}
