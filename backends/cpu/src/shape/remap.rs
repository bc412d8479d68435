//! Dtype-agnostic data movement: build an output tensor element by element from
//! another tensor's elements (as raw bytes), given a map from output index to source
//! element. Every pure data-movement op (flip, roll, repeat, pad, tril/triu, cat,
//! gather, index, ...) is one such map.
//!
//! Owns: the odometer over output indices and the byte copies.
//! Must not: know any op's index arithmetic.

use crate::nn::io::{check_nbytes, in_op, numel, try_vec};
use opal::{DType, Result, Tensor};

pub(crate) use opal::rules::contiguous_strides;

/// Calls `f(index)` for every multi-index of `shape` in row-major order.
pub(crate) fn for_each_index(
    shape: &[i64],
    mut f: impl FnMut(&[usize]) -> Result<()>,
) -> Result<()> {
    if shape.iter().any(|&s| s <= 0) {
        return Ok(());
    }
    let mut idx = vec![0usize; shape.len()];
    loop {
        f(&idx)?;
        let mut d = shape.len();
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            idx[d] += 1;
            if (idx[d] as i64) < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// A tensor of `out_shape` and `input`'s dtype whose element at output index `i` is
/// `input`'s element number `src(i)` in logical (row-major) order, or `fill` (one
/// element's bytes; zeros when `None`) where `src` returns `None`. `src` may fail.
/// Errors name `op`, including a result too large to allocate.
pub(crate) fn remap(
    op: &str,
    input: &Tensor,
    out_shape: &[i64],
    fill: Option<&[u8]>,
    src: impl FnMut(&[usize]) -> Result<Option<usize>>,
) -> Result<Tensor> {
    let bytes = input.to_bytes().map_err(in_op(op))?;
    remap_bytes(op, &bytes, input.dtype(), out_shape, fill, src)
}

/// [`remap`] over already-extracted logical-order bytes of dtype `dtype`.
pub(crate) fn remap_bytes(
    op: &str,
    bytes: &[u8],
    dtype: DType,
    out_shape: &[i64],
    fill: Option<&[u8]>,
    mut src: impl FnMut(&[usize]) -> Result<Option<usize>>,
) -> Result<Tensor> {
    let es = dtype.size();
    let zero = vec![0u8; es];
    let fill = fill.unwrap_or(&zero);
    check_nbytes(out_shape, dtype, op)?;
    let n = numel(out_shape).saturating_mul(es);
    let mut out = try_vec::<u8>(n, op)?;
    for_each_index(out_shape, |idx| {
        match src(idx)? {
            Some(s) => out.extend_from_slice(&bytes[s * es..(s + 1) * es]),
            None => out.extend_from_slice(fill),
        }
        Ok(())
    })?;
    Tensor::from_bytes(&out, out_shape, dtype).map_err(in_op(op))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remap_reverses_and_fills() {
        let t = Tensor::from_slice(&[1i32, 2, 3], &[3]).unwrap();
        let r = remap("test", &t, &[4], None, |i| Ok((i[0] < 3).then(|| 2 - i[0]))).unwrap();
        assert_eq!(r.to_vec::<i32>().unwrap(), vec![3, 2, 1, 0]);
        assert_eq!(contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
        let mut count = 0;
        for_each_index(&[2, 0, 3], |_| {
            count += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(count, 0);
    }
}
