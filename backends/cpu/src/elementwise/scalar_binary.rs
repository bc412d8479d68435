//! The Scalar overloads of `div` (with and without `rounding_mode`), `sub` and
//! `remainder`.
//!
//! Owns: turning the Python-scalar operand into a 0-dim tensor of the promoted
//! dtype (so it takes part in promotion as a wrapped number) and running the Tensor
//! kernel of `binary`. Must not: compute anything itself.

use super::binary::{div_impl, remainder_impl, sub_impl};
use super::{float_or_complex_result, result_type_scalar, scalar_as, scalar_tensor};
use crate::nn::io::{make_output, with_slice};
use crate::nn::vecmath::{has_avx2, has_avx512, multiversion};
use crate::out::Dest;
use opal::{DType, Result, Scalar, Tensor};

/// `other` as a 0-dim tensor of the dtype `self_ (op) other` promotes to.
pub(super) fn wrapped(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    scalar_tensor(other, result_type_scalar(self_, other)?)
}

/// The divisor of `div`: true division computes in a float dtype, so the scalar
/// goes there directly (a negative divisor of a `uint8` tensor stays negative);
/// rounded division keeps the promoted dtype.
fn divisor(
    self_: &Tensor,
    other: &Scalar,
    rounding_mode: Option<&str>,
    op: &str,
) -> Result<Tensor> {
    let rt = result_type_scalar(self_, other)?;
    let dt = match rounding_mode {
        None => float_or_complex_result(rt, op)?,
        Some(_) => rt,
    };
    scalar_tensor(other, dt)
}

multiversion!(div_f32_mv(x: &[f32], y: &mut [f32], b: f32) -> () {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = v / b;
    }
});

/// `div.Scalar` of a contiguous f32 tensor by a scalar that keeps it f32: one
/// vectorized true division per element (PyTorch's CPU kernel divides f32 by the
/// scalar rounded to f32, never multiplying by a reciprocal, so the results agree
/// bit for bit), in parallel pieces. None for any other case.
fn div_scalar_f32(self_: &Tensor, other: &Scalar) -> Option<Result<Tensor>> {
    if self_.dtype() != DType::F32
        || !self_.is_contiguous()
        || !matches!(result_type_scalar(self_, other), Ok(DType::F32))
    {
        return None;
    }
    let b: f32 = scalar_as(other);
    Some(with_slice::<f32, _>(self_, |x| {
        make_output::<f32>(self_.sizes(), DType::F32, |y| {
            let grain = crate::iter::GRAIN;
            crate::parallel::fork_chunks_mut(y, grain, |c, piece| {
                div_f32_mv(&x[c * grain..c * grain + piece.len()], piece, b)
            });
            Ok(())
        })
    }))
}

/// `div.Scalar`: true division by a scalar.
pub fn div_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    if let Some(r) = div_scalar_f32(self_, other) {
        return r;
    }
    div_scalar_mode(self_, other, None)
}
/// `div_.Scalar`.
pub fn div_scalar_(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    div_scalar_mode_(self_, other, None)
}
/// `div.Scalar_mode`: division by a scalar rounded per `rounding_mode`.
pub fn div_scalar_mode(
    self_: &Tensor,
    other: &Scalar,
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    let op = "div.Scalar_mode";
    let b = divisor(self_, other, rounding_mode, op)?;
    div_impl(self_, &b, rounding_mode, Dest::New, op)
}
/// `div_.Scalar_mode`.
pub fn div_scalar_mode_(
    self_: &Tensor,
    other: &Scalar,
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    let op = "div_.Scalar_mode";
    let b = divisor(self_, other, rounding_mode, op)?;
    div_impl(self_, &b, rounding_mode, Dest::InPlace(self_), op)
}
/// `sub.Scalar`: `self - alpha * other`.
pub fn sub_scalar(self_: &Tensor, other: &Scalar, alpha: &Scalar) -> Result<Tensor> {
    sub_impl(
        self_,
        &wrapped(self_, other)?,
        alpha,
        Dest::New,
        "sub.Scalar",
    )
}
/// `sub_.Scalar`.
pub fn sub_scalar_(self_: &Tensor, other: &Scalar, alpha: &Scalar) -> Result<Tensor> {
    let b = wrapped(self_, other)?;
    sub_impl(self_, &b, alpha, Dest::InPlace(self_), "sub_.Scalar")
}
/// `remainder.Scalar`: Python's modulus (the sign of the divisor).
pub fn remainder_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    remainder_impl(
        self_,
        &wrapped(self_, other)?,
        Dest::New,
        "remainder.Scalar",
    )
}
/// `remainder_.Scalar`.
pub fn remainder_scalar_(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    let b = wrapped(self_, other)?;
    remainder_impl(self_, &b, Dest::InPlace(self_), "remainder_.Scalar")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The f32 fast path gives what the general kernel gives, bit for bit, for a
    /// float and an int divisor, odd lengths and special values.
    #[test]
    fn f32_fast_division_matches_the_general_kernel() {
        let mut v: Vec<f32> = (0..70_001).map(|i| (i as f32 - 35_000.0) * 0.37).collect();
        v[..4].copy_from_slice(&[f32::NAN, f32::INFINITY, -0.0, 1e-40]);
        let x = Tensor::from_vec(v, &[70_001]).unwrap();
        for s in [
            Scalar::Float(3.0),
            Scalar::Float(0.1),
            Scalar::Int(7),
            Scalar::Float(0.0),
        ] {
            let fast = div_scalar(&x, &s).unwrap().to_vec::<f32>().unwrap();
            let slow = div_scalar_mode(&x, &s, None)
                .unwrap()
                .to_vec::<f32>()
                .unwrap();
            assert_eq!(fast.len(), slow.len());
            for (a, b) in fast.iter().zip(&slow) {
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "{a} vs {b}"
                );
            }
        }
        // A complex divisor leaves the fast path (the result is complex).
        assert!(div_scalar_f32(&x, &Scalar::Complex(1.0, 1.0)).is_none());
    }
}
