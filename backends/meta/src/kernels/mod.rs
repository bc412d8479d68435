//! Meta-device kernels: one pub function per operator of Opal's
//! `native_functions.yaml`, named by codegen's naming rule (`add.Tensor` ->
//! `add_tensor`, `add_.Tensor` -> `add_tensor_`, `add.out` -> `add_out`), taking the
//! typed arguments of `docs/design.md` and returning tensors on the `meta` device
//! that own no data.
//!
//! Owns: turning the [`crate::shape`] rules into tensors, and the shared `out=` and
//! in-place conventions ([`finish_out`], [`finish_inplace`]). The `out=` ops whose
//! `out` must have the result's dtype exactly (`mm.out`, `gather.out`,
//! `_softmax.out`, ...) have no kernel here: `backend.yaml` lists them without one,
//! and the generated trait runs the functional kernel, then [`autogen::copy_outs`].
//! Must not: compute a shape rule inline (a rule the CPU backend also needs lives in
//! `opal::rules`, named as `rule | kernel` in `backend.yaml`; a Meta-only one in
//! `shape`) or read data.

pub mod autogen;
pub mod compare;
pub mod distance;
pub mod dropout;
pub mod embedding_bag;
pub mod factory;
pub mod fft;
pub mod fold;
pub mod grid_sample;
pub mod index;
pub mod index_b;
pub mod linalg;
pub mod loss;
pub mod masked;
pub mod nn;
pub mod norm;
pub mod overloads;
pub mod permutation;
pub mod pointwise;
pub mod pool;
pub mod reduce;
pub mod scalar_binary;
pub mod strided;
pub mod unary_math;
pub mod view;

use crate::shape::promote::{check_out_cast, check_out_exact};
use crate::shape::{fail, view::Strided};
use opal::{DType, Device, Result, Tensor};

/// The device every result of this backend lives on.
pub fn meta_device() -> Device {
    Device::meta()
}

/// A new meta tensor with explicit strides (allocates no data).
pub fn new_strided(sizes: &[i64], strides: &[i64], dtype: DType) -> Result<Tensor> {
    Tensor::empty_strided(sizes, strides, dtype, meta_device())
}

/// A new contiguous meta tensor.
pub fn new_contiguous(sizes: &[i64], dtype: DType) -> Result<Tensor> {
    Tensor::empty(sizes, dtype, meta_device())
}

/// The geometry of a tensor as the shape rules take it.
pub fn strided_of(t: &Tensor) -> Strided {
    Strided::of(t.sizes(), t.strides(), t.storage_offset())
}

/// A view of `base` with the given geometry (shares its storage).
pub fn view_of(base: &Tensor, g: &Strided) -> Result<Tensor> {
    base.as_strided(&g.sizes, &g.strides, g.offset)
}

/// Inputs of a meta kernel must be meta tensors, except zero-dim CPU tensors, which
/// PyTorch lets any device read as scalars. An undefined tensor is refused: it is
/// laid out like an empty meta tensor, and would otherwise pass as one.
pub fn check_inputs(op: &str, tensors: &[&Tensor]) -> Result<()> {
    for t in tensors {
        if !t.is_defined() {
            return Err(fail(op, "expected a defined tensor, got an undefined one"));
        }
        let d = t.device();
        if !(d.is_meta() || (d.is_cpu() && t.dim() == 0)) {
            return Err(fail(
                op,
                format!("expected all tensors to be on the meta device, but found one on {d:?}"),
            ));
        }
    }
    Ok(())
}

/// The `out=` convention: the result computed by the functional kernel decides sizes
/// and dtype; `out` must be a meta tensor whose dtype the result can be cast to, and
/// is resized (PyTorch's out= rule) to the result's sizes.
pub fn finish_out(op: &str, result: &Tensor, out: &Tensor) -> Result<Tensor> {
    check_out_tensor(op, result.sizes(), result.dtype(), out)?;
    Ok(out.clone())
}

/// The `out=` convention of kernels that are not element-wise: `out` must have
/// exactly the result's dtype.
pub fn finish_out_exact(op: &str, result: &Tensor, out: &Tensor) -> Result<Tensor> {
    check_out_exact(op, result.dtype(), out.dtype())?;
    finish_out(op, result, out)
}

/// `finish_out` for a result known only by sizes and dtype.
pub fn check_out_tensor(op: &str, sizes: &[i64], dtype: DType, out: &Tensor) -> Result<()> {
    check_out_cast(op, dtype, out.dtype())?;
    resize_meta_out(op, sizes, out)
}

/// Resizes an `out=` tensor, which must itself be a meta tensor, to `sizes`.
pub fn resize_meta_out(op: &str, sizes: &[i64], out: &Tensor) -> Result<()> {
    if !out.device().is_meta() {
        return Err(fail(
            op,
            format!(
                "expected out tensor on the meta device, but it is on {:?}",
                out.device()
            ),
        ));
    }
    out.resize_(sizes)
}

/// The in-place convention: the functional result must have exactly `self`'s sizes
/// (in-place ops cannot broadcast `self`) and a dtype castable to `self`'s.
pub fn finish_inplace(op: &str, result: &Tensor, self_: &Tensor) -> Result<Tensor> {
    if result.sizes() != self_.sizes() {
        return Err(fail(
            op,
            format!(
                "output with shape {:?} doesn't match the broadcast shape {:?}",
                self_.sizes(),
                result.sizes()
            ),
        ));
    }
    check_out_cast(op, result.dtype(), self_.dtype())?;
    Ok(self_.clone())
}

/// Generates `out=` variants from a functional kernel with the same leading
/// arguments: `out_variants!(add_out = "add.out" from add_tensor(self_: &Tensor, ...));`
macro_rules! out_variants {
    ($($out:ident = $name:literal from $f:ident($($a:ident: $t:ty),* $(,)?);)*) => {$(
        #[doc = concat!("`", $name, "`: the functional result resized into `out`.")]
        #[allow(clippy::too_many_arguments)] // the schema fixes the argument list
        pub fn $out($($a: $t,)* out: &::opal::Tensor) -> ::opal::Result<::opal::Tensor> {
            $crate::kernels::finish_out($name, &$f($($a),*)?, out)
        }
    )*};
}

/// Generates in-place variants: `inplace_variants!(add_tensor_ = "add_.Tensor" from
/// add_tensor(other: &Tensor, alpha: &Scalar));` (`self_` is implied first).
macro_rules! inplace_variants {
    ($($inp:ident = $name:literal from $f:ident($($a:ident: $t:ty),* $(,)?);)*) => {$(
        #[doc = concat!("`", $name, "`: checks the functional result fits `self`.")]
        pub fn $inp(self_: &::opal::Tensor $(, $a: $t)*) -> ::opal::Result<::opal::Tensor> {
            $crate::kernels::finish_inplace($name, &$f(self_ $(, $a)*)?, self_)
        }
    )*};
}

pub(crate) use inplace_variants;
pub(crate) use out_variants;
