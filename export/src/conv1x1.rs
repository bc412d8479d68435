//! A 1x1 convolution (stride 1, no padding, no dilation, one group, not
//! transposed) of a static contiguous f32 `[n, cin, h, w]` as one product loop
//! on the CPU. MobileNetV3 has 40 of them, on planes of 16x16 down to 1x1 with
//! 8 to 144 channels: a few thousand multiply-adds each, where the operator's
//! argument handling, bias copy and general product cost about 3 µs a call.
//!
//! Owns: recognising such a node and its loops. Must not: take another
//! geometry, dtype or layout (at run time anything else takes the operator),
//! or change the result beyond rounding (each output is its bias plus the
//! channels' products, summed in f32).

use crate::error::{Error, Result};
use crate::graph::{arg, f32_contiguous, is, out, tensor_arg};
use crate::schema::{Arg, Node, Program};
use opal::{DType, Tensor};

/// One recognised node.
pub(crate) struct Conv {
    pub input: String,
    pub weight: String,
    pub bias: Option<String>,
}

/// The node as a 1x1 convolution, when it is one. The weight's shape is checked
/// when it runs (a batch norm folded at load gives it a new name without
/// traced metadata).
pub(crate) fn lower(p: &Program, node: &Node) -> Option<Conv> {
    if !is(node, "convolution.default") {
        return None;
    }
    let x = tensor_arg(node, "input")?;
    let w = tensor_arg(node, "weight")?;
    let ints = |name, want: &[i64]| matches!(arg(node, name), Some(Arg::Ints(v)) if v == want);
    let geometry = ints("stride", &[1, 1])
        && ints("padding", &[0, 0])
        && ints("dilation", &[1, 1])
        && ints("output_padding", &[0, 0])
        && matches!(arg(node, "transposed"), Some(Arg::Bool(false)))
        && matches!(arg(node, "groups"), Some(Arg::Int(1)));
    let bias = match arg(node, "bias") {
        None | Some(Arg::None) | Some(Arg::OptTensor(None)) => None,
        Some(Arg::Tensor(b)) | Some(Arg::OptTensor(Some(b))) => Some(b.clone()),
        _ => return None,
    };
    let (xs, ys) = (f32_contiguous(p, x)?, f32_contiguous(p, out(node)?)?);
    (geometry && xs.len() == 4 && ys.len() == 4).then(|| Conv {
        input: x.to_string(),
        weight: w.to_string(),
        bias,
    })
}

/// The node's convolution through the dispatcher.
fn operator(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    let (one, zero) = ([1i64, 1], [0i64, 0]);
    Ok(opal::ops::convolution::call(
        x, w, b, &one, &zero, &one, false, &zero, 1,
    )?)
}

/// Output columns summed together in registers.
const LANES: usize = 16;

/// `conv2d(x, w, b)` for a `[cout, cin, 1, 1]` kernel; anything but contiguous
/// CPU f32 operands of those shapes takes the operator.
pub(crate) fn run(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    let s = x.sizes();
    let f32_cpu = |t: &Tensor| t.dtype() == DType::F32 && t.is_contiguous() && t.device().is_cpu();
    let cout = w.sizes().first().copied().unwrap_or(0);
    let ok = x.dim() == 4
        && w.sizes() == [cout, s[1], 1, 1].as_slice()
        && b.is_none_or(|b| b.sizes() == [cout].as_slice() && f32_cpu(b))
        && f32_cpu(x)
        && f32_cpu(w);
    if !ok {
        return operator(x, w, b);
    }
    let (n, cin, plane) = (s[0] as usize, s[1] as usize, (s[2] * s[3]) as usize);
    let cout = cout as usize;
    let y = Tensor::empty(
        &[s[0], cout as i64, s[2], s[3]],
        DType::F32,
        opal::Device::cpu(),
    )?;
    if n * cout * plane == 0 {
        return Ok(y);
    }
    let not_contiguous = || Error::new("a 1x1 convolution operand is not contiguous");
    let (xr, wr) = (x.read::<f32>()?, w.read::<f32>()?);
    let br = b.map(|b| b.read::<f32>()).transpose()?;
    let xs = xr.as_slice().ok_or_else(not_contiguous)?;
    let ws = wr.as_slice().ok_or_else(not_contiguous)?;
    let bs = br
        .as_ref()
        .map(|r| r.as_slice().ok_or_else(not_contiguous))
        .transpose()?;
    let mut yw = y.write::<f32>()?;
    let ys = yw.as_mut_slice().ok_or_else(not_contiguous)?;
    let bias = |o: usize| bs.map_or(0.0, |b| b[o]);
    let mut xt = Vec::new();
    for (xb, yb) in xs
        .chunks_exact(cin * plane)
        .zip(ys.chunks_exact_mut(cout * plane))
    {
        if plane % LANES == 0 {
            columns(xb, ws, &bias, cin, plane, yb);
        } else {
            // Planes of 1 to 15 positions: each output is a dot product over the
            // channels, read from the image moved channels-last.
            xt.clear();
            xt.extend((0..plane).flat_map(|q| (0..cin).map(move |c| xb[c * plane + q])));
            for (o, (wrow, yrow)) in ws
                .chunks_exact(cin)
                .zip(yb.chunks_exact_mut(plane))
                .enumerate()
            {
                for (v, xq) in yrow.iter_mut().zip(xt.chunks_exact(cin)) {
                    *v = bias(o) + dot(wrow, xq);
                }
            }
        }
    }
    drop(yw);
    Ok(y)
}

/// One image whose plane is a multiple of [`LANES`]: each run of `LANES`
/// positions of an output channel keeps its sums in registers over all input
/// channels, starting from the bias.
fn columns(
    x: &[f32],
    w: &[f32],
    bias: &dyn Fn(usize) -> f32,
    cin: usize,
    plane: usize,
    y: &mut [f32],
) {
    for (o, (wrow, yrow)) in w
        .chunks_exact(cin)
        .zip(y.chunks_exact_mut(plane))
        .enumerate()
    {
        for (q, out) in yrow.chunks_exact_mut(LANES).enumerate() {
            let mut acc = [bias(o); LANES];
            for (c, &k) in wrow.iter().enumerate() {
                let xs = &x[c * plane + q * LANES..][..LANES];
                for (a, &v) in acc.iter_mut().zip(xs) {
                    *a += k * v;
                }
            }
            out.copy_from_slice(&acc);
        }
    }
}

/// `sum(a[i] * b[i])` in eight partial sums.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    const L: usize = 8;
    let mut acc = [0.0f32; L];
    let (mut ia, mut ib) = (a.chunks_exact(L), b.chunks_exact(L));
    for (ca, cb) in (&mut ia).zip(&mut ib) {
        for ((s, &u), &v) in acc.iter_mut().zip(ca).zip(cb) {
            *s += u * v;
        }
    }
    for ((s, &u), &v) in acc.iter_mut().zip(ia.remainder()).zip(ib.remainder()) {
        *s += u * v;
    }
    acc.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_operator_on_every_plane_size() {
        crate::program::init_backends().unwrap();
        let seq = crate::test_values::seq;
        for (n, cin, cout, h, w) in [
            (2, 8, 24, 16, 16),
            (2, 24, 8, 8, 8),
            (2, 144, 40, 1, 1),
            (2, 24, 144, 2, 2),
            (1, 3, 5, 3, 5),
            (1, 17, 9, 4, 4),
        ] {
            let x = Tensor::from_vec(seq(n * cin * h * w, 7, 0.25), &[n, cin, h, w]).unwrap();
            let k = Tensor::from_vec(seq(cout * cin, 5, 0.125), &[cout, cin, 1, 1]).unwrap();
            let b = Tensor::from_vec(seq(cout, 3, 0.5), &[cout]).unwrap();
            for bias in [Some(&b), None] {
                let want = operator(&x, &k, bias).unwrap();
                crate::graph::assert_close(&run(&x, &k, bias).unwrap(), &want, 1e-5);
            }
        }
        // A kernel that is not 1x1 takes the operator with the node's geometry.
        let x = Tensor::from_vec(seq(2 * 3 * 5 * 5, 7, 0.25), &[2, 3, 5, 5]).unwrap();
        let k = Tensor::from_vec(seq(4 * 3 * 9, 5, 0.125), &[4, 3, 3, 3]).unwrap();
        let want = operator(&x, &k, None).unwrap();
        let got = run(&x, &k, None).unwrap();
        assert_eq!(got.sizes(), [2, 4, 3, 3].as_slice());
        assert_eq!(got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    }
}
