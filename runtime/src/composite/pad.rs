//! Reflection and replication padding (`reflection_pad1d/2d/3d`,
//! `replication_pad2d/3d`). Padding is separable: each padded dim is an
//! `index_select` of the source positions its output positions read, so the ops
//! run on every backend, keep every dtype, and autograd differentiates them through
//! `index_select` (whose gradient adds each output back to its source, which is
//! what the padding ops' backward kernels compute).
//!
//! Owns: the argument checks (PyTorch's), the output sizes and the source-position
//! rule of these ops. Must not: read or write tensor data itself.

use crate::dispatch::DispatchKeySet;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::{DType, Tensor};

/// How positions outside the input read it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Mirror around the edge element (the edge itself is not repeated).
    Reflect,
    /// Repeat the edge element.
    Replicate,
}

/// Source position of padded position `o` along a dim of size `n` with left pad `l`.
fn source(o: i64, n: i64, l: i64, mode: Mode) -> i64 {
    let i = o - l;
    match mode {
        Mode::Replicate => i.clamp(0, n - 1),
        Mode::Reflect if i < 0 => -i,
        Mode::Reflect if i >= n => 2 * (n - 1) - i,
        Mode::Reflect => i,
    }
}

/// Pads the last `spatial` dims of `x` by `padding` (`[left, right]` of the last
/// dim first, then of the one before, ...).
fn pad(op: &str, x: &Tensor, padding: &[i64], spatial: usize, mode: Mode) -> Result<Tensor> {
    let s = x.sizes();
    let nd = s.len();
    if padding.len() != 2 * spatial {
        return Err(OpalError::msg(format!(
            "{op}: padding size is expected to be {}, but got padding={padding:?} ({} values)",
            2 * spatial,
            padding.len()
        )));
    }
    // The batch dim may be empty, the channel and spatial dims may not.
    let non_batch_ok = nd == spatial + 1 || nd == spatial + 2;
    if !non_batch_ok || s[nd - spatial - 1..].contains(&0) {
        return Err(OpalError::shape(format!(
            "{op}: expected {}D or {}D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got input of size {s:?}",
            spatial + 1,
            spatial + 2
        )));
    }
    if x.dtype() == DType::Bool {
        return Err(OpalError::msg(format!(
            "{op}: not implemented for 'Bool' (input dtype Bool)"
        )));
    }
    let mut out = x.clone();
    for k in 0..spatial {
        let dim = nd - 1 - k;
        let (n, l, r) = (s[dim], padding[2 * k], padding[2 * k + 1]);
        if mode == Mode::Reflect && (l >= n || r >= n) {
            return Err(OpalError::msg(format!(
                "{op}: Argument #4: Padding size should be less than the corresponding input dimension, but got: padding ({l}, {r}) at dimension {dim} of input {s:?}"
            )));
        }
        let len = n + l + r;
        if len < 1 {
            return Err(OpalError::shape(format!(
                "{op}: input size {n} at dimension {dim} with padding ({l}, {r}) gives output size {len}, which is too small"
            )));
        }
        // Negative padding crops: those sources are inside the input already.
        let idx: Vec<i64> = (0..len).map(|o| source(o, n, l, mode)).collect();
        let idx = crate::derivatives::host_constant(
            &Tensor::from_vec(idx, &[len])?,
            DType::I64,
            x.device(),
        )?;
        out = ops::index_select(&out, dim as i64, &idx)?;
    }
    Ok(out)
}

pub(super) fn reflection_pad1d(_ks: DispatchKeySet, x: &Tensor, padding: &[i64]) -> Result<Tensor> {
    pad("reflection_pad1d", x, padding, 1, Mode::Reflect)
}

pub(super) fn reflection_pad2d(_ks: DispatchKeySet, x: &Tensor, padding: &[i64]) -> Result<Tensor> {
    pad("reflection_pad2d", x, padding, 2, Mode::Reflect)
}

pub(super) fn reflection_pad3d(_ks: DispatchKeySet, x: &Tensor, padding: &[i64]) -> Result<Tensor> {
    pad("reflection_pad3d", x, padding, 3, Mode::Reflect)
}

pub(super) fn replication_pad2d(
    _ks: DispatchKeySet,
    x: &Tensor,
    padding: &[i64],
) -> Result<Tensor> {
    pad("replication_pad2d", x, padding, 2, Mode::Replicate)
}

pub(super) fn replication_pad3d(
    _ks: DispatchKeySet,
    x: &Tensor,
    padding: &[i64],
) -> Result<Tensor> {
    pad("replication_pad3d", x, padding, 3, Mode::Replicate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_positions() {
        let refl: Vec<i64> = (0..7).map(|o| source(o, 4, 2, Mode::Reflect)).collect();
        assert_eq!(refl, vec![2, 1, 0, 1, 2, 3, 2]);
        let rep: Vec<i64> = (0..7).map(|o| source(o, 4, 2, Mode::Replicate)).collect();
        assert_eq!(rep, vec![0, 0, 0, 1, 2, 3, 3]);
        // A negative left pad crops.
        let crop: Vec<i64> = (0..3).map(|o| source(o, 4, -1, Mode::Reflect)).collect();
        assert_eq!(crop, vec![1, 2, 3]);
    }
}
