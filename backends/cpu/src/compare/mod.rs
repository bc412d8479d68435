//! Comparison and logical kernels: `eq ne lt le gt ge` (Tensor and Scalar
//! overloads), `logical_and logical_or logical_not`; the bitwise ops and
//! `logical_xor` live in `bitwise`.
//!
//! Owns: these ops in functional, out= and in-place forms. Comparisons compare in
//! the promoted dtype of both operands and produce bool; in-place forms write 0/1
//! in `self`'s dtype. Must not: handle layout or out= rules itself.

use crate::copy::to_dtype;
use crate::dtype_dispatch::Float;
use crate::elementwise::{binary_driver, result_type2, result_type_scalar, scalar_tensor};
use crate::iter::{map1, map2};
use crate::out::{write_result, Dest};
use crate::{dispatch_complex, dispatch_float};

pub mod bitwise;
pub use bitwise::{bitwise_and_tensor, bitwise_and_tensor_, bitwise_and_tensor_out};
use opal::{DType, OpalError, Result, Scalar, Tensor};

/// Which relation a comparison computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rel {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Rel {
    #[inline(always)]
    fn test<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Rel::Eq => a == b,
            Rel::Ne => a != b,
            Rel::Lt => a < b,
            Rel::Le => a <= b,
            Rel::Gt => a > b,
            Rel::Ge => a >= b,
        }
    }
}

fn compare_core(
    a: &Tensor,
    b: &Tensor,
    rt: DType,
    rel: Rel,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    if rt.is_complex() && !matches!(rel, Rel::Eq | Rel::Ne) {
        return Err(OpalError::msg(format!(
            "{op}: complex numbers have no order; not supported for complex tensors (promoted dtype {rt})"
        )));
    }
    binary_driver(a, b, dest, rt, DType::Bool, op, |o, x, y| {
        if rt.is_complex() {
            let ne = rel == Rel::Ne;
            return dispatch_complex!(rt, op, |T, R| map2::<bool, T, T>(o, x, y, op, |p, q| (p
                != q)
                == ne));
        }
        // Monomorphise per relation so each inner loop is a single compare.
        macro_rules! run {
            ($r:expr) => {{
                if rt.is_floating_point() {
                    dispatch_float!(rt, op, |T, C| map2::<bool, T, T>(o, x, y, op, |p, q| $r
                        .test(p.up(), q.up())))
                } else {
                    crate::dispatch_int_bool!(rt, op, |T| map2::<bool, T, T>(
                        o,
                        x,
                        y,
                        op,
                        |p, q| $r.test(p, q)
                    ))
                }
            }};
        }
        match rel {
            Rel::Eq => run!(Rel::Eq),
            Rel::Ne => run!(Rel::Ne),
            Rel::Lt => run!(Rel::Lt),
            Rel::Le => run!(Rel::Le),
            Rel::Gt => run!(Rel::Gt),
            Rel::Ge => run!(Rel::Ge),
        }
    })
}

/// `a (rel) b` for two tensors, compared in their promoted dtype.
fn compare_tensors(a: &Tensor, b: &Tensor, rel: Rel, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    compare_core(a, b, result_type2(a, b)?, rel, dest, op)
}

/// `a (rel) s` for a Python-style scalar `s`, which takes part in promotion as a
/// wrapped number.
fn compare_scalar(a: &Tensor, s: &Scalar, rel: Rel, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    let rt = result_type_scalar(a, s)?;
    compare_core(a, &scalar_tensor(s, rt)?, rt, rel, dest, op)
}

macro_rules! comparison {
    ($rel:ident, $t:ident, $t_out:ident, $t_:ident, $s:ident, $s_out:ident, $s_:ident, $name:literal) => {
        #[doc = concat!("`", $name, ".Tensor`: element-wise comparison, bool result.")]
        pub fn $t(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
            compare_tensors(self_, other, Rel::$rel, Dest::New, $name)
        }
        #[doc = concat!("`", $name, ".Tensor_out`.")]
        pub fn $t_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
            compare_tensors(self_, other, Rel::$rel, Dest::Out(out), $name)
        }
        #[doc = concat!("`", $name, "_.Tensor`.")]
        pub fn $t_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
            compare_tensors(self_, other, Rel::$rel, Dest::InPlace(self_), $name)
        }
        #[doc = concat!("`", $name, ".Scalar`.")]
        pub fn $s(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
            compare_scalar(self_, other, Rel::$rel, Dest::New, $name)
        }
        #[doc = concat!("`", $name, ".Scalar_out`.")]
        pub fn $s_out(self_: &Tensor, other: &Scalar, out: &Tensor) -> Result<Tensor> {
            compare_scalar(self_, other, Rel::$rel, Dest::Out(out), $name)
        }
        #[doc = concat!("`", $name, "_.Scalar`.")]
        pub fn $s_(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
            compare_scalar(self_, other, Rel::$rel, Dest::InPlace(self_), $name)
        }
    };
}
comparison!(
    Eq,
    eq_tensor,
    eq_tensor_out,
    eq_tensor_,
    eq_scalar,
    eq_scalar_out,
    eq_scalar_,
    "eq"
);
comparison!(
    Ne,
    ne_tensor,
    ne_tensor_out,
    ne_tensor_,
    ne_scalar,
    ne_scalar_out,
    ne_scalar_,
    "ne"
);
comparison!(
    Lt,
    lt_tensor,
    lt_tensor_out,
    lt_tensor_,
    lt_scalar,
    lt_scalar_out,
    lt_scalar_,
    "lt"
);
comparison!(
    Le,
    le_tensor,
    le_tensor_out,
    le_tensor_,
    le_scalar,
    le_scalar_out,
    le_scalar_,
    "le"
);
comparison!(
    Gt,
    gt_tensor,
    gt_tensor_out,
    gt_tensor_,
    gt_scalar,
    gt_scalar_out,
    gt_scalar_,
    "gt"
);
comparison!(
    Ge,
    ge_tensor,
    ge_tensor_out,
    ge_tensor_,
    ge_scalar,
    ge_scalar_out,
    ge_scalar_,
    "ge"
);

fn logical_impl(a: &Tensor, b: &Tensor, and: bool, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    binary_driver(a, b, dest, DType::Bool, DType::Bool, op, |o, x, y| {
        if and {
            map2::<bool, bool, bool>(o, x, y, op, |p, q| p && q)
        } else {
            map2::<bool, bool, bool>(o, x, y, op, |p, q| p || q)
        }
    })
}
/// `logical_and`: both non-zero, bool result.
pub fn logical_and(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    logical_impl(self_, other, true, Dest::New, "logical_and")
}
/// `logical_and.out`.
pub fn logical_and_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    logical_impl(self_, other, true, Dest::Out(out), "logical_and.out")
}
/// `logical_and_`.
pub fn logical_and_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    logical_impl(self_, other, true, Dest::InPlace(self_), "logical_and_")
}
/// `logical_or`: either non-zero, bool result.
pub fn logical_or(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    logical_impl(self_, other, false, Dest::New, "logical_or")
}
/// `logical_or.out`.
pub fn logical_or_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    logical_impl(self_, other, false, Dest::Out(out), "logical_or.out")
}
/// `logical_or_`.
pub fn logical_or_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    logical_impl(self_, other, false, Dest::InPlace(self_), "logical_or_")
}

fn logical_not_impl(self_: &Tensor, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    let a = to_dtype(self_, DType::Bool)?;
    write_result(dest, self_.sizes(), DType::Bool, op, |o| {
        map1::<bool, bool>(o, &a, op, |v| !v)
    })
}
/// `logical_not`: true where the element is zero.
pub fn logical_not(self_: &Tensor) -> Result<Tensor> {
    logical_not_impl(self_, Dest::New, "logical_not")
}
/// `logical_not.out`.
pub fn logical_not_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    logical_not_impl(self_, Dest::Out(out), "logical_not.out")
}
/// `logical_not_`.
pub fn logical_not_(self_: &Tensor) -> Result<Tensor> {
    logical_not_impl(self_, Dest::InPlace(self_), "logical_not_")
}
