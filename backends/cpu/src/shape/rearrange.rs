//! Ops that rearrange elements without arithmetic: `flip`, `roll`, `repeat`,
//! `tril` / `triu` (+ out= / in-place), `constant_pad_nd`, `cat`, `stack` (+ out=).
//! All run on raw element bytes, so every dtype works the same way.
//!
//! Owns: each op's index map and PyTorch's checks and messages.
//! Must not: copy through a dtype (values are moved bit-exactly; only `cat` casts
//! inputs to the promoted dtype first).

use super::remap::{contiguous_strides, remap};
use crate::copy::copy_into;
use crate::nn::io::{check_nbytes, err, in_op, numel, shape_err, wrap_dim, write_out};
use opal::{Result, Scalar, Tensor};

/// Linear (row-major) index of `idx` in a tensor of `strides`.
#[inline]
fn lin(idx: &[usize], strides: &[i64]) -> usize {
    idx.iter().zip(strides).map(|(&i, &s)| i * s as usize).sum()
}

/// Reverses the order of elements along each of `dims`.
pub fn flip(self_: &Tensor, dims: &[i64]) -> Result<Tensor> {
    const OP: &str = "flip";
    let nd = self_.dim();
    let mut flip = vec![false; nd.max(1)];
    for &d in dims {
        let w = wrap_dim(d, nd, OP)?;
        if std::mem::replace(&mut flip[w], true) {
            return Err(err(
                OP,
                format!("dim {w} appears multiple times in the list of dims"),
            ));
        }
    }
    let (sz, st) = (self_.sizes().to_vec(), contiguous_strides(self_.sizes()));
    remap(OP, self_, &sz, None, |idx| {
        let mut s = 0usize;
        for d in 0..idx.len() {
            let i = if flip[d] {
                sz[d] as usize - 1 - idx[d]
            } else {
                idx[d]
            };
            s += i * st[d] as usize;
        }
        Ok(Some(s))
    })
}

/// Rotates elements along `dims` by `shifts` (flattened first when `dims` is empty).
pub fn roll(self_: &Tensor, shifts: &[i64], dims: &[i64]) -> Result<Tensor> {
    const OP: &str = "roll";
    if dims.is_empty() {
        if shifts.len() != 1 {
            return Err(err(
                OP,
                format!(
                    "shifts and dimensions must align. shifts: {}, dims:0",
                    shifts.len()
                ),
            ));
        }
        let n = self_.numel();
        let flat = remap(OP, self_, &[n], None, |idx| {
            Ok(Some(
                ((idx[0] as i64 - shifts[0]).rem_euclid(n.max(1))) as usize,
            ))
        })?;
        return flat.as_strided(self_.sizes(), &contiguous_strides(self_.sizes()), 0);
    }
    if shifts.len() != dims.len() {
        return Err(err(
            OP,
            format!(
                "shifts and dimensions must align. shifts: {}, dims:{}",
                shifts.len(),
                dims.len()
            ),
        ));
    }
    let nd = self_.dim();
    let mut shift = vec![0i64; nd.max(1)];
    for (&s, &d) in shifts.iter().zip(dims) {
        let w = wrap_dim(d, nd, OP)?;
        shift[w] += s;
    }
    let (sz, st) = (self_.sizes().to_vec(), contiguous_strides(self_.sizes()));
    remap(OP, self_, &sz, None, |idx| {
        let mut s = 0usize;
        for d in 0..idx.len() {
            let i = (idx[d] as i64 - shift[d]).rem_euclid(sz[d].max(1)) as usize;
            s += i * st[d] as usize;
        }
        Ok(Some(s))
    })
}

/// Tiles the tensor `repeats[i]` times along each dim (leading repeats add dims).
pub fn repeat(self_: &Tensor, repeats: &[i64]) -> Result<Tensor> {
    const OP: &str = "repeat";
    let nd = self_.dim();
    if repeats.len() < nd {
        return Err(err(OP, "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"));
    }
    if let Some(r) = repeats.iter().find(|&&r| r < 0) {
        return Err(err(
            OP,
            format!("Trying to create tensor with negative dimension {r}: {repeats:?}"),
        ));
    }
    let lead = repeats.len() - nd;
    let mut src_shape = vec![1i64; lead];
    src_shape.extend_from_slice(self_.sizes());
    let out = src_shape
        .iter()
        .zip(repeats)
        .map(|(&s, &r)| {
            s.checked_mul(r)
                .ok_or_else(|| err(OP, format!("size {s} repeated {r} times overflows int64")))
        })
        .collect::<Result<Vec<i64>>>()?;
    let st = contiguous_strides(&src_shape);
    remap(OP, self_, &out, None, |idx| {
        Ok(Some(
            idx.iter()
                .enumerate()
                .map(|(d, &i)| (i % src_shape[d] as usize) * st[d] as usize)
                .sum(),
        ))
    })
}

fn tri(self_: &Tensor, diagonal: i64, lower: bool, op: &str) -> Result<Tensor> {
    if self_.dim() < 2 {
        return Err(err(
            op,
            format!("{op}: input tensor must have at least 2 dimensions"),
        ));
    }
    let (sz, st) = (self_.sizes().to_vec(), contiguous_strides(self_.sizes()));
    let nd = sz.len();
    remap(op, self_, &sz, None, |idx| {
        let (r, c) = (idx[nd - 2] as i64, idx[nd - 1] as i64);
        let keep = if lower {
            c - r <= diagonal
        } else {
            c - r >= diagonal
        };
        Ok(keep.then(|| lin(idx, &st)))
    })
}

/// Lower triangle (elements with `col - row <= diagonal`) of the last two dims.
pub fn tril(self_: &Tensor, diagonal: i64) -> Result<Tensor> {
    tri(self_, diagonal, true, "tril")
}

/// `tril` into `out`.
pub fn tril_out(self_: &Tensor, diagonal: i64, out: &Tensor) -> Result<Tensor> {
    write_out(&tril(self_, diagonal)?, out, "tril.out")
}

/// In-place `tril`.
pub fn tril_(self_: &Tensor, diagonal: i64) -> Result<Tensor> {
    copy_into(self_, &tril(self_, diagonal)?, "tril_")?;
    Ok(self_.clone())
}

/// Upper triangle (elements with `col - row >= diagonal`) of the last two dims.
pub fn triu(self_: &Tensor, diagonal: i64) -> Result<Tensor> {
    tri(self_, diagonal, false, "triu")
}

/// `triu` into `out`.
pub fn triu_out(self_: &Tensor, diagonal: i64, out: &Tensor) -> Result<Tensor> {
    write_out(&triu(self_, diagonal)?, out, "triu.out")
}

/// In-place `triu`.
pub fn triu_(self_: &Tensor, diagonal: i64) -> Result<Tensor> {
    copy_into(self_, &triu(self_, diagonal)?, "triu_")?;
    Ok(self_.clone())
}

/// Pads (or, with negative amounts, crops) the trailing dims: `pad` holds
/// `(before, after)` pairs starting from the last dim; new elements are `value`.
pub fn constant_pad_nd(self_: &Tensor, pad: &[i64], value: &Scalar) -> Result<Tensor> {
    const OP: &str = "constant_pad_nd";
    if !pad.len().is_multiple_of(2) {
        return Err(err(
            OP,
            format!(
                "Length of pad must be even but instead it equals {}",
                pad.len()
            ),
        ));
    }
    let nd = self_.dim();
    if pad.len() / 2 > nd {
        return Err(err(OP, format!("Length of pad should be no more than twice the number of dimensions of the input. Pad length is {} while the input has {nd} dimensions.", pad.len())));
    }
    let mut before = vec![0i64; nd];
    let mut out = self_.sizes().to_vec();
    for (k, pair) in pad.chunks(2).enumerate() {
        let d = nd - 1 - k;
        before[d] = pair[0];
        out[d] += pair[0] + pair[1];
        if out[d] < 0 {
            return Err(err(OP, format!("The input size {}, plus negative padding {} and {} resulted in a negative output size, which is invalid. Check dimension {d} of your input.", self_.sizes()[d], pair[0], pair[1])));
        }
    }
    value.check_fits(self_.dtype(), OP)?;
    let fill = Tensor::scalar_tensor(value, self_.dtype(), opal::Device::cpu())?.to_bytes()?;
    let (sz, st) = (self_.sizes().to_vec(), contiguous_strides(self_.sizes()));
    remap(OP, self_, &out, Some(&fill), |idx| {
        let mut s = 0usize;
        for d in 0..idx.len() {
            let i = idx[d] as i64 - before[d];
            if i < 0 || i >= sz[d] {
                return Ok(None);
            }
            s += i as usize * st[d] as usize;
        }
        Ok(Some(s))
    })
}

/// An undefined tensor's sizes and dtype are placeholders, so a list holding one
/// is refused (as PyTorch does) rather than read as an empty tensor.
fn check_defined(tensors: &[Tensor], op: &str) -> Result<()> {
    match tensors.iter().position(|t| !t.is_defined()) {
        Some(i) => Err(err(
            op,
            format!("expected a defined tensor at position {i}, got an undefined tensor"),
        )),
        None => Ok(()),
    }
}

/// Concatenates along `dim`; inputs are promoted to a common dtype. 1-D empty
/// tensors are skipped (PyTorch's legacy rule).
pub fn cat(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    const OP: &str = "cat";
    if tensors.is_empty() {
        return Err(err(OP, "torch.cat(): expected a non-empty list of Tensors"));
    }
    check_defined(tensors, OP)?;
    let dtype = tensors
        .iter()
        .skip(1)
        .fold(tensors[0].dtype(), |a, t| opal::promote_types(a, t.dtype()));
    let parts: Vec<&Tensor> = tensors
        .iter()
        .filter(|t| !(t.dim() == 1 && t.numel() == 0))
        .collect();
    let Some(first) = parts.first() else {
        return crate::out::empty(&[0], dtype);
    };
    let nd = first.dim();
    if nd == 0 {
        return Err(err(
            OP,
            "zero-dimensional tensor (at position 0) cannot be concatenated",
        ));
    }
    let d = wrap_dim(dim, nd, OP)?;
    let mut out = first.sizes().to_vec();
    out[d] = 0;
    for (i, t) in parts.iter().enumerate() {
        if t.dim() != nd {
            return Err(shape_err(
                OP,
                format!(
                    "Tensors must have same number of dimensions: got {nd} and {}",
                    t.dim()
                ),
            ));
        }
        for (k, (&want, &got)) in out.iter().zip(t.sizes()).enumerate() {
            if k != d && got != want {
                return Err(shape_err(OP, format!("Sizes of tensors must match except in dimension {d}. Expected size {want} but got size {got} for tensor number {i} in the list.")));
            }
        }
        out[d] = out[d].checked_add(t.sizes()[d]).ok_or_else(|| {
            shape_err(
                OP,
                format!(
                    "the sizes along dimension {d} add up to more than {} elements",
                    i64::MAX
                ),
            )
        })?;
    }
    // The result's room is claimed first, so a result too large fails before any part
    // is copied out.
    check_nbytes(&out, dtype, OP)?;
    let result = crate::out::empty_uninit(&out, dtype).map_err(in_op(OP))?;
    if numel(&out) == 0 {
        return Ok(result);
    }
    // Each part is copied (cast to the common dtype) into its slab of the result: a
    // view of `result` along `d`, which the strided copy fills run by run.
    let strides = contiguous_strides(&out);
    let mut start = 0i64;
    for t in &parts {
        let len = t.sizes()[d];
        if len > 0 {
            let mut sizes = out.clone();
            sizes[d] = len;
            let slab = result
                .as_strided(&sizes, &strides, start * strides[d])
                .map_err(in_op(OP))?;
            copy_into(&slab, t, OP)?;
        }
        start += len;
    }
    Ok(result)
}

/// `cat` into `out`.
pub fn cat_out(tensors: &[Tensor], dim: i64, out: &Tensor) -> Result<Tensor> {
    write_out(&cat(tensors, dim)?, out, "cat.out")
}

/// Joins equally shaped tensors along a new dim.
pub fn stack(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    const OP: &str = "stack";
    if tensors.is_empty() {
        return Err(err(OP, "stack expects a non-empty TensorList"));
    }
    check_defined(tensors, OP)?;
    let shape = tensors[0].sizes();
    for (i, t) in tensors.iter().enumerate() {
        if t.sizes() != shape {
            return Err(shape_err(OP, format!("stack expects each tensor to be equal size, but got {shape:?} at entry 0 and {:?} at entry {i}", t.sizes())));
        }
    }
    let d = wrap_dim(dim, shape.len() + 1, OP)? as i64;
    let parts: Vec<Tensor> = tensors
        .iter()
        .map(|t| super::views::unsqueeze(t, d))
        .collect::<Result<_>>()?;
    cat(&parts, d)
}

/// `stack` into `out`.
pub fn stack_out(tensors: &[Tensor], dim: i64, out: &Tensor) -> Result<Tensor> {
    write_out(&stack(tensors, dim)?, out, "stack.out")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ar(n: usize, shape: &[i64]) -> Tensor {
        Tensor::from_vec((0..n as i64).collect::<Vec<_>>(), shape).unwrap()
    }

    #[test]
    fn flip_roll_repeat() {
        let a = ar(6, &[2, 3]);
        assert_eq!(
            flip(&a, &[0, 1]).unwrap().to_vec::<i64>().unwrap(),
            vec![5, 4, 3, 2, 1, 0]
        );
        assert!(flip(&a, &[0, -2]).is_err());
        assert_eq!(
            roll(&a, &[1], &[]).unwrap().to_vec::<i64>().unwrap(),
            vec![5, 0, 1, 2, 3, 4]
        );
        assert_eq!(
            roll(&a, &[1, -1], &[0, 1])
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            vec![4, 5, 3, 1, 2, 0]
        );
        let r = repeat(&ar(2, &[2]), &[2, 2]).unwrap();
        assert_eq!(r.sizes(), &[2, 4]);
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![0, 1, 0, 1, 0, 1, 0, 1]);
    }

    #[test]
    fn tri_pad_cat_stack() {
        let a = ar(9, &[3, 3]);
        assert_eq!(
            tril(&a, 0).unwrap().to_vec::<i64>().unwrap(),
            vec![0, 0, 0, 3, 4, 0, 6, 7, 8]
        );
        assert_eq!(
            triu(&a, 1).unwrap().to_vec::<i64>().unwrap(),
            vec![0, 1, 2, 0, 0, 5, 0, 0, 0]
        );
        let p = constant_pad_nd(&ar(2, &[1, 2]), &[1, -1, 0, 1], &Scalar::Int(9)).unwrap();
        assert_eq!(p.sizes(), &[2, 2]);
        assert_eq!(p.to_vec::<i64>().unwrap(), vec![9, 0, 9, 9]);
        let f = Tensor::from_slice(&[0.5f32, 1.5], &[1, 2]).unwrap();
        let c = cat(&[ar(2, &[1, 2]), f], 0).unwrap();
        assert_eq!(c.dtype(), opal::DType::F32);
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 0.5, 1.5]);
        assert!(cat(&[ar(2, &[1, 2]), ar(3, &[1, 3])], 0)
            .unwrap_err()
            .to_string()
            .contains("Sizes of tensors must match"));
        let s = stack(&[ar(2, &[2]), ar(2, &[2])], 1).unwrap();
        assert_eq!(s.sizes(), &[2, 2]);
        assert_eq!(s.to_vec::<i64>().unwrap(), vec![0, 0, 1, 1]);
    }
}
