//! Meta kernels of the inverse-trigonometric, hyperbolic and base-2/10 log ops
//! (`acos acosh asin asinh atan atanh cosh sinh log10 log2`), with their out= and
//! in-place forms.
//!
//! Owns: their dtype rule (integers and bool give the default float dtype).
//! Must not: compute geometry itself (`pointwise::elementwise` does).

use super::pointwise::{elementwise, unary_float};
use super::{inplace_variants, out_variants};
use crate::shape::promote::to_float;
use opal::{Result, Tensor};

unary_float! {
    acos = "acos";
    acosh = "acosh";
    asin = "asin";
    asinh = "asinh";
    atan = "atan";
    atanh = "atanh";
    cosh = "cosh";
    sinh = "sinh";
    log10 = "log10";
    log2 = "log2";
}

out_variants! {
    acos_out = "acos.out" from acos(self_: &Tensor);
    acosh_out = "acosh.out" from acosh(self_: &Tensor);
    asin_out = "asin.out" from asin(self_: &Tensor);
    asinh_out = "asinh.out" from asinh(self_: &Tensor);
    atan_out = "atan.out" from atan(self_: &Tensor);
    atanh_out = "atanh.out" from atanh(self_: &Tensor);
    cosh_out = "cosh.out" from cosh(self_: &Tensor);
    sinh_out = "sinh.out" from sinh(self_: &Tensor);
    log10_out = "log10.out" from log10(self_: &Tensor);
    log2_out = "log2.out" from log2(self_: &Tensor);
}

inplace_variants! {
    acos_ = "acos_" from acos();
    acosh_ = "acosh_" from acosh();
    asin_ = "asin_" from asin();
    asinh_ = "asinh_" from asinh();
    atan_ = "atan_" from atan();
    atanh_ = "atanh_" from atanh();
    cosh_ = "cosh_" from cosh();
    sinh_ = "sinh_" from sinh();
    log10_ = "log10_" from log10();
    log2_ = "log2_" from log2();
}
