//! Registration of the CPU kernels with the dispatcher. `backend.yaml` names each
//! op's kernel function; `build.rs` generates from it the trait `CpuKernels`, whose
//! provided fns forward to those kernels (and derive the `autogen` out= ops through
//! [`crate::autogen::copy_outs`]), and `register::<K>()` (every kernel for the `CPU`
//! dispatch key, through the generated per-op `kernel` adapters that also serve boxed
//! calls).
//!
//! Owns: [`init`] and the two adapters below, from the backward kernels' `Option`
//! results to the schema's undefined tensors. Must not: compute anything (kernels
//! live in the kernel modules) or list ops (`backend.yaml` does; the compiler checks
//! every named kernel against its op's schema, so a kernel whose signature differs
//! fails the build).
//!
//! Structured ops: every functional and in-place op of `native_functions.yaml` with a
//! `structured_delegate` has a CPU kernel of its own, so the generator derives none of
//! them (an op left out of `backend.yaml` would be derived from its out= kernel plus
//! the Meta kernel, and [`init`] would then have to call `opal_meta::init()`; today
//! nothing needs Meta kernels, so the CPU backend does not depend on `opal-meta`).
//!
//! CompositeImplicitAutograd ops (`reshape`, `matmul`, ...) are not registered here:
//! their kernels live in `opal`'s runtime and run on every backend.

use crate::nn;
use opal::rules::conv::ConvolutionBackward;
use opal::rules::norm::LayerNormBackward;
use opal::{OpalError, Result, Tensor};
use std::sync::OnceLock;

/// The generated kernel trait and registration function of the CPU backend.
#[allow(
    dead_code,
    reason = "the generated constants (DEVICE, BACKEND, ...) describe the backend; init uses only register"
)]
pub mod generated {
    include!(concat!(env!("OUT_DIR"), "/backend_cpu.rs"));
}

/// The CPU backend: every fn of the generated [`generated::CpuKernels`] is provided
/// (`backend.yaml` names each kernel), so the implementation is empty.
pub struct Cpu;

impl generated::CpuKernels for Cpu {}

// The two kernels below return an undefined tensor for a gradient that
// `output_mask` did not request, as PyTorch does (boxed, it becomes `None`).

/// The schema form of [`nn::convolution_backward`]: unrequested gradients as undefined tensors.
pub(crate) fn convolution_backward(b: ConvolutionBackward) -> Result<(Tensor, Tensor, Tensor)> {
    nn::convolution_backward(b).map(undefined_if_none)
}

/// The schema form of [`nn::native_layer_norm_backward`]: unrequested gradients as undefined tensors.
pub(crate) fn native_layer_norm_backward(b: LayerNormBackward) -> Result<(Tensor, Tensor, Tensor)> {
    nn::native_layer_norm_backward(b).map(undefined_if_none)
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
