//! Registration of the Meta kernels with the dispatcher, through the code that
//! `build.rs` generates from `backend.yaml` (opal-codegen's `BackendBuilder`): the
//! trait `MetaKernels` (one associated function per op, with the op's typed kernel
//! signature) and `register::<K>()` (every kernel for the `Meta` dispatch key,
//! through the generated per-op `kernel` adapters that also serve boxed calls).
//!
//! Owns: `impl MetaKernels for Meta` (thin forwarding from each op to its kernel
//! function in [`crate::kernels`]) and [`init`]. Must not: contain shape logic or
//! list ops (`backend.yaml` does; the compiler checks this table against the
//! generated trait).

use crate::kernels::{autogen, dropout, factory, index, linalg, nn, pointwise, reduce, view};
use opal::dispatch::DispatchKeySet;
use opal::{DType, Device, Layout, MemoryFormat, Result, Scalar, Tensor};
use std::sync::OnceLock;

/// The generated kernel trait and registration function of the Meta backend.
#[allow(
    missing_docs,
    reason = "generated code documents itself from the schemas"
)]
pub mod generated {
    include!(concat!(env!("OUT_DIR"), "/backend_meta.rs"));
}

/// The Meta backend: the type that implements the generated
/// [`generated::MetaKernels`] trait.
pub struct Meta;

/// One line per op: `module::kernel(args) -> returns;` becomes the trait's associated
/// function, forwarding to the kernel. The key set is unused: meta kernels never
/// redispatch.
macro_rules! meta_kernels {
    ($($m:ident :: $f:ident ( $($a:ident : $t:ty),* ) -> $r:ty;)*) => {
        impl generated::MetaKernels for Meta {
            $(
                #[inline]
                fn $f(_ks: DispatchKeySet, $($a: $t),*) -> Result<$r> {
                    $m::$f($($a),*)
                }
            )*
        }
    };
}

meta_kernels! {
    pointwise::add_tensor(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Tensor;
    pointwise::add_tensor_(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Tensor;
    pointwise::add_out(self_: &Tensor, other: &Tensor, alpha: &Scalar, out: &Tensor) -> Tensor;
    pointwise::add_scalar(self_: &Tensor, other: &Scalar, alpha: &Scalar) -> Tensor;
    pointwise::add_scalar_(self_: &Tensor, other: &Scalar, alpha: &Scalar) -> Tensor;
    pointwise::sub_out(self_: &Tensor, other: &Tensor, alpha: &Scalar, out: &Tensor) -> Tensor;
    pointwise::sub_tensor(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Tensor;
    pointwise::sub_tensor_(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Tensor;
    pointwise::mul_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::mul_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::mul_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::mul_scalar(self_: &Tensor, other: &Scalar) -> Tensor;
    pointwise::mul_scalar_(self_: &Tensor, other: &Scalar) -> Tensor;
    pointwise::div_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::div_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::div_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::div_tensor_mode(self_: &Tensor, other: &Tensor, rounding_mode: Option<&str>) -> Tensor;
    pointwise::div_tensor_mode_(self_: &Tensor, other: &Tensor, rounding_mode: Option<&str>) -> Tensor;
    pointwise::div_out_mode(self_: &Tensor, other: &Tensor, rounding_mode: Option<&str>, out: &Tensor) -> Tensor;
    pointwise::remainder_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::remainder_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::remainder_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::pow_tensor_tensor_out(self_: &Tensor, exponent: &Tensor, out: &Tensor) -> Tensor;
    pointwise::pow_tensor_tensor(self_: &Tensor, exponent: &Tensor) -> Tensor;
    pointwise::pow_tensor_(self_: &Tensor, exponent: &Tensor) -> Tensor;
    pointwise::pow_tensor_scalar_out(self_: &Tensor, exponent: &Scalar, out: &Tensor) -> Tensor;
    pointwise::pow_tensor_scalar(self_: &Tensor, exponent: &Scalar) -> Tensor;
    pointwise::pow_scalar_(self_: &Tensor, exponent: &Scalar) -> Tensor;
    pointwise::atan2_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::atan2_(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::atan2(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::maximum(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::maximum_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::minimum(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::minimum_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::lerp_scalar_(self_: &Tensor, end: &Tensor, weight: &Scalar) -> Tensor;
    pointwise::lerp_scalar_out(self_: &Tensor, end: &Tensor, weight: &Scalar, out: &Tensor) -> Tensor;
    pointwise::lerp_scalar(self_: &Tensor, end: &Tensor, weight: &Scalar) -> Tensor;
    pointwise::addcmul_out(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar, out: &Tensor) -> Tensor;
    pointwise::addcmul(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar) -> Tensor;
    pointwise::addcmul_(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar) -> Tensor;
    pointwise::addcdiv_out(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar, out: &Tensor) -> Tensor;
    pointwise::addcdiv(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar) -> Tensor;
    pointwise::addcdiv_(self_: &Tensor, tensor1: &Tensor, tensor2: &Tensor, value: &Scalar) -> Tensor;
    pointwise::eq_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::eq_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::eq_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::ne_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::ne_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::ne_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::lt_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::lt_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::lt_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::le_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::le_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::le_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::gt_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::gt_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::gt_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::ge_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::ge_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::ge_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::eq_scalar_(self_: &Tensor, other: &Scalar) -> Tensor;
    pointwise::eq_scalar_out(self_: &Tensor, other: &Scalar, out: &Tensor) -> Tensor;
    pointwise::eq_scalar(self_: &Tensor, other: &Scalar) -> Tensor;
    pointwise::logical_and(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::logical_and_(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::logical_and_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::logical_or(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::logical_or_(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::logical_or_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::logical_not(self_: &Tensor) -> Tensor;
    pointwise::logical_not_(self_: &Tensor) -> Tensor;
    pointwise::logical_not_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::bitwise_and_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::bitwise_and_tensor(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::bitwise_and_tensor_(self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::where_self(condition: &Tensor, self_: &Tensor, other: &Tensor) -> Tensor;
    pointwise::where_self_out(condition: &Tensor, self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    pointwise::masked_fill_scalar_(self_: &Tensor, mask: &Tensor, value: &Scalar) -> Tensor;
    pointwise::masked_fill_scalar(self_: &Tensor, mask: &Tensor, value: &Scalar) -> Tensor;
    pointwise::clamp(self_: &Tensor, min: Option<&Scalar>, max: Option<&Scalar>) -> Tensor;
    pointwise::clamp_(self_: &Tensor, min: Option<&Scalar>, max: Option<&Scalar>) -> Tensor;
    pointwise::clamp_out(self_: &Tensor, min: Option<&Scalar>, max: Option<&Scalar>, out: &Tensor) -> Tensor;
    pointwise::nan_to_num(self_: &Tensor, nan: Option<f64>, posinf: Option<f64>, neginf: Option<f64>) -> Tensor;
    pointwise::nan_to_num_(self_: &Tensor, nan: Option<f64>, posinf: Option<f64>, neginf: Option<f64>) -> Tensor;
    pointwise::nan_to_num_out(self_: &Tensor, nan: Option<f64>, posinf: Option<f64>, neginf: Option<f64>, out: &Tensor) -> Tensor;
    pointwise::isnan(self_: &Tensor) -> Tensor;
    pointwise::neg(self_: &Tensor) -> Tensor;
    pointwise::neg_(self_: &Tensor) -> Tensor;
    pointwise::neg_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::abs(self_: &Tensor) -> Tensor;
    pointwise::abs_(self_: &Tensor) -> Tensor;
    pointwise::abs_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::sign(self_: &Tensor) -> Tensor;
    pointwise::sign_(self_: &Tensor) -> Tensor;
    pointwise::sign_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::exp(self_: &Tensor) -> Tensor;
    pointwise::exp_(self_: &Tensor) -> Tensor;
    pointwise::exp_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::log(self_: &Tensor) -> Tensor;
    pointwise::log_(self_: &Tensor) -> Tensor;
    pointwise::log_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::log1p(self_: &Tensor) -> Tensor;
    pointwise::log1p_(self_: &Tensor) -> Tensor;
    pointwise::log1p_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::expm1(self_: &Tensor) -> Tensor;
    pointwise::expm1_(self_: &Tensor) -> Tensor;
    pointwise::expm1_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::sqrt(self_: &Tensor) -> Tensor;
    pointwise::sqrt_(self_: &Tensor) -> Tensor;
    pointwise::sqrt_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::rsqrt(self_: &Tensor) -> Tensor;
    pointwise::rsqrt_(self_: &Tensor) -> Tensor;
    pointwise::rsqrt_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::reciprocal(self_: &Tensor) -> Tensor;
    pointwise::reciprocal_(self_: &Tensor) -> Tensor;
    pointwise::reciprocal_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::sin(self_: &Tensor) -> Tensor;
    pointwise::sin_(self_: &Tensor) -> Tensor;
    pointwise::sin_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::cos(self_: &Tensor) -> Tensor;
    pointwise::cos_(self_: &Tensor) -> Tensor;
    pointwise::cos_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::tan(self_: &Tensor) -> Tensor;
    pointwise::tan_(self_: &Tensor) -> Tensor;
    pointwise::tan_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::tanh(self_: &Tensor) -> Tensor;
    pointwise::tanh_(self_: &Tensor) -> Tensor;
    pointwise::tanh_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::erf(self_: &Tensor) -> Tensor;
    pointwise::erf_(self_: &Tensor) -> Tensor;
    pointwise::erf_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::floor(self_: &Tensor) -> Tensor;
    pointwise::floor_(self_: &Tensor) -> Tensor;
    pointwise::floor_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::ceil(self_: &Tensor) -> Tensor;
    pointwise::ceil_(self_: &Tensor) -> Tensor;
    pointwise::ceil_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::round(self_: &Tensor) -> Tensor;
    pointwise::round_(self_: &Tensor) -> Tensor;
    pointwise::round_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::trunc(self_: &Tensor) -> Tensor;
    pointwise::trunc_(self_: &Tensor) -> Tensor;
    pointwise::trunc_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::sigmoid(self_: &Tensor) -> Tensor;
    pointwise::sigmoid_(self_: &Tensor) -> Tensor;
    pointwise::sigmoid_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::silu(self_: &Tensor) -> Tensor;
    pointwise::silu_(self_: &Tensor) -> Tensor;
    pointwise::silu_out(self_: &Tensor, out: &Tensor) -> Tensor;
    pointwise::relu(self_: &Tensor) -> Tensor;
    pointwise::relu_(self_: &Tensor) -> Tensor;
    pointwise::gelu_out(self_: &Tensor, approximate: &str, out: &Tensor) -> Tensor;
    pointwise::gelu_(self_: &Tensor, approximate: &str) -> Tensor;
    pointwise::gelu(self_: &Tensor, approximate: &str) -> Tensor;
    pointwise::softplus_out(self_: &Tensor, beta: &Scalar, threshold: &Scalar, out: &Tensor) -> Tensor;
    pointwise::softplus(self_: &Tensor, beta: &Scalar, threshold: &Scalar) -> Tensor;
    pointwise::leaky_relu_out(self_: &Tensor, negative_slope: &Scalar, out: &Tensor) -> Tensor;
    pointwise::leaky_relu(self_: &Tensor, negative_slope: &Scalar) -> Tensor;
    pointwise::leaky_relu_(self_: &Tensor, negative_slope: &Scalar) -> Tensor;
    pointwise::elu_out(self_: &Tensor, alpha: &Scalar, scale: &Scalar, input_scale: &Scalar, out: &Tensor) -> Tensor;
    pointwise::elu(self_: &Tensor, alpha: &Scalar, scale: &Scalar, input_scale: &Scalar) -> Tensor;
    pointwise::elu_(self_: &Tensor, alpha: &Scalar, scale: &Scalar, input_scale: &Scalar) -> Tensor;
    pointwise::hardtanh_out(self_: &Tensor, min_val: &Scalar, max_val: &Scalar, out: &Tensor) -> Tensor;
    pointwise::hardtanh(self_: &Tensor, min_val: &Scalar, max_val: &Scalar) -> Tensor;
    pointwise::hardtanh_(self_: &Tensor, min_val: &Scalar, max_val: &Scalar) -> Tensor;
    pointwise::threshold_backward_grad_input(grad_output: &Tensor, self_: &Tensor, threshold: &Scalar, grad_input: &Tensor) -> Tensor;
    pointwise::threshold_backward(grad_output: &Tensor, self_: &Tensor, threshold: &Scalar) -> Tensor;
    pointwise::gelu_backward_grad_input(grad_output: &Tensor, self_: &Tensor, approximate: &str, grad_input: &Tensor) -> Tensor;
    pointwise::gelu_backward(grad_output: &Tensor, self_: &Tensor, approximate: &str) -> Tensor;
    pointwise::sigmoid_backward_grad_input(grad_output: &Tensor, output: &Tensor, grad_input: &Tensor) -> Tensor;
    pointwise::sigmoid_backward(grad_output: &Tensor, output: &Tensor) -> Tensor;
    pointwise::tanh_backward_grad_input(grad_output: &Tensor, output: &Tensor, grad_input: &Tensor) -> Tensor;
    pointwise::tanh_backward(grad_output: &Tensor, output: &Tensor) -> Tensor;
    reduce::sum(self_: &Tensor, dtype: Option<DType>) -> Tensor;
    reduce::sum_dim_intlist(self_: &Tensor, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Tensor;
    reduce::sum_intlist_out(self_: &Tensor, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>, out: &Tensor) -> Tensor;
    reduce::mean_dim(self_: &Tensor, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Tensor;
    reduce::mean_out(self_: &Tensor, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>, out: &Tensor) -> Tensor;
    reduce::prod(self_: &Tensor, dtype: Option<DType>) -> Tensor;
    reduce::amax(self_: &Tensor, dim: &[i64], keepdim: bool) -> Tensor;
    reduce::amax_out(self_: &Tensor, dim: &[i64], keepdim: bool, out: &Tensor) -> Tensor;
    reduce::amin(self_: &Tensor, dim: &[i64], keepdim: bool) -> Tensor;
    reduce::amin_out(self_: &Tensor, dim: &[i64], keepdim: bool, out: &Tensor) -> Tensor;
    reduce::max_dim(self_: &Tensor, dim: i64, keepdim: bool) -> (Tensor, Tensor);
    reduce::max_dim_max(self_: &Tensor, dim: i64, keepdim: bool, max: &Tensor, max_values: &Tensor) -> (Tensor, Tensor);
    reduce::min_dim(self_: &Tensor, dim: i64, keepdim: bool) -> (Tensor, Tensor);
    reduce::min_dim_min(self_: &Tensor, dim: i64, keepdim: bool, min: &Tensor, min_indices: &Tensor) -> (Tensor, Tensor);
    reduce::argmax(self_: &Tensor, dim: Option<i64>, keepdim: bool) -> Tensor;
    reduce::argmax_out(self_: &Tensor, dim: Option<i64>, keepdim: bool, out: &Tensor) -> Tensor;
    reduce::argmin(self_: &Tensor, dim: Option<i64>, keepdim: bool) -> Tensor;
    reduce::argmin_out(self_: &Tensor, dim: Option<i64>, keepdim: bool, out: &Tensor) -> Tensor;
    reduce::var_correction(self_: &Tensor, dim: Option<&[i64]>, correction: Option<&Scalar>, keepdim: bool) -> Tensor;
    reduce::var_correction_out(self_: &Tensor, dim: Option<&[i64]>, correction: Option<&Scalar>, keepdim: bool, out: &Tensor) -> Tensor;
    reduce::std_correction(self_: &Tensor, dim: Option<&[i64]>, correction: Option<&Scalar>, keepdim: bool) -> Tensor;
    reduce::std_correction_out(self_: &Tensor, dim: Option<&[i64]>, correction: Option<&Scalar>, keepdim: bool, out: &Tensor) -> Tensor;
    reduce::logsumexp(self_: &Tensor, dim: &[i64], keepdim: bool) -> Tensor;
    reduce::logsumexp_out(self_: &Tensor, dim: &[i64], keepdim: bool, out: &Tensor) -> Tensor;
    reduce::all(self_: &Tensor) -> Tensor;
    reduce::all_all_out(self_: &Tensor, out: &Tensor) -> Tensor;
    reduce::any(self_: &Tensor) -> Tensor;
    reduce::any_all_out(self_: &Tensor, out: &Tensor) -> Tensor;
    reduce::linalg_vector_norm(self_: &Tensor, ord: &Scalar, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Tensor;
    reduce::linalg_vector_norm_out(self_: &Tensor, ord: &Scalar, dim: Option<&[i64]>, keepdim: bool, dtype: Option<DType>, out: &Tensor) -> Tensor;
    reduce::cumsum(self_: &Tensor, dim: i64, dtype: Option<DType>) -> Tensor;
    reduce::cumsum_(self_: &Tensor, dim: i64, dtype: Option<DType>) -> Tensor;
    reduce::cumsum_out(self_: &Tensor, dim: i64, dtype: Option<DType>, out: &Tensor) -> Tensor;
    reduce::topk_values(self_: &Tensor, k: i64, dim: i64, largest: bool, sorted: bool, values: &Tensor, indices: &Tensor) -> (Tensor, Tensor);
    reduce::topk(self_: &Tensor, k: i64, dim: i64, largest: bool, sorted: bool) -> (Tensor, Tensor);
    reduce::sort_values(self_: &Tensor, dim: i64, descending: bool, values: &Tensor, indices: &Tensor) -> (Tensor, Tensor);
    reduce::sort(self_: &Tensor, dim: i64, descending: bool) -> (Tensor, Tensor);
    reduce::_softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Tensor;
    reduce::_softmax_out(self_: &Tensor, dim: i64, half_to_float: bool, out: &Tensor) -> Tensor;
    reduce::_log_softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Tensor;
    reduce::_log_softmax_out(self_: &Tensor, dim: i64, half_to_float: bool, out: &Tensor) -> Tensor;
    reduce::_softmax_backward_data(grad_output: &Tensor, output: &Tensor, dim: i64, input_dtype: DType) -> Tensor;
    reduce::_softmax_backward_data_out(grad_output: &Tensor, output: &Tensor, dim: i64, input_dtype: DType, grad_input: &Tensor) -> Tensor;
    reduce::_log_softmax_backward_data(grad_output: &Tensor, output: &Tensor, dim: i64, input_dtype: DType) -> Tensor;
    reduce::_log_softmax_backward_data_out(grad_output: &Tensor, output: &Tensor, dim: i64, input_dtype: DType, out: &Tensor) -> Tensor;
    linalg::mm(self_: &Tensor, mat2: &Tensor) -> Tensor;
    linalg::mm_out(self_: &Tensor, mat2: &Tensor, out: &Tensor) -> Tensor;
    linalg::bmm(self_: &Tensor, mat2: &Tensor) -> Tensor;
    linalg::bmm_out(self_: &Tensor, mat2: &Tensor, out: &Tensor) -> Tensor;
    linalg::matmul(self_: &Tensor, other: &Tensor) -> Tensor;
    linalg::matmul_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Tensor;
    linalg::addmm_out(self_: &Tensor, mat1: &Tensor, mat2: &Tensor, beta: &Scalar, alpha: &Scalar, out: &Tensor) -> Tensor;
    linalg::addmm(self_: &Tensor, mat1: &Tensor, mat2: &Tensor, beta: &Scalar, alpha: &Scalar) -> Tensor;
    linalg::addmm_(self_: &Tensor, mat1: &Tensor, mat2: &Tensor, beta: &Scalar, alpha: &Scalar) -> Tensor;
    linalg::linear(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Tensor;
    linalg::linear_out(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, out: &Tensor) -> Tensor;
    linalg::dot(self_: &Tensor, tensor: &Tensor) -> Tensor;
    linalg::dot_out(self_: &Tensor, tensor: &Tensor, out: &Tensor) -> Tensor;
    linalg::baddbmm(self_: &Tensor, batch1: &Tensor, batch2: &Tensor, beta: &Scalar, alpha: &Scalar) -> Tensor;
    linalg::baddbmm_(self_: &Tensor, batch1: &Tensor, batch2: &Tensor, beta: &Scalar, alpha: &Scalar) -> Tensor;
    linalg::baddbmm_out(self_: &Tensor, batch1: &Tensor, batch2: &Tensor, beta: &Scalar, alpha: &Scalar, out: &Tensor) -> Tensor;
    nn::convolution(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, stride: &[i64], padding: &[i64], dilation: &[i64], transposed: bool, output_padding: &[i64], groups: i64) -> Tensor;
    nn::convolution_backward(grad_output: &Tensor, input: &Tensor, weight: &Tensor, bias_sizes: Option<&[i64]>, stride: &[i64], padding: &[i64], dilation: &[i64], transposed: bool, output_padding: &[i64], groups: i64, output_mask: &[bool]) -> (Tensor, Tensor, Tensor);
    nn::max_pool2d_with_indices_out(self_: &Tensor, kernel_size: &[i64], stride: &[i64], padding: &[i64], dilation: &[i64], ceil_mode: bool, out: &Tensor, indices: &Tensor) -> (Tensor, Tensor);
    nn::max_pool2d_with_indices(self_: &Tensor, kernel_size: &[i64], stride: &[i64], padding: &[i64], dilation: &[i64], ceil_mode: bool) -> (Tensor, Tensor);
    nn::avg_pool2d_out(self_: &Tensor, kernel_size: &[i64], stride: &[i64], padding: &[i64], ceil_mode: bool, count_include_pad: bool, divisor_override: Option<i64>, out: &Tensor) -> Tensor;
    nn::avg_pool2d(self_: &Tensor, kernel_size: &[i64], stride: &[i64], padding: &[i64], ceil_mode: bool, count_include_pad: bool, divisor_override: Option<i64>) -> Tensor;
    nn::_adaptive_avg_pool2d(self_: &Tensor, output_size: &[i64]) -> Tensor;
    nn::max_pool2d_with_indices_backward_grad_input(grad_output: &Tensor, self_: &Tensor, kernel_size: &[i64], stride: &[i64], padding: &[i64], dilation: &[i64], ceil_mode: bool, indices: &Tensor, grad_input: &Tensor) -> Tensor;
    nn::max_pool2d_with_indices_backward(grad_output: &Tensor, self_: &Tensor, kernel_size: &[i64], stride: &[i64], padding: &[i64], dilation: &[i64], ceil_mode: bool, indices: &Tensor) -> Tensor;
    nn::native_layer_norm(input: &Tensor, normalized_shape: &[i64], weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64) -> (Tensor, Tensor, Tensor);
    nn::native_batch_norm(input: &Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, running_mean: Option<&Tensor>, running_var: Option<&Tensor>, training: bool, momentum: f64, eps: f64) -> (Tensor, Tensor, Tensor);
    nn::native_batch_norm_out(input: &Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, running_mean: Option<&Tensor>, running_var: Option<&Tensor>, training: bool, momentum: f64, eps: f64, out: &Tensor, save_mean: &Tensor, save_invstd: &Tensor) -> (Tensor, Tensor, Tensor);
    nn::native_layer_norm_backward(grad_out: &Tensor, input: &Tensor, normalized_shape: &[i64], mean: &Tensor, rstd: &Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, output_mask: &[bool]) -> (Tensor, Tensor, Tensor);
    dropout::native_dropout(input: &Tensor, p: f64, train: Option<bool>) -> (Tensor, Tensor);
    dropout::native_dropout_out(input: &Tensor, p: f64, train: Option<bool>, out0: &Tensor, out1: &Tensor) -> (Tensor, Tensor);
    dropout::native_dropout_backward(grad_output: &Tensor, mask: &Tensor, scale: f64) -> Tensor;
    dropout::native_dropout_backward_out(grad_output: &Tensor, mask: &Tensor, scale: f64, out: &Tensor) -> Tensor;
    nn::upsample_nearest2d_out(self_: &Tensor, output_size: &[i64], scales_h: Option<f64>, scales_w: Option<f64>, out: &Tensor) -> Tensor;
    nn::upsample_nearest2d(self_: &Tensor, output_size: &[i64], scales_h: Option<f64>, scales_w: Option<f64>) -> Tensor;
    nn::embedding(weight: &Tensor, indices: &Tensor, padding_idx: i64, scale_grad_by_freq: bool, sparse: bool) -> Tensor;
    nn::one_hot(self_: &Tensor, num_classes: i64) -> Tensor;
    nn::embedding_dense_backward(grad_output: &Tensor, indices: &Tensor, num_weights: i64, padding_idx: i64, scale_grad_by_freq: bool) -> Tensor;
    nn::nll_loss_forward_output(self_: &Tensor, target: &Tensor, weight: Option<&Tensor>, reduction: i64, ignore_index: i64, output: &Tensor, total_weight: &Tensor) -> (Tensor, Tensor);
    nn::nll_loss_forward(self_: &Tensor, target: &Tensor, weight: Option<&Tensor>, reduction: i64, ignore_index: i64) -> (Tensor, Tensor);
    nn::mse_loss_out(self_: &Tensor, target: &Tensor, reduction: i64, out: &Tensor) -> Tensor;
    nn::mse_loss(self_: &Tensor, target: &Tensor, reduction: i64) -> Tensor;
    nn::binary_cross_entropy(self_: &Tensor, target: &Tensor, weight: Option<&Tensor>, reduction: i64) -> Tensor;
    nn::binary_cross_entropy_out(self_: &Tensor, target: &Tensor, weight: Option<&Tensor>, reduction: i64, out: &Tensor) -> Tensor;
    nn::nll_loss_backward_grad_input(grad_output: &Tensor, self_: &Tensor, target: &Tensor, weight: Option<&Tensor>, reduction: i64, ignore_index: i64, total_weight: &Tensor, grad_input: &Tensor) -> Tensor;
    nn::nll_loss_backward(grad_output: &Tensor, self_: &Tensor, target: &Tensor, weight: Option<&Tensor>, reduction: i64, ignore_index: i64, total_weight: &Tensor) -> Tensor;
    nn::mse_loss_backward_grad_input(grad_output: &Tensor, self_: &Tensor, target: &Tensor, reduction: i64, grad_input: &Tensor) -> Tensor;
    nn::mse_loss_backward(grad_output: &Tensor, self_: &Tensor, target: &Tensor, reduction: i64) -> Tensor;
    view::view(self_: &Tensor, size: &[i64]) -> Tensor;
    view::reshape(self_: &Tensor, shape: &[i64]) -> Tensor;
    view::permute(self_: &Tensor, dims: &[i64]) -> Tensor;
    view::transpose_int(self_: &Tensor, dim0: i64, dim1: i64) -> Tensor;
    view::t(self_: &Tensor) -> Tensor;
    view::expand(self_: &Tensor, size: &[i64], implicit: bool) -> Tensor;
    view::squeeze_dim(self_: &Tensor, dim: i64) -> Tensor;
    view::unsqueeze(self_: &Tensor, dim: i64) -> Tensor;
    view::slice_tensor(self_: &Tensor, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Tensor;
    view::select_int(self_: &Tensor, dim: i64, index: i64) -> Tensor;
    view::narrow(self_: &Tensor, dim: i64, start: i64, length: i64) -> Tensor;
    view::flatten_using_ints(self_: &Tensor, start_dim: i64, end_dim: i64) -> Tensor;
    view::split_tensor(self_: &Tensor, split_size: i64, dim: i64) -> Vec<Tensor>;
    view::chunk(self_: &Tensor, chunks: i64, dim: i64) -> Vec<Tensor>;
    view::contiguous(self_: &Tensor, memory_format: MemoryFormat) -> Tensor;
    index::flip(self_: &Tensor, dims: &[i64]) -> Tensor;
    index::roll(self_: &Tensor, shifts: &[i64], dims: &[i64]) -> Tensor;
    index::repeat(self_: &Tensor, repeats: &[i64]) -> Tensor;
    index::constant_pad_nd(self_: &Tensor, pad: &[i64], value: &Scalar) -> Tensor;
    view::_to_copy(self_: &Tensor, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>, non_blocking: bool, memory_format: Option<MemoryFormat>) -> Tensor;
    index::cat(tensors: &[Tensor], dim: i64) -> Tensor;
    index::cat_out(tensors: &[Tensor], dim: i64, out: &Tensor) -> Tensor;
    index::stack(tensors: &[Tensor], dim: i64) -> Tensor;
    index::stack_out(tensors: &[Tensor], dim: i64, out: &Tensor) -> Tensor;
    index::tril_(self_: &Tensor, diagonal: i64) -> Tensor;
    index::tril_out(self_: &Tensor, diagonal: i64, out: &Tensor) -> Tensor;
    index::tril(self_: &Tensor, diagonal: i64) -> Tensor;
    index::triu_(self_: &Tensor, diagonal: i64) -> Tensor;
    index::triu_out(self_: &Tensor, diagonal: i64, out: &Tensor) -> Tensor;
    index::triu(self_: &Tensor, diagonal: i64) -> Tensor;
    index::index_select_out(self_: &Tensor, dim: i64, index: &Tensor, out: &Tensor) -> Tensor;
    index::index_select(self_: &Tensor, dim: i64, index: &Tensor) -> Tensor;
    index::gather_out(self_: &Tensor, dim: i64, index: &Tensor, sparse_grad: bool, out: &Tensor) -> Tensor;
    index::gather(self_: &Tensor, dim: i64, index: &Tensor, sparse_grad: bool) -> Tensor;
    index::scatter_src(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Tensor;
    index::scatter_src_(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Tensor;
    index::scatter_src_out(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor, out: &Tensor) -> Tensor;
    index::scatter_add(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Tensor;
    index::scatter_add_(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Tensor;
    index::scatter_add_out(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor, out: &Tensor) -> Tensor;
    index::index_tensor(self_: &Tensor, indices: &[Option<Tensor>]) -> Tensor;
    index::index_tensor_out(self_: &Tensor, indices: &[Option<Tensor>], out: &Tensor) -> Tensor;
    factory::empty_memory_format(size: &[i64], dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>, memory_format: Option<MemoryFormat>) -> Tensor;
    factory::zeros(size: &[i64], dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
    factory::ones(size: &[i64], dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
    factory::full(size: &[i64], fill_value: &Scalar, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
    factory::arange_start_step(start: &Scalar, end: &Scalar, step: &Scalar, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
    factory::linspace(start: &Scalar, end: &Scalar, steps: i64, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
    factory::eye(n: i64, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
    factory::zeros_like(self_: &Tensor, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>, memory_format: Option<MemoryFormat>) -> Tensor;
    factory::ones_like(self_: &Tensor, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>, memory_format: Option<MemoryFormat>) -> Tensor;
    factory::full_like(self_: &Tensor, fill_value: &Scalar, dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>, memory_format: Option<MemoryFormat>) -> Tensor;
    factory::rand(size: &[i64], dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
    factory::randn(size: &[i64], dtype: Option<DType>, layout: Option<Layout>, device: Option<Device>, pin_memory: Option<bool>) -> Tensor;
    autogen::add_scalar_out(self_: &Tensor, other: &Scalar, alpha: &Scalar, out: &Tensor) -> Tensor;
    autogen::mul_scalar_out(self_: &Tensor, other: &Scalar, out: &Tensor) -> Tensor;
    autogen::masked_fill_scalar_out(self_: &Tensor, mask: &Tensor, value: &Scalar, out: &Tensor) -> Tensor;
    autogen::isnan_out(self_: &Tensor, out: &Tensor) -> Tensor;
    autogen::relu_out(self_: &Tensor, out: &Tensor) -> Tensor;
    autogen::sum_out(self_: &Tensor, dtype: Option<DType>, out: &Tensor) -> Tensor;
    autogen::prod_out(self_: &Tensor, dtype: Option<DType>, out: &Tensor) -> Tensor;
    autogen::convolution_out(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, stride: &[i64], padding: &[i64], dilation: &[i64], transposed: bool, output_padding: &[i64], groups: i64, out: &Tensor) -> Tensor;
    autogen::convolution_backward_out(grad_output: &Tensor, input: &Tensor, weight: &Tensor, bias_sizes: Option<&[i64]>, stride: &[i64], padding: &[i64], dilation: &[i64], transposed: bool, output_padding: &[i64], groups: i64, output_mask: &[bool], out0: &Tensor, out1: &Tensor, out2: &Tensor) -> (Tensor, Tensor, Tensor);
    autogen::_adaptive_avg_pool2d_out(self_: &Tensor, output_size: &[i64], out: &Tensor) -> Tensor;
    autogen::native_layer_norm_out(input: &Tensor, normalized_shape: &[i64], weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64, out0: &Tensor, out1: &Tensor, out2: &Tensor) -> (Tensor, Tensor, Tensor);
    autogen::native_layer_norm_backward_out(grad_out: &Tensor, input: &Tensor, normalized_shape: &[i64], mean: &Tensor, rstd: &Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, output_mask: &[bool], out0: &Tensor, out1: &Tensor, out2: &Tensor) -> (Tensor, Tensor, Tensor);
    autogen::embedding_out(weight: &Tensor, indices: &Tensor, padding_idx: i64, scale_grad_by_freq: bool, sparse: bool, out: &Tensor) -> Tensor;
    autogen::embedding_dense_backward_out(grad_output: &Tensor, indices: &Tensor, num_weights: i64, padding_idx: i64, scale_grad_by_freq: bool, out: &Tensor) -> Tensor;
    autogen::flip_out(self_: &Tensor, dims: &[i64], out: &Tensor) -> Tensor;
    autogen::roll_out(self_: &Tensor, shifts: &[i64], dims: &[i64], out: &Tensor) -> Tensor;
    autogen::repeat_out(self_: &Tensor, repeats: &[i64], out: &Tensor) -> Tensor;
    autogen::constant_pad_nd_out(self_: &Tensor, pad: &[i64], value: &Scalar, out: &Tensor) -> Tensor;
    autogen::_to_copy_out(self_: &Tensor, non_blocking: bool, memory_format: Option<MemoryFormat>, out: &Tensor) -> Tensor;
    autogen::zeros_like_out(self_: &Tensor, memory_format: Option<MemoryFormat>, out: &Tensor) -> Tensor;
    autogen::ones_like_out(self_: &Tensor, memory_format: Option<MemoryFormat>, out: &Tensor) -> Tensor;
    autogen::full_like_out(self_: &Tensor, fill_value: &Scalar, memory_format: Option<MemoryFormat>, out: &Tensor) -> Tensor;
}

/// Defines Opal's operators (if not yet done) and registers the Meta kernels for
/// the `Meta` dispatch key, for the life of the process. Idempotent: the first call
/// registers, later calls return its outcome.
pub fn init() -> Result<()> {
    static DONE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        generated::register::<Meta>()
            .map(|lib| lib.leak())
            .map_err(|e| e.to_string())
    })
    .clone()
    .map_err(opal::OpalError::msg)
}
