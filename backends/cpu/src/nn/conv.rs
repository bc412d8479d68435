//! `convolution` (1-d and 2-d, groups, stride, padding, dilation, transposed) and
//! `convolution_backward` (1-d and 2-d, both directions), and the depthwise
//! convolution of channels-last images that the `.pt2` runner calls directly.
//!
//! Owns: argument normalisation and checks with PyTorch's messages, output sizes,
//! and mapping transposed convolutions onto the forward/backward cores.
//! Must not: hold the im2col / GEMM numerics (those are in `conv_core`).

use super::conv_core::{backward_bias, backward_input, backward_weight, forward, Geom};
use super::conv_depthwise::channels_last_any;
use super::io::{check_nbytes, compute_dtype, err, in_op, make_output, with_slice, Compute};
use crate::copy::to_vec_as;
use opal::rules::conv::{Convolution, ConvolutionBackward};
use opal::{DType, Result, Tensor};

const OP: &str = "convolution";

/// The geometry of the equivalent non-transposed convolution (for a transposed
/// one, its "input" is the transposed output) of arguments `opal::rules::conv`
/// checked. Only 1-d and 2-d convolutions run here; a 1-d one runs as 2-d with a
/// leading spatial dim of size 1 (stride and dilation 1, padding 0 there).
fn plan(c: &Convolution, op: &str) -> Result<Geom> {
    let (input, weight) = (c.input.sizes(), c.weight.sizes());
    if !(input.len() == 3 || input.len() == 4) {
        return Err(err(
            op,
            format!(
                "only 1-d and 2-d convolutions are implemented on CPU; got input of size {input:?}"
            ),
        ));
    }
    let two = |v: &[i64], unit: i64| match *v {
        [x] => [unit as usize, x as usize],
        [y, x, ..] => [y as usize, x as usize],
        [] => [unit as usize; 2],
    };
    let (stride, pad, dil) = (two(&c.stride, 1), two(&c.padding, 0), two(&c.dilation, 1));
    let (isp, ksp, osp) = (
        two(&input[2..], 1),
        two(&weight[2..], 1),
        two(&c.sizes[2..], 1),
    );
    let (n, cin, cout) = (input[0] as usize, input[1] as usize, c.sizes[1] as usize);
    let groups = c.groups as usize;
    Ok(if c.transposed {
        // The transposed conv is the input-gradient of a conv from its output
        // (channels cout, spatial osp) to its input (channels cin, spatial isp).
        Geom {
            n,
            cin: cout,
            h: osp[0],
            w: osp[1],
            cout: cin,
            kh: ksp[0],
            kw: ksp[1],
            stride,
            pad,
            dil,
            groups,
            oh: isp[0],
            ow: isp[1],
        }
    } else {
        Geom {
            n,
            cin,
            h: isp[0],
            w: isp[1],
            cout,
            kh: ksp[0],
            kw: ksp[1],
            stride,
            pad,
            dil,
            groups,
            oh: osp[0],
            ow: osp[1],
        }
    })
}

/// N-d convolution over the trailing 1 or 2 dims of `input` (`[N, C, (H,) W]`).
pub fn convolution(c: Convolution) -> Result<Tensor> {
    let dt = c.dtype;
    // int64 convolves in f64, as PyTorch's CPU has integer convolution (forward
    // only): exact while every output's sum of products stays below 2^53.
    let compute = match dt {
        DType::I64 => DType::F64,
        _ => compute_dtype(dt, OP)?,
    };
    let g = plan(&c, OP)?;
    let (input, weight, bias, transposed, out_shape) =
        (c.input, c.weight, c.bias, c.transposed, &c.sizes);
    fn run<C: Compute>(
        input: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        g: &Geom,
        transposed: bool,
        out_shape: &[i64],
        dt: DType,
    ) -> Result<Tensor> {
        let b = bias.map(to_vec_as::<C>).transpose()?;
        // The input and weight are read in place when contiguous in the compute type.
        with_slice::<C, _>(input, |x| {
            with_slice::<C, _>(weight, |w| {
                make_output::<C>(out_shape, dt, |y| {
                    if transposed {
                        backward_input(x, w, g, y);
                        if let Some(b) = &b {
                            let sp = y.len() / (g.n * b.len()).max(1);
                            for (i, v) in y.iter_mut().enumerate() {
                                *v = *v + b[(i / sp) % b.len()];
                            }
                        }
                    } else {
                        forward(x, w, b.as_deref(), g, y);
                    }
                    Ok(())
                })
            })
        })
    }
    // Padding, stride and dilation can ask for any output size: refuse one no
    // allocation can hold before the inputs are converted.
    check_nbytes(out_shape, dt, OP)?;
    match compute {
        DType::F64 => run::<f64>(input, weight, bias, &g, transposed, out_shape, dt),
        _ => run::<f32>(input, weight, bias, &g, transposed, out_shape, dt),
    }
    .map_err(in_op(OP))
}

/// A depthwise 2-d convolution (one output channel per input channel: `weight`
/// of `[c, 1, kh, kw]`, `bias` of `[c]`) of f32 images stored channels-last:
/// `x` is a contiguous `[n, h, w, c]`, the result a contiguous `[n, oh, ow, c]`.
/// The values are those of [`convolution`] with `groups = c` on the same
/// images in NCHW order (the same taps summed in the same order from the
/// bias); no image is moved. Runs on the calling thread.
pub fn depthwise_conv2d_nhwc(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: [i64; 2],
    padding: [i64; 2],
    dilation: [i64; 2],
) -> Result<Tensor> {
    const OP: &str = "depthwise_conv2d_nhwc";
    let f32_cpu = |t: &Tensor| t.dtype() == DType::F32 && t.is_contiguous() && t.device().is_cpu();
    let [n, h, w, c] = *x.sizes() else {
        return Err(err(
            OP,
            format!("expected a 4-d input, got sizes {:?}", x.sizes()),
        ));
    };
    let ws = weight.sizes();
    if ws.len() != 4 || ws[0] != c || ws[1] != 1 {
        return Err(err(
            OP,
            format!("expected a weight of [{c}, 1, kh, kw], got sizes {ws:?}"),
        ));
    }
    if let Some(b) = bias.filter(|b| b.sizes() != [c].as_slice() || !f32_cpu(b)) {
        return Err(err(
            OP,
            format!(
                "expected a contiguous f32 bias of [{c}], got {} {:?}",
                b.dtype(),
                b.sizes()
            ),
        ));
    }
    if !f32_cpu(x) || !f32_cpu(weight) {
        return Err(err(OP, "expects contiguous f32 CPU input and weight"));
    }
    if h * w == 0 || c == 0 {
        return Err(err(
            OP,
            format!("expects non-empty images, got sizes {:?}", x.sizes()),
        ));
    }
    if stride.iter().chain(&dilation).any(|&v| v < 1) || padding.iter().any(|&v| v < 0) {
        return Err(err(
            OP,
            format!("stride {stride:?} and dilation {dilation:?} must be positive, padding {padding:?} non-negative"),
        ));
    }
    let out = |size: i64, k: i64, i: usize| -> Result<i64> {
        let span = dilation[i] * (k - 1) + 1;
        let room = size + 2 * padding[i];
        if room < span {
            return Err(err(
                OP,
                format!("the kernel's extent {span} is larger than the padded input {room} in dimension {i}"),
            ));
        }
        Ok((room - span) / stride[i] + 1)
    };
    let (oh, ow) = (out(h, ws[2], 0)?, out(w, ws[3], 1)?);
    let shape = [n, oh, ow, c];
    check_nbytes(&shape, DType::F32, OP)?;
    let u = |v: i64| v as usize;
    let g = Geom {
        n: u(n),
        cin: u(c),
        h: u(h),
        w: u(w),
        cout: u(c),
        kh: u(ws[2]),
        kw: u(ws[3]),
        stride: [u(stride[0]), u(stride[1])],
        pad: [u(padding[0]), u(padding[1])],
        dil: [u(dilation[0]), u(dilation[1])],
        groups: u(c),
        oh: u(oh),
        ow: u(ow),
    };
    let b = bias.map(to_vec_as::<f32>).transpose()?;
    with_slice::<f32, _>(x, |xs| {
        with_slice::<f32, _>(weight, |wk| {
            make_output::<f32>(&shape, DType::F32, |y| {
                if !y.is_empty() {
                    channels_last_any(xs, wk, b.as_deref(), &g, true, y);
                }
                Ok(())
            })
        })
    })
}

/// Gradients of [`convolution`] w.r.t. input, weight and bias, each only when its
/// `output_mask` entry is set (`None` otherwise; the kernel returns an undefined
/// tensor there, as PyTorch does).
pub fn convolution_backward(
    b: ConvolutionBackward,
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    const OPB: &str = "convolution_backward";
    let c = &b.conv;
    let dt = c.dtype;
    compute_dtype(dt, OPB)?;
    let g = plan(c, OPB)?;
    #[allow(clippy::too_many_arguments)]
    fn run<C: Compute>(
        gy: &Tensor,
        input: &Tensor,
        weight: &Tensor,
        g: &Geom,
        transposed: bool,
        m: [bool; 3],
        dt: DType,
        cout: usize,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        with_slice::<C, _>(gy, |dy| {
            with_slice::<C, _>(input, |x| {
                with_slice::<C, _>(weight, |w| {
                    grads(dy, x, w, input, weight, g, transposed, m, dt, cout)
                })
            })
        })
    }
    #[allow(clippy::too_many_arguments)]
    fn grads<C: Compute>(
        dy: &[C],
        x: &[C],
        w: &[C],
        input: &Tensor,
        weight: &Tensor,
        g: &Geom,
        transposed: bool,
        m: [bool; 3],
        dt: DType,
        cout: usize,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let gi = if m[0] {
            Some(make_output::<C>(input.sizes(), dt, |o| {
                if transposed {
                    // d/dx of a transposed conv is the plain conv of dy.
                    forward(dy, w, None, g, o);
                } else {
                    backward_input(dy, w, g, o);
                }
                Ok(())
            })?)
        } else {
            None
        };
        let gw = if m[1] {
            Some(make_output::<C>(weight.sizes(), dt, |o| {
                if transposed {
                    // Roles swap: the conv's "input" is dy and its output is x.
                    backward_weight(x, dy, g, o);
                } else {
                    backward_weight(dy, x, g, o);
                }
                Ok(())
            })?)
        } else {
            None
        };
        let gb = if m[2] {
            let plane = dy.len() / (g.n * cout).max(1);
            let geo = Geom {
                cout,
                oh: 1,
                ow: plane,
                ..*g
            };
            let db = backward_bias(dy, &geo);
            Some(make_output::<C>(&[cout as i64], dt, |o| {
                o.copy_from_slice(&db);
                Ok(())
            })?)
        } else {
            None
        };
        Ok((gi, gw, gb))
    }
    let (gy, input, weight, transposed, m) = (
        b.grad_output,
        c.input,
        c.weight,
        c.transposed,
        b.output_mask,
    );
    let cout = c.sizes[1] as usize;
    match compute_dtype(dt, OPB)? {
        DType::F64 => run::<f64>(gy, input, weight, &g, transposed, m, dt, cout),
        _ => run::<f32>(gy, input, weight, &g, transposed, m, dt, cout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv2d_shapes_bias_and_errors() {
        let x = Tensor::from_slice(&[1.0f32; 2 * 3 * 5 * 5], &[2, 3, 5, 5]).unwrap();
        let w = Tensor::from_slice(&[0.5f32; 4 * 3 * 3 * 3], &[4, 3, 3, 3]).unwrap();
        let b = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
        let y = opal::rules::conv::convolution(
            &x,
            &w,
            Some(&b),
            &[1, 1],
            &[0, 0],
            &[1, 1],
            false,
            &[0, 0],
            1,
        )
        .and_then(convolution)
        .unwrap();
        assert_eq!(y.sizes(), &[2, 4, 3, 3]);
        let v = y.to_vec::<f32>().unwrap();
        assert_eq!(v[0], 13.5 + 1.0);
        assert_eq!(v[9], 13.5 + 2.0);
        let e = opal::rules::conv::convolution(&x, &w, None, &[1], &[0], &[1], false, &[0], 2)
            .and_then(convolution)
            .unwrap_err()
            .to_string();
        assert!(e.contains("convolution") && e.contains("channels"), "{e}");
    }

    #[test]
    fn transposed_conv_is_adjoint_of_conv() {
        // <conv(x), y> == <x, conv_transpose(y)> for the same weight.
        let x: Vec<f64> = (0..2 * 4 * 5 * 5)
            .map(|i| ((i * 7) % 9) as f64 - 4.0)
            .collect();
        let w: Vec<f64> = (0..6 * 2 * 3 * 3)
            .map(|i| ((i * 5) % 7) as f64 * 0.5 - 1.0)
            .collect();
        let xt = Tensor::from_slice(&x, &[2, 4, 5, 5]).unwrap();
        let wt = Tensor::from_slice(&w, &[6, 2, 3, 3]).unwrap();
        let y = opal::rules::conv::convolution(
            &xt,
            &wt,
            None,
            &[2, 2],
            &[1, 1],
            &[1, 1],
            false,
            &[0, 0],
            2,
        )
        .and_then(convolution)
        .unwrap();
        let yv: Vec<f64> = (0..y.numel() as usize)
            .map(|i| ((i * 3) % 5) as f64 - 2.0)
            .collect();
        let yt = Tensor::from_slice(&yv, y.sizes()).unwrap();
        let xr = opal::rules::conv::convolution(
            &yt,
            &wt,
            None,
            &[2, 2],
            &[1, 1],
            &[1, 1],
            true,
            &[0, 0],
            2,
        )
        .and_then(convolution)
        .unwrap();
        assert_eq!(xr.sizes(), &[2, 4, 5, 5]);
        let lhs: f64 = y
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .zip(&yv)
            .map(|(a, b)| a * b)
            .sum();
        let rhs: f64 = xr
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .zip(&x)
            .map(|(a, b)| a * b)
            .sum();
        assert!((lhs - rhs).abs() < 1e-9);
        let (gi, gw, gb) = opal::rules::conv::convolution_backward(
            &yt,
            &xt,
            &wt,
            Some(&[6]),
            &[2, 2],
            &[1, 1],
            &[1, 1],
            false,
            &[0, 0],
            2,
            &[true, true, true],
        )
        .and_then(convolution_backward)
        .unwrap();
        assert_eq!(
            gi.unwrap().to_vec::<f64>().unwrap(),
            xr.to_vec::<f64>().unwrap()
        );
        assert_eq!(gw.unwrap().sizes(), &[6, 2, 3, 3]);
        assert_eq!(
            gb.unwrap().to_vec::<f64>().unwrap()[0],
            yv[..9].iter().sum::<f64>() + yv[54..63].iter().sum::<f64>()
        );
    }

    #[test]
    fn conv1d_works() {
        let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[1, 1, 4]).unwrap();
        let w = Tensor::from_slice(&[1.0f32, -1.0], &[1, 1, 2]).unwrap();
        let y = opal::rules::conv::convolution(&x, &w, None, &[1], &[0], &[1], false, &[0], 1)
            .and_then(convolution)
            .unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![-1.0, -1.0, -1.0]);
    }
}
