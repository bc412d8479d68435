//! Shape composites: `reshape` (a view when the strides allow one, else a
//! contiguous copy viewed), `flatten.using_ints`, `narrow` (a slice), `chunk` (equal
//! pieces of ceil(size / chunks), the last one shorter), `contiguous`, and the
//! in-place view ops `transpose_`, `t_`, `squeeze_.dim` and `unsqueeze_`.
//!
//! The in-place view ops restride `self` with [`Tensor::set_geometry_`] and return
//! it: a functional view plus a copy would move data (and give `self` the wrong
//! strides), and the geometry is pure arithmetic on sizes and strides, the same on
//! every backend.
//!
//! Owns: these kernels and the stride arithmetic that decides whether a reshape can
//! be a view. Must not: touch tensor data (views and copies are other operators).

use super::wrap_dim;
use crate::dispatch::DispatchKeySet;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::types::MemoryFormat;
use crate::Tensor;

/// Row-major strides of a dense tensor of `sizes`.
fn dense_strides(sizes: &[i64]) -> Vec<i64> {
    let mut strides = vec![1; sizes.len()];
    for d in (0..sizes.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * sizes[d + 1].max(1);
    }
    strides
}

/// `shape` with its `-1` (at most one) replaced so that it holds `numel` elements;
/// an error when no such shape exists.
pub(super) fn infer_shape(op: &str, shape: &[i64], numel: i64) -> Result<Vec<i64>> {
    let mut inferred = None;
    let mut known: i64 = 1;
    for (i, &s) in shape.iter().enumerate() {
        match s {
            -1 if inferred.is_some() => {
                return Err(OpalError::msg(format!(
                    "{op}: only one dimension can be inferred (shape {shape:?})"
                )))
            }
            -1 => inferred = Some(i),
            s if s < 0 => {
                return Err(OpalError::msg(format!(
                    "{op}: invalid shape dimension {s} in {shape:?}"
                )))
            }
            s => {
                known = known.checked_mul(s).ok_or_else(|| {
                    OpalError::msg(format!("{op}: shape {shape:?} has too many elements"))
                })?
            }
        }
    }
    let mut out = shape.to_vec();
    match inferred {
        // With a zero among the given sizes, the -1 could be anything.
        Some(_) if known == 0 => Err(OpalError::msg(format!(
            "{op}: cannot reshape a tensor of {numel} elements into shape {shape:?}: the \
             unspecified dimension -1 can be any value and is ambiguous"
        ))),
        Some(i) if numel % known == 0 => {
            out[i] = numel / known;
            Ok(out)
        }
        None if known == numel => Ok(out),
        _ => Err(OpalError::msg(format!(
            "{op}: shape {shape:?} is invalid for input of size {numel}"
        ))),
    }
}

/// The strides under which a tensor of `sizes`/`strides` can be seen with the
/// sizes `shape` (same number of elements) without moving data, or `None` when no
/// view exists.
///
/// The old dims (size-1 dims dropped, their stride never matters) split into runs
/// that are dense among themselves: `stride[k] == stride[k + 1] * size[k + 1]`.
/// A view exists exactly when the new dims, left to right, can be grouped into
/// consecutive blocks whose products equal the runs' element counts (size-1 new dims
/// fit anywhere); inside a block the strides are the run's innermost stride times the
/// sizes to the right.
pub(super) fn view_strides(sizes: &[i64], strides: &[i64], shape: &[i64]) -> Option<Vec<i64>> {
    if sizes.contains(&0) {
        return Some(dense_strides(shape));
    }
    // (element count, innermost stride) of each dense run.
    let mut runs: Vec<(i64, i64)> = Vec::new();
    let mut prev_stride = None;
    for (&n, &st) in sizes.iter().zip(strides).filter(|(&n, _)| n != 1) {
        match runs.last_mut() {
            Some(run) if prev_stride == Some(st * n) => *run = (run.0 * n, st),
            _ => runs.push((n, st)),
        }
        prev_stride = Some(st);
    }
    let mut out = vec![1; shape.len()];
    let mut next = 0;
    for (count, inner) in runs {
        let start = next;
        let mut prod = 1;
        while prod < count {
            prod *= *shape.get(next)?;
            next += 1;
        }
        if prod != count {
            return None;
        }
        let mut st = inner;
        for d in (start..next).rev() {
            out[d] = st;
            st *= shape[d];
        }
    }
    // Whatever is left must be size-1 dims (their stride is irrelevant).
    shape[next..].iter().all(|&s| s == 1).then_some(out)
}

/// `reshape`: a view when the strides allow one (PyTorch's rule), else a contiguous
/// copy seen with the new shape.
pub(super) fn reshape(_ks: DispatchKeySet, self_: &Tensor, shape: &[i64]) -> Result<Tensor> {
    let shape = infer_shape("reshape", shape, self_.numel())?;
    if view_strides(self_.sizes(), self_.strides(), &shape).is_some() {
        return ops::view(self_, &shape);
    }
    let dense = ops::_to_copy::call(
        self_,
        None,
        None,
        None,
        None,
        false,
        Some(MemoryFormat::Contiguous),
    )?;
    ops::view(&dense, &shape)
}

/// `flatten.using_ints`: dims `start_dim..=end_dim` merged into one (a 0-d tensor
/// becomes 1-d); a view whenever `reshape` can be one.
pub(super) fn flatten_using_ints(
    _ks: DispatchKeySet,
    self_: &Tensor,
    start_dim: i64,
    end_dim: i64,
) -> Result<Tensor> {
    let op = "flatten";
    let start = wrap_dim(op, start_dim, self_.dim())?;
    let end = wrap_dim(op, end_dim, self_.dim())?;
    if start > end {
        return Err(OpalError::msg(format!(
            "flatten: start_dim ({start_dim}) cannot come after end_dim ({end_dim})"
        )));
    }
    if self_.dim() == 0 {
        return ops::reshape(self_, &[1]);
    }
    if start == end {
        return Ok(self_.clone());
    }
    let sizes = self_.sizes();
    let mut shape = sizes[..start].to_vec();
    shape.push(sizes[start..=end].iter().product());
    shape.extend_from_slice(&sizes[end + 1..]);
    ops::reshape(self_, &shape)
}

/// `narrow`: `length` elements of `dim` from `start` (negative `start` counts from
/// the end), as a view (`slice`).
pub(super) fn narrow(
    _ks: DispatchKeySet,
    self_: &Tensor,
    dim: i64,
    start: i64,
    length: i64,
) -> Result<Tensor> {
    if self_.dim() == 0 {
        return Err(OpalError::msg(
            "narrow: cannot be applied to a 0-dim tensor",
        ));
    }
    let d = wrap_dim("narrow", dim, self_.dim())?;
    let size = self_.sizes()[d];
    if length < 0 {
        return Err(OpalError::msg(format!(
            "narrow: length must be non-negative, got {length}"
        )));
    }
    if start < -size || start > size {
        return Err(OpalError::msg(format!(
            "narrow: start out of range (expected to be in range of [{}, {size}], but got {start})",
            -size
        )));
    }
    let start = if start < 0 { start + size } else { start };
    if start + length > size {
        return Err(OpalError::msg(format!(
            "narrow: start ({start}) + length ({length}) exceeds dimension size ({size})"
        )));
    }
    ops::slice_tensor::call(self_, d as i64, Some(start), Some(start + length), 1)
}

/// `chunk`: `dim` cut into pieces of ceil(size / chunks) elements (the last one
/// shorter, fewer pieces than `chunks` when they run out; `chunks` empty pieces of
/// an empty dim), each a view. Built on `narrow` rather than `split`, which has the
/// same pieces but a kernel on fewer backends.
pub(super) fn chunk(
    ks: DispatchKeySet,
    self_: &Tensor,
    chunks: i64,
    dim: i64,
) -> Result<Vec<Tensor>> {
    if self_.dim() == 0 {
        return Err(OpalError::msg(
            "chunk: expects at least a 1-dimensional tensor",
        ));
    }
    if chunks <= 0 {
        return Err(OpalError::msg(format!(
            "chunk: number of chunks must be greater than 0, got {chunks}"
        )));
    }
    let d = wrap_dim("chunk", dim, self_.dim())?;
    let size = self_.sizes()[d];
    if size == 0 {
        return (0..chunks)
            .map(|_| narrow(ks, self_, d as i64, 0, 0))
            .collect();
    }
    let piece = (size + chunks - 1) / chunks;
    (0..size)
        .step_by(piece as usize)
        .map(|start| narrow(ks, self_, d as i64, start, piece.min(size - start)))
        .collect()
}

/// `split.Tensor`: views of `split_size` along `dim`, the last one shorter when the
/// size does not divide evenly (a size-0 dim gives one empty piece).
pub(super) fn split_tensor(
    ks: DispatchKeySet,
    self_: &Tensor,
    split_size: i64,
    dim: i64,
) -> Result<Vec<Tensor>> {
    if self_.dim() == 0 {
        return Err(OpalError::msg(
            "split: expects at least a 1-dimensional tensor",
        ));
    }
    if split_size < 0 {
        return Err(OpalError::msg(format!(
            "split: split_size must be non-negative, got {split_size}"
        )));
    }
    let d = wrap_dim("split", dim, self_.dim())?;
    let size = self_.sizes()[d];
    if split_size == 0 && size != 0 {
        return Err(OpalError::msg(format!(
            "split: split_size can only be 0 if dimension size is 0, but got dimension size of {size}"
        )));
    }
    if size == 0 {
        return Ok(vec![narrow(ks, self_, d as i64, 0, 0)?]);
    }
    (0..size)
        .step_by(split_size as usize)
        .map(|start| narrow(ks, self_, d as i64, start, split_size.min(size - start)))
        .collect()
}

/// `transpose_`: swaps dims `dim0` and `dim1` of `self` in place. A 0-dim tensor
/// takes dims 0 and -1, like PyTorch, and stays as it is.
pub(super) fn transpose_(
    _ks: DispatchKeySet,
    self_: &Tensor,
    dim0: i64,
    dim1: i64,
) -> Result<Tensor> {
    let nd = self_.dim();
    let a = wrap_dim("transpose_", dim0, nd)?;
    let b = wrap_dim("transpose_", dim1, nd)?;
    if nd == 0 || a == b {
        return Ok(self_.clone());
    }
    let (mut sizes, mut strides) = (self_.sizes().to_vec(), self_.strides().to_vec());
    sizes.swap(a, b);
    strides.swap(a, b);
    self_.set_geometry_(&sizes, &strides)?;
    Ok(self_.clone())
}

/// `t_`: `transpose_(0, 1)` for a 2-d tensor; 0-d and 1-d tensors stay as they are
/// and more dims are an error (PyTorch's rule).
pub(super) fn t_(ks: DispatchKeySet, self_: &Tensor) -> Result<Tensor> {
    match self_.dim() {
        0 | 1 => Ok(self_.clone()),
        2 => transpose_(ks, self_, 0, 1),
        n => Err(OpalError::shape(format!(
            "t_() expects a tensor with <= 2 dimensions, but self is {n}D"
        ))),
    }
}

/// `squeeze_.dim`: removes `dim` from `self` when its size is 1, else leaves `self`
/// as it is. A 0-dim tensor takes dims 0 and -1 and stays as it is.
pub(super) fn squeeze_dim_(_ks: DispatchKeySet, self_: &Tensor, dim: i64) -> Result<Tensor> {
    let d = wrap_dim("squeeze_", dim, self_.dim())?;
    if self_.dim() == 0 || self_.sizes()[d] != 1 {
        return Ok(self_.clone());
    }
    let (mut sizes, mut strides) = (self_.sizes().to_vec(), self_.strides().to_vec());
    sizes.remove(d);
    strides.remove(d);
    self_.set_geometry_(&sizes, &strides)?;
    Ok(self_.clone())
}

/// `unsqueeze_`: inserts a size-1 dim into `self` at `dim` (in `-(dim()+1)..=dim()`).
/// Its stride is the extent of the dim it lands before (1 at the end), so a
/// contiguous tensor stays contiguous, as with PyTorch's `unsqueeze`.
pub(super) fn unsqueeze_(_ks: DispatchKeySet, self_: &Tensor, dim: i64) -> Result<Tensor> {
    let nd = self_.dim();
    let d = wrap_dim("unsqueeze_", dim, nd + 1)?;
    let (mut sizes, mut strides) = (self_.sizes().to_vec(), self_.strides().to_vec());
    let stride = if d < nd { sizes[d] * strides[d] } else { 1 };
    sizes.insert(d, 1);
    strides.insert(d, stride);
    self_.set_geometry_(&sizes, &strides)?;
    Ok(self_.clone())
}

/// Whether `t`'s strides are those of a dense tensor in memory format `fmt`
/// (size-1 dims ignored: their stride never matters).
pub(super) fn is_contiguous_as(t: &Tensor, fmt: MemoryFormat) -> bool {
    // The dims in order from outermost to innermost in memory.
    let order: Vec<usize> = match (fmt, t.dim()) {
        (MemoryFormat::ChannelsLast, 4) => vec![0, 2, 3, 1],
        (MemoryFormat::ChannelsLast3d, 5) => vec![0, 2, 3, 4, 1],
        (MemoryFormat::Contiguous, _) => return t.is_contiguous(),
        _ => return false,
    };
    let (sizes, strides) = (t.sizes(), t.strides());
    let mut expected = 1;
    for &d in order.iter().rev() {
        if sizes[d] != 1 && strides[d] != expected {
            return false;
        }
        expected *= sizes[d];
    }
    true
}

/// `contiguous`: `self` when it already is dense in `memory_format`, else a dense
/// copy in that format.
pub(super) fn contiguous(
    _ks: DispatchKeySet,
    self_: &Tensor,
    memory_format: MemoryFormat,
) -> Result<Tensor> {
    match memory_format {
        MemoryFormat::Preserve => Err(OpalError::msg(
            "contiguous: memory format Preserve is not supported (name the format the result \
             must be dense in)",
        )),
        MemoryFormat::ChannelsLast if self_.dim() != 4 => Err(OpalError::msg(format!(
            "contiguous: memory format ChannelsLast needs a 4-d tensor, got {} dims",
            self_.dim()
        ))),
        MemoryFormat::ChannelsLast3d if self_.dim() != 5 => Err(OpalError::msg(format!(
            "contiguous: memory format ChannelsLast3d needs a 5-d tensor, got {} dims",
            self_.dim()
        ))),
        fmt if is_contiguous_as(self_, fmt) => Ok(self_.clone()),
        fmt => ops::_to_copy::call(self_, None, None, None, None, false, Some(fmt)),
    }
}

#[cfg(test)]
mod tests {
    use super::{infer_shape, view_strides};

    #[test]
    fn infers_the_free_dimension() {
        assert_eq!(infer_shape("t", &[2, -1], 6).unwrap(), vec![2, 3]);
        assert_eq!(infer_shape("t", &[-1], 0).unwrap(), vec![0]);
        assert!(infer_shape("t", &[-1, -1], 6).is_err());
        assert!(infer_shape("t", &[4, -1], 6).is_err());
        assert!(infer_shape("t", &[0, -1], 0).is_err());
        assert!(infer_shape("t", &[5], 6).is_err());
        assert!(infer_shape("t", &[-2, 3], 6).is_err());
    }

    #[test]
    fn views_exist_exactly_for_dense_runs() {
        // Dense 2x3x4: any regrouping is a view.
        assert_eq!(
            view_strides(&[2, 3, 4], &[12, 4, 1], &[6, 4]),
            Some(vec![4, 1])
        );
        assert_eq!(view_strides(&[2, 3, 4], &[12, 4, 1], &[24]), Some(vec![1]));
        assert_eq!(
            view_strides(&[2, 3, 4], &[12, 4, 1], &[2, 1, 12]),
            Some(vec![12, 12, 1])
        );
        // Transposed 3x2 (of a dense 2x3): no flat view, but splitting a dim is one.
        assert_eq!(view_strides(&[3, 2], &[1, 3], &[6]), None);
        assert_eq!(
            view_strides(&[3, 2], &[1, 3], &[3, 1, 2]),
            Some(vec![1, 6, 3])
        );
        // Every other column of a 4x6 is evenly spaced: one run of stride 2.
        assert_eq!(view_strides(&[4, 3], &[6, 2], &[12]), Some(vec![2]));
        // Every other column of a 4x8 is not: rows stay separate runs.
        assert_eq!(
            view_strides(&[4, 3], &[8, 2], &[2, 2, 3]),
            Some(vec![16, 8, 2])
        );
        assert_eq!(view_strides(&[4, 3], &[8, 2], &[12]), None);
        // Empty tensors are always viewable (dense strides).
        assert_eq!(view_strides(&[0, 3], &[3, 1], &[3, 0]), Some(vec![1, 1]));
        // Scalars to all-ones shapes.
        assert_eq!(view_strides(&[], &[], &[1, 1]), Some(vec![1, 1]));
    }
}
