//! Bitwise kernels over integers and bool (`bitwise_and / or / xor` with Tensor
//! and Scalar operands, `bitwise_not`) and `logical_xor`.
//!
//! Owns: these ops in functional, out= and in-place forms; the promoted dtype must
//! be integral or bool (floats are refused, as PyTorch does). Must not: handle
//! layout or out= rules itself (`binary_driver` / `unary_driver` do).

use crate::dispatch_int_bool;
use crate::elementwise::{
    binary_driver, result_type2, result_type_scalar, scalar_tensor, unary_driver,
};
use crate::iter::{map1, map2};
use crate::out::Dest;
use opal::{DType, OpalError, Result, Scalar, Tensor};

/// Which bitwise operation a binary kernel computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bit {
    And,
    Or,
    Xor,
}

fn integral_only(rt: DType, op: &str) -> Result<()> {
    if rt.is_integral(true) {
        Ok(())
    } else {
        Err(OpalError::msg(format!(
            "{op}: only implemented for integer and bool dtypes, got {rt}"
        )))
    }
}

/// `a (op) b` in the promoted dtype `rt` (already checked for integral or bool).
pub(crate) fn bitwise_core(
    a: &Tensor,
    b: &Tensor,
    rt: DType,
    bit: Bit,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    integral_only(rt, op)?;
    binary_driver(a, b, dest, rt, rt, op, |o, x, y| match bit {
        Bit::And => dispatch_int_bool!(rt, op, |T| map2::<T, T, T>(o, x, y, op, |p, q| p & q)),
        Bit::Or => dispatch_int_bool!(rt, op, |T| map2::<T, T, T>(o, x, y, op, |p, q| p | q)),
        Bit::Xor => dispatch_int_bool!(rt, op, |T| map2::<T, T, T>(o, x, y, op, |p, q| p ^ q)),
    })
}

fn bitwise_tensor(a: &Tensor, b: &Tensor, bit: Bit, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    bitwise_core(a, b, result_type2(a, b)?, bit, dest, op)
}

fn bitwise_scalar(a: &Tensor, s: &Scalar, bit: Bit, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    let rt = result_type_scalar(a, s)?;
    integral_only(rt, op)?;
    bitwise_core(a, &scalar_tensor(s, rt)?, rt, bit, dest, op)
}

macro_rules! bitwise_forms {
    ($bit:ident, $name:literal, $t:ident, $t_out:ident, $t_:ident, $s:ident, $s_out:ident, $s_:ident) => {
        #[doc = concat!("`", $name, ".Tensor`.")]
        pub fn $t(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
            bitwise_tensor(self_, other, Bit::$bit, Dest::New, $name)
        }
        #[doc = concat!("`", $name, ".Tensor_out`.")]
        pub fn $t_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
            bitwise_tensor(self_, other, Bit::$bit, Dest::Out(out), $name)
        }
        #[doc = concat!("`", $name, "_.Tensor`.")]
        pub fn $t_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
            bitwise_tensor(self_, other, Bit::$bit, Dest::InPlace(self_), $name)
        }
        #[doc = concat!("`", $name, ".Scalar`.")]
        pub fn $s(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
            bitwise_scalar(self_, other, Bit::$bit, Dest::New, $name)
        }
        #[doc = concat!("`", $name, ".Scalar_out`.")]
        pub fn $s_out(self_: &Tensor, other: &Scalar, out: &Tensor) -> Result<Tensor> {
            bitwise_scalar(self_, other, Bit::$bit, Dest::Out(out), $name)
        }
        #[doc = concat!("`", $name, "_.Scalar`.")]
        pub fn $s_(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
            bitwise_scalar(self_, other, Bit::$bit, Dest::InPlace(self_), $name)
        }
    };
}

bitwise_forms!(
    And,
    "bitwise_and",
    bitwise_and_tensor,
    bitwise_and_tensor_out,
    bitwise_and_tensor_,
    bitwise_and_scalar,
    bitwise_and_scalar_out,
    bitwise_and_scalar_
);
bitwise_forms!(
    Or,
    "bitwise_or",
    bitwise_or_tensor,
    bitwise_or_tensor_out,
    bitwise_or_tensor_,
    bitwise_or_scalar,
    bitwise_or_scalar_out,
    bitwise_or_scalar_
);
bitwise_forms!(
    Xor,
    "bitwise_xor",
    bitwise_xor_tensor,
    bitwise_xor_tensor_out,
    bitwise_xor_tensor_,
    bitwise_xor_scalar,
    bitwise_xor_scalar_out,
    bitwise_xor_scalar_
);

fn bitwise_not_impl(self_: &Tensor, dest: Dest<'_>) -> Result<Tensor> {
    let op = "bitwise_not";
    let dt = self_.dtype();
    integral_only(dt, op)?;
    unary_driver(self_, dest, dt, dt, op, |o, a| {
        dispatch_int_bool!(dt, op, |T| map1::<T, T>(o, a, op, |v| !v))
    })
}
/// `bitwise_not`: bool negation or two's-complement not.
pub fn bitwise_not(self_: &Tensor) -> Result<Tensor> {
    bitwise_not_impl(self_, Dest::New)
}
/// `bitwise_not.out`.
pub fn bitwise_not_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    bitwise_not_impl(self_, Dest::Out(out))
}
/// `bitwise_not_`.
pub fn bitwise_not_(self_: &Tensor) -> Result<Tensor> {
    bitwise_not_impl(self_, Dest::InPlace(self_))
}

fn logical_xor_impl(a: &Tensor, b: &Tensor, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    binary_driver(a, b, dest, DType::Bool, DType::Bool, op, |o, x, y| {
        map2::<bool, bool, bool>(o, x, y, op, |p, q| p != q)
    })
}
/// `logical_xor`: exactly one operand non-zero, bool result.
pub fn logical_xor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    logical_xor_impl(self_, other, Dest::New, "logical_xor")
}
/// `logical_xor.out`.
pub fn logical_xor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    logical_xor_impl(self_, other, Dest::Out(out), "logical_xor.out")
}
/// `logical_xor_`.
pub fn logical_xor_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    logical_xor_impl(self_, other, Dest::InPlace(self_), "logical_xor_")
}
