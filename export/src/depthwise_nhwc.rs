//! A depthwise convolution whose input is stored channels-last, run without
//! moving it on the CPU. ConvNeXt's trace keeps its images channels-last: each
//! 7x7 depthwise convolution reads a permuted view of a layer norm's `[n, h,
//! w, c]` result, and its result is permuted back for the next layer norm. The
//! operator copied the view to NCHW, moved each image channels-last for its
//! loop, moved the result back, and the layer norm copied its permuted view
//! again; here the loop reads the stored images and writes its result
//! channels-last, returned as the same NCHW view PyTorch's trace has (its
//! strides are the traced ones), so the following permute is contiguous.
//!
//! Owns: recognising such nodes and the run-time choice. Must not: take
//! another convolution, or change the result (the same taps in the same order
//! as the operator's own channels-last loop); an input stored otherwise takes
//! the operator.

use crate::error::Result;
use crate::graph::{arg, f32_static, is, out, tensor_arg};
use crate::schema::{Arg, Node, Program};
use opal::ops::TensorOps;
use opal::{DType, Tensor};

/// One recognised node.
pub(crate) struct Conv {
    pub input: String,
    pub weight: String,
    pub bias: Option<String>,
    pub geom: Geometry,
}

/// The node's constant arguments.
#[derive(Clone, Debug)]
pub(crate) struct Geometry {
    pub stride: [i64; 2],
    pub padding: [i64; 2],
    pub dilation: [i64; 2],
    pub groups: i64,
}

fn pair(node: &Node, name: &str) -> Option<[i64; 2]> {
    match arg(node, name)? {
        Arg::Ints(v) if v.len() == 2 => Some([v[0], v[1]]),
        _ => None,
    }
}

/// Whether the traced value is stored channels-last: static sizes `[n, c, h,
/// w]` with the strides of a contiguous `[n, h, w, c]`.
pub(crate) fn traced_channels_last(p: &Program, name: &str) -> Option<i64> {
    let (s, st) = f32_static(p, name)?;
    let ok = s.len() == 4 && st == [s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]] && s[1] > 1;
    ok.then_some(s[1])
}

/// The node as a depthwise convolution of a channels-last input, when it is
/// one (as traced; the run checks again).
pub(crate) fn lower(p: &Program, node: &Node) -> Option<Conv> {
    if !is(node, "convolution.default") {
        return None;
    }
    let x = tensor_arg(node, "input")?;
    let c = traced_channels_last(p, x)?;
    traced_channels_last(p, out(node)?)?;
    let plain = matches!(arg(node, "transposed"), Some(Arg::Bool(false)))
        && pair(node, "output_padding")? == [0, 0]
        && matches!(arg(node, "groups"), Some(Arg::Int(g)) if *g == c);
    let bias = match arg(node, "bias") {
        None | Some(Arg::None) | Some(Arg::OptTensor(None)) => None,
        Some(Arg::Tensor(b)) | Some(Arg::OptTensor(Some(b))) => Some(b.clone()),
        _ => return None,
    };
    plain.then(|| {
        Some(Conv {
            input: x.to_string(),
            weight: tensor_arg(node, "weight")?.to_string(),
            bias,
            geom: Geometry {
                stride: pair(node, "stride")?,
                padding: pair(node, "padding")?,
                dilation: pair(node, "dilation")?,
                groups: c,
            },
        })
    })?
}

/// Whether `x` is a CPU f32 `[n, c, h, w]` of non-empty planes stored as a
/// contiguous `[n, h, w, c]`.
pub(crate) fn stored_nhwc(x: &Tensor) -> bool {
    let s = x.sizes();
    x.dim() == 4
        && x.dtype() == DType::F32
        && x.device().is_cpu()
        && s[1] > 1
        && s[2] * s[3] > 0
        && x.strides() == [s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]]
}

/// The convolution of `x` (`[n, c, h, w]`): when `x` is stored channels-last
/// and the weight is `[c, 1, kh, kw]` (f32, CPU), without moving it, the
/// result a channels-last `[n, c, oh, ow]` view; otherwise the operator's.
pub(crate) fn run(c: &Geometry, x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    let s = x.sizes();
    let kernel_ok = w.dim() == 4 && w.sizes()[..2] == [s.get(1).copied().unwrap_or(0), 1];
    if stored_nhwc(x) && kernel_ok {
        let xt = x.permute(&[0, 2, 3, 1])?;
        let y = opal_cpu::nn::depthwise_conv2d_nhwc(&xt, w, b, c.stride, c.padding, c.dilation)?;
        return Ok(y.permute(&[0, 3, 1, 2])?);
    }
    Ok(opal::ops::convolution::call(
        x,
        w,
        b,
        &c.stride,
        &c.padding,
        &c.dilation,
        false,
        &[0, 0],
        c.groups,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_operator_for_channels_last_and_other_inputs() {
        crate::program::init_backends().unwrap();
        let seq = crate::test_values::seq;
        for (n, ch, hw, k, stride, pad, dil) in [
            (2, 16, 8, 7, 1, 3, 1),
            (2, 32, 4, 7, 1, 3, 1),
            (2, 64, 2, 7, 1, 3, 1),
            (1, 12, 9, 3, 2, 1, 1),
            (1, 9, 6, 3, 1, 2, 2),
        ] {
            // Stored [n, h, w, c], seen as [n, c, h, w].
            let stored =
                Tensor::from_vec(seq(n * hw * hw * ch, 7, 0.25), &[n, hw, hw, ch]).unwrap();
            let x = stored.permute(&[0, 3, 1, 2]).unwrap();
            let w = Tensor::from_vec(seq(ch * k * k, 5, 0.125), &[ch, 1, k, k]).unwrap();
            let b = Tensor::from_vec(seq(ch, 3, 0.5), &[ch]).unwrap();
            let conv = Geometry {
                stride: [stride; 2],
                padding: [pad; 2],
                dilation: [dil; 2],
                groups: ch,
            };
            let op = |x: &Tensor, b: Option<&Tensor>| {
                opal::ops::convolution::call(
                    x,
                    &w,
                    b,
                    &[stride; 2],
                    &[pad; 2],
                    &[dil; 2],
                    false,
                    &[0, 0],
                    ch,
                )
                .unwrap()
            };
            for bias in [Some(&b), None] {
                let want = op(&x, bias);
                let got = run(&conv, &x, &w, bias).unwrap();
                // Stored channels-last, like the input.
                assert_eq!(got.strides()[1], 1);
                assert_eq!(
                    got.contiguous().unwrap().to_vec::<f32>().unwrap(),
                    want.contiguous().unwrap().to_vec::<f32>().unwrap()
                );
                // An NCHW input takes the operator: the same values.
                let xc = x.contiguous().unwrap();
                let got = run(&conv, &xc, &w, bias).unwrap();
                assert_eq!(
                    got.contiguous().unwrap().to_vec::<f32>().unwrap(),
                    want.contiguous().unwrap().to_vec::<f32>().unwrap()
                );
            }
        }
    }
}
