//! `convolution` (1-d and 2-d, groups, stride, padding, dilation, transposed) and
//! `convolution_backward` (1-d and 2-d, both directions).
//!
//! Owns: argument normalisation and checks with PyTorch's messages, output sizes,
//! and mapping transposed convolutions onto the forward/backward cores.
//! Must not: hold the im2col / GEMM numerics (those are in `conv_core`).

use super::conv_core::{backward_bias, backward_input, backward_weight, forward, Geom};
use super::io::{
    check_nbytes, compute_dtype, err, in_op, make_output, shape_err, with_slice, Compute,
};
use crate::copy::to_vec_as;
use opal::{DType, Result, Tensor};

const OP: &str = "convolution";

/// Expands a per-dim parameter given once (`[2]`) to every spatial dim.
/// A 1-d convolution runs as 2-d with a leading spatial dim of size 1, which gets
/// `unit` (1 for stride/dilation, 0 for padding).
fn expand(p: &[i64], nsp: usize, name: &str, unit: usize, op: &str) -> Result<[usize; 2]> {
    let v: Vec<i64> = match p.len() {
        1 => vec![p[0]; nsp],
        n if n == nsp => p.to_vec(),
        n => return Err(err(op, format!("expected {name} to be a single integer value or a list of {nsp} values to match the convolution dimensions, but got {name}={p:?} ({n} values)"))),
    };
    if v.iter().any(|&x| x < 0) {
        return Err(err(op, format!("negative {name} is not supported")));
    }
    Ok(if nsp == 1 {
        [unit, v[0] as usize]
    } else {
        [v[0] as usize, v[1] as usize]
    })
}

/// Geometry and checks shared by forward and backward. Returns the geometry of the
/// equivalent non-transposed convolution (for a transposed one, its "input" is the
/// transposed output) and the shape of the op's output.
#[allow(clippy::too_many_arguments)]
fn plan(
    input: &[i64],
    weight: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
    op: &str,
) -> Result<(Geom, Vec<i64>)> {
    let nd = input.len();
    if !(nd == 3 || nd == 4) {
        return Err(err(
            op,
            format!(
                "only 1-d and 2-d convolutions are implemented on CPU; got input of size {input:?}"
            ),
        ));
    }
    if weight.len() != nd {
        return Err(shape_err(op, format!("Expected {nd}-dimensional weight for {nd}-dimensional input {input:?}, but got {}-dimensional weight of size {weight:?} instead", weight.len())));
    }
    if groups <= 0 {
        return Err(err(op, "non-positive groups is not supported"));
    }
    let nsp = nd - 2;
    let stride = expand(stride, nsp, "stride", 1, op)?;
    let pad = expand(padding, nsp, "padding", 0, op)?;
    let dil = expand(dilation, nsp, "dilation", 1, op)?;
    if stride.contains(&0) {
        return Err(err(op, "non-positive stride is not supported"));
    }
    if dil.contains(&0) {
        return Err(err(op, "dilation should be greater than zero"));
    }
    let opad = if transposed {
        expand(output_padding, nsp, "output_padding", 0, op)?
    } else {
        [0, 0]
    };
    // The extra rows of a transposed output must lie within one stride (or one
    // dilated kernel tap), else they would be rows no input reaches.
    for d in 0..2 {
        if opad[d] >= stride[d].max(dil[d]) {
            return Err(err(
                op,
                format!(
                    "output padding must be smaller than either stride or dilation, but got output_padding={output_padding:?}, stride={stride:?}, dilation={dilation:?}"
                ),
            ));
        }
    }
    let g = groups as usize;
    let sp = |s: &[i64]| {
        if nsp == 1 {
            [1usize, s[2] as usize]
        } else {
            [s[2] as usize, s[3] as usize]
        }
    };
    let (isp, ksp) = (sp(input), sp(weight));
    let (n, cin) = (input[0] as usize, input[1] as usize);
    let in_channels = if transposed {
        weight[0] as usize
    } else {
        weight[1] as usize * g
    };
    if cin != in_channels || (transposed && !(weight[0] as usize).is_multiple_of(g)) {
        return Err(shape_err(op, format!(
            "Given groups={groups}, weight of size {weight:?}, expected input{input:?} to have {in_channels} channels, but got {cin} channels instead"
        )));
    }
    let cout = if transposed {
        weight[1] as usize * g
    } else {
        weight[0] as usize
    };
    if !transposed && cout % g != 0 {
        return Err(shape_err(op, format!("Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight of size {weight:?} instead")));
    }
    let mut out_shape = vec![n as i64, cout as i64];
    let mut osp = [0usize; 2];
    for d in 0..2 {
        // In i128, where sizes, strides, padding and dilation from i64 cannot
        // overflow; results beyond i64 are refused below.
        let wide = |x: usize| x as i128;
        let eff_k = wide(dil[d]) * (wide(ksp[d].max(1)) - 1) + 1;
        let o = if transposed {
            (wide(isp[d]) - 1) * wide(stride[d]) - 2 * wide(pad[d]) + eff_k + wide(opad[d])
        } else {
            let padded = wide(isp[d]) + 2 * wide(pad[d]);
            if padded < eff_k {
                return Err(shape_err(op, format!(
                    "Calculated padded input size per channel: ({padded}). Kernel size: ({eff_k}). Kernel size can't be greater than actual input size"
                )));
            }
            (padded - eff_k) / wide(stride[d]) + 1
        };
        if o <= 0 {
            return Err(shape_err(
                op,
                format!("computed output size is non-positive for input {input:?}"),
            ));
        }
        if o > i64::MAX as i128 || eff_k > i64::MAX as i128 {
            return Err(shape_err(
                op,
                format!("computed output size {o} (kernel extent {eff_k}) overflows for input {input:?}"),
            ));
        }
        osp[d] = o as usize;
    }
    out_shape.extend(if nsp == 1 {
        vec![osp[1] as i64]
    } else {
        vec![osp[0] as i64, osp[1] as i64]
    });
    let geom = if transposed {
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
            groups: g,
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
            groups: g,
            oh: osp[0],
            ow: osp[1],
        }
    };
    Ok((geom, out_shape))
}

fn check_dtypes(ts: &[(&str, Option<&Tensor>)], op: &str) -> Result<DType> {
    let first = ts[0].1.map(|t| t.dtype()).unwrap_or(DType::F32);
    for (name, t) in ts {
        if let Some(t) = t {
            if t.dtype() != first {
                return Err(err(
                    op,
                    format!(
                        "Input type ({first}) and {name} type ({}) should be the same",
                        t.dtype()
                    ),
                ));
            }
        }
    }
    compute_dtype(first, op)?;
    Ok(first)
}

/// N-d convolution over the trailing 1 or 2 dims of `input` (`[N, C, (H,) W]`).
#[allow(clippy::too_many_arguments)]
pub fn convolution(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
) -> Result<Tensor> {
    let dt = check_dtypes(
        &[
            ("input", Some(input)),
            ("weight", Some(weight)),
            ("bias", bias),
        ],
        OP,
    )?;
    let (g, out_shape) = plan(
        input.sizes(),
        weight.sizes(),
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        OP,
    )?;
    let cout = out_shape[1];
    if let Some(b) = bias {
        if b.sizes() != [cout] {
            return Err(shape_err(OP, format!("Given weight of size {:?}, expected bias to be 1-dimensional with {cout} elements, but got bias of size {:?} instead", weight.sizes(), b.sizes())));
        }
    }
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
    check_nbytes(&out_shape, dt, OP)?;
    match compute_dtype(dt, OP)? {
        DType::F64 => run::<f64>(input, weight, bias, &g, transposed, &out_shape, dt),
        _ => run::<f32>(input, weight, bias, &g, transposed, &out_shape, dt),
    }
    .map_err(in_op(OP))
}

/// Gradients of [`convolution`] w.r.t. input, weight and bias, each only when its
/// `output_mask` entry is set (`None` otherwise; the kernel returns an undefined
/// tensor there, as PyTorch does).
#[allow(clippy::too_many_arguments)]
pub fn convolution_backward(
    grad_output: &Tensor,
    input: &Tensor,
    weight: &Tensor,
    bias_sizes: Option<&[i64]>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
    output_mask: &[bool],
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    const OPB: &str = "convolution_backward";
    let dt = check_dtypes(
        &[
            ("grad_output", Some(grad_output)),
            ("input", Some(input)),
            ("weight", Some(weight)),
        ],
        OPB,
    )?;
    let (g, out_shape) = plan(
        input.sizes(),
        weight.sizes(),
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        OPB,
    )?;
    if grad_output.sizes() != out_shape.as_slice() {
        return Err(shape_err(
            OPB,
            format!(
                "grad_output of size {:?} does not match the convolution output size {out_shape:?}",
                grad_output.sizes()
            ),
        ));
    }
    let mask = |i: usize| output_mask.get(i).copied().unwrap_or(false);
    let want_bias = mask(2) && bias_sizes.is_some_and(|s| s.first().copied() == Some(out_shape[1]));
    if mask(2) && !want_bias && bias_sizes.is_some() {
        return Err(shape_err(
            OPB,
            format!(
                "bias_sizes {bias_sizes:?} do not match {} output channels",
                out_shape[1]
            ),
        ));
    }
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
    let m = [mask(0), mask(1), want_bias];
    let cout = out_shape[1] as usize;
    match compute_dtype(dt, OPB)? {
        DType::F64 => run::<f64>(grad_output, input, weight, &g, transposed, m, dt, cout),
        _ => run::<f32>(grad_output, input, weight, &g, transposed, m, dt, cout),
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
        let y = convolution(
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
        .unwrap();
        assert_eq!(y.sizes(), &[2, 4, 3, 3]);
        let v = y.to_vec::<f32>().unwrap();
        assert_eq!(v[0], 13.5 + 1.0);
        assert_eq!(v[9], 13.5 + 2.0);
        let e = convolution(&x, &w, None, &[1], &[0], &[1], false, &[0], 2)
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
        let y = convolution(&xt, &wt, None, &[2, 2], &[1, 1], &[1, 1], false, &[0, 0], 2).unwrap();
        let yv: Vec<f64> = (0..y.numel() as usize)
            .map(|i| ((i * 3) % 5) as f64 - 2.0)
            .collect();
        let yt = Tensor::from_slice(&yv, y.sizes()).unwrap();
        let xr = convolution(&yt, &wt, None, &[2, 2], &[1, 1], &[1, 1], true, &[0, 0], 2).unwrap();
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
        let (gi, gw, gb) = convolution_backward(
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
        let y = convolution(&x, &w, None, &[1], &[0], &[1], false, &[0], 1).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![-1.0, -1.0, -1.0]);
    }
}
