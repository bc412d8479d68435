//! `embedding`, `embedding_dense_backward` and `one_hot`.
//!
//! Owns: index value validation and the row gathers / scatters of these ops.
//! Must not: restate the argument checks of `embedding` and its backward
//! (`opal::rules::bag`, named as the rule in `backend.yaml`), or touch other ops'
//! numerics.

use super::io::{
    check_nbytes, compute_dtype, err, in_op, make_output, try_vec_of, with_slice, Compute,
};
use crate::copy::to_vec_as;
use opal::rules::bag::{Embedding, EmbeddingDenseBackward};
use opal::{DType, Result, Tensor};

fn indices_i64(indices: &Tensor, op: &str) -> Result<Vec<i64>> {
    match indices.dtype() {
        DType::I64 | DType::I32 => to_vec_as::<i64>(indices),
        other => Err(err(op, format!("Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got {other} instead"))),
    }
}

/// Rows of `weight` picked by `indices`: shape `indices.shape + [embedding_dim]`.
/// `padding_idx`, `scale_grad_by_freq` and `sparse` only matter for the backward.
pub fn embedding(e: Embedding) -> Result<Tensor> {
    const OP: &str = "embedding";
    let (weight, indices, shape) = (e.weight, e.indices, &e.sizes);
    let iv = indices_i64(indices, OP)?;
    let (rows, dim) = (weight.sizes()[0], weight.sizes()[1] as usize);
    if let Some(bad) = iv.iter().find(|&&i| i < 0 || i >= rows) {
        return Err(err(
            OP,
            format!("index out of range in self (index {bad}, {rows} rows)"),
        ));
    }
    // Whole rows are copied as bytes, so every dtype works the same way.
    let w = crate::copy::contiguous(weight)?;
    let out = crate::out::empty_uninit(shape, w.dtype()).map_err(in_op(OP))?;
    let row = dim * w.dtype().size();
    if row > 0 && !iv.is_empty() {
        let (_acc, [src], [dst]) = opal::tensor::KernelAccess::with_ptrs([&w], [&out])?;
        for (k, &i) in iv.iter().enumerate() {
            // SAFETY: `w` is contiguous with `rows` rows of `row` bytes from `src` and
            // `i` is in `0..rows` (checked above); `out` is new and contiguous with
            // `iv.len()` rows of `row` bytes from `dst`, so the two never overlap;
            // `_acc` holds `w`'s storage shared and `out`'s exclusively meanwhile.
            unsafe {
                std::ptr::copy_nonoverlapping(src.add(i as usize * row), dst.add(k * row), row)
            };
        }
    }
    Ok(out)
}

/// Gradient of `embedding` w.r.t. its weight: rows of `grad_output` summed into the
/// rows their indices name, skipping `padding_idx`; with `scale_grad_by_freq` each
/// contribution is divided by how often its index occurs.
pub fn embedding_dense_backward(e: EmbeddingDenseBackward) -> Result<Tensor> {
    const OP: &str = "embedding_dense_backward";
    let (grad_output, num_weights) = (e.grad_output, e.num_weights);
    let cd = compute_dtype(grad_output.dtype(), OP)?;
    let iv = indices_i64(e.indices, OP)?;
    let dim = e.dim as usize;
    if let Some(bad) = iv.iter().find(|&&i| i < 0 || i >= num_weights) {
        return Err(err(
            OP,
            format!("index {bad} out of range for {num_weights} weights"),
        ));
    }
    // num_weights sizes the result: refuse one no allocation can hold up front.
    check_nbytes(&[num_weights, dim as i64], grad_output.dtype(), OP)?;
    fn scatter_rows<C: Compute>(
        gv: &[C],
        dtype: DType,
        iv: &[i64],
        nw: usize,
        dim: usize,
        pad: i64,
        freq: bool,
    ) -> Result<Tensor> {
        let mut counts = try_vec_of(if freq { nw } else { 0 }, 0usize, OP)?;
        if freq {
            for &i in iv {
                counts[i as usize] += 1;
            }
        }
        make_output::<C>(&[nw as i64, dim as i64], dtype, |o| {
            o.iter_mut().for_each(|v| *v = num_traits::zero());
            for (k, &i) in iv.iter().enumerate() {
                if i == pad {
                    continue;
                }
                let scale = if freq {
                    C::one() / C::from(counts[i as usize]).unwrap_or_else(C::one)
                } else {
                    C::one()
                };
                let row = &mut o[i as usize * dim..(i as usize + 1) * dim];
                for (r, &v) in row.iter_mut().zip(&gv[k * dim..(k + 1) * dim]) {
                    *r = *r + v * scale;
                }
            }
            Ok(())
        })
    }
    let (g, nw) = (grad_output, num_weights as usize);
    let (pad, freq) = (e.padding_idx, e.scale_grad_by_freq);
    match cd {
        DType::F64 => {
            with_slice::<f64, _>(g, |gv| scatter_rows(gv, g.dtype(), &iv, nw, dim, pad, freq))
        }
        _ => with_slice::<f32, _>(g, |gv| scatter_rows(gv, g.dtype(), &iv, nw, dim, pad, freq)),
    }
}

/// One-hot encoding of an int64 tensor: shape `self.shape + [num_classes]`
/// (`num_classes = -1` means `max + 1`).
pub fn one_hot(self_: &Tensor, num_classes: i64) -> Result<Tensor> {
    const OP: &str = "one_hot";
    if self_.dtype() != DType::I64 {
        return Err(err(
            OP,
            "one_hot is only applicable to index tensor of type LongTensor.",
        ));
    }
    let v = to_vec_as::<i64>(self_)?;
    if v.iter().any(|&x| x < 0) {
        return Err(err(OP, "Class values must be non-negative."));
    }
    let nc = if num_classes == -1 {
        if v.is_empty() {
            return Err(err(
                OP,
                "Can not infer total number of classes from empty tensor.",
            ));
        }
        let max = v.iter().copied().max().unwrap_or(0);
        max.checked_add(1).ok_or_else(|| {
            err(
                OP,
                format!("class value {max} leaves no room for max + 1 classes"),
            )
        })?
    } else {
        if num_classes < 0 {
            return Err(err(
                OP,
                format!("num_classes should be -1 or non-negative, got {num_classes}"),
            ));
        }
        if v.iter().any(|&x| x >= num_classes) {
            return Err(err(OP, "Class values must be smaller than num_classes."));
        }
        num_classes
    };
    let mut shape = self_.sizes().to_vec();
    shape.push(nc);
    check_nbytes(&shape, DType::I64, OP)?;
    let c = nc as usize;
    let mut out = try_vec_of(v.len() * c, 0i64, OP)?;
    for (k, &x) in v.iter().enumerate() {
        out[k * c + x as usize] = 1;
    }
    Tensor::from_vec(out, &shape).map_err(in_op(OP))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedding_roundtrip_and_one_hot() {
        let w = Tensor::from_vec((0..6).map(|v| v as f32).collect::<Vec<_>>(), &[3, 2]).unwrap();
        let i = Tensor::from_slice(&[2i64, 0, 2], &[3]).unwrap();
        let e = opal::rules::bag::embedding(&w, &i, -1, false, false)
            .and_then(embedding)
            .unwrap();
        assert_eq!(e.to_vec::<f32>().unwrap(), vec![4., 5., 0., 1., 4., 5.]);
        let g = Tensor::from_slice(&[1.0f32; 6], &[3, 2]).unwrap();
        let gw = opal::rules::bag::embedding_dense_backward(&g, &i, 3, 0, true)
            .and_then(embedding_dense_backward)
            .unwrap();
        assert_eq!(gw.to_vec::<f32>().unwrap(), vec![0., 0., 0., 0., 1., 1.]);
        assert!(opal::rules::bag::embedding(
            &w,
            &Tensor::from_slice(&[3i64], &[1]).unwrap(),
            -1,
            false,
            false
        )
        .and_then(embedding)
        .is_err());
        let oh = one_hot(&i, -1).unwrap();
        assert_eq!(oh.sizes(), &[3, 3]);
        assert_eq!(oh.to_vec::<i64>().unwrap(), vec![0, 0, 1, 1, 0, 0, 0, 0, 1]);
        assert!(one_hot(&i, 2).is_err());
    }
}
