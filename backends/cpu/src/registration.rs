//! Registration of the CPU kernels with the dispatcher, through the code that
//! `build.rs` generates from `backend.yaml`: the trait `CpuKernels` (one associated
//! function per supported op, with the op's typed kernel signature) and
//! `register::<K>()` (every kernel for the `CPU` dispatch key, through the generated
//! per-op `kernel` adapters that also serve boxed calls).
//!
//! Owns: `impl CpuKernels for Cpu` (thin forwarding from each op to its kernel
//! function in the kernel modules) and [`init`]. Must not: compute anything (kernels
//! live in the kernel modules) or list ops (`backend.yaml` does; the compiler checks
//! this table against the generated trait, so an op listed there without a line here,
//! or a kernel whose signature differs from the schema, fails the build).
//!
//! Structured ops: every functional and in-place op of `native_functions.yaml` with a
//! `structured_delegate` has a CPU kernel of its own, so the generator derives none of
//! them (an op left out of `backend.yaml` would be derived from its out= kernel plus
//! the Meta kernel, and [`init`] would then have to call `opal_meta::init()`; today
//! nothing needs Meta kernels, so the CPU backend does not depend on `opal-meta`).
//!
//! CompositeImplicitAutograd ops (`reshape`, `matmul`, ...) are not registered here:
//! their kernels live in `opal`'s runtime and run on every backend.

use crate::{autogen, compare, elementwise, factory, index, linalg, nn, reduce, shape};
use opal::dispatch::DispatchKeySet;
use opal::{DType, Device, Layout, MemoryFormat, OpalError, Result, Scalar, Tensor};
use std::sync::OnceLock;

/// The generated kernel trait and registration function of the CPU backend.
#[allow(
    dead_code,
    reason = "the generated constants (DEVICE, BACKEND, ...) describe the backend; init uses only register"
)]
pub mod generated {
    include!(concat!(env!("OUT_DIR"), "/backend_cpu.rs"));
}

use generated::CpuKernels;

/// The CPU backend: the type that implements the generated [`CpuKernels`] trait.
pub struct Cpu;

/// One line per op: `op => kernel_path(args) -> returns;` becomes the trait's
/// associated function, forwarding to the kernel. The key set is unused: CPU kernels
/// are the end of dispatch and never redispatch.
macro_rules! forward {
    ($($op:ident => $($path:ident)::+ ( $($a:ident : $t:ty),* ) -> $r:ty;)*) => {$(
        #[inline]
        #[allow(clippy::too_many_arguments, reason = "the schema's argument list")]
        fn $op(_ks: DispatchKeySet, $($a: $t),*) -> Result<$r> {
            $($path)::+($($a),*)
        }
    )*};
}

impl CpuKernels for Cpu {
    forward! {
        // Binary arithmetic.
        add_tensor => elementwise::binary::add_tensor(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Tensor;
        add_tensor_ => elementwise::binary::add_(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Tensor;
        add_out => elementwise::binary::add_out(self_: &Tensor, other: &Tensor, alpha: &Scalar, out: &Tensor) -> Tensor;
        add_scalar => elementwise::binary::add_scalar(self_: &Tensor, other: &Scalar, alpha: &Scalar) -> Tensor;
        add_scalar_ => elementwise::binary::add_scalar_(self_: &Tensor, other: &Scalar, alpha: &Scalar) -> Tensor;
        add_scalar_out => elementwise::binary::add_scalar_out(self_: &Tensor, other: &Scalar, alpha: &Scalar, out: &Tensor) -> Tensor;
        sub_out => elementwise::binary::sub_out(self_: &Tensor, other: &Tensor, alpha: &Scalar, out: &Tensor) -> Tensor;
        sub_tensor => elementwise::binary::sub_tensor(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Tensor;
        sub_tensor_ => elementwise::binary::sub_(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Tensor;
        mul_tensor => elementwise::binary::mul_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
        mul_tensor_ => elementwise::binary::mul_(self_: &Tensor, other: &Tensor) -> Tensor;
        mul_out => elementwise::binary::mul_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        mul_scalar => elementwise::binary::mul_scalar(self_: &Tensor, other: &Scalar) -> Tensor;
        mul_scalar_ => elementwise::binary::mul_scalar_(self_: &Tensor, other: &Scalar) -> Tensor;
        mul_scalar_out => elementwise::binary::mul_scalar_out(self_: &Tensor, other: &Scalar, out: &Tensor) -> Tensor;
        div_tensor => elementwise::binary::div_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
        div_tensor_ => elementwise::binary::div_(self_: &Tensor, other: &Tensor) -> Tensor;
        div_out => elementwise::binary::div_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        div_tensor_mode => elementwise::binary::div_tensor_mode(self_: &Tensor, other: &Tensor, rounding_mode: Option<&str>) -> Tensor;
        div_tensor_mode_ => elementwise::binary::div_tensor_mode_(self_: &Tensor, other: &Tensor, rounding_mode: Option<&str>) -> Tensor;
        div_out_mode => elementwise::binary::div_out_mode(self_: &Tensor, other: &Tensor, rounding_mode: Option<&str>, out: &Tensor) -> Tensor;
        remainder_tensor_out => elementwise::binary::remainder_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        remainder_tensor => elementwise::binary::remainder_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
        remainder_tensor_ => elementwise::binary::remainder_(self_: &Tensor, other: &Tensor) -> Tensor;
        pow_tensor_tensor_out => elementwise::binary::pow_tensor_tensor_out(self_: &Tensor, exponent: &Tensor, out: &Tensor) -> Tensor;
        pow_tensor_tensor => elementwise::binary::pow_tensor_tensor(self_: &Tensor, exponent: &Tensor) -> Tensor;
        pow_tensor_ => elementwise::binary::pow_tensor_(self_: &Tensor, exponent: &Tensor) -> Tensor;
        pow_tensor_scalar_out => elementwise::binary::pow_tensor_scalar_out(self_: &Tensor, exponent: &Scalar, out: &Tensor) -> Tensor;
        pow_tensor_scalar => elementwise::binary::pow_tensor_scalar(self_: &Tensor, exponent: &Scalar) -> Tensor;
        pow_scalar_ => elementwise::binary::pow_scalar_(self_: &Tensor, exponent: &Scalar) -> Tensor;
        atan2_out => elementwise::binary::atan2_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        atan2_ => elementwise::binary::atan2_(self_: &Tensor, other: &Tensor) -> Tensor;
        atan2 => elementwise::binary::atan2(self_: &Tensor, other: &Tensor) -> Tensor;
        maximum => elementwise::binary::maximum(self_: &Tensor, other: &Tensor) -> Tensor;
        maximum_out => elementwise::binary::maximum_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        minimum => elementwise::binary::minimum(self_: &Tensor, other: &Tensor) -> Tensor;
        minimum_out => elementwise::binary::minimum_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        // Ternary (lerp, addcmul, addcdiv).
        lerp_scalar_ => elementwise::ternary::lerp_scalar_(self_: &Tensor, end: &Tensor, weight: &Scalar) -> Tensor;
        lerp_scalar_out => elementwise::ternary::lerp_scalar_out(self_: &Tensor, end: &Tensor, weight: &Scalar, out: &Tensor) -> Tensor;
        lerp_scalar => elementwise::ternary::lerp_scalar(self_: &Tensor, end: &Tensor, weight: &Scalar) -> Tensor;
        addcmul_out => elementwise::ternary::addcmul_out(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar, out: &Tensor) -> Tensor;
        addcmul => elementwise::ternary::addcmul(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar) -> Tensor;
        addcmul_ => elementwise::ternary::addcmul_(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar) -> Tensor;
        addcdiv_out => elementwise::ternary::addcdiv_out(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar, out: &Tensor) -> Tensor;
        addcdiv => elementwise::ternary::addcdiv(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar) -> Tensor;
        addcdiv_ => elementwise::ternary::addcdiv_(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar) -> Tensor;
        // Comparison, logical, bitwise.
        eq_tensor_ => compare::eq_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
        eq_tensor_out => compare::eq_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        eq_tensor => compare::eq_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
        ne_tensor_out => compare::ne_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        ne_tensor => compare::ne_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
        ne_tensor_ => compare::ne_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
        lt_tensor_out => compare::lt_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        lt_tensor => compare::lt_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
        lt_tensor_ => compare::lt_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
        le_tensor_out => compare::le_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        le_tensor => compare::le_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
        le_tensor_ => compare::le_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
        gt_tensor_out => compare::gt_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        gt_tensor => compare::gt_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
        gt_tensor_ => compare::gt_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
        ge_tensor_out => compare::ge_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        ge_tensor => compare::ge_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
        ge_tensor_ => compare::ge_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
        eq_scalar_ => compare::eq_scalar_(self_: &Tensor, other: &Scalar) -> Tensor;
        eq_scalar_out => compare::eq_scalar_out(self_: &Tensor, other: &Scalar, out: &Tensor) -> Tensor;
        eq_scalar => compare::eq_scalar(self_: &Tensor, other: &Scalar) -> Tensor;
        logical_and => compare::logical_and(self_: &Tensor, other: &Tensor) -> Tensor;
        logical_and_ => compare::logical_and_(self_: &Tensor, other: &Tensor) -> Tensor;
        logical_and_out => compare::logical_and_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        logical_or => compare::logical_or(self_: &Tensor, other: &Tensor) -> Tensor;
        logical_or_ => compare::logical_or_(self_: &Tensor, other: &Tensor) -> Tensor;
        logical_or_out => compare::logical_or_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        logical_not => compare::logical_not(self_: &Tensor) -> Tensor;
        logical_not_ => compare::logical_not_(self_: &Tensor) -> Tensor;
        logical_not_out => compare::logical_not_out(self_: &Tensor, out: &Tensor) -> Tensor;
        bitwise_and_tensor_out => compare::bitwise_and_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        bitwise_and_tensor => compare::bitwise_and_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
        bitwise_and_tensor_ => compare::bitwise_and_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
        // Selection (where, masked_fill, clamp, nan_to_num, isnan).
        where_self => elementwise::select::where_self(condition: &Tensor, self_: &Tensor, other: &Tensor) -> Tensor;
        where_self_out => elementwise::select::where_self_out(condition: &Tensor, self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
        masked_fill_scalar_ => elementwise::select::masked_fill_scalar_(self_: &Tensor, mask: &Tensor, value: &Scalar) -> Tensor;
        masked_fill_scalar => elementwise::select::masked_fill_scalar(self_: &Tensor, mask: &Tensor, value: &Scalar) -> Tensor;
        clamp => elementwise::select::clamp(self_: &Tensor, min: Option<&Scalar>, max: Option<&Scalar>) -> Tensor;
        clamp_ => elementwise::select::clamp_(self_: &Tensor, min: Option<&Scalar>, max: Option<&Scalar>) -> Tensor;
        clamp_out => elementwise::select::clamp_out(self_: &Tensor, min: Option<&Scalar>, max: Option<&Scalar>, out: &Tensor) -> Tensor;
        nan_to_num => elementwise::select::nan_to_num(self_: &Tensor, nan: Option<f64>, posinf: Option<f64>, neginf: Option<f64>) -> Tensor;
        nan_to_num_ => elementwise::select::nan_to_num_(self_: &Tensor, nan: Option<f64>, posinf: Option<f64>, neginf: Option<f64>) -> Tensor;
        nan_to_num_out => elementwise::select::nan_to_num_out(self_: &Tensor, nan: Option<f64>, posinf: Option<f64>, neginf: Option<f64>, out: &Tensor) -> Tensor;
        isnan => elementwise::select::isnan(self_: &Tensor) -> Tensor;
        // Unary math.
        neg => elementwise::unary::neg(self_: &Tensor) -> Tensor;
        neg_ => elementwise::unary::neg_(self_: &Tensor) -> Tensor;
        neg_out => elementwise::unary::neg_out(self_: &Tensor, out: &Tensor) -> Tensor;
        abs => elementwise::unary::abs(self_: &Tensor) -> Tensor;
        abs_ => elementwise::unary::abs_(self_: &Tensor) -> Tensor;
        abs_out => elementwise::unary::abs_out(self_: &Tensor, out: &Tensor) -> Tensor;
        sign => elementwise::unary::sign(self_: &Tensor) -> Tensor;
        sign_ => elementwise::unary::sign_(self_: &Tensor) -> Tensor;
        sign_out => elementwise::unary::sign_out(self_: &Tensor, out: &Tensor) -> Tensor;
        exp => elementwise::unary::exp(self_: &Tensor) -> Tensor;
        exp_ => elementwise::unary::exp_(self_: &Tensor) -> Tensor;
        exp_out => elementwise::unary::exp_out(self_: &Tensor, out: &Tensor) -> Tensor;
        log => elementwise::unary::log(self_: &Tensor) -> Tensor;
        log_ => elementwise::unary::log_(self_: &Tensor) -> Tensor;
        log_out => elementwise::unary::log_out(self_: &Tensor, out: &Tensor) -> Tensor;
        log1p => elementwise::unary::log1p(self_: &Tensor) -> Tensor;
        log1p_ => elementwise::unary::log1p_(self_: &Tensor) -> Tensor;
        log1p_out => elementwise::unary::log1p_out(self_: &Tensor, out: &Tensor) -> Tensor;
        expm1 => elementwise::unary::expm1(self_: &Tensor) -> Tensor;
        expm1_ => elementwise::unary::expm1_(self_: &Tensor) -> Tensor;
        expm1_out => elementwise::unary::expm1_out(self_: &Tensor, out: &Tensor) -> Tensor;
        sqrt => elementwise::unary::sqrt(self_: &Tensor) -> Tensor;
        sqrt_ => elementwise::unary::sqrt_(self_: &Tensor) -> Tensor;
        sqrt_out => elementwise::unary::sqrt_out(self_: &Tensor, out: &Tensor) -> Tensor;
        rsqrt => elementwise::unary::rsqrt(self_: &Tensor) -> Tensor;
        rsqrt_ => elementwise::unary::rsqrt_(self_: &Tensor) -> Tensor;
        rsqrt_out => elementwise::unary::rsqrt_out(self_: &Tensor, out: &Tensor) -> Tensor;
        reciprocal => elementwise::unary::reciprocal(self_: &Tensor) -> Tensor;
        reciprocal_ => elementwise::unary::reciprocal_(self_: &Tensor) -> Tensor;
        reciprocal_out => elementwise::unary::reciprocal_out(self_: &Tensor, out: &Tensor) -> Tensor;
        sin => elementwise::unary::sin(self_: &Tensor) -> Tensor;
        sin_ => elementwise::unary::sin_(self_: &Tensor) -> Tensor;
        sin_out => elementwise::unary::sin_out(self_: &Tensor, out: &Tensor) -> Tensor;
        cos => elementwise::unary::cos(self_: &Tensor) -> Tensor;
        cos_ => elementwise::unary::cos_(self_: &Tensor) -> Tensor;
        cos_out => elementwise::unary::cos_out(self_: &Tensor, out: &Tensor) -> Tensor;
        tan => elementwise::unary::tan(self_: &Tensor) -> Tensor;
        tan_ => elementwise::unary::tan_(self_: &Tensor) -> Tensor;
        tan_out => elementwise::unary::tan_out(self_: &Tensor, out: &Tensor) -> Tensor;
        tanh => elementwise::unary::tanh(self_: &Tensor) -> Tensor;
        tanh_ => elementwise::unary::tanh_(self_: &Tensor) -> Tensor;
        tanh_out => elementwise::unary::tanh_out(self_: &Tensor, out: &Tensor) -> Tensor;
        erf => elementwise::unary::erf(self_: &Tensor) -> Tensor;
        erf_ => elementwise::unary::erf_(self_: &Tensor) -> Tensor;
        erf_out => elementwise::unary::erf_out(self_: &Tensor, out: &Tensor) -> Tensor;
        floor => elementwise::unary::floor(self_: &Tensor) -> Tensor;
        floor_ => elementwise::unary::floor_(self_: &Tensor) -> Tensor;
        floor_out => elementwise::unary::floor_out(self_: &Tensor, out: &Tensor) -> Tensor;
        ceil => elementwise::unary::ceil(self_: &Tensor) -> Tensor;
        ceil_ => elementwise::unary::ceil_(self_: &Tensor) -> Tensor;
        ceil_out => elementwise::unary::ceil_out(self_: &Tensor, out: &Tensor) -> Tensor;
        round => elementwise::unary::round(self_: &Tensor) -> Tensor;
        round_ => elementwise::unary::round_(self_: &Tensor) -> Tensor;
        round_out => elementwise::unary::round_out(self_: &Tensor, out: &Tensor) -> Tensor;
        trunc => elementwise::unary::trunc(self_: &Tensor) -> Tensor;
        trunc_ => elementwise::unary::trunc_(self_: &Tensor) -> Tensor;
        trunc_out => elementwise::unary::trunc_out(self_: &Tensor, out: &Tensor) -> Tensor;
        sigmoid => elementwise::unary::sigmoid(self_: &Tensor) -> Tensor;
        sigmoid_ => elementwise::unary::sigmoid_(self_: &Tensor) -> Tensor;
        sigmoid_out => elementwise::unary::sigmoid_out(self_: &Tensor, out: &Tensor) -> Tensor;
        // Activations.
        silu => elementwise::activation::silu(self_: &Tensor) -> Tensor;
        silu_ => elementwise::activation::silu_(self_: &Tensor) -> Tensor;
        silu_out => elementwise::activation::silu_out(self_: &Tensor, out: &Tensor) -> Tensor;
        relu => elementwise::activation::relu(self_: &Tensor) -> Tensor;
        relu_ => elementwise::activation::relu_(self_: &Tensor) -> Tensor;
        gelu_out => elementwise::activation::gelu_out(self_: &Tensor, approximate: &str, out: &Tensor) -> Tensor;
        gelu_ => elementwise::activation::gelu_(self_: &Tensor, approximate: &str) -> Tensor;
        gelu => elementwise::activation::gelu(self_: &Tensor, approximate: &str) -> Tensor;
        softplus_out => elementwise::activation::softplus_out(self_: &Tensor, beta: &Scalar, threshold: &Scalar, out: &Tensor) -> Tensor;
        softplus => elementwise::activation::softplus(self_: &Tensor, beta: &Scalar, threshold: &Scalar) -> Tensor;
        leaky_relu_out => elementwise::activation::leaky_relu_out(self_: &Tensor, negative_slope: &Scalar, out: &Tensor) -> Tensor;
        leaky_relu => elementwise::activation::leaky_relu(self_: &Tensor, negative_slope: &Scalar) -> Tensor;
        leaky_relu_ => elementwise::activation::leaky_relu_(self_: &Tensor, negative_slope: &Scalar) -> Tensor;
        elu_out => elementwise::activation::elu_out(self_: &Tensor, alpha: &Scalar, scale: &Scalar, input_scale: &Scalar, out: &Tensor) -> Tensor;
        elu => elementwise::activation::elu(self_: &Tensor, alpha: &Scalar, scale: &Scalar, input_scale: &Scalar) -> Tensor;
        elu_ => elementwise::activation::elu_(self_: &Tensor, alpha: &Scalar, scale: &Scalar, input_scale: &Scalar) -> Tensor;
        hardtanh_out => elementwise::activation::hardtanh_out(self_: &Tensor, min_val: &Scalar, max_val: &Scalar, out: &Tensor) -> Tensor;
        hardtanh => elementwise::activation::hardtanh(self_: &Tensor, min_val: &Scalar, max_val: &Scalar) -> Tensor;
        hardtanh_ => elementwise::activation::hardtanh_(self_: &Tensor, min_val: &Scalar, max_val: &Scalar) -> Tensor;
        // Activation backward.
        threshold_backward_grad_input => elementwise::backward::threshold_backward_grad_input(grad_output: &Tensor, self_: &Tensor, threshold: &Scalar, grad_input: &Tensor) -> Tensor;
        threshold_backward => elementwise::backward::threshold_backward(grad_output: &Tensor, self_: &Tensor, threshold: &Scalar) -> Tensor;
        gelu_backward_grad_input => elementwise::backward::gelu_backward_grad_input(grad_output: &Tensor, self_: &Tensor, approximate: &str, grad_input: &Tensor) -> Tensor;
        gelu_backward => elementwise::backward::gelu_backward(grad_output: &Tensor, self_: &Tensor, approximate: &str) -> Tensor;
        sigmoid_backward_grad_input => elementwise::backward::sigmoid_backward_grad_input(grad_output: &Tensor, output: &Tensor, grad_input: &Tensor) -> Tensor;
        sigmoid_backward => elementwise::backward::sigmoid_backward(grad_output: &Tensor, output: &Tensor) -> Tensor;
        tanh_backward_grad_input => elementwise::backward::tanh_backward_grad_input(grad_output: &Tensor, output: &Tensor, grad_input: &Tensor) -> Tensor;
        tanh_backward => elementwise::backward::tanh_backward(grad_output: &Tensor, output: &Tensor) -> Tensor;
        // Reductions.
        sum => reduce::sum::sum(self_: &Tensor, dtype: Option<DType>) -> Tensor;
        sum_dim_intlist => reduce::sum::sum_dim_intlist(self_: &Tensor, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Tensor;
        sum_intlist_out => reduce::sum::sum_intlist_out(self_: &Tensor, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>, out: &Tensor) -> Tensor;
        mean_dim => reduce::sum::mean_dim(self_: &Tensor, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Tensor;
        mean_out => reduce::sum::mean_out(self_: &Tensor, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>, out: &Tensor) -> Tensor;
        prod => reduce::sum::prod(self_: &Tensor, dtype: Option<DType>) -> Tensor;
        var_correction => reduce::sum::var_correction(self_: &Tensor, dim: Option<&[i64]>, correction: Option<&Scalar>, keepdim: bool) -> Tensor;
        var_correction_out => reduce::sum::var_correction_out(self_: &Tensor, dim: Option<&[i64]>, correction: Option<&Scalar>, keepdim: bool, out: &Tensor) -> Tensor;
        std_correction => reduce::sum::std_correction(self_: &Tensor, dim: Option<&[i64]>, correction: Option<&Scalar>, keepdim: bool) -> Tensor;
        std_correction_out => reduce::sum::std_correction_out(self_: &Tensor, dim: Option<&[i64]>, correction: Option<&Scalar>, keepdim: bool, out: &Tensor) -> Tensor;
        logsumexp => reduce::sum::logsumexp(self_: &Tensor, dim: &[i64], keepdim: bool) -> Tensor;
        logsumexp_out => reduce::sum::logsumexp_out(self_: &Tensor, dim: &[i64], keepdim: bool, out: &Tensor) -> Tensor;
        all => reduce::sum::all(self_: &Tensor) -> Tensor;
        all_all_out => reduce::sum::all_all_out(self_: &Tensor, out: &Tensor) -> Tensor;
        any => reduce::sum::any(self_: &Tensor) -> Tensor;
        any_all_out => reduce::sum::any_all_out(self_: &Tensor, out: &Tensor) -> Tensor;
        linalg_vector_norm => reduce::sum::linalg_vector_norm(self_: &Tensor, ord: &Scalar, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Tensor;
        linalg_vector_norm_out => reduce::sum::linalg_vector_norm_out(self_: &Tensor, ord: &Scalar, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>, out: &Tensor) -> Tensor;
        // Min/max reductions.
        amax => reduce::minmax::amax(self_: &Tensor, dim: &[i64], keepdim: bool) -> Tensor;
        amax_out => reduce::minmax::amax_out(self_: &Tensor, dim: &[i64], keepdim: bool, out: &Tensor) -> Tensor;
        amin => reduce::minmax::amin(self_: &Tensor, dim: &[i64], keepdim: bool) -> Tensor;
        amin_out => reduce::minmax::amin_out(self_: &Tensor, dim: &[i64], keepdim: bool, out: &Tensor) -> Tensor;
        max_dim => reduce::minmax::max_dim(self_: &Tensor, dim: i64, keepdim: bool) -> (Tensor, Tensor);
        max_dim_max => reduce::minmax::max_dim_max(self_: &Tensor, dim: i64, keepdim: bool, max: &Tensor, max_values: &Tensor) -> (Tensor, Tensor);
        min_dim => reduce::minmax::min_dim(self_: &Tensor, dim: i64, keepdim: bool) -> (Tensor, Tensor);
        min_dim_min => reduce::minmax::min_dim_min(self_: &Tensor, dim: i64, keepdim: bool, min: &Tensor, min_indices: &Tensor) -> (Tensor, Tensor);
        argmax => reduce::minmax::argmax(self_: &Tensor, dim: Option<i64>, keepdim: bool) -> Tensor;
        argmax_out => reduce::minmax::argmax_out(self_: &Tensor, dim: Option<i64>, keepdim: bool, out: &Tensor) -> Tensor;
        argmin => reduce::minmax::argmin(self_: &Tensor, dim: Option<i64>, keepdim: bool) -> Tensor;
        argmin_out => reduce::minmax::argmin_out(self_: &Tensor, dim: Option<i64>, keepdim: bool, out: &Tensor) -> Tensor;
        // Scans.
        cumsum => reduce::scan::cumsum(self_: &Tensor, dim: i64, dtype: Option<DType>) -> Tensor;
        cumsum_ => reduce::scan::cumsum_(self_: &Tensor, dim: i64, dtype: Option<DType>) -> Tensor;
        cumsum_out => reduce::scan::cumsum_out(self_: &Tensor, dim: i64, dtype: Option<DType>, out: &Tensor) -> Tensor;
        // Sorting.
        topk_values => reduce::sort::topk_values(self_: &Tensor, k: i64, dim: i64, largest: bool, sorted: bool, values: &Tensor, indices: &Tensor) -> (Tensor, Tensor);
        topk => reduce::sort::topk(self_: &Tensor, k: i64, dim: i64, largest: bool, sorted: bool) -> (Tensor, Tensor);
        sort_values => reduce::sort::sort_values(self_: &Tensor, dim: i64, descending: bool, values: &Tensor, indices: &Tensor) -> (Tensor, Tensor);
        sort => reduce::sort::sort(self_: &Tensor, dim: i64, descending: bool) -> (Tensor, Tensor);
        // Neural-network ops (softmax, conv, pooling, norms, losses, embedding).
        _softmax => nn::_softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Tensor;
        _softmax_out => nn::_softmax_out(self_: &Tensor, dim: i64, half_to_float: bool, out: &Tensor) -> Tensor;
        _log_softmax => nn::_log_softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Tensor;
        _log_softmax_out => nn::_log_softmax_out(self_: &Tensor, dim: i64, half_to_float: bool, out: &Tensor) -> Tensor;
        _softmax_backward_data => nn::_softmax_backward_data(grad_output: &Tensor, output: &Tensor, dim: i64, input_dtype: DType) -> Tensor;
        _softmax_backward_data_out => nn::_softmax_backward_data_out(grad_output: &Tensor, output: &Tensor, dim: i64, input_dtype: DType, grad_input: &Tensor) -> Tensor;
        _log_softmax_backward_data => nn::_log_softmax_backward_data(grad_output: &Tensor, output: &Tensor, dim: i64, input_dtype: DType) -> Tensor;
        _log_softmax_backward_data_out => nn::_log_softmax_backward_data_out(grad_output: &Tensor, output: &Tensor, dim: i64, input_dtype: DType, out: &Tensor) -> Tensor;
        convolution => nn::convolution(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, stride: &[i64], padding: &[i64], dilation: &[i64], transposed: bool, output_padding: &[i64], groups: i64) -> Tensor;
        max_pool2d_with_indices_out => nn::max_pool2d_with_indices_out(self_: &Tensor, kernel_size: &[i64], stride: &[i64], padding: &[i64], dilation: &[i64], ceil_mode: bool, out: &Tensor, indices: &Tensor) -> (Tensor, Tensor);
        max_pool2d_with_indices => nn::max_pool2d_with_indices(self_: &Tensor, kernel_size: &[i64], stride: &[i64], padding: &[i64], dilation: &[i64], ceil_mode: bool) -> (Tensor, Tensor);
        avg_pool2d_out => nn::avg_pool2d_out(self_: &Tensor, kernel_size: &[i64], stride: &[i64], padding: &[i64], ceil_mode: bool, count_include_pad: bool, divisor_override: Option<i64>, out: &Tensor) -> Tensor;
        avg_pool2d => nn::avg_pool2d(self_: &Tensor, kernel_size: &[i64], stride: &[i64], padding: &[i64], ceil_mode: bool, count_include_pad: bool, divisor_override: Option<i64>) -> Tensor;
        _adaptive_avg_pool2d => nn::_adaptive_avg_pool2d(self_: &Tensor, output_size: &[i64]) -> Tensor;
        max_pool2d_with_indices_backward_grad_input => nn::max_pool2d_with_indices_backward_grad_input(grad_output: &Tensor, self_: &Tensor, kernel_size: &[i64], stride: &[i64], padding: &[i64], dilation: &[i64], ceil_mode: bool, indices: &Tensor, grad_input: &Tensor) -> Tensor;
        max_pool2d_with_indices_backward => nn::max_pool2d_with_indices_backward(grad_output: &Tensor, self_: &Tensor, kernel_size: &[i64], stride: &[i64], padding: &[i64], dilation: &[i64], ceil_mode: bool, indices: &Tensor) -> Tensor;
        native_layer_norm => nn::native_layer_norm(input: &Tensor, normalized_shape: &[i64], weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64) -> (Tensor, Tensor, Tensor);
        native_dropout => nn::native_dropout(input: &Tensor, p: f64, train: Option<bool>) -> (Tensor, Tensor);
        native_dropout_out => nn::native_dropout_out(input: &Tensor, p: f64, train: Option<bool>, out0: &Tensor, out1: &Tensor) -> (Tensor, Tensor);
        native_dropout_backward => nn::native_dropout_backward(grad_output: &Tensor, mask: &Tensor, scale: f64) -> Tensor;
        native_dropout_backward_out => nn::native_dropout_backward_out(grad_output: &Tensor, mask: &Tensor, scale: f64, out: &Tensor) -> Tensor;
        native_batch_norm => nn::native_batch_norm(input: &Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, running_mean: Option<&Tensor>, running_var: Option<&Tensor>, training: bool, momentum: f64, eps: f64) -> (Tensor, Tensor, Tensor);
        upsample_nearest2d_out => nn::upsample_nearest2d_out(self_: &Tensor, output_size: &[i64], scales_h: Option<f64>, scales_w: Option<f64>, out: &Tensor) -> Tensor;
        upsample_nearest2d => nn::upsample_nearest2d(self_: &Tensor, output_size: &[i64], scales_h: Option<f64>, scales_w: Option<f64>) -> Tensor;
        embedding => nn::embedding(weight: &Tensor, indices: &Tensor, padding_idx: i64, scale_grad_by_freq: bool, sparse: bool) -> Tensor;
        embedding_dense_backward => nn::embedding_dense_backward(grad_output: &Tensor, indices: &Tensor, num_weights: i64, padding_idx: i64, scale_grad_by_freq: bool) -> Tensor;
        nll_loss_forward_output => nn::nll_loss_forward_output(self_: &Tensor, target: &Tensor, weight: Option<&Tensor>, reduction: i64, ignore_index: i64, output: &Tensor, total_weight: &Tensor) -> (Tensor, Tensor);
        nll_loss_forward => nn::nll_loss_forward(self_: &Tensor, target: &Tensor, weight: Option<&Tensor>, reduction: i64, ignore_index: i64) -> (Tensor, Tensor);
        mse_loss_out => nn::mse_loss_out(self_: &Tensor, target: &Tensor, reduction: i64, out: &Tensor) -> Tensor;
        mse_loss => nn::mse_loss(self_: &Tensor, target: &Tensor, reduction: i64) -> Tensor;
        binary_cross_entropy => nn::binary_cross_entropy(self_: &Tensor, target: &Tensor, weight: Option<&Tensor>, reduction: i64) -> Tensor;
        binary_cross_entropy_out => nn::binary_cross_entropy_out(self_: &Tensor, target: &Tensor, weight: Option<&Tensor>, reduction: i64, out: &Tensor) -> Tensor;
        nll_loss_backward_grad_input => nn::nll_loss_backward_grad_input(grad_output: &Tensor, self_: &Tensor, target: &Tensor, weight: Option<&Tensor>, reduction: i64, ignore_index: i64, total_weight: &Tensor, grad_input: &Tensor) -> Tensor;
        nll_loss_backward => nn::nll_loss_backward(grad_output: &Tensor, self_: &Tensor, target: &Tensor, weight: Option<&Tensor>, reduction: i64, ignore_index: i64, total_weight: &Tensor) -> Tensor;
        mse_loss_backward_grad_input => nn::mse_loss_backward_grad_input(grad_output: &Tensor, self_: &Tensor, target: &Tensor, reduction: i64, grad_input: &Tensor) -> Tensor;
        mse_loss_backward => nn::mse_loss_backward(grad_output: &Tensor, self_: &Tensor, target: &Tensor, reduction: i64) -> Tensor;
        // Linear algebra.
        mm => linalg::mm(self_: &Tensor, mat2: &Tensor) -> Tensor;
        mm_out => linalg::mm_out(self_: &Tensor, mat2: &Tensor, out: &Tensor) -> Tensor;
        bmm => linalg::bmm(self_: &Tensor, mat2: &Tensor) -> Tensor;
        bmm_out => linalg::bmm_out(self_: &Tensor, mat2: &Tensor, out: &Tensor) -> Tensor;
        addmm_out => linalg::addmm_out(self_: &Tensor, mat1: &Tensor, mat2: &Tensor, beta: &Scalar, alpha: &Scalar, out: &Tensor) -> Tensor;
        addmm => linalg::addmm(self_: &Tensor, mat1: &Tensor, mat2: &Tensor, beta: &Scalar, alpha: &Scalar) -> Tensor;
        addmm_ => linalg::addmm_(self_: &Tensor, mat1: &Tensor, mat2: &Tensor, beta: &Scalar, alpha: &Scalar) -> Tensor;
        dot => linalg::dot(self_: &Tensor, tensor: &Tensor) -> Tensor;
        dot_out => linalg::dot_out(self_: &Tensor, tensor: &Tensor, out: &Tensor) -> Tensor;
        baddbmm => linalg::baddbmm(self_: &Tensor, batch1: &Tensor, batch2: &Tensor, beta: &Scalar, alpha: &Scalar) -> Tensor;
        baddbmm_ => linalg::baddbmm_(self_: &Tensor, batch1: &Tensor, batch2: &Tensor, beta: &Scalar, alpha: &Scalar) -> Tensor;
        baddbmm_out => linalg::baddbmm_out(self_: &Tensor, batch1: &Tensor, batch2: &Tensor, beta: &Scalar, alpha: &Scalar, out: &Tensor) -> Tensor;
        // Shape, views and copies.
        view => shape::view(self_: &Tensor, size: &[i64]) -> Tensor;
        permute => shape::permute(self_: &Tensor, dims: &[i64]) -> Tensor;
        transpose_int => shape::transpose_int(self_: &Tensor, dim0: i64, dim1: i64) -> Tensor;
        t => shape::t(self_: &Tensor) -> Tensor;
        expand => shape::expand(self_: &Tensor, size: &[i64], implicit: bool) -> Tensor;
        squeeze_dim => shape::squeeze_dim(self_: &Tensor, dim: i64) -> Tensor;
        unsqueeze => shape::unsqueeze(self_: &Tensor, dim: i64) -> Tensor;
        slice_tensor => shape::slice_tensor(self_: &Tensor, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Tensor;
        select_int => shape::select_int(self_: &Tensor, dim: i64, index: i64) -> Tensor;
        flip => shape::flip(self_: &Tensor, dims: &[i64]) -> Tensor;
        roll => shape::roll(self_: &Tensor, shifts: &[i64], dims: &[i64]) -> Tensor;
        repeat => shape::repeat(self_: &Tensor, repeats: &[i64]) -> Tensor;
        constant_pad_nd => shape::constant_pad_nd(self_: &Tensor, pad: &[i64], value: &Scalar) -> Tensor;
        _to_copy => shape::_to_copy(self_: &Tensor, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>, non_blocking: bool, memory_format: Option<MemoryFormat>) -> Tensor;
        cat => shape::cat(tensors: &[Tensor], dim: i64) -> Tensor;
        cat_out => shape::cat_out(tensors: &[Tensor], dim: i64, out: &Tensor) -> Tensor;
        stack => shape::stack(tensors: &[Tensor], dim: i64) -> Tensor;
        stack_out => shape::stack_out(tensors: &[Tensor], dim: i64, out: &Tensor) -> Tensor;
        tril_ => shape::tril_(self_: &Tensor, diagonal: i64) -> Tensor;
        tril_out => shape::tril_out(self_: &Tensor, diagonal: i64, out: &Tensor) -> Tensor;
        tril => shape::tril(self_: &Tensor, diagonal: i64) -> Tensor;
        triu_ => shape::triu_(self_: &Tensor, diagonal: i64) -> Tensor;
        triu_out => shape::triu_out(self_: &Tensor, diagonal: i64, out: &Tensor) -> Tensor;
        triu => shape::triu(self_: &Tensor, diagonal: i64) -> Tensor;
        // Indexing.
        index_select_out => index::index_select_out(self_: &Tensor, dim: i64, index: &Tensor, out: &Tensor) -> Tensor;
        index_select => index::index_select(self_: &Tensor, dim: i64, index: &Tensor) -> Tensor;
        gather_out => index::gather_out(self_: &Tensor, dim: i64, index: &Tensor, sparse_grad: bool, out: &Tensor) -> Tensor;
        gather => index::gather(self_: &Tensor, dim: i64, index: &Tensor, sparse_grad: bool) -> Tensor;
        scatter_src => index::scatter_src(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Tensor;
        scatter_src_ => index::scatter_src_(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Tensor;
        scatter_src_out => index::scatter_src_out(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor, out: &Tensor) -> Tensor;
        scatter_add => index::scatter_add(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Tensor;
        scatter_add_ => index::scatter_add_(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Tensor;
        scatter_add_out => index::scatter_add_out(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor, out: &Tensor) -> Tensor;
        index_tensor => index::index_tensor(self_: &Tensor, indices: &[Option<Tensor>]) -> Tensor;
        index_tensor_out => index::index_tensor_out(self_: &Tensor, indices: &[Option<Tensor>], out: &Tensor) -> Tensor;
        // Factories and random.
        empty_memory_format => factory::empty(size: &[i64], dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>, memory_format: Option<MemoryFormat>) -> Tensor;
        zeros => factory::zeros(size: &[i64], dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
        ones => factory::ones(size: &[i64], dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
        full => factory::full(size: &[i64], fill_value: &Scalar, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
        arange_start_step => factory::arange_start_step(start: &Scalar, end: &Scalar, step: &Scalar, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
        linspace => factory::linspace(start: &Scalar, end: &Scalar, steps: i64, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
        eye => factory::eye(n: i64, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
        zeros_like => factory::zeros_like(self_: &Tensor, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>, memory_format: Option<MemoryFormat>) -> Tensor;
        ones_like => factory::ones_like(self_: &Tensor, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>, memory_format: Option<MemoryFormat>) -> Tensor;
        full_like => factory::full_like(self_: &Tensor, fill_value: &Scalar, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>, memory_format: Option<MemoryFormat>) -> Tensor;
        rand => factory::rand(size: &[i64], dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
        randn => factory::randn(size: &[i64], dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
        // Autogen out= forms (and native_batch_norm.out): the functional result
        // copied into the outs.
        masked_fill_scalar_out => autogen::masked_fill_scalar_out(self_: &Tensor, mask: &Tensor, value: &Scalar, out: &Tensor) -> Tensor;
        isnan_out => autogen::isnan_out(self_: &Tensor, out: &Tensor) -> Tensor;
        relu_out => autogen::relu_out(self_: &Tensor, out: &Tensor) -> Tensor;
        sum_out => autogen::sum_out(self_: &Tensor, dtype: Option<DType>, out: &Tensor) -> Tensor;
        prod_out => autogen::prod_out(self_: &Tensor, dtype: Option<DType>, out: &Tensor) -> Tensor;
        convolution_out => autogen::convolution_out(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, stride: &[i64], padding: &[i64], dilation: &[i64], transposed: bool, output_padding: &[i64], groups: i64, out: &Tensor) -> Tensor;
        convolution_backward_out => autogen::convolution_backward_out(grad_output: &Tensor, input: &Tensor, weight: &Tensor, bias_sizes: Option<&[i64]>, stride: &[i64], padding: &[i64], dilation: &[i64], transposed: bool, output_padding: &[i64], groups: i64, output_mask: &[bool], out0: &Tensor, out1: &Tensor, out2: &Tensor) -> (Tensor, Tensor, Tensor);
        _adaptive_avg_pool2d_out => autogen::_adaptive_avg_pool2d_out(self_: &Tensor, output_size: &[i64], out: &Tensor) -> Tensor;
        native_layer_norm_out => autogen::native_layer_norm_out(input: &Tensor, normalized_shape: &[i64], weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64, out0: &Tensor, out1: &Tensor, out2: &Tensor) -> (Tensor, Tensor, Tensor);
        native_layer_norm_backward_out => autogen::native_layer_norm_backward_out(grad_out: &Tensor, input: &Tensor, normalized_shape: &[i64], mean: &Tensor, rstd: &Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, output_mask: &[bool], out0: &Tensor, out1: &Tensor, out2: &Tensor) -> (Tensor, Tensor, Tensor);
        native_batch_norm_out => autogen::native_batch_norm_out(input: &Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, running_mean: Option<&Tensor>, running_var: Option<&Tensor>, training: bool, momentum: f64, eps: f64, out: &Tensor, save_mean: &Tensor, save_invstd: &Tensor) -> (Tensor, Tensor, Tensor);
        embedding_out => autogen::embedding_out(weight: &Tensor, indices: &Tensor, padding_idx: i64, scale_grad_by_freq: bool, sparse: bool, out: &Tensor) -> Tensor;
        embedding_dense_backward_out => autogen::embedding_dense_backward_out(grad_output: &Tensor, indices: &Tensor, num_weights: i64, padding_idx: i64, scale_grad_by_freq: bool, out: &Tensor) -> Tensor;
        flip_out => autogen::flip_out(self_: &Tensor, dims: &[i64], out: &Tensor) -> Tensor;
        roll_out => autogen::roll_out(self_: &Tensor, shifts: &[i64], dims: &[i64], out: &Tensor) -> Tensor;
        repeat_out => autogen::repeat_out(self_: &Tensor, repeats: &[i64], out: &Tensor) -> Tensor;
        constant_pad_nd_out => autogen::constant_pad_nd_out(self_: &Tensor, pad: &[i64], value: &Scalar, out: &Tensor) -> Tensor;
        _to_copy_out => autogen::_to_copy_out(self_: &Tensor, non_blocking: bool, memory_format: Option<MemoryFormat>, out: &Tensor) -> Tensor;
        zeros_like_out => autogen::zeros_like_out(self_: &Tensor, memory_format: Option<MemoryFormat>, out: &Tensor) -> Tensor;
        ones_like_out => autogen::ones_like_out(self_: &Tensor, memory_format: Option<MemoryFormat>, out: &Tensor) -> Tensor;
        full_like_out => autogen::full_like_out(self_: &Tensor, fill_value: &Scalar, memory_format: Option<MemoryFormat>, out: &Tensor) -> Tensor;
    }

    // The two kernels below return an undefined tensor for a gradient that
    // `output_mask` did not request, as PyTorch does (boxed, it becomes `None`).

    #[inline]
    fn convolution_backward(
        _ks: DispatchKeySet,
        grad_output: &Tensor,
        input: &Tensor,
        weight: &Tensor,
        bias_sizes: Option<&[i64]>,
        stride: &[i64],
        padding: &[i64],
        dilation: &[i64],
        transposed: bool,
        output_padding: &[i64],
        groups: i64,
        output_mask: &[bool],
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let grads = nn::convolution_backward(
            grad_output,
            input,
            weight,
            bias_sizes,
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
            output_mask,
        )?;
        Ok(undefined_if_none(grads))
    }

    #[inline]
    fn native_layer_norm_backward(
        _ks: DispatchKeySet,
        grad_out: &Tensor,
        input: &Tensor,
        normalized_shape: &[i64],
        mean: &Tensor,
        rstd: &Tensor,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        output_mask: &[bool],
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let grads = nn::native_layer_norm_backward(
            grad_out,
            input,
            normalized_shape,
            mean,
            rstd,
            weight,
            bias,
            output_mask,
        )?;
        Ok(undefined_if_none(grads))
    }
}

/// Gradients not requested (`None`) as undefined tensors.
fn undefined_if_none(
    (a, b, c): (Option<Tensor>, Option<Tensor>, Option<Tensor>),
) -> (Tensor, Tensor, Tensor) {
    let d = |t: Option<Tensor>| t.unwrap_or_else(Tensor::undefined);
    (d(a), d(b), d(c))
}

/// Registers the CPU backend (every kernel of `backend.yaml` for the `CPU` dispatch
/// key) for the rest of the process. Idempotent: the first call registers, later calls
/// return the first call's outcome.
pub fn init() -> Result<()> {
    static DONE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        generated::register::<Cpu>()
            .map(|lib| lib.leak())
            .map_err(|e| e.to_string())
    })
    .clone()
    .map_err(OpalError::msg)
}
