//! Backward formulas of shape, view, join and indexing ops: permute, squeeze,
//! slice, split, cat/stack, roll, repeat, pad, `_to_copy` and advanced indexing,
//! plus `sum_to` (undoing a broadcast).
//!
//! Owns: these formulas. Must not: record graph nodes.

use super::{cmp, scalar_like, wd, zeros_of, TensorOptions};
use crate::error::{OpalError, Result};
use crate::{ops, DType, Device, Scalar, Tensor};

pub fn permute_backwards(grad: &Tensor, dims: &[i64]) -> Result<Tensor> {
    let n = dims.len();
    let mut inverse = vec![0i64; n];
    for (i, &d) in dims.iter().enumerate() {
        inverse[wd(d, n)?] = i as i64;
    }
    ops::permute(grad, &inverse)
}

/// Sums `grad` down to `sizes` (what broadcasting expanded).
pub fn sum_to(grad: &Tensor, sizes: &[i64]) -> Result<Tensor> {
    if grad.sizes() == sizes {
        return Ok(grad.clone());
    }
    let lead = grad.dim().saturating_sub(sizes.len());
    let mut g = grad.clone();
    if lead > 0 {
        let dims: Vec<i64> = (0..lead as i64).collect();
        g = ops::sum_dim_intlist::call(&g, Some(&dims), false, None)?;
    }
    let ones: Vec<i64> = sizes
        .iter()
        .enumerate()
        .filter(|(i, &s)| s == 1 && g.sizes()[*i] != 1)
        .map(|(i, _)| i as i64)
        .collect();
    if !ones.is_empty() {
        g = ops::sum_dim_intlist::call(&g, Some(&ones), true, None)?;
    }
    Ok(g)
}

pub fn unsqueeze_to(grad: &Tensor, dim: i64, sizes: &[i64]) -> Result<Tensor> {
    let d = wd(dim, sizes.len().max(1))?;
    if sizes.get(d) == Some(&1) {
        ops::unsqueeze(grad, d as i64)
    } else {
        Ok(grad.clone())
    }
}

/// `unsqueeze_to` over a list of dims (`squeeze.dims`' backward): the squeezed size-1
/// dims are put back, lowest first, so each lands where it was.
pub fn unsqueeze_to_dims(grad: &Tensor, dims: &[i64], sizes: &[i64]) -> Result<Tensor> {
    let mut ds: Vec<usize> = dims
        .iter()
        .map(|&d| wd(d, sizes.len().max(1)))
        .collect::<Result<_>>()?;
    ds.sort_unstable();
    ds.dedup();
    let mut g = grad.clone();
    for d in ds {
        if sizes.get(d) == Some(&1) {
            g = ops::unsqueeze(&g, d as i64)?;
        }
    }
    Ok(g)
}

pub fn slice_backward_wrapper(
    grad: &Tensor,
    sizes: &[i64],
    dim: i64,
    start: &Option<i64>,
    end: &Option<i64>,
    step: i64,
) -> Result<Tensor> {
    let d = wd(dim, sizes.len())?;
    let n = sizes[d];
    let clampi = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(n) };
    let s = clampi(start.unwrap_or(0));
    let opts = TensorOptions::of(grad);
    let zeros = zeros_of(sizes, opts)?;
    let len = grad.sizes().get(d).copied().unwrap_or(0);
    if len == 0 {
        return Ok(zeros);
    }
    let _ = end;
    let idx = ops::arange_start_step::call(
        &Scalar::Int(s),
        &Scalar::Int(s + step * len),
        &Scalar::Int(step),
        Some(DType::I64),
        None,
        Some(opts.device),
        None,
    )?;
    let mut shape = vec![1i64; sizes.len()];
    shape[d] = len;
    let idx = ops::expand(&ops::reshape(&idx, &shape)?, grad.sizes())?;
    ops::scatter_src(&zeros, d as i64, &idx, grad)
}

pub fn split_backward(
    grads: &[Tensor],
    split_size: i64,
    dim: i64,
    sizes: &[i64],
    options: &TensorOptions,
) -> Result<Tensor> {
    let d = wd(dim, sizes.len())?;
    let total = sizes[d];
    let mut parts = Vec::with_capacity(grads.len());
    for (i, g) in grads.iter().enumerate() {
        if g.is_defined() {
            parts.push(g.clone());
        } else {
            let start = i as i64 * split_size;
            let mut shape = sizes.to_vec();
            shape[d] = split_size.min(total - start).max(0);
            parts.push(zeros_of(&shape, *options)?);
        }
    }
    ops::cat::call(&parts, d as i64)
}

/// `split_with_sizes`' backward: the pieces' gradients joined along `dim`, zeros
/// for a piece that got none.
pub fn split_with_sizes_backward(
    grads: &[Tensor],
    split_sizes: &[i64],
    dim: i64,
    sizes: &[i64],
    options: &TensorOptions,
) -> Result<Tensor> {
    let d = wd(dim, sizes.len())?;
    let mut parts = Vec::with_capacity(grads.len());
    for (g, &len) in grads.iter().zip(split_sizes) {
        if g.is_defined() {
            parts.push(g.clone());
        } else {
            let mut shape = sizes.to_vec();
            shape[d] = len;
            parts.push(zeros_of(&shape, *options)?);
        }
    }
    ops::cat::call(&parts, d as i64)
}

pub fn to_args_sizes(tensors: &[Tensor]) -> Result<Vec<Vec<i64>>> {
    Ok(tensors.iter().map(|t| t.sizes().to_vec()).collect())
}

pub fn to_args_sizes_symint(tensors: &[Tensor]) -> Result<Vec<Vec<i64>>> {
    to_args_sizes(tensors)
}

pub fn to_args_scalartypes(tensors: &[Tensor]) -> Result<Vec<DType>> {
    Ok(tensors.iter().map(Tensor::dtype).collect())
}

pub fn cat_tensors_backward(
    grad: &Tensor,
    sizes: &[Vec<i64>],
    _dtypes: &[DType],
    dim: i64,
) -> Result<Vec<Tensor>> {
    if !grad.is_defined() {
        return Ok(sizes.iter().map(|_| Tensor::undefined()).collect());
    }
    let d = wd(dim, grad.dim())?;
    let mut out = Vec::with_capacity(sizes.len());
    let mut start = 0;
    for s in sizes {
        // A 1-d empty tensor takes part in cat without a place along `dim`.
        if s.len() == 1 && s[0] == 0 {
            out.push(Tensor::undefined());
            continue;
        }
        let len = s[d];
        out.push(ops::narrow(grad, d as i64, start, len)?);
        start += len;
    }
    Ok(out)
}

pub fn stack_tensors_backward(grad: &Tensor, dim: i64, dtypes: &[DType]) -> Result<Vec<Tensor>> {
    if !grad.is_defined() {
        return Ok(dtypes.iter().map(|_| Tensor::undefined()).collect());
    }
    let d = wd(dim, grad.dim())? as i64;
    (0..dtypes.len() as i64)
        .map(|i| ops::select_int(grad, d, i))
        .collect()
}

pub fn roll_backward(grad: &Tensor, shifts: &[i64], dims: &[i64]) -> Result<Tensor> {
    let neg: Vec<i64> = shifts.iter().map(|s| -s).collect();
    ops::roll::call(grad, &neg, dims)
}

pub fn repeat_backward(grad: &Tensor, repeats: &[i64], sizes: &[i64]) -> Result<Tensor> {
    let lead = repeats.len().saturating_sub(sizes.len());
    let mut g = grad.clone();
    if lead > 0 {
        let dims: Vec<i64> = (0..lead as i64).collect();
        g = ops::sum_dim_intlist::call(&g, Some(&dims), false, None)?;
    }
    // Split each dim into (repeat, size) and sum the repeats away.
    let mut shape = Vec::with_capacity(2 * sizes.len());
    for (r, s) in repeats[lead..].iter().zip(sizes) {
        shape.push(*r);
        shape.push(*s);
    }
    if shape.is_empty() {
        return Ok(g);
    }
    let g = ops::reshape(&g, &shape)?;
    let dims: Vec<i64> = (0..sizes.len() as i64).map(|i| 2 * i).collect();
    ops::sum_dim_intlist::call(&g, Some(&dims), false, None)
}

pub fn constant_pad_nd_backward(grad: &Tensor, pad: &[i64]) -> Result<Tensor> {
    let neg: Vec<i64> = pad.iter().map(|p| -p).collect();
    ops::constant_pad_nd(grad, &neg)
}

/// The gradient in the input's dtype and on its device: itself when it already is
/// (as PyTorch's `to(..., copy=False)`; gradients are never written in place, so
/// sharing it is safe), else one `_to_copy`. A reshape that had to copy records a
/// `_to_copy` whose gradient would otherwise be copied once more.
pub fn _to_copy_backward(grad: &Tensor, options: &TensorOptions) -> Result<Tensor> {
    if grad.dtype() == options.dtype && grad.device() == options.device {
        return Ok(grad.clone());
    }
    ops::_to_copy::call(
        grad,
        Some(options.dtype),
        None,
        Some(options.device),
        None,
        false,
        None,
    )
}

pub fn index_backward(zeros: &Tensor, indices: &[Option<Tensor>], grad: &Tensor) -> Result<Tensor> {
    // Boolean masks become their coordinates (what indexing by a mask means), each
    // mask dim one index tensor.
    let mut per_dim: Vec<Option<Tensor>> = Vec::new();
    for t in indices {
        match t.as_ref().filter(|t| t.is_defined()) {
            Some(m) if matches!(m.dtype(), DType::Bool | DType::U8) => {
                per_dim.extend(mask_coordinates(m)?.into_iter().map(Some));
            }
            Some(t) => per_dim.push(Some(t.clone())),
            None => per_dim.push(None),
        }
    }
    let given: Vec<usize> = (0..per_dim.len())
        .filter(|&i| per_dim[i].is_some())
        .collect();
    let (Some(&first), Some(&last)) = (given.first(), given.last()) else {
        return Ok(grad.clone());
    };
    if last - first + 1 != given.len() {
        return Err(OpalError::msg(
            "index.Tensor backward: index tensors separated by a `None` (the result's indexed \
             dims move first) are not supported yet",
        ));
    }
    // Linear index over the indexed dims (row-major), broadcast to one shape.
    let sizes = zeros.sizes().to_vec();
    let idx: Vec<Tensor> = given.iter().filter_map(|&d| per_dim[d].clone()).collect();
    let mut linear: Option<Tensor> = None;
    for (k, &d) in given.iter().enumerate() {
        let n = sizes[d];
        // Negative indices count from the end.
        let i = cmp(
            ops::remainder_tensor,
            &ops::add_tensor(&idx[k], &scalar_like(&idx[k], Scalar::Int(n))?)?,
            &Scalar::Int(n.max(1)),
        )?;
        linear = Some(match linear {
            None => i,
            Some(l) => {
                ops::add_tensor(&ops::mul_tensor(&l, &scalar_like(&l, Scalar::Int(n))?)?, &i)?
            }
        });
    }
    let linear = linear.unwrap_or_else(Tensor::undefined);
    // self: [pre.., n_first..n_last, post..] -> [pre, N, post]; grad: [pre.., S.., post..] -> [pre, |S|, post].
    let pre: i64 = sizes[..first].iter().product();
    let n: i64 = sizes[first..=last].iter().product();
    let post: i64 = sizes[last + 1..].iter().product();
    let m = linear.numel();
    let z = ops::reshape(&ops::contiguous(zeros)?, &[pre, n, post])?;
    let g = ops::reshape(&ops::contiguous(grad)?, &[pre, m, post])?;
    let ix = ops::expand(&ops::reshape(&linear, &[1, m, 1])?, &[pre, m, post])?;
    let out = ops::scatter_add(&z, 1, &ix, &g)?;
    ops::reshape(&out, &sizes)
}

/// The coordinates of a mask's true elements: one index tensor per mask dim (read
/// on the host, as PyTorch's `nonzero` synchronizes).
fn mask_coordinates(mask: &Tensor) -> Result<Vec<Tensor>> {
    let host = ops::_to_copy::call(
        mask,
        Some(DType::Bool),
        None,
        Some(Device::cpu()),
        None,
        false,
        None,
    )?;
    let values = host.to_vec::<bool>()?;
    let sizes = mask.sizes().to_vec();
    let mut coords: Vec<Vec<i64>> = vec![Vec::new(); sizes.len()];
    for (flat, _) in values.iter().enumerate().filter(|(_, v)| **v) {
        let mut rem = flat as i64;
        for d in (0..sizes.len()).rev() {
            coords[d].push(rem % sizes[d].max(1));
            rem /= sizes[d].max(1);
        }
    }
    coords
        .into_iter()
        .map(|c| {
            let n = c.len() as i64;
            let t = Tensor::from_slice(&c, &[n])?;
            ops::_to_copy::call(&t, None, None, Some(mask.device()), None, false, None)
        })
        .collect()
}
