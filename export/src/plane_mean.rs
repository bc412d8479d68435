//! The mean of each plane of a tensor as one loop on the CPU: `mean.dim(x,
//! [-1, -2])` (the last two dimensions, in either order, either sign) of a
//! static contiguous f32 `[n, c, h, w]`, with or without `keepdim`.
//! MobileNetV3's squeeze-and-excitation blocks start so (ten of them, on planes
//! of 2x2 to 16x16); the generic reduction cost about 4 µs per call there.
//!
//! Owns: recognising such a node and running it. Must not: take another
//! reduction, dtype or layout (those keep the operator), or change the result
//! beyond rounding (each plane summed in f32 in 8 partial sums, then divided
//! by its size).

use crate::error::{Error, Result};
use crate::graph::{arg, f32_contiguous, is, out, tensor_arg};
use crate::schema::{Arg, Node, Program};
use opal::{DType, Tensor};

/// One recognised node.
pub(crate) struct Mean {
    pub input: String,
    pub keepdim: bool,
}

/// The node as a plane mean, when it is one.
pub(crate) fn lower(p: &Program, node: &Node) -> Option<Mean> {
    if !is(node, "mean.dim") {
        return None;
    }
    let x = tensor_arg(node, "self")?;
    let sizes = f32_contiguous(p, x)?;
    f32_contiguous(p, out(node)?)?;
    let mut dims = match arg(node, "dim")? {
        Arg::Ints(v) if v.len() == 2 => v.iter().map(|&d| (d + 4) % 4).collect::<Vec<_>>(),
        _ => return None,
    };
    dims.sort_unstable();
    let keepdim = match arg(node, "keepdim") {
        None => false,
        Some(Arg::Bool(b)) => *b,
        _ => return None,
    };
    let no_dtype = matches!(arg(node, "dtype"), None | Some(Arg::None));
    (sizes.len() == 4 && dims == [2, 3] && no_dtype).then(|| Mean {
        input: x.to_string(),
        keepdim,
    })
}

/// The mean of each `h x w` plane of `x`; anything but a contiguous CPU f32
/// `[n, c, h, w]` with non-empty planes takes the operator.
pub(crate) fn run(x: &Tensor, keepdim: bool) -> Result<Tensor> {
    let s = x.sizes();
    let ok = x.dim() == 4
        && s[2] * s[3] > 0
        && x.dtype() == DType::F32
        && x.is_contiguous()
        && x.device().is_cpu();
    if !ok {
        return Ok(opal::ops::mean_dim::call(
            x,
            Some(&[-1, -2]),
            keepdim,
            None,
        )?);
    }
    let plane = (s[2] * s[3]) as usize;
    let out: &[i64] = if keepdim {
        &[s[0], s[1], 1, 1]
    } else {
        &s[..2]
    };
    let y = Tensor::empty(out, DType::F32, opal::Device::cpu())?;
    let xr = x.read::<f32>()?;
    let mut yw = y.write::<f32>()?;
    let not_contiguous = || Error::new("a plane mean operand is not contiguous");
    let xs = xr.as_slice().ok_or_else(not_contiguous)?;
    let ys = yw.as_mut_slice().ok_or_else(not_contiguous)?;
    for (m, p) in ys.iter_mut().zip(xs.chunks_exact(plane)) {
        let mut acc = [0.0f32; 8];
        let mut it = p.chunks_exact(8);
        for c in &mut it {
            for (a, &v) in acc.iter_mut().zip(c) {
                *a += v;
            }
        }
        for (a, &v) in acc.iter_mut().zip(it.remainder()) {
            *a += v;
        }
        *m = acc.iter().sum::<f32>() / plane as f32;
    }
    drop(yw);
    Ok(y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_operator() {
        crate::program::init_backends().unwrap();
        for (n, c, h, w) in [(2, 3, 2, 2), (1, 4, 5, 7), (2, 2, 16, 16), (1, 1, 1, 1)] {
            let x = Tensor::from_vec(
                (0..n * c * h * w)
                    .map(|i| ((i * 37) % 23) as f32 * 0.3 - 3.0)
                    .collect(),
                &[n, c, h, w],
            )
            .unwrap();
            for keepdim in [true, false] {
                let want = opal::ops::mean_dim::call(&x, Some(&[-1, -2]), keepdim, None).unwrap();
                crate::graph::assert_close(&run(&x, keepdim).unwrap(), &want, 1e-6);
            }
        }
    }
}
