//! The functions backward formulas call, under the names `derivatives.yaml` uses
//! (PyTorch's: `sum_backward`, `mul_tensor_backward`, ...), written over Opal's
//! operators so they run on every backend. The autograd kernels generated from
//! `derivatives.yaml` call them (as `d::name`); so do composite kernels that share
//! a gradient (pooling).
//!
//! Each public function's signature is listed, in schema-like form, in
//! `opal_codegen::derivatives::helpers::IMPLEMENTED`: the generator calls them by
//! that list, and the compiler checks the two agree when the generated kernels
//! build. Formulas are for real dtypes, so PyTorch's conjugations are identities
//! here; the FFT formulas (`spectral`) are the ones written for complex tensors
//! (the autograd recorder refuses complex tensors at other nodes).
//!
//! Each formula computes what its PyTorch namesake computes (the name says which
//! derivative), so they carry no separate docs. Split by concept: `arith`,
//! `reduce`, `linalg`, `shape`, `nn`, `spectral` (the FFTs), and `overloads` (the
//! core opset's last group).
//!
//! Owns: the formulas and the small pieces formulas share (`at`, `value`,
//! `size_at`, `scalar_like`, [`TensorOptions`], and `host_constant`, which
//! composite kernels use too). Must not: import `autograd`
//! (formulas neither record nodes nor read autograd state: grad mode, nodes and
//! recording belong to the generated kernels and `crate::autograd`), or touch
//! tensor data other than through operators. `runtime/tests/module_deps.rs`
//! checks the imports.

#![allow(
    missing_docs,
    reason = "each formula is documented by its PyTorch name (module docs)"
)]

use crate::error::{OpalError, Result};
use crate::ops;
use crate::tensor::wrap_dim;
use crate::{DType, Device, Scalar, Tensor};

mod arith;
mod linalg;
mod nn;
mod overloads;
mod reduce;
mod scatter;
mod shape;
mod spectral;

pub use arith::*;
pub use linalg::*;
pub use nn::*;
pub use overloads::*;
pub use reduce::*;
pub use scatter::*;
pub use shape::*;
pub use spectral::*;

/// `wrap_dim` for formulas (messages name the backward pass).
fn wd(dim: i64, ndim: usize) -> Result<usize> {
    wrap_dim("backward", dim, ndim)
}

/// A tensor's dtype and device (`self.options()` in formulas).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TensorOptions {
    pub dtype: DType,
    pub device: Device,
}

impl TensorOptions {
    /// The options of `t`.
    pub fn of(t: &Tensor) -> TensorOptions {
        TensorOptions {
            dtype: t.dtype(),
            device: t.device(),
        }
    }
}

/// `list[i]` with a negative `i` counting from the end; out of range is an `Err`.
pub fn at<T>(list: &[T], i: i64) -> Result<&T> {
    let n = list.len() as i64;
    let j = if i < 0 { i + n } else { i };
    usize::try_from(j)
        .ok()
        .and_then(|j| list.get(j))
        .ok_or_else(|| OpalError::msg(format!("index {i} is out of range for a list of {n}")))
}

/// The value of an optional the formula requires (`*opt`, `opt.value()`).
pub fn value<T>(v: Option<T>, name: &str) -> Result<T> {
    v.ok_or_else(|| OpalError::msg(format!("backward formula: `{name}` has no value")))
}

/// `t.size(d)` with `d` wrapped.
pub fn size_at(t: &Tensor, d: i64) -> Result<i64> {
    let d = wd(d, t.dim())?;
    Ok(t.sizes()[d])
}

/// `s` as a 0-dim tensor with `like`'s dtype and device (for operators that have
/// no `Scalar` overload in Opal's set).
pub fn scalar_like(like: &Tensor, s: Scalar) -> Result<Tensor> {
    ops::full::call(&[], &s, Some(like.dtype()), None, Some(like.device()), None)
}

fn cmp(f: fn(&Tensor, &Tensor) -> Result<Tensor>, t: &Tensor, s: &Scalar) -> Result<Tensor> {
    f(t, &scalar_like(t, *s)?)
}

fn is_one(s: &Scalar) -> bool {
    matches!(s, Scalar::Int(1)) || matches!(s, Scalar::Float(f) if *f == 1.0)
}

fn zeros_as(t: &Tensor) -> Result<Tensor> {
    ops::zeros_like(t)
}

fn zeros_of(sizes: &[i64], o: TensorOptions) -> Result<Tensor> {
    ops::zeros::call(sizes, Some(o.dtype), None, Some(o.device), None)
}

/// Wrapped, sorted reduction dims (`None` or empty: every dim).
fn reduced_dims(dim: Option<&[i64]>, ndim: usize) -> Result<Vec<usize>> {
    let mut ds = match dim {
        Some(d) if !d.is_empty() => d.iter().map(|&x| wd(x, ndim)).collect::<Result<Vec<_>>>()?,
        _ => (0..ndim).collect(),
    };
    ds.sort_unstable();
    ds.dedup();
    Ok(ds)
}

/// `g` with the reduced dims of an input of rank `ndim` put back as size 1.
fn unsqueeze_reduced(
    g: &Tensor,
    dim: Option<&[i64]>,
    ndim: usize,
    keepdim: bool,
) -> Result<Tensor> {
    if keepdim || ndim == 0 {
        return Ok(g.clone());
    }
    let mut g = g.clone();
    for d in reduced_dims(dim, ndim)? {
        g = ops::unsqueeze(&g, d as i64)?;
    }
    Ok(g)
}

/// A small constant built on the host (index lists, interpolation weights) placed
/// where an operator needs it: on `device` with `dtype`. A meta device gets an
/// empty meta tensor of that shape (meta tensors hold no values to copy). Composite
/// kernels use it too.
pub(crate) fn host_constant(host: &Tensor, dtype: DType, device: Device) -> Result<Tensor> {
    if device.is_meta() {
        return Tensor::empty(host.sizes(), dtype, device);
    }
    if device.is_cpu() && host.dtype() == dtype {
        return Ok(host.clone());
    }
    ops::_to_copy::call(host, Some(dtype), None, Some(device), None, false, None)
}
