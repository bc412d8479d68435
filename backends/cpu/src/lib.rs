//! Opal's CPU backend: kernels for the ops in `native_functions.yaml`, and the
//! shared infrastructure they are built on.
//!
//! Owns: CPU kernels (plain `pub fn`s with the argument types of
//! `docs/design.md`) and CPU-only helpers. Must not: touch the runtime's internals
//! (only its public Tensor/DType/Scalar API) or define ops (the YAML does).
//!
//! Infrastructure for kernel authors, each documented in its module:
//! * [`iter`] — broadcasting, strided N-operand loops (`map1/map2/map3`,
//!   `for_each_raw`), parallel above [`iter::GRAIN`] elements.
//! * `parallel` (crate-private) — `fork_chunks` / `fork_chunks_mut`: fork-join in
//!   which the calling thread takes part, with a warm helper team; use it rather
//!   than a rayon scope for kernels called back to back.
//! * [`dtype_dispatch`] — `dispatch_all!`, `dispatch_float!` (f16/bf16 compute in
//!   f32), `dispatch_int!`, `dispatch_int_bool!`, `dispatch_numeric!`; traits
//!   [`dtype_dispatch::Elem`] (casts) and [`dtype_dispatch::Float`].
//! * [`out`] — out= rules (`resize_out`, `check_out_dtype`, `can_cast`),
//!   `write_result` for functional / out= / in-place destinations.
//! * [`alloc`] — `empty_cpu`: output allocation that recycles large blocks.
//! * [`copy`] — `copy_into` (any strides, any dtypes, broadcasting), `contiguous`,
//!   `to_dtype`.
//! * [`reduce`] — `wrap_dim`, `dim_mask`, `Rows` (reduced dims last), helpers to
//!   write row results back.
//! * [`elementwise`] — promotion helpers (`result_type2`, `float_result`).
//!
//! Kernel families: [`elementwise`] (unary, binary, activations, backward,
//! ternary, selection), [`compare`] (comparisons, logical, bitwise), [`reduce`]
//! (reductions, scans, sorting).
//!
//! [`autogen`] holds the `out=` forms PyTorch derives from functional ops
//! (`autogen:` in the YAML): the functional result copied into `out`.

pub mod alloc;
pub mod autogen;
pub mod compare;
pub mod copy;
pub mod dtype_dispatch;
pub mod elementwise;
pub mod iter;
pub mod out;
pub(crate) mod parallel;
pub mod reduce;
// Part 2 kernel families.
pub mod factory;
pub mod fused;
pub mod fused_rows;
pub mod index;
pub mod linalg;
pub mod nn;
mod registration;
pub mod shape;
pub mod spectral;
pub use registration::init;
