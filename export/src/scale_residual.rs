//! ConvNeXt's layer scale and residual as one step on the CPU: `add(mul(s, x),
//! r)` with `s` of `[c, 1, 1]` and `x`, `r` of `[n, c, h, w]` stored
//! channels-last (the trace keeps the network so), the product read by the sum
//! only. The two operators each walked permuted views element by element and
//! wrote an NCHW result that the next layer norm then copied back
//! channels-last; here one loop runs over the stored `[n, h, w, c]` values and
//! the result is the same channels-last view the trace has.
//!
//! Owns: recognising the pair and running it. Must not: take other operands or
//! layouts (at run time anything but channels-last CPU f32 takes the two
//! operators), or change the result (the product rounded to f32, then the sum,
//! as the operators do).

use crate::depthwise_nhwc::{stored_nhwc, traced_channels_last};
use crate::error::{Error, Result};
use crate::graph::{arg, f32_contiguous, is, out, tensor_arg};
use crate::schema::{Arg, Node, Program};
use opal::ops::TensorOps;
use opal::{DType, Tensor};
use std::collections::HashMap;
use std::ops::Range;

/// One recognised pair.
pub(crate) struct Group {
    /// Node indices, consecutive.
    pub members: Range<usize>,
    pub scale: String,
    pub input: String,
    pub residual: String,
    pub output: String,
}

/// The binary node's operands, `one` first: the other one.
fn other<'a>(node: &'a Node, one: &str) -> Option<&'a str> {
    let (s, o) = (tensor_arg(node, "self")?, tensor_arg(node, "other")?);
    match (s == one, o == one) {
        (true, false) => Some(o),
        (false, true) => Some(s),
        _ => None,
    }
}

fn at(p: &Program, i: usize, readers: &HashMap<&str, usize>) -> Option<Group> {
    let [mul, add] = p.nodes.get(i..i + 2)? else {
        return None;
    };
    if !is(mul, "mul.Tensor") || !is(add, "add.Tensor") {
        return None;
    }
    if !matches!(arg(add, "alpha"), None | Some(Arg::Int(1))) {
        return None;
    }
    let m = out(mul)?;
    if readers.get(m).copied() != Some(1) {
        return None;
    }
    let r = other(add, m)?;
    let y = out(add)?;
    let (a, b) = (tensor_arg(mul, "self")?, tensor_arg(mul, "other")?);
    let c = traced_channels_last(p, y)?;
    let scale_of = |s: &str| f32_contiguous(p, s).is_some_and(|v| v == [c, 1, 1]);
    let (s, x) = if scale_of(a) {
        (a, b)
    } else if scale_of(b) {
        (b, a)
    } else {
        return None;
    };
    let sizes = |v: &str| p.tensor_meta.get(v).map(|m| &m.sizes);
    let ok = [x, r, m]
        .iter()
        .all(|v| traced_channels_last(p, v) == Some(c) && sizes(v) == sizes(y));
    ok.then(|| Group {
        members: i..i + 2,
        scale: s.to_string(),
        input: x.to_string(),
        residual: r.to_string(),
        output: y.to_string(),
    })
}

/// Every occurrence of the pair in `p`.
pub(crate) fn groups(p: &Program) -> Vec<Group> {
    let r = crate::graph::readers(p);
    crate::graph::scan_runs(p, |i| at(p, i, &r), |g| &g.members)
}

/// `s * x + r`: over the stored channels-last values when `x` and `r` are
/// stored so and `s` is a contiguous `[c, 1, 1]` (f32, CPU), the result the
/// same channels-last view; otherwise the two operators.
pub(crate) fn run(s: &Tensor, x: &Tensor, r: &Tensor) -> Result<Tensor> {
    let c = x.sizes().get(1).copied().unwrap_or(0);
    let fast = stored_nhwc(x)
        && stored_nhwc(r)
        && x.sizes() == r.sizes()
        && s.sizes() == [c, 1, 1].as_slice()
        && s.dtype() == DType::F32
        && s.is_contiguous()
        && s.device().is_cpu();
    if !fast {
        return Ok(opal::ops::add_tensor(&opal::ops::mul_tensor(s, x)?, r)?);
    }
    let (xt, rt) = (x.permute(&[0, 2, 3, 1])?, r.permute(&[0, 2, 3, 1])?);
    let y = Tensor::empty(xt.sizes(), DType::F32, opal::Device::cpu())?;
    let not_contiguous = || Error::new("a layer scale operand is not stored channels-last");
    let (sr, xr, rr) = (s.read::<f32>()?, xt.read::<f32>()?, rt.read::<f32>()?);
    let (ss, xs, rs) = (
        sr.as_slice().ok_or_else(not_contiguous)?,
        xr.as_slice().ok_or_else(not_contiguous)?,
        rr.as_slice().ok_or_else(not_contiguous)?,
    );
    let mut yw = y.write::<f32>()?;
    let ys = yw.as_mut_slice().ok_or_else(not_contiguous)?;
    let c = c as usize;
    for ((yp, xp), rp) in ys
        .chunks_exact_mut(c)
        .zip(xs.chunks_exact(c))
        .zip(rs.chunks_exact(c))
    {
        for (((o, &v), &k), &q) in yp.iter_mut().zip(xp).zip(ss).zip(rp) {
            *o = k * v + q;
        }
    }
    drop(yw);
    Ok(y.permute(&[0, 3, 1, 2])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_two_operators() {
        crate::program::init_backends().unwrap();
        let seq = crate::test_values::seq;
        let (n, c, h, w) = (2, 16, 4, 3);
        let nhwc = |k| {
            Tensor::from_vec(seq(n * h * w * c, k, 0.3), &[n, h, w, c])
                .unwrap()
                .permute(&[0, 3, 1, 2])
                .unwrap()
        };
        let (x, r) = (nhwc(7), nhwc(11));
        let s = Tensor::from_vec(seq(c, 5, 0.1), &[c, 1, 1]).unwrap();
        let want = opal::ops::add_tensor(&opal::ops::mul_tensor(&s, &x).unwrap(), &r).unwrap();
        let got = run(&s, &x, &r).unwrap();
        assert!(stored_nhwc(&got));
        assert_eq!(
            got.contiguous().unwrap().to_vec::<f32>().unwrap(),
            want.contiguous().unwrap().to_vec::<f32>().unwrap()
        );
        // NCHW operands take the operators: the same values.
        let (xc, rc) = (x.contiguous().unwrap(), r.contiguous().unwrap());
        let got = run(&s, &xc, &rc).unwrap();
        assert_eq!(
            got.contiguous().unwrap().to_vec::<f32>().unwrap(),
            want.contiguous().unwrap().to_vec::<f32>().unwrap()
        );
    }
}
