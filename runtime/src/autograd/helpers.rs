//! The helper functions backward formulas call, under the names `derivatives.yaml`
//! uses (PyTorch's: `sum_backward`, `mul_tensor_backward`, ...), written over Opal's
//! operators so they run on every backend; plus the small pieces generated kernels
//! share (`should_record`, `grad_at`, ...).
//!
//! Each public helper's signature is listed, in schema-like form, in
//! `opal_codegen::derivatives::helpers::IMPLEMENTED`: the generator calls them by
//! that list, and the compiler checks the two agree when the generated kernels
//! build. Formulas are for real dtypes (Opal has no complex tensors), so PyTorch's
//! conjugations are identities here.
//!
//! Each helper computes what its PyTorch namesake computes (the name says which
//! derivative), so they carry no separate docs.
//!
//! Owns: these helpers. Must not: record graph nodes or touch tensor data other
//! than through operators.

#![allow(
    missing_docs,
    reason = "each helper is documented by its PyTorch name (module docs)"
)]

use super::grad_mode::is_grad_enabled;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::rules::pool::{adaptive_window, avg_pool_windows};
use crate::tensor::wrap_dim;
use crate::{DType, Device, Layout, Scalar, Tensor};

mod overloads;
pub use overloads::*;

/// `wrap_dim` for helpers (messages name the backward pass).
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

// ---- pieces of generated kernels -------------------------------------------------

/// Whether an op with these tensor inputs must record a node: grad mode is on and
/// one of them requires grad.
#[inline]
pub fn should_record(inputs: &[&Tensor]) -> bool {
    is_grad_enabled() && inputs.iter().any(|t| t.requires_grad())
}

/// The gradient of output `i` (an undefined tensor when it got none).
pub fn grad_at(grads: &[Option<Tensor>], i: usize) -> Tensor {
    grads
        .get(i)
        .and_then(Clone::clone)
        .unwrap_or_else(Tensor::undefined)
}

/// The in-place rules of generated in-place kernels, checked before the write:
/// a leaf that requires grad is refused (see [`super::check_inplace`]); so is a
/// view, or a tensor a recorded view was taken of, since the other tensors sharing
/// its storage would change behind their recorded history (Opal does not rebase
/// views' history the way PyTorch's ADInplaceOrView does; it refuses instead of
/// giving a wrong gradient).
pub fn check_inplace(t: &Tensor, op: &str) -> Result<()> {
    super::check_inplace(t, op)?;
    if !t.owns_storage() {
        return Err(OpalError::msg(format!(
            "{op}: in-place update of a view (or of a tensor sharing another's storage) \
             while autograd records it is not supported: its base would change without \
             history; use the out-of-place op, or clone() first"
        )));
    }
    if t.autograd_meta()
        .is_some_and(|m| m.viewed.load(std::sync::atomic::Ordering::Acquire))
    {
        return Err(OpalError::msg(format!(
            "{op}: in-place update of a tensor that has views recorded by autograd is not \
             supported: the views would change without history; use the out-of-place op"
        )));
    }
    Ok(())
}

/// Marks `t` as having a view that autograd recorded (see [`check_inplace`]).
pub fn mark_viewed(t: &Tensor) {
    t.autograd_meta_or_init()
        .viewed
        .store(true, std::sync::atomic::Ordering::Release);
}

/// A copy of `t`'s current value, for a formula of an in-place op that reads
/// `self` as it was before the write (made without recording).
pub fn original(t: &Tensor) -> Result<Tensor> {
    let _no_grad = super::NoGradGuard::new();
    ops::_to_copy::call(t, None, None, None, None, false, None)
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

/// Appends the gradients of a `Tensor[]` input (`count` slots).
pub fn push_list(out: &mut Vec<Option<Tensor>>, grads: Option<Vec<Tensor>>, count: usize) {
    match grads {
        Some(gs) => {
            let n = gs.len();
            out.extend(gs.into_iter().map(|g| g.is_defined().then_some(g)));
            out.extend((n..count).map(|_| None));
        }
        None => out.extend((0..count).map(|_| None)),
    }
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

// ---- arithmetic ------------------------------------------------------------------

/// `t * s`, skipping the multiplication when `s` is 1.
pub fn maybe_multiply(t: &Tensor, s: &Scalar) -> Result<Tensor> {
    if is_one(s) {
        Ok(t.clone())
    } else {
        ops::mul_scalar(t, s)
    }
}

pub fn mul_tensor_backward(grad: &Tensor, other: &Tensor, _self_st: DType) -> Result<Tensor> {
    ops::mul_tensor(grad, other)
}

pub fn mul_tensor_backward_scalar(
    grad: &Tensor,
    other: &Scalar,
    _self_st: DType,
) -> Result<Tensor> {
    ops::mul_scalar(grad, other)
}

pub fn div_tensor_self_backward(
    grad: &Tensor,
    other: &Tensor,
    _self_st: DType,
    rounding_mode: &Option<String>,
) -> Result<Tensor> {
    if rounding_mode.is_some() {
        return zeros_as(grad);
    }
    ops::div_tensor(grad, other)
}

pub fn div_tensor_self_backward_scalar(
    grad: &Tensor,
    other: &Scalar,
    _self_st: DType,
    rounding_mode: &Option<String>,
) -> Result<Tensor> {
    if rounding_mode.is_some() {
        return zeros_as(grad);
    }
    ops::div_scalar(grad, other)
}

pub fn div_tensor_other_backward(
    grad: &Tensor,
    self_: &Tensor,
    other: &Tensor,
    rounding_mode: &Option<String>,
) -> Result<Tensor> {
    if rounding_mode.is_some() {
        return zeros_as(grad);
    }
    let q = ops::div_tensor(&ops::div_tensor(self_, other)?, other)?;
    ops::neg(&ops::mul_tensor(grad, &q)?)
}

pub fn pow_backward(grad: &Tensor, self_: &Tensor, exponent: &Scalar) -> Result<Tensor> {
    let e = exponent.to_f64();
    if e == 0.0 {
        return zeros_as(self_);
    }
    let p = ops::pow_tensor_scalar(self_, &Scalar::Float(e - 1.0))?;
    ops::mul_tensor(grad, &ops::mul_scalar(&p, &Scalar::Float(e))?)
}

pub fn pow_backward_self(grad: &Tensor, self_: &Tensor, exponent: &Tensor) -> Result<Tensor> {
    let p = ops::pow_tensor_tensor(self_, &cmp(ops::sub_tensor, exponent, &Scalar::Int(1))?)?;
    let g = ops::mul_tensor(grad, &ops::mul_tensor(exponent, &p)?)?;
    let zero = ops::eq_scalar(exponent, &Scalar::Float(0.0))?;
    ops::masked_fill_scalar(&g, &zero, &Scalar::Int(0))
}

pub fn pow_backward_exponent(
    grad: &Tensor,
    self_: &Tensor,
    exponent: &Tensor,
    result: &Tensor,
) -> Result<Tensor> {
    let at_zero = ops::logical_and(
        &cmp(ops::ge_tensor, exponent, &Scalar::Int(0))?,
        &ops::eq_scalar(self_, &Scalar::Int(0))?,
    )?;
    let g = ops::mul_tensor(grad, &ops::mul_tensor(result, &ops::log(self_)?)?)?;
    ops::masked_fill_scalar(&g, &at_zero, &Scalar::Int(0))
}

pub fn masked_fill_inplace_if_safe(t: &Tensor, mask: &Tensor, value: &Scalar) -> Result<Tensor> {
    ops::masked_fill_scalar(t, mask, value)
}

pub fn atan2_backward(
    grad: &Tensor,
    self_: &Tensor,
    other: &Tensor,
    mask: &[bool],
) -> Result<(Tensor, Tensor)> {
    let denom = ops::add_tensor(
        &ops::mul_tensor(self_, self_)?,
        &ops::mul_tensor(other, other)?,
    )?;
    let recip = ops::reciprocal(&denom)?;
    let gs = if mask.first() == Some(&true) {
        ops::mul_tensor(&ops::mul_tensor(grad, other)?, &recip)?
    } else {
        Tensor::undefined()
    };
    let go = if mask.get(1) == Some(&true) {
        ops::mul_tensor(&ops::mul_tensor(grad, &ops::neg(self_)?)?, &recip)?
    } else {
        Tensor::undefined()
    };
    Ok((gs, go))
}

pub fn clamp_backward(
    grad: &Tensor,
    self_: &Tensor,
    min: &Option<Scalar>,
    max: &Option<Scalar>,
) -> Result<Tensor> {
    let keep = match (min, max) {
        (Some(lo), Some(hi)) => ops::logical_and(
            &cmp(ops::ge_tensor, self_, lo)?,
            &cmp(ops::le_tensor, self_, hi)?,
        )?,
        (Some(lo), None) => cmp(ops::ge_tensor, self_, lo)?,
        (None, Some(hi)) => cmp(ops::le_tensor, self_, hi)?,
        (None, None) => return Ok(grad.clone()),
    };
    ops::where_self(&keep, grad, &zeros_as(grad)?)
}

pub fn log1p_backward(grad: &Tensor, self_: &Tensor) -> Result<Tensor> {
    ops::div_tensor(grad, &ops::add_scalar(self_, &Scalar::Int(1))?)
}

pub fn infinitely_differentiable_silu_backward(grad: &Tensor, self_: &Tensor) -> Result<Tensor> {
    let s = ops::sigmoid(self_)?;
    // grad * s * (1 + x * (1 - s))
    let one_minus = ops::add_scalar(&ops::neg(&s)?, &Scalar::Int(1))?;
    let inner = ops::add_scalar(&ops::mul_tensor(self_, &one_minus)?, &Scalar::Int(1))?;
    ops::mul_tensor(&ops::mul_tensor(grad, &s)?, &inner)
}

// ---- reductions ------------------------------------------------------------------

pub fn sum_backward(
    grad: &Tensor,
    sizes: &[i64],
    dim: &Option<Vec<i64>>,
    keepdim: bool,
) -> Result<Tensor> {
    let g = unsqueeze_reduced(grad, dim.as_deref(), sizes.len(), keepdim)?;
    ops::expand(&g, sizes)
}

pub fn mean_backward(
    grad: &Tensor,
    sizes: &[i64],
    dim: &Option<Vec<i64>>,
    numel: i64,
    keepdim: bool,
) -> Result<Tensor> {
    let all = dim.as_ref().is_none_or(|d| d.is_empty());
    let n = if all {
        numel
    } else {
        reduced_dims(dim.as_deref(), sizes.len())?
            .iter()
            .map(|&d| sizes[d])
            .product()
    };
    let g = sum_backward(grad, sizes, dim, keepdim)?;
    cmp(ops::div_tensor, &g, &Scalar::Int(n))
}

pub fn prod_backward(grad: &Tensor, self_: &Tensor, result: &Tensor) -> Result<Tensor> {
    if self_.numel() == 0 {
        return zeros_as(self_);
    }
    // d prod / d x_i = prod of the others.
    let flat = ops::reshape(self_, &[-1])?;
    let others = ops::reshape(&product_of_others(&flat, 0)?, self_.sizes())?;
    let _ = result;
    ops::mul_tensor(&ops::expand(grad, self_.sizes())?, &others)
}

/// Cumulative product along `dim`, as exp(cumsum(log|x|)) with signs and zeros
/// tracked separately (no cumprod kernel is needed).
fn cumprod(x: &Tensor, dim: i64) -> Result<Tensor> {
    let zero = ops::eq_scalar(x, &Scalar::Int(0))?;
    let safe = ops::masked_fill_scalar(x, &zero, &Scalar::Int(1))?;
    let mag = ops::exp(&ops::cumsum(&ops::log(&ops::abs(&safe)?)?, dim)?)?;
    let neg = cmp(ops::lt_tensor, &safe, &Scalar::Int(0))?;
    let neg_count = ops::cumsum::call(&neg, dim, Some(DType::I64))?;
    let odd = cmp(ops::remainder_tensor, &neg_count, &Scalar::Int(2))?;
    let sign = ops::add_scalar(&ops::mul_scalar(&odd, &Scalar::Int(-2))?, &Scalar::Int(1))?;
    let zeros_seen = ops::cumsum::call(&zero, dim, Some(DType::I64))?;
    let any_zero = cmp(ops::gt_tensor, &zeros_seen, &Scalar::Int(0))?;
    let v = ops::mul_tensor(
        &mag,
        &ops::_to_copy::call(&sign, Some(x.dtype()), None, None, None, false, None)?,
    )?;
    ops::masked_fill_scalar(&v, &any_zero, &Scalar::Int(0))
}

/// The product of every element of `x` along `dim` but the one at each position:
/// the product of those before it times those after it, which needs no division
/// (zeros are fine).
fn product_of_others(x: &Tensor, dim: usize) -> Result<Tensor> {
    let d = dim as i64;
    let n = x.sizes()[dim];
    let one = ops::ones_like(&ops::narrow(x, d, 0, 1)?)?;
    let before = ops::cat::call(&[one.clone(), ops::narrow(x, d, 0, n - 1)?], d)?;
    let after = ops::cat::call(&[ops::narrow(x, d, 1, n - 1)?, one], d)?;
    let excl_before = cumprod(&before, d)?;
    let excl_after = ops::flip(&cumprod(&ops::flip(&after, &[d])?, d)?, &[d])?;
    ops::mul_tensor(&excl_before, &excl_after)
}

pub fn restore_reduced_dims(t: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
    if keepdim {
        return Ok(t.clone());
    }
    let ndim = t.dim() + if dim.is_empty() { 0 } else { dim.len() };
    let all_dims: Option<&[i64]> = if dim.is_empty() { None } else { Some(dim) };
    unsqueeze_reduced(t, all_dims, ndim, false)
}

pub fn scale_grad_by_count(grad: &Tensor, mask: &Tensor, dim: &[i64]) -> Result<Tensor> {
    let d: Option<&[i64]> = if dim.is_empty() { None } else { Some(dim) };
    let count = ops::sum_dim_intlist::call(mask, d, true, Some(grad.dtype()))?;
    ops::mul_tensor(&ops::div_tensor(grad, &count)?, mask)
}

fn reduced_count(sizes: &[i64], dim: Option<&[i64]>) -> Result<i64> {
    Ok(reduced_dims(dim, sizes.len())?
        .iter()
        .map(|&d| sizes[d])
        .product())
}

pub fn var_backward(
    grad: &Tensor,
    self_: &Tensor,
    dim: &Option<Vec<i64>>,
    correction: &Option<Scalar>,
    keepdim: bool,
) -> Result<Tensor> {
    let n = reduced_count(self_.sizes(), dim.as_deref())? as f64;
    let c = correction.as_ref().map_or(1.0, Scalar::to_f64);
    let g = unsqueeze_reduced(grad, dim.as_deref(), self_.dim(), keepdim)?;
    let mean = ops::mean_dim::call(self_, dim.as_deref(), true, None)?;
    let centered = ops::sub_tensor(self_, &mean)?;
    let scale = 2.0 / (n - c).max(0.0);
    ops::mul_scalar(&ops::mul_tensor(&g, &centered)?, &Scalar::Float(scale))
}

pub fn std_backward(
    result: &Tensor,
    grad: &Tensor,
    self_: &Tensor,
    dim: &Option<Vec<i64>>,
    correction: &Option<Scalar>,
    keepdim: bool,
) -> Result<Tensor> {
    let g = ops::div_tensor(grad, &ops::mul_scalar(result, &Scalar::Int(2))?)?;
    let g = ops::masked_fill_scalar(
        &g,
        &ops::eq_scalar(result, &Scalar::Int(0))?,
        &Scalar::Int(0),
    )?;
    var_backward(&g, self_, dim, correction, keepdim)
}

pub fn logsumexp_backward(
    grad: &Tensor,
    self_: &Tensor,
    result: &Tensor,
    dim: &[i64],
    keepdim: bool,
) -> Result<Tensor> {
    let d: Option<&[i64]> = if dim.is_empty() { None } else { Some(dim) };
    let g = unsqueeze_reduced(grad, d, self_.dim(), keepdim)?;
    let r = unsqueeze_reduced(result, d, self_.dim(), keepdim)?;
    ops::mul_tensor(&g, &ops::exp(&ops::sub_tensor(self_, &r)?)?)
}

pub fn linalg_vector_norm_backward(
    grad: &Tensor,
    self_: &Tensor,
    ord: &Scalar,
    result: &Tensor,
    dim: &Option<Vec<i64>>,
    keepdim: bool,
) -> Result<Tensor> {
    let p = ord.to_f64();
    let g = unsqueeze_reduced(grad, dim.as_deref(), self_.dim(), keepdim)?;
    let r = unsqueeze_reduced(result, dim.as_deref(), self_.dim(), keepdim)?;
    let zero = Scalar::Int(0);
    if p == 0.0 {
        return zeros_as(self_);
    }
    if p == 1.0 {
        return ops::mul_tensor(&ops::sign(self_)?, &g);
    }
    if p.is_infinite() {
        // The gradient is shared by the entries that reach the norm.
        let hit = ops::eq_tensor(&ops::abs(self_)?, &r)?;
        let hit_f = ops::_to_copy::call(&hit, Some(self_.dtype()), None, None, None, false, None)?;
        let d: Option<&[i64]> = dim.as_deref();
        let count = ops::sum_dim_intlist::call(&hit_f, d, true, None)?;
        let share = ops::div_tensor(&ops::mul_tensor(&ops::sign(self_)?, &hit_f)?, &count)?;
        return ops::mul_tensor(&share, &g);
    }
    if p == 2.0 {
        let scale = ops::div_tensor(&g, &r)?;
        let scale = ops::masked_fill_scalar(&scale, &ops::eq_scalar(&r, &zero)?, &zero)?;
        return ops::mul_tensor(self_, &scale);
    }
    // x * |x|^(p-2) * g / r^(p-1)
    let num = ops::mul_tensor(
        self_,
        &ops::pow_tensor_scalar(&ops::abs(self_)?, &Scalar::Float(p - 2.0))?,
    )?;
    let scale = ops::div_tensor(&g, &ops::pow_tensor_scalar(&r, &Scalar::Float(p - 1.0))?)?;
    let scale = ops::masked_fill_scalar(&scale, &ops::eq_scalar(&r, &zero)?, &zero)?;
    ops::mul_tensor(&num, &scale)
}

pub fn cumsum_backward(grad: &Tensor, dim: i64) -> Result<Tensor> {
    if grad.dim() == 0 || grad.numel() <= 1 {
        return Ok(grad.clone());
    }
    let d = wd(dim, grad.dim())? as i64;
    ops::flip(&ops::cumsum(&ops::flip(grad, &[d])?, d)?, &[d])
}

// ---- linear algebra --------------------------------------------------------------

pub fn mm_mat1_backward(
    grad: &Tensor,
    mat2: &Tensor,
    sizes: &[i64],
    strides: &[i64],
    _layout: Layout,
    alpha: &Scalar,
) -> Result<Tensor> {
    if column_major(sizes, strides) {
        // mat1 is a transposed matrix: give its gradient the same layout, so that
        // the gradient comes out of the transpose's backward contiguous.
        return maybe_multiply(&ops::t(&ops::mm(mat2, &ops::t(grad)?)?)?, alpha);
    }
    maybe_multiply(&ops::mm(grad, &ops::t(mat2)?)?, alpha)
}

pub fn mm_mat2_backward(
    grad: &Tensor,
    mat1: &Tensor,
    sizes: &[i64],
    strides: &[i64],
    _layout: Layout,
    alpha: &Scalar,
) -> Result<Tensor> {
    if column_major(sizes, strides) {
        // mat2 is a transposed matrix (a linear layer's `weight.t()`): the same
        // product, computed transposed, has mat2's layout, so the weight's gradient
        // comes out of the transpose's backward contiguous.
        return maybe_multiply(&ops::t(&ops::mm(&ops::t(grad)?, mat1)?)?, alpha);
    }
    maybe_multiply(&ops::mm(&ops::t(mat1)?, grad)?, alpha)
}

/// True when a 2-d matrix of `sizes` and `strides` is stored column by column (a
/// transposed contiguous matrix) and not also row by row.
fn column_major(sizes: &[i64], strides: &[i64]) -> bool {
    matches!((sizes, strides), ([r, c], [1, cs]) if *r > 1 && *c > 1 && cs == r)
}

// ---- shapes ----------------------------------------------------------------------

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

// ---- element-wise, losses and pooling (helpers for ops Opal's set lacks) -----------

/// A host-built `rows x cols` matrix in `like`'s dtype and device (shape only on
/// a meta device).
fn matrix_like(like: &Tensor, values: &[f64], rows: i64, cols: i64) -> Result<Tensor> {
    let m = Tensor::from_slice(values, &[rows, cols])?;
    crate::composite::host_constant(&m, like.dtype(), like.device())
}

pub fn nan_to_num_backward(grad: &Tensor, self_: &Tensor) -> Result<Tensor> {
    let nan = ops::isnan(self_)?;
    let inf = cmp(
        ops::eq_tensor,
        &ops::abs(self_)?,
        &Scalar::Float(f64::INFINITY),
    )?;
    let bad = ops::logical_or(&nan, &inf)?;
    ops::masked_fill_scalar(grad, &bad, &Scalar::Int(0))
}

pub fn elu_backward(
    grad: &Tensor,
    alpha: &Scalar,
    scale: &Scalar,
    input_scale: &Scalar,
    _is_result: bool,
    self_: &Tensor,
) -> Result<Tensor> {
    let (a, s, i) = (alpha.to_f64(), scale.to_f64(), input_scale.to_f64());
    // x > 0: scale; else scale * input_scale * alpha * exp(x * input_scale).
    let neg = ops::mul_scalar(
        &ops::exp(&ops::mul_scalar(self_, &Scalar::Float(i))?)?,
        &Scalar::Float(s * i * a),
    )?;
    let pos = ops::full_like::call(self_, &Scalar::Float(s), None, None, None, None, None)?;
    let d = ops::where_self(&cmp(ops::gt_tensor, self_, &Scalar::Int(0))?, &pos, &neg)?;
    ops::mul_tensor(grad, &d)
}

/// `grad_input = A_h^T @ grad @ A_w` for a 2-d op that is linear and separable:
/// `out = A_h @ x @ A_w^T` over the last two dims (average pooling, nearest
/// upsampling), with `a_h` `oh x h` and `a_w` `ow x w` given row by row.
fn separable_backward(grad: &Tensor, a_h: &[f64], a_w: &[f64], h: i64, w: i64) -> Result<Tensor> {
    let (oh, ow) = (grad.sizes()[grad.dim() - 2], grad.sizes()[grad.dim() - 1]);
    let ah = matrix_like(grad, a_h, oh, h)?;
    let aw = matrix_like(grad, a_w, ow, w)?;
    let left = ops::matmul(&ops::t(&ah)?, grad)?;
    ops::matmul(&left, &aw)
}

#[allow(clippy::too_many_arguments)]
pub fn avg_pool2d_backward(
    grad: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    _ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: &Option<i64>,
) -> Result<Tensor> {
    let two = |v: &[i64], d: i64| -> (i64, i64) {
        match v {
            [] => (d, d),
            [a] => (*a, *a),
            [a, b, ..] => (*a, *b),
        }
    };
    let (kh, kw) = two(kernel_size, 1);
    let (sh, sw) = if stride.is_empty() {
        (kh, kw)
    } else {
        two(stride, 1)
    };
    let (ph, pw) = two(padding, 0);
    let nd = self_.dim();
    let (h, w) = (self_.sizes()[nd - 2], self_.sizes()[nd - 1]);
    let (oh, ow) = (grad.sizes()[nd - 2], grad.sizes()[nd - 1]);
    let rows = avg_pool_windows(h, oh, kh, sh, ph, count_include_pad);
    let cols = avg_pool_windows(w, ow, kw, sw, pw, count_include_pad);
    let mut a_h = vec![0.0; (oh * h) as usize];
    let mut a_w = vec![0.0; (ow * w) as usize];
    // With a divisor override the divisor is not separable: put it all in a_h.
    for (o, &(s, e, div)) in rows.iter().enumerate() {
        let d = match *divisor_override {
            Some(d) => d as f64,
            None => div as f64,
        };
        for i in s..e {
            a_h[o * h as usize + i as usize] = 1.0 / d;
        }
    }
    for (o, &(s, e, div)) in cols.iter().enumerate() {
        let d = if divisor_override.is_some() {
            1.0
        } else {
            div as f64
        };
        for i in s..e {
            a_w[o * w as usize + i as usize] = 1.0 / d;
        }
    }
    separable_backward(grad, &a_h, &a_w, h, w)
}

pub fn _adaptive_avg_pool2d_backward(grad: &Tensor, self_: &Tensor) -> Result<Tensor> {
    let nd = self_.dim();
    let (h, w) = (self_.sizes()[nd - 2], self_.sizes()[nd - 1]);
    let (oh, ow) = (grad.sizes()[nd - 2], grad.sizes()[nd - 1]);
    let weights = |n: i64, out: i64| -> Vec<f64> {
        let mut a = vec![0.0; (out * n) as usize];
        for o in 0..out {
            let (s, e) = adaptive_window(o, n, out);
            for i in s..e {
                a[(o * n + i) as usize] = 1.0 / (e - s) as f64;
            }
        }
        a
    };
    separable_backward(grad, &weights(h, oh), &weights(w, ow), h, w)
}

pub fn upsample_nearest2d_backward(
    grad: &Tensor,
    output_size: &[i64],
    input_size: &[i64],
    scales_h: &Option<f64>,
    scales_w: &Option<f64>,
) -> Result<Tensor> {
    let nd = input_size.len();
    if nd < 2 || output_size.len() != 2 {
        return Err(OpalError::msg("upsample_nearest2d backward: bad sizes"));
    }
    let (h, w) = (input_size[nd - 2], input_size[nd - 1]);
    let (oh, ow) = (output_size[0], output_size[1]);
    let weights = |n: i64, out: i64, scale: Option<f64>| -> Vec<f64> {
        let ratio = match scale {
            Some(s) if s > 0.0 => 1.0 / s,
            _ => n as f64 / out as f64,
        };
        let mut a = vec![0.0; (out * n) as usize];
        for o in 0..out {
            let src = ((o as f64 * ratio).floor() as i64).min(n - 1);
            a[(o * n + src) as usize] = 1.0;
        }
        a
    };
    separable_backward(
        grad,
        &weights(h, oh, *scales_h),
        &weights(w, ow, *scales_w),
        h,
        w,
    )
}

#[allow(clippy::too_many_arguments)]
pub fn native_batch_norm_backward(
    grad: &Tensor,
    input: &Tensor,
    weight: &Option<Tensor>,
    running_mean: &Option<Tensor>,
    running_var: &Option<Tensor>,
    save_mean: &Tensor,
    save_invstd: &Tensor,
    training: bool,
    eps: f64,
    mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    let nd = input.dim();
    let dims: Vec<i64> = (0..nd as i64).filter(|&d| d != 1).collect();
    // Per-channel statistics, shaped to broadcast over the input.
    let mut shape = vec![1i64; nd];
    if nd > 1 {
        shape[1] = input.sizes()[1];
    }
    let (mean, invstd) = if training {
        (save_mean.clone(), save_invstd.clone())
    } else {
        let (Some(rm), Some(rv)) = (running_mean, running_var) else {
            return Err(OpalError::msg(
                "native_batch_norm backward: evaluation mode needs running_mean and running_var",
            ));
        };
        let invstd = ops::rsqrt(&ops::add_scalar(rv, &Scalar::Float(eps))?)?;
        (rm.clone(), invstd)
    };
    let mean_b = ops::reshape(&mean, &shape)?;
    let invstd_b = ops::reshape(&invstd, &shape)?;
    let xhat = ops::mul_tensor(&ops::sub_tensor(input, &mean_b)?, &invstd_b)?;
    let sum_g = ops::sum_dim_intlist::call(grad, Some(&dims), false, None)?;
    let sum_gx =
        ops::sum_dim_intlist::call(&ops::mul_tensor(grad, &xhat)?, Some(&dims), false, None)?;
    let gamma = match weight {
        Some(w) => ops::reshape(w, &shape)?,
        None => scalar_like(input, Scalar::Int(1))?,
    };
    let gi = if mask.first() == Some(&true) {
        if training {
            let n: i64 = dims.iter().map(|&d| input.sizes()[d as usize]).product();
            let n = n as f64;
            // (gamma * invstd / n) * (n * g - sum(g) - xhat * sum(g * xhat))
            let t = ops::sub_tensor(
                &ops::sub_tensor(
                    &ops::mul_scalar(grad, &Scalar::Float(n))?,
                    &ops::reshape(&sum_g, &shape)?,
                )?,
                &ops::mul_tensor(&xhat, &ops::reshape(&sum_gx, &shape)?)?,
            )?;
            let scale = ops::mul_scalar(
                &ops::mul_tensor(&gamma, &invstd_b)?,
                &Scalar::Float(1.0 / n),
            )?;
            ops::mul_tensor(&t, &scale)?
        } else {
            ops::mul_tensor(grad, &ops::mul_tensor(&gamma, &invstd_b)?)?
        }
    } else {
        Tensor::undefined()
    };
    let gw = if mask.get(1) == Some(&true) {
        sum_gx
    } else {
        Tensor::undefined()
    };
    let gb = if mask.get(2) == Some(&true) {
        sum_g
    } else {
        Tensor::undefined()
    };
    Ok((gi, gw, gb))
}

/// The reduction's scale of an element-wise loss gradient: `grad` expanded, and
/// divided by the element count for `Mean` (1).
fn loss_grad_scale(grad: &Tensor, like: &Tensor, reduction: i64) -> Result<Tensor> {
    let g = ops::expand(grad, like.sizes())?;
    if reduction == 1 {
        ops::mul_scalar(&g, &Scalar::Float(1.0 / like.numel().max(1) as f64))
    } else {
        Ok(g)
    }
}

fn times_weight(t: Tensor, weight: &Option<Tensor>) -> Result<Tensor> {
    match weight {
        Some(w) => ops::mul_tensor(&t, w),
        None => Ok(t),
    }
}

pub fn binary_cross_entropy_backward(
    grad: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: &Option<Tensor>,
    reduction: i64,
) -> Result<Tensor> {
    // (x - y) / max(x (1 - x), eps)
    let one_minus = ops::add_scalar(&ops::neg(self_)?, &Scalar::Int(1))?;
    let denom = ops::clamp::call(
        &ops::mul_tensor(self_, &one_minus)?,
        Some(&Scalar::Float(1e-12)),
        None,
    )?;
    let d = ops::div_tensor(&ops::sub_tensor(self_, target)?, &denom)?;
    let g = ops::mul_tensor(&loss_grad_scale(grad, self_, reduction)?, &d)?;
    times_weight(g, weight)
}

pub fn binary_cross_entropy_target_backward(
    grad: &Tensor,
    self_: &Tensor,
    _target: &Tensor,
    weight: &Option<Tensor>,
    reduction: i64,
) -> Result<Tensor> {
    // -(log x - log(1 - x)), each log clamped at -100 as the forward is.
    let lo = Scalar::Int(-100);
    let log_x = ops::clamp::call(&ops::log(self_)?, Some(&lo), None)?;
    let log_1mx = ops::clamp::call(&ops::log1p(&ops::neg(self_)?)?, Some(&lo), None)?;
    let d = ops::neg(&ops::sub_tensor(&log_x, &log_1mx)?)?;
    let g = ops::mul_tensor(&loss_grad_scale(grad, self_, reduction)?, &d)?;
    times_weight(g, weight)
}

pub fn gelu_double_backward(
    grad: &Tensor,
    grad_output: &Tensor,
    self_: &Tensor,
    approximate: &str,
) -> Result<Tensor> {
    let x = self_;
    let x2 = ops::mul_tensor(x, x)?;
    let second = if approximate == "tanh" {
        // f'' = (1 - t^2) * (u' + x/2 * (u'' - 2 t u'^2)), u = k (x + c x^3)
        let k = (2.0 / std::f64::consts::PI).sqrt();
        let c = 0.044715;
        let u = ops::mul_scalar(
            &ops::add_tensor(
                x,
                &ops::mul_scalar(&ops::mul_tensor(&x2, x)?, &Scalar::Float(c))?,
            )?,
            &Scalar::Float(k),
        )?;
        let t = ops::tanh(&u)?;
        let du = ops::mul_scalar(
            &ops::add_scalar(
                &ops::mul_scalar(&x2, &Scalar::Float(3.0 * c))?,
                &Scalar::Int(1),
            )?,
            &Scalar::Float(k),
        )?;
        let ddu = ops::mul_scalar(x, &Scalar::Float(6.0 * k * c))?;
        let sech2 = ops::add_scalar(&ops::neg(&ops::mul_tensor(&t, &t)?)?, &Scalar::Int(1))?;
        let inner = ops::sub_tensor(
            &ddu,
            &ops::mul_scalar(
                &ops::mul_tensor(&t, &ops::mul_tensor(&du, &du)?)?,
                &Scalar::Int(2),
            )?,
        )?;
        let bracket = ops::add_tensor(
            &du,
            &ops::mul_scalar(&ops::mul_tensor(x, &inner)?, &Scalar::Float(0.5))?,
        )?;
        ops::mul_tensor(&sech2, &bracket)?
    } else {
        // f'' = phi(x) (2 - x^2), phi the standard normal density.
        let phi = ops::mul_scalar(
            &ops::exp(&ops::mul_scalar(&x2, &Scalar::Float(-0.5))?)?,
            &Scalar::Float(1.0 / (2.0 * std::f64::consts::PI).sqrt()),
        )?;
        ops::mul_tensor(&phi, &ops::add_scalar(&ops::neg(&x2)?, &Scalar::Int(2))?)?
    };
    ops::mul_tensor(&ops::mul_tensor(grad, grad_output)?, &second)
}

pub fn softmax_double_backward(
    grad: &Tensor,
    grad_output: &Tensor,
    dim: i64,
    output: &Tensor,
) -> Result<Tensor> {
    // d/dy of y * (go - sum(go y)): go * (g - sum(g y)) - g * sum(go y)
    let d = [dim];
    let s_gy = ops::sum_dim_intlist::call(&ops::mul_tensor(grad, output)?, Some(&d), true, None)?;
    let s_goy =
        ops::sum_dim_intlist::call(&ops::mul_tensor(grad_output, output)?, Some(&d), true, None)?;
    ops::sub_tensor(
        &ops::mul_tensor(grad_output, &ops::sub_tensor(grad, &s_gy)?)?,
        &ops::mul_tensor(grad, &s_goy)?,
    )
}

pub fn mse_loss_double_backward_grad_output(
    grad: &Tensor,
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    reduction: i64,
) -> Result<Tensor> {
    let d = ops::mul_scalar(
        &ops::mul_tensor(grad, &ops::sub_tensor(self_, target)?)?,
        &Scalar::Int(2),
    )?;
    match reduction {
        0 => Ok(d),
        1 => ops::mul_scalar(
            &ops::sum(&d)?,
            &Scalar::Float(1.0 / self_.numel().max(1) as f64),
        ),
        _ => ops::sum(&d),
    }
    .and_then(|g| {
        if g.sizes() == grad_output.sizes() {
            Ok(g)
        } else {
            ops::reshape(&g, grad_output.sizes())
        }
    })
}

pub fn mse_loss_double_backward(grad: &Tensor, self_: &Tensor, reduction: i64) -> Result<Tensor> {
    let g = ops::mul_scalar(&ops::expand(grad, self_.sizes())?, &Scalar::Int(2))?;
    if reduction == 1 {
        ops::mul_scalar(&g, &Scalar::Float(1.0 / self_.numel().max(1) as f64))
    } else {
        Ok(g)
    }
}

pub fn max_pool_double_backward(grad: &Tensor, indices: &Tensor, dims: i64) -> Result<Tensor> {
    // Gather `grad` (input-shaped) at each output's argmax over the last `dims` dims.
    let nd = grad.dim() as i64;
    let g = ops::flatten_using_ints::call(grad, nd - dims, -1)?;
    let i = ops::flatten_using_ints::call(indices, nd - dims, -1)?;
    let out = ops::gather(&g, nd - dims, &i)?;
    ops::reshape(&out, indices.sizes())
}

pub fn embedding_dense_double_backward_symint(
    grad: &Tensor,
    indices: &Tensor,
    padding_idx: i64,
) -> Result<Tensor> {
    let flat = ops::reshape(indices, &[-1])?;
    let rows = ops::index_select(grad, 0, &flat)?;
    let mut shape = indices.sizes().to_vec();
    shape.push(grad.sizes().get(1).copied().unwrap_or(1));
    let rows = ops::reshape(&rows, &shape)?;
    if padding_idx < 0 {
        return Ok(rows);
    }
    let pad = ops::unsqueeze(
        &cmp(ops::eq_tensor, indices, &Scalar::Int(padding_idx))?,
        -1,
    )?;
    ops::masked_fill_scalar(&rows, &pad, &Scalar::Int(0))
}
