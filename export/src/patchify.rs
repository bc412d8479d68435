//! A convolution whose stride equals its kernel (non-overlapping patches, no
//! padding, one group) as one product on the CPU: ViT's patch embedding and
//! ConvNeXt's stem over NCHW images (each image's patches one product, in
//! the weight's own order, without the operator's column matrix), and, over an
//! input stored channels-last, ConvNeXt's downsampling layers. Those (2x2,
//! stride 2) read a permuted view of a layer norm's `[n, h, w, c]` result: the
//! operator copied it to NCHW, built its column matrix and wrote an NCHW result that
//! the next depthwise convolution and layer norm then read through permuted
//! views. Here each patch is `kh` contiguous runs of the stored rows, the
//! product `patches x kernel` is the result channels-last, returned as the
//! NCHW view with the traced strides.
//!
//! Owns: recognising such nodes and the run-time choice. Must not: take any
//! other convolution or layout (those take the operator), or change the
//! result beyond rounding (the same products, summed in the product's order).

use crate::depthwise_nhwc::{stored_nhwc, traced_channels_last};
use crate::error::{Error, Result};
use crate::graph::{arg, f32_contiguous, f32_static, is, out, tensor_arg};
use crate::schema::{Arg, Node, Program};
use opal::ops::TensorOps;
use opal::{DType, Tensor};

/// One recognised node.
pub(crate) struct Conv {
    pub input: String,
    pub weight: String,
    pub bias: Option<String>,
    /// The kernel's size, which is also the stride.
    pub kernel: [i64; 2],
    /// The input and output are traced channels-last (else contiguous NCHW).
    pub nhwc: bool,
}

fn ints<'a>(node: &'a Node, name: &str) -> Option<&'a [i64]> {
    match arg(node, name)? {
        Arg::Ints(v) => Some(v),
        _ => None,
    }
}

/// The node as a patch convolution of a channels-last input, when it is one
/// as traced (the run checks again).
pub(crate) fn lower(p: &Program, node: &Node) -> Option<Conv> {
    if !is(node, "convolution.default") {
        return None;
    }
    let x = tensor_arg(node, "input")?;
    let w = tensor_arg(node, "weight")?;
    let y = out(node)?;
    let (c, nhwc) = match (traced_channels_last(p, x), traced_channels_last(p, y)) {
        (Some(c), Some(_)) => (c, true),
        _ => {
            let (xs, ys) = (f32_contiguous(p, x)?, f32_contiguous(p, y)?);
            (xs.len() == 4 && ys.len() == 4).then_some((xs[1], false))?
        }
    };
    let (ws, _) = f32_static(p, w)?;
    let plain = matches!(arg(node, "transposed"), Some(Arg::Bool(false)))
        && matches!(arg(node, "groups"), Some(Arg::Int(1)))
        && ints(node, "padding")? == [0, 0]
        && ints(node, "dilation")? == [1, 1]
        && ints(node, "output_padding")? == [0, 0]
        && ws.len() == 4
        && ws[1] == c
        && ints(node, "stride")? == &ws[2..];
    let bias = match arg(node, "bias") {
        None | Some(Arg::None) | Some(Arg::OptTensor(None)) => None,
        Some(Arg::Tensor(b)) | Some(Arg::OptTensor(Some(b))) => Some(b.clone()),
        _ => return None,
    };
    plain.then(|| Conv {
        input: x.to_string(),
        weight: w.to_string(),
        bias,
        kernel: [ws[2], ws[3]],
        nhwc,
    })
}

/// The convolution of `x` with stride = kernel = `k`: over the stored
/// channels-last values when `x` is stored so (f32, CPU) and the weight is
/// `[cout, c, k[0], k[1]]`, the result a channels-last view; otherwise the
/// operator's.
pub(crate) fn run(
    k: [i64; 2],
    nhwc: bool,
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
) -> Result<Tensor> {
    let s = x.sizes();
    let nchw = !nhwc
        && x.dim() == 4
        && x.dtype() == DType::F32
        && x.is_contiguous()
        && x.device().is_cpu();
    let fast = (nchw || (nhwc && stored_nhwc(x)))
        && k[0] > 0
        && k[1] > 0
        && s[2] >= k[0]
        && s[3] >= k[1]
        && w.dim() == 4
        && w.sizes()[1..] == [s[1], k[0], k[1]]
        && w.dtype() == DType::F32
        && w.device().is_cpu();
    if !fast {
        return Ok(opal::ops::convolution::call(
            x,
            w,
            b,
            &k,
            &[0, 0],
            &[1, 1],
            false,
            &[0, 0],
            1,
        )?);
    }
    let (n, c, h, wd) = (s[0], s[1], s[2], s[3]);
    let (oh, ow) = (h / k[0], wd / k[1]);
    let cout = w.sizes()[0];
    let u = |v: i64| v as usize;
    if nchw {
        // Image by image (one image's patches live at a time): one row per
        // output position, in the kernel's own (channel, row, column) order,
        // `c * k[0]` runs of `k[1]` values of the image rows; the product's
        // positions-by-channels result is written out NCHW.
        let kernel = w.reshape(&[cout, c * k[0] * k[1]])?.t()?;
        let (pos, kk) = (u(oh * ow), u(c * k[0] * k[1]));
        let mut out = vec![0.0f32; u(n * cout) * pos];
        let xr = x.read::<f32>()?;
        let xs = xr
            .as_slice()
            .ok_or_else(|| Error::new("a patch convolution input is not contiguous"))?;
        for (img, ob) in out.chunks_exact_mut(u(cout) * pos).enumerate() {
            let mut patches = Vec::with_capacity(pos * kk);
            for oy in 0..u(oh) {
                for ox in 0..u(ow) {
                    for ch in 0..u(c) {
                        for i in 0..u(k[0]) {
                            let row = ((img * u(c) + ch) * u(h) + oy * u(k[0]) + i) * u(wd);
                            patches.extend_from_slice(&xs[row + ox * u(k[1])..][..u(k[1])]);
                        }
                    }
                }
            }
            let patches = Tensor::from_vec(patches, &[pos as i64, kk as i64])?;
            let y = match b {
                Some(b) => opal::ops::addmm(b, &patches, &kernel)?,
                None => opal::ops::mm(&patches, &kernel)?,
            };
            let yr = y.read::<f32>()?;
            let ys = yr
                .as_slice()
                .ok_or_else(|| Error::new("a product result is not contiguous"))?;
            for (q, row) in ys.chunks_exact(u(cout)).enumerate() {
                for (o, &v) in row.iter().enumerate() {
                    ob[o * pos + q] = v;
                }
            }
        }
        drop(xr);
        return Ok(Tensor::from_vec(out, &[n, cout, oh, ow])?);
    }
    // One row per output position: its patch, `k[0]` runs of `k[1] * c`
    // stored values, in (row, column, channel) order.
    let run_len = u(k[1] * c);
    let xt = x.permute(&[0, 2, 3, 1])?;
    let xr = xt.read::<f32>()?;
    let xs = xr
        .as_slice()
        .ok_or_else(|| Error::new("a patch convolution input is not stored channels-last"))?;
    let mut patches = Vec::with_capacity(u(n * oh * ow * k[0]) * run_len);
    for b in 0..u(n) {
        for oy in 0..u(oh) {
            for ox in 0..u(ow) {
                for i in 0..u(k[0]) {
                    let row = (b * u(h) + oy * u(k[0]) + i) * u(wd) + ox * u(k[1]);
                    patches.extend_from_slice(&xs[row * u(c)..][..run_len]);
                }
            }
        }
    }
    drop(xr);
    let patches = Tensor::from_vec(patches, &[n * oh * ow, k[0] * k[1] * c])?;
    // The kernel in the same (row, column, channel) order, one column per
    // output channel.
    let kernel = w
        .permute(&[2, 3, 1, 0])?
        .contiguous()?
        .reshape(&[k[0] * k[1] * c, cout])?;
    let y = match b {
        Some(b) => opal::ops::addmm(b, &patches, &kernel)?,
        None => opal::ops::mm(&patches, &kernel)?,
    };
    Ok(y.reshape(&[n, oh, ow, cout])?.permute(&[0, 3, 1, 2])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_operator_for_channels_last_and_other_inputs() {
        crate::program::init_backends().unwrap();
        let seq = crate::test_values::seq;
        for (n, c, cout, h, w, k) in [
            (2, 16, 32, 8, 8, [2, 2]),
            (2, 32, 64, 4, 4, [2, 2]),
            (1, 5, 7, 9, 7, [3, 2]),
        ] {
            let x = Tensor::from_vec(seq(n * h * w * c, 7, 0.25), &[n, h, w, c])
                .unwrap()
                .permute(&[0, 3, 1, 2])
                .unwrap();
            let wt = Tensor::from_vec(
                seq(cout * c * k[0] * k[1], 5, 0.125),
                &[cout, c, k[0], k[1]],
            )
            .unwrap();
            let bias = Tensor::from_vec(seq(cout, 3, 0.5), &[cout]).unwrap();
            for b in [Some(&bias), None] {
                let want = opal::ops::convolution::call(
                    &x,
                    &wt,
                    b,
                    &k,
                    &[0, 0],
                    &[1, 1],
                    false,
                    &[0, 0],
                    1,
                )
                .unwrap();
                let got = run(k, true, &x, &wt, b).unwrap();
                assert!(stored_nhwc(&got));
                crate::graph::assert_close(
                    &got.contiguous().unwrap(),
                    &want.contiguous().unwrap(),
                    1e-5,
                );
                // An NCHW input where the trace has channels-last takes the
                // operator; one traced NCHW has its own loop, NCHW out.
                let xc = x.contiguous().unwrap();
                let got = run(k, true, &xc, &wt, b).unwrap();
                crate::graph::assert_close(
                    &got.contiguous().unwrap(),
                    &want.contiguous().unwrap(),
                    1e-6,
                );
                let got = run(k, false, &xc, &wt, b).unwrap();
                assert!(got.is_contiguous());
                crate::graph::assert_close(&got, &want.contiguous().unwrap(), 1e-5);
            }
        }
    }
}
