//! Element-wise CPU kernels: unary math, binary arithmetic, activations and their
//! backward functions, ternary fused ops, selection (where/masked_fill/clamp).
//!
//! Owns: the kernels and the small drivers they share (`unary_driver`,
//! `binary_shape`, the `float_result` promotion rule). Must not: implement
//! layout iteration (that is [`crate::iter`]) or out= rules ([`crate::out`]).
//!
//! Every op comes in three forms, named like the schema: `op(..) -> Tensor`
//! (functional), `op_out(.., out) -> Tensor` (writes `out`, returns it), and
//! `op_(self_, ..) -> Tensor` (in-place, returns `self_`).

pub mod activation;
pub mod backward;
pub mod binary;
pub mod overloads;
pub mod scalar_binary;
pub mod select;
pub mod ternary;
mod transcendental;
pub mod unary;

use crate::copy::to_dtype;
use crate::dtype_dispatch::Elem;
use crate::nn::io::in_op;
use crate::out::{write_result, Dest};
use opal::dtype::ResultType;
use opal::{DType, OpalError, Result, Scalar, Tensor};
use std::borrow::Cow;

/// The dtype a floating-only op computes in: floats keep their dtype, integers and
/// bool go to the default float dtype (PyTorch's int->float promotion).
pub(crate) fn float_result(d: DType, op: &str) -> Result<DType> {
    if d.is_floating_point() {
        Ok(d)
    } else if d.is_complex() {
        Err(OpalError::not_implemented(
            &format!("{op} (complex)"),
            "CPU",
        ))
    } else {
        Ok(opal::dtype::default_dtype())
    }
}

/// The dtype of an op defined on floats and complex numbers (true division,
/// reciprocal): complex keeps its dtype, the rest as [`float_result`].
pub(crate) fn float_or_complex_result(d: DType, op: &str) -> Result<DType> {
    if d.is_complex() {
        Ok(d)
    } else {
        float_result(d, op)
    }
}

/// Result dtype of a binary op between two tensors.
#[inline]
pub(crate) fn result_type2(a: &Tensor, b: &Tensor) -> Result<DType> {
    ResultType::of_tensors(&[a, b])
}

/// Result dtype of a tensor and a Python-style scalar.
pub(crate) fn result_type_scalar(a: &Tensor, s: &Scalar) -> Result<DType> {
    let mut r = ResultType::new();
    r.add_tensor(a).scalar(s);
    r.finish()
}

/// The broadcast shape of two operands; borrows when they already agree so the
/// common same-shape case allocates nothing extra.
pub(crate) fn binary_shape<'a>(a: &'a Tensor, b: &Tensor, op: &str) -> Result<Cow<'a, [i64]>> {
    if crate::iter::same_sizes(a.sizes(), b.sizes()) {
        return Ok(Cow::Borrowed(a.sizes()));
    }
    opal::rules::broadcast_shapes(op, &[a.sizes(), b.sizes()]).map(Cow::Owned)
}

/// `t` itself (borrowed, no refcount traffic) when it has `dtype`, else a cast copy.
pub(crate) fn cast_cow(t: &Tensor, dtype: DType) -> Result<Cow<'_, Tensor>> {
    if t.dtype() == dtype {
        Ok(Cow::Borrowed(t))
    } else {
        to_dtype(t, dtype).map(Cow::Owned)
    }
}

/// A zero-dim CPU tensor holding `s` converted to `dtype`.
pub(crate) fn scalar_tensor(s: &Scalar, dtype: DType) -> Result<Tensor> {
    let t = crate::out::empty(&[], dtype)?;
    if dtype.is_complex() {
        crate::dispatch_complex!(dtype, "scalar_tensor", |T, R| {
            let p = t.data_ptr::<T>()?;
            // SAFETY: `t` is a fresh zero-dim tensor holding exactly one T at `p`.
            unsafe { *p = <T as opal::Element>::from_scalar(s) };
            Ok(())
        })?;
        return Ok(t);
    }
    crate::dispatch_all!(dtype, "scalar_tensor", |T| {
        let p = t.data_ptr::<T>()?;
        // SAFETY: `t` is a fresh zero-dim tensor holding exactly one T at `p`.
        unsafe { *p = scalar_as::<T>(s) };
        Ok(())
    })?;
    Ok(t)
}

/// Runs a same-dtype unary kernel `k(out, input)` where `input` is `self_` cast to
/// `compute` and the result has dtype `result`.
pub(crate) fn unary_driver(
    self_: &Tensor,
    dest: Dest<'_>,
    compute: DType,
    result: DType,
    op: &str,
    k: impl FnOnce(&Tensor, &Tensor) -> Result<()>,
) -> Result<Tensor> {
    let input = cast_cow(self_, compute).map_err(in_op(op))?;
    write_result(dest, self_.sizes(), result, op, |o| k(o, &input)).map_err(in_op(op))
}

/// Runs a binary kernel `k(out, a, b)` with inputs cast to `compute` and broadcast,
/// result dtype `result`.
#[inline]
pub(crate) fn binary_driver(
    a: &Tensor,
    b: &Tensor,
    dest: Dest<'_>,
    compute: DType,
    result: DType,
    op: &str,
    k: impl FnOnce(&Tensor, &Tensor, &Tensor) -> Result<()>,
) -> Result<Tensor> {
    // The common call: a fresh result of two same-shape operands already in the
    // compute dtype. Nothing to broadcast, cast or redirect, so the kernel writes a
    // new tensor directly (this is most of a small op's cost otherwise).
    if matches!(dest, Dest::New)
        && a.dtype() == compute
        && b.dtype() == compute
        && crate::iter::same_sizes(a.sizes(), b.sizes())
    {
        return crate::out::new_result(a.sizes(), result, |o| k(o, a, b)).map_err(in_op(op));
    }
    let general = || {
        let shape = binary_shape(a, b, op)?;
        let a = cast_cow(a, compute)?;
        let b = cast_cow(b, compute)?;
        write_result(dest, &shape, result, op, |o| k(o, &a, &b))
    };
    general().map_err(in_op(op))
}

/// Converts a scalar to element type `T` with C-like casting.
#[inline]
pub(crate) fn scalar_as<T: Elem>(s: &Scalar) -> T {
    match *s {
        Scalar::Bool(b) => T::from_i64(b as i64),
        Scalar::Int(i) => T::from_i64(i),
        Scalar::Float(f) => T::from_f64(f),
        Scalar::Complex(r, _) => T::from_f64(r),
    }
}

/// Floating special functions missing from `std`.
pub(crate) trait Special: Copy {
    fn erf(self) -> Self;
}
impl Special for f32 {
    #[inline(always)]
    fn erf(self) -> f32 {
        libm::erff(self)
    }
}
impl Special for f64 {
    #[inline(always)]
    fn erf(self) -> f64 {
        libm::erf(self)
    }
}

/// Declares the functional, out= and in-place forms of an op from one
/// `impl_fn(self_, <args>, dest)`.
macro_rules! three_forms {
    ($impl_fn:ident, $f:ident, $f_out:ident, $f_:ident, ($($a:ident : $t:ty),*)) => {
        #[doc = concat!("`", stringify!($f), "` (functional form).")]
        pub fn $f(self_: &Tensor $(, $a: $t)*) -> Result<Tensor> {
            $impl_fn(self_ $(, $a)*, Dest::New)
        }
        #[doc = concat!("`", stringify!($f), "` writing into `out` (resized if needed).")]
        pub fn $f_out(self_: &Tensor $(, $a: $t)*, out: &Tensor) -> Result<Tensor> {
            $impl_fn(self_ $(, $a)*, Dest::Out(out))
        }
        #[doc = concat!("`", stringify!($f), "` in place on `self_`.")]
        pub fn $f_(self_: &Tensor $(, $a: $t)*) -> Result<Tensor> {
            $impl_fn(self_ $(, $a)*, Dest::InPlace(self_))
        }
    };
}
pub(crate) use three_forms;
