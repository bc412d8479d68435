//! A product that scales each plane of a tensor by one number, as one loop on
//! the CPU: `mul(x, s)` with `x` of sizes `[n, c, h, w]` and `s` of `[n, c, 1,
//! 1]` (either order), both static, contiguous and f32. MobileNetV3's
//! squeeze-and-excitation blocks end so (nine of them); the generic broadcast
//! path walked both operands' strides element by element.
//!
//! Owns: recognising such a node and running it. Must not: take any other
//! broadcast (those keep the operator), or change the result (one f32 product
//! per element, as the operator rounds it).

use crate::error::{Error, Result};
use crate::graph::{f32_contiguous, is, out, tensor_arg};
use crate::schema::{Node, Program};
use opal::{DType, Tensor};

/// One recognised node: the planes' tensor and the scales'.
pub(crate) struct Scale {
    pub planes: String,
    pub scales: String,
}

/// The node as a plane scaling, when it is one.
pub(crate) fn lower(p: &Program, node: &Node) -> Option<Scale> {
    if !is(node, "mul.Tensor") || node.inputs.len() != 2 {
        return None;
    }
    let (a, b) = (tensor_arg(node, "self")?, tensor_arg(node, "other")?);
    let y = f32_contiguous(p, out(node)?)?;
    let (sa, sb) = (f32_contiguous(p, a)?, f32_contiguous(p, b)?);
    let per_plane = |x: &[i64], s: &[i64]| {
        x.len() == 4
            && s.len() == 4
            && x[..2] == s[..2]
            && s[2..] == [1, 1]
            && x[2] * x[3] > 1
            && x == y.as_slice()
    };
    if per_plane(&sa, &sb) {
        Some(Scale {
            planes: a.to_string(),
            scales: b.to_string(),
        })
    } else if per_plane(&sb, &sa) {
        Some(Scale {
            planes: b.to_string(),
            scales: a.to_string(),
        })
    } else {
        None
    }
}

/// `x * s` with `s` one number per plane of `x`; anything but contiguous CPU
/// f32 operands of those shapes takes the operator.
pub(crate) fn run(x: &Tensor, s: &Tensor) -> Result<Tensor> {
    let sizes = x.sizes();
    let ok = x.dim() == 4
        && s.sizes() == [sizes[0], sizes[1], 1, 1].as_slice()
        && [x, s]
            .iter()
            .all(|t| t.dtype() == DType::F32 && t.is_contiguous() && t.device().is_cpu());
    if !ok {
        return Ok(opal::ops::mul_tensor(x, s)?);
    }
    let plane = (sizes[2] * sizes[3]).max(0) as usize;
    let y = Tensor::empty(sizes, DType::F32, opal::Device::cpu())?;
    if plane == 0 {
        return Ok(y);
    }
    let (xr, sr) = (x.read::<f32>()?, s.read::<f32>()?);
    let mut yw = y.write::<f32>()?;
    let not_contiguous = || Error::new("a plane scaling operand is not contiguous");
    let (xs, ss) = (
        xr.as_slice().ok_or_else(not_contiguous)?,
        sr.as_slice().ok_or_else(not_contiguous)?,
    );
    let ys = yw.as_mut_slice().ok_or_else(not_contiguous)?;
    for ((yp, xp), &k) in ys
        .chunks_exact_mut(plane)
        .zip(xs.chunks_exact(plane))
        .zip(ss)
    {
        for (o, &v) in yp.iter_mut().zip(xp) {
            *o = v * k;
        }
    }
    drop(yw);
    Ok(y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_broadcast_product() {
        crate::program::init_backends().unwrap();
        let x = Tensor::from_vec(
            (0..2 * 3 * 5).map(|i| i as f32 * 0.5 - 3.0).collect(),
            &[2, 3, 5, 1],
        )
        .unwrap();
        let s = Tensor::from_vec(vec![1.5f32, -2.0, 0.25, 3.0, 0.0, -1.0], &[2, 3, 1, 1]).unwrap();
        let want = opal::ops::mul_tensor(&x, &s)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(run(&x, &s).unwrap().to_vec::<f32>().unwrap(), want);
        // Other shapes take the operator, same values.
        let s2 = Tensor::from_vec(vec![2.0f32; 5], &[5, 1]).unwrap();
        let want = opal::ops::mul_tensor(&x, &s2)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(run(&x, &s2).unwrap().to_vec::<f32>().unwrap(), want);
    }
}
