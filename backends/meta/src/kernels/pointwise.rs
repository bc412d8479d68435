//! Meta kernels of element-wise ops: binary arithmetic, comparisons and logical
//! ops, `where` / `masked_fill` / `clamp`, unary math and activations, and the
//! element-wise backward ops, with their `out=` and in-place forms.
//!
//! Owns: each op's dtype family (same-type, float-promoting, bool-producing) and
//! its argument checks. Must not: compute geometry itself (`shape::elementwise`).

use super::{check_inputs, inplace_variants, new_contiguous, new_strided, out_variants};
use crate::shape::elementwise::elementwise_geometry;
use crate::shape::fail;
use crate::shape::promote::{require, to_float};
use opal::dtype::ResultType;
use opal::{DType, Result, Scalar, Tensor};

/// A new element-wise result over `inputs` (broadcast sizes, strides following the
/// inputs' memory order) of `dtype`.
pub fn elementwise(op: &str, inputs: &[&Tensor], dtype: DType) -> Result<Tensor> {
    check_inputs(op, inputs)?;
    // Structured CPU kernels run this for every call: same-shape contiguous inputs
    // (the common case) skip the general layout inference and its allocations.
    if let Some(first) = inputs.first() {
        if inputs
            .iter()
            .all(|t| t.sizes() == first.sizes() && t.is_contiguous())
        {
            return new_contiguous(first.sizes(), dtype);
        }
    }
    let geo: Vec<(&[i64], &[i64])> = inputs.iter().map(|t| (t.sizes(), t.strides())).collect();
    let (sizes, strides) = elementwise_geometry(op, &geo)?;
    new_strided(&sizes, &strides, dtype)
}

/// PyTorch's `result_type` over tensors (wrapped numbers count as scalars) and scalars.
pub fn common_dtype(tensors: &[&Tensor], scalars: &[&Scalar]) -> Result<DType> {
    if scalars.is_empty() {
        return ResultType::of_tensors(tensors);
    }
    let mut rt = ResultType::new();
    for t in tensors {
        rt.add_tensor(t);
    }
    for s in scalars {
        rt.scalar(s);
    }
    rt.finish()
}

fn no_bool(op: &str, d: DType, what: &str) -> Result<()> {
    if d == DType::Bool {
        return Err(fail(
            op,
            format!("{what} on a bool tensor is not supported"),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------- binary arithmetic

/// `add.Tensor`.
pub fn add_tensor(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Result<Tensor> {
    let d = common_dtype(&[self_, other], &[])?;
    opal::rules::check_alpha("add", d, alpha)?;
    elementwise("add", &[self_, other], d)
}

/// `add.Scalar`: the scalar takes part in promotion as a wrapped number.
pub fn add_scalar(self_: &Tensor, other: &Scalar, alpha: &Scalar) -> Result<Tensor> {
    let d = common_dtype(&[self_], &[other])?;
    opal::rules::check_alpha("add", d, alpha)?;
    elementwise("add", &[self_], d)
}

/// `sub.Tensor`: like `add`, but bool operands are rejected.
pub fn sub_tensor(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Result<Tensor> {
    no_bool("sub", self_.dtype(), "subtraction, the `-` operator,")?;
    no_bool("sub", other.dtype(), "subtraction, the `-` operator,")?;
    let d = common_dtype(&[self_, other], &[])?;
    opal::rules::check_alpha("sub", d, alpha)?;
    elementwise("sub", &[self_, other], d)
}

/// `mul.Tensor`.
pub fn mul_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = common_dtype(&[self_, other], &[])?;
    elementwise("mul", &[self_, other], d)
}

/// `mul.Scalar`.
pub fn mul_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    let d = common_dtype(&[self_], &[other])?;
    elementwise("mul", &[self_], d)
}

/// `div.Tensor`: true division, integers give the default float dtype.
pub fn div_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = to_float(common_dtype(&[self_, other], &[])?);
    elementwise("div", &[self_, other], d)
}

/// `div.Tensor_mode`: `trunc` / `floor` keep integer dtypes, no mode divides truly.
pub fn div_tensor_mode(
    self_: &Tensor,
    other: &Tensor,
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    let common = common_dtype(&[self_, other], &[])?;
    let d = match rounding_mode {
        None => to_float(common),
        Some("trunc") | Some("floor") => common,
        Some(m) => {
            return Err(fail(
                "div",
                format!(
                    "expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{m}'"
                ),
            ))
        }
    };
    elementwise("div", &[self_, other], d)
}

/// `remainder.Tensor`.
pub fn remainder_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = common_dtype(&[self_, other], &[])?;
    elementwise("remainder", &[self_, other], d)
}

/// `pow.Tensor_Tensor`.
pub fn pow_tensor_tensor(self_: &Tensor, exponent: &Tensor) -> Result<Tensor> {
    let d = common_dtype(&[self_, exponent], &[])?;
    elementwise("pow", &[self_, exponent], d)
}

/// `pow.Tensor_Scalar`: integer bases cannot take negative integer exponents.
pub fn pow_tensor_scalar(self_: &Tensor, exponent: &Scalar) -> Result<Tensor> {
    if self_.dtype().is_integral(true) && exponent.is_integral() && exponent.to_i64() < 0 {
        return Err(fail(
            "pow",
            "integers to negative integer powers are not allowed",
        ));
    }
    let d = common_dtype(&[self_], &[exponent])?;
    elementwise("pow", &[self_], d)
}

/// `atan2`: float-promoting.
pub fn atan2(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = to_float(common_dtype(&[self_, other], &[])?);
    elementwise("atan2", &[self_, other], d)
}

/// `maximum`: complex inputs have no order.
pub fn maximum(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = common_dtype(&[self_, other], &[])?;
    require(
        "maximum",
        d,
        !d.is_complex(),
        "complex inputs are not supported",
    )?;
    elementwise("maximum", &[self_, other], d)
}

/// `minimum`.
pub fn minimum(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = common_dtype(&[self_, other], &[])?;
    require(
        "minimum",
        d,
        !d.is_complex(),
        "complex inputs are not supported",
    )?;
    elementwise("minimum", &[self_, other], d)
}

/// `lerp.Scalar`: `self` and `end` must share a dtype (no promotion).
pub fn lerp_scalar(self_: &Tensor, end: &Tensor, _weight: &Scalar) -> Result<Tensor> {
    if self_.dtype() != end.dtype() {
        return Err(fail(
            "lerp",
            format!(
                "expected dtype {} for `end` but got dtype {}",
                self_.dtype().name(),
                end.dtype().name()
            ),
        ));
    }
    elementwise("lerp", &[self_, end], self_.dtype())
}

/// `addcmul`.
pub fn addcmul(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    _value: &Scalar,
) -> Result<Tensor> {
    let d = common_dtype(&[self_, tensor1, tensor2], &[])?;
    elementwise("addcmul", &[self_, tensor1, tensor2], d)
}

/// `addcdiv`: integer division is rejected.
pub fn addcdiv(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    _value: &Scalar,
) -> Result<Tensor> {
    if tensor1.dtype().is_integral(true) && tensor2.dtype().is_integral(true) {
        return Err(fail(
            "addcdiv",
            "integer division with addcdiv is no longer supported; use addcmul with tensor1 / tensor2 in floating point",
        ));
    }
    let d = common_dtype(&[self_, tensor1, tensor2], &[])?;
    elementwise("addcdiv", &[self_, tensor1, tensor2], d)
}

// ---------------------------------------------------------------- comparisons, logic

fn compare(op: &str, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    // The common dtype is still computed: incompatible operands fail here as on CPU.
    common_dtype(&[a, b], &[])?;
    elementwise(op, &[a, b], DType::Bool)
}

macro_rules! comparisons {
    ($($f:ident = $name:literal;)*) => {$(
        #[doc = concat!("`", $name, "`: a bool result over the broadcast shape.")]
        pub fn $f(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
            compare($name, self_, other)
        }
    )*};
}

comparisons! {
    eq_tensor = "eq";
    ne_tensor = "ne";
    lt_tensor = "lt";
    le_tensor = "le";
    gt_tensor = "gt";
    ge_tensor = "ge";
    logical_and = "logical_and";
    logical_or = "logical_or";
}

/// `eq.Scalar`.
pub fn eq_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    compare_scalar("eq", self_, other)
}

/// `ne.Scalar`.
pub fn ne_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    compare_scalar("ne", self_, other)
}

/// `ge.Scalar`.
pub fn ge_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    compare_scalar("ge", self_, other)
}

/// A comparison with a scalar: `self`'s shape, bool, after the promotion check
/// (incompatible operands fail here as on CPU).
pub(crate) fn compare_scalar(op: &str, self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    common_dtype(&[self_], &[other])?;
    elementwise(op, &[self_], DType::Bool)
}

/// `logical_not`.
pub fn logical_not(self_: &Tensor) -> Result<Tensor> {
    elementwise("logical_not", &[self_], DType::Bool)
}

/// `isnan`.
pub fn isnan(self_: &Tensor) -> Result<Tensor> {
    elementwise("isnan", &[self_], DType::Bool)
}

/// `bitwise_and.Tensor`: integers and bool only.
pub fn bitwise_and_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = common_dtype(&[self_, other], &[])?;
    require(
        "bitwise_and",
        d,
        d.is_integral(true),
        "bitwise ops need integer or bool tensors",
    )?;
    elementwise("bitwise_and", &[self_, other], d)
}

/// `where.self`: a bool condition selects between `self` and `other`, promoted.
pub fn where_self(condition: &Tensor, self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    if condition.dtype() != DType::Bool {
        return Err(fail(
            "where",
            format!(
                "expected condition to be a boolean tensor, but got a tensor with dtype {}",
                condition.dtype().name()
            ),
        ));
    }
    let d = common_dtype(&[self_, other], &[])?;
    elementwise("where", &[condition, self_, other], d)
}

/// `masked_fill.Scalar`: `self` and the bool mask broadcast; the result is a
/// contiguous copy of `self`'s dtype.
pub fn masked_fill_scalar(self_: &Tensor, mask: &Tensor, _value: &Scalar) -> Result<Tensor> {
    check_inputs("masked_fill", &[self_, mask])?;
    if mask.dtype() != DType::Bool {
        return Err(fail(
            "masked_fill",
            format!(
                "only supports boolean masks, but got mask with dtype {}",
                mask.dtype().name()
            ),
        ));
    }
    let sizes = opal::rules::broadcast_shapes("masked_fill", &[self_.sizes(), mask.sizes()])?;
    new_contiguous(&sizes, self_.dtype())
}

/// `clamp`: bounds take part in promotion like scalars; at least one is needed.
pub fn clamp(self_: &Tensor, min: Option<&Scalar>, max: Option<&Scalar>) -> Result<Tensor> {
    if min.is_none() && max.is_none() {
        return Err(fail(
            "clamp",
            "at least one of 'min' or 'max' must not be None",
        ));
    }
    let bounds: Vec<&Scalar> = min.into_iter().chain(max).collect();
    let d = common_dtype(&[self_], &bounds)?;
    require(
        "clamp",
        d,
        !d.is_complex(),
        "complex inputs are not supported",
    )?;
    elementwise("clamp", &[self_], d)
}

/// `nan_to_num`.
pub fn nan_to_num(
    self_: &Tensor,
    _nan: Option<f64>,
    _posinf: Option<f64>,
    _neginf: Option<f64>,
) -> Result<Tensor> {
    elementwise("nan_to_num", &[self_], self_.dtype())
}

// ---------------------------------------------------------------- unary

macro_rules! unary_same {
    ($($f:ident = $name:literal;)*) => {$(
        #[doc = concat!("`", $name, "`: same dtype and layout as the input.")]
        pub fn $f(self_: &Tensor) -> Result<Tensor> {
            elementwise($name, &[self_], self_.dtype())
        }
    )*};
}

/// Float-result unary kernels (`elementwise` and `to_float` must be in scope).
macro_rules! unary_float {
    ($($f:ident = $name:literal;)*) => {$(
        #[doc = concat!("`", $name, "`: integers and bool give the default float dtype.")]
        pub fn $f(self_: &Tensor) -> Result<Tensor> {
            elementwise($name, &[self_], to_float(self_.dtype()))
        }
    )*};
}
pub(crate) use unary_float;

/// `abs`: the same dtype as the input, except that a complex input's magnitudes
/// are real (C64 -> F32, C128 -> F64).
pub fn abs(self_: &Tensor) -> Result<Tensor> {
    let dt = self_.dtype();
    elementwise(
        "abs",
        &[self_],
        if dt.is_complex() { dt.to_real() } else { dt },
    )
}

unary_same! {
    sign = "sign";
    floor = "floor";
    ceil = "ceil";
    round = "round";
    trunc = "trunc";
    relu = "relu";
    silu = "silu";
}

unary_float! {
    exp = "exp";
    log = "log";
    log1p = "log1p";
    expm1 = "expm1";
    sqrt = "sqrt";
    rsqrt = "rsqrt";
    reciprocal = "reciprocal";
    sin = "sin";
    cos = "cos";
    tan = "tan";
    tanh = "tanh";
    erf = "erf";
    sigmoid = "sigmoid";
}

/// `neg`: bool tensors cannot be negated.
pub fn neg(self_: &Tensor) -> Result<Tensor> {
    no_bool("neg", self_.dtype(), "negation, the `-` operator,")?;
    elementwise("neg", &[self_], self_.dtype())
}

fn check_approximate(op: &str, approximate: &str) -> Result<()> {
    match approximate {
        "none" | "tanh" => Ok(()),
        a => Err(fail(
            op,
            format!("approximate argument must be either none or tanh, got '{a}'"),
        )),
    }
}

/// `gelu`.
pub fn gelu(self_: &Tensor, approximate: &str) -> Result<Tensor> {
    check_approximate("gelu", approximate)?;
    elementwise("gelu", &[self_], self_.dtype())
}

/// `softplus`.
pub fn softplus(self_: &Tensor, _beta: &Scalar, _threshold: &Scalar) -> Result<Tensor> {
    elementwise("softplus", &[self_], self_.dtype())
}

/// `leaky_relu`.
pub fn leaky_relu(self_: &Tensor, _negative_slope: &Scalar) -> Result<Tensor> {
    elementwise("leaky_relu", &[self_], self_.dtype())
}

/// `elu`.
pub fn elu(
    self_: &Tensor,
    _alpha: &Scalar,
    _scale: &Scalar,
    _input_scale: &Scalar,
) -> Result<Tensor> {
    elementwise("elu", &[self_], self_.dtype())
}

/// `hardtanh`.
pub fn hardtanh(self_: &Tensor, _min_val: &Scalar, _max_val: &Scalar) -> Result<Tensor> {
    elementwise("hardtanh", &[self_], self_.dtype())
}

// ---------------------------------------------------------------- element-wise backward

/// `threshold_backward`.
pub fn threshold_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    _threshold: &Scalar,
) -> Result<Tensor> {
    let d = common_dtype(&[grad_output, self_], &[])?;
    elementwise("threshold_backward", &[grad_output, self_], d)
}

/// `gelu_backward`.
pub fn gelu_backward(grad_output: &Tensor, self_: &Tensor, approximate: &str) -> Result<Tensor> {
    check_approximate("gelu_backward", approximate)?;
    let d = common_dtype(&[grad_output, self_], &[])?;
    elementwise("gelu_backward", &[grad_output, self_], d)
}

/// `sigmoid_backward`.
pub fn sigmoid_backward(grad_output: &Tensor, output: &Tensor) -> Result<Tensor> {
    let d = common_dtype(&[grad_output, output], &[])?;
    elementwise("sigmoid_backward", &[grad_output, output], d)
}

/// `tanh_backward`.
pub fn tanh_backward(grad_output: &Tensor, output: &Tensor) -> Result<Tensor> {
    let d = common_dtype(&[grad_output, output], &[])?;
    elementwise("tanh_backward", &[grad_output, output], d)
}

// ---------------------------------------------------------------- out= and in-place forms

out_variants! {
    add_out = "add.out" from add_tensor(self_: &Tensor, other: &Tensor, alpha: &Scalar);
    sub_out = "sub.out" from sub_tensor(self_: &Tensor, other: &Tensor, alpha: &Scalar);
    mul_out = "mul.out" from mul_tensor(self_: &Tensor, other: &Tensor);
    div_out = "div.out" from div_tensor(self_: &Tensor, other: &Tensor);
    div_out_mode = "div.out_mode" from div_tensor_mode(self_: &Tensor, other: &Tensor, rounding_mode: Option<&str>);
    remainder_tensor_out = "remainder.Tensor_out" from remainder_tensor(self_: &Tensor, other: &Tensor);
    pow_tensor_tensor_out = "pow.Tensor_Tensor_out" from pow_tensor_tensor(self_: &Tensor, exponent: &Tensor);
    pow_tensor_scalar_out = "pow.Tensor_Scalar_out" from pow_tensor_scalar(self_: &Tensor, exponent: &Scalar);
    atan2_out = "atan2.out" from atan2(self_: &Tensor, other: &Tensor);
    maximum_out = "maximum.out" from maximum(self_: &Tensor, other: &Tensor);
    minimum_out = "minimum.out" from minimum(self_: &Tensor, other: &Tensor);
    lerp_scalar_out = "lerp.Scalar_out" from lerp_scalar(self_: &Tensor, end: &Tensor, weight: &Scalar);
    addcmul_out = "addcmul.out" from addcmul(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar);
    addcdiv_out = "addcdiv.out" from addcdiv(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar);
    eq_tensor_out = "eq.Tensor_out" from eq_tensor(self_: &Tensor, other: &Tensor);
    ne_tensor_out = "ne.Tensor_out" from ne_tensor(self_: &Tensor, other: &Tensor);
    lt_tensor_out = "lt.Tensor_out" from lt_tensor(self_: &Tensor, other: &Tensor);
    le_tensor_out = "le.Tensor_out" from le_tensor(self_: &Tensor, other: &Tensor);
    gt_tensor_out = "gt.Tensor_out" from gt_tensor(self_: &Tensor, other: &Tensor);
    ge_tensor_out = "ge.Tensor_out" from ge_tensor(self_: &Tensor, other: &Tensor);
    eq_scalar_out = "eq.Scalar_out" from eq_scalar(self_: &Tensor, other: &Scalar);
    ne_scalar_out = "ne.Scalar_out" from ne_scalar(self_: &Tensor, other: &Scalar);
    ge_scalar_out = "ge.Scalar_out" from ge_scalar(self_: &Tensor, other: &Scalar);
    logical_and_out = "logical_and.out" from logical_and(self_: &Tensor, other: &Tensor);
    logical_or_out = "logical_or.out" from logical_or(self_: &Tensor, other: &Tensor);
    logical_not_out = "logical_not.out" from logical_not(self_: &Tensor);
    bitwise_and_tensor_out = "bitwise_and.Tensor_out" from bitwise_and_tensor(self_: &Tensor, other: &Tensor);
    where_self_out = "where.self_out" from where_self(condition: &Tensor, self_: &Tensor, other: &Tensor);
    clamp_out = "clamp.out" from clamp(self_: &Tensor, min: Option<&Scalar>, max: Option<&Scalar>);
    nan_to_num_out = "nan_to_num.out" from nan_to_num(self_: &Tensor, nan: Option<f64>, posinf: Option<f64>, neginf: Option<f64>);
    neg_out = "neg.out" from neg(self_: &Tensor);
    abs_out = "abs.out" from abs(self_: &Tensor);
    sign_out = "sign.out" from sign(self_: &Tensor);
    exp_out = "exp.out" from exp(self_: &Tensor);
    log_out = "log.out" from log(self_: &Tensor);
    log1p_out = "log1p.out" from log1p(self_: &Tensor);
    expm1_out = "expm1.out" from expm1(self_: &Tensor);
    sqrt_out = "sqrt.out" from sqrt(self_: &Tensor);
    rsqrt_out = "rsqrt.out" from rsqrt(self_: &Tensor);
    reciprocal_out = "reciprocal.out" from reciprocal(self_: &Tensor);
    sin_out = "sin.out" from sin(self_: &Tensor);
    cos_out = "cos.out" from cos(self_: &Tensor);
    tan_out = "tan.out" from tan(self_: &Tensor);
    tanh_out = "tanh.out" from tanh(self_: &Tensor);
    erf_out = "erf.out" from erf(self_: &Tensor);
    floor_out = "floor.out" from floor(self_: &Tensor);
    ceil_out = "ceil.out" from ceil(self_: &Tensor);
    round_out = "round.out" from round(self_: &Tensor);
    trunc_out = "trunc.out" from trunc(self_: &Tensor);
    sigmoid_out = "sigmoid.out" from sigmoid(self_: &Tensor);
    silu_out = "silu.out" from silu(self_: &Tensor);
    gelu_out = "gelu.out" from gelu(self_: &Tensor, approximate: &str);
    softplus_out = "softplus.out" from softplus(self_: &Tensor, beta: &Scalar, threshold: &Scalar);
    leaky_relu_out = "leaky_relu.out" from leaky_relu(self_: &Tensor, negative_slope: &Scalar);
    elu_out = "elu.out" from elu(self_: &Tensor, alpha: &Scalar, scale: &Scalar, input_scale: &Scalar);
    hardtanh_out = "hardtanh.out" from hardtanh(self_: &Tensor, min_val: &Scalar, max_val: &Scalar);
    threshold_backward_grad_input = "threshold_backward.grad_input" from threshold_backward(grad_output: &Tensor, self_: &Tensor, threshold: &Scalar);
    gelu_backward_grad_input = "gelu_backward.grad_input" from gelu_backward(grad_output: &Tensor, self_: &Tensor, approximate: &str);
    sigmoid_backward_grad_input = "sigmoid_backward.grad_input" from sigmoid_backward(grad_output: &Tensor, output: &Tensor);
    tanh_backward_grad_input = "tanh_backward.grad_input" from tanh_backward(grad_output: &Tensor, output: &Tensor);
}

inplace_variants! {
    add_tensor_ = "add_.Tensor" from add_tensor(other: &Tensor, alpha: &Scalar);
    add_scalar_ = "add_.Scalar" from add_scalar(other: &Scalar, alpha: &Scalar);
    sub_tensor_ = "sub_.Tensor" from sub_tensor(other: &Tensor, alpha: &Scalar);
    mul_tensor_ = "mul_.Tensor" from mul_tensor(other: &Tensor);
    mul_scalar_ = "mul_.Scalar" from mul_scalar(other: &Scalar);
    div_tensor_ = "div_.Tensor" from div_tensor(other: &Tensor);
    div_tensor_mode_ = "div_.Tensor_mode" from div_tensor_mode(other: &Tensor, rounding_mode: Option<&str>);
    remainder_tensor_ = "remainder_.Tensor" from remainder_tensor(other: &Tensor);
    pow_tensor_ = "pow_.Tensor" from pow_tensor_tensor(exponent: &Tensor);
    pow_scalar_ = "pow_.Scalar" from pow_tensor_scalar(exponent: &Scalar);
    atan2_ = "atan2_" from atan2(other: &Tensor);
    lerp_scalar_ = "lerp_.Scalar" from lerp_scalar(end: &Tensor, weight: &Scalar);
    addcmul_ = "addcmul_" from addcmul(tensor1: &Tensor, tensor2: &Tensor, value: &Scalar);
    addcdiv_ = "addcdiv_" from addcdiv(tensor1: &Tensor, tensor2: &Tensor, value: &Scalar);
    eq_tensor_ = "eq_.Tensor" from eq_tensor(other: &Tensor);
    ne_tensor_ = "ne_.Tensor" from ne_tensor(other: &Tensor);
    lt_tensor_ = "lt_.Tensor" from lt_tensor(other: &Tensor);
    le_tensor_ = "le_.Tensor" from le_tensor(other: &Tensor);
    gt_tensor_ = "gt_.Tensor" from gt_tensor(other: &Tensor);
    ge_tensor_ = "ge_.Tensor" from ge_tensor(other: &Tensor);
    eq_scalar_ = "eq_.Scalar" from eq_scalar(other: &Scalar);
    ne_scalar_ = "ne_.Scalar" from ne_scalar(other: &Scalar);
    ge_scalar_ = "ge_.Scalar" from ge_scalar(other: &Scalar);
    logical_and_ = "logical_and_" from logical_and(other: &Tensor);
    logical_or_ = "logical_or_" from logical_or(other: &Tensor);
    logical_not_ = "logical_not_" from logical_not();
    bitwise_and_tensor_ = "bitwise_and_.Tensor" from bitwise_and_tensor(other: &Tensor);
    masked_fill_scalar_ = "masked_fill_.Scalar" from masked_fill_scalar(mask: &Tensor, value: &Scalar);
    clamp_ = "clamp_" from clamp(min: Option<&Scalar>, max: Option<&Scalar>);
    nan_to_num_ = "nan_to_num_" from nan_to_num(nan: Option<f64>, posinf: Option<f64>, neginf: Option<f64>);
    neg_ = "neg_" from neg();
    abs_ = "abs_" from abs();
    sign_ = "sign_" from sign();
    exp_ = "exp_" from exp();
    log_ = "log_" from log();
    log1p_ = "log1p_" from log1p();
    expm1_ = "expm1_" from expm1();
    sqrt_ = "sqrt_" from sqrt();
    rsqrt_ = "rsqrt_" from rsqrt();
    reciprocal_ = "reciprocal_" from reciprocal();
    sin_ = "sin_" from sin();
    cos_ = "cos_" from cos();
    tan_ = "tan_" from tan();
    tanh_ = "tanh_" from tanh();
    erf_ = "erf_" from erf();
    floor_ = "floor_" from floor();
    ceil_ = "ceil_" from ceil();
    round_ = "round_" from round();
    trunc_ = "trunc_" from trunc();
    sigmoid_ = "sigmoid_" from sigmoid();
    silu_ = "silu_" from silu();
    relu_ = "relu_" from relu();
    gelu_ = "gelu_" from gelu(approximate: &str);
    leaky_relu_ = "leaky_relu_" from leaky_relu(negative_slope: &Scalar);
    elu_ = "elu_" from elu(alpha: &Scalar, scale: &Scalar, input_scale: &Scalar);
    hardtanh_ = "hardtanh_" from hardtanh(min_val: &Scalar, max_val: &Scalar);
}
