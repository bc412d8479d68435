//! Meta kernels of view ops (results share the input's storage, with PyTorch's
//! sizes, strides and storage offset), plus `contiguous` and `_to_copy`, which
//! return a view or a fresh tensor depending on the layout.
//!
//! Owns: turning `shape::view` geometry into views of the input. Must not: copy
//! data. The in-place view ops (`transpose_`, ...) are not here: the runtime's
//! composite kernels restride `self` on every backend.

use super::{check_inputs, meta_device, new_contiguous, new_strided, strided_of, view_of};
use crate::shape::fail;
use crate::shape::geometry::{
    channels_last_strides, contiguous_strides, is_contiguous, preserve_strides,
};
use crate::shape::view::{self as v, Reshape};
use opal::rules::view::DimPick;
use opal::{DType, Device, Layout, MemoryFormat, Result, Tensor};

fn reshaped(self_: &Tensor, r: Reshape) -> Result<Tensor> {
    match r {
        Reshape::View(g) => view_of(self_, &g),
        Reshape::Copy(sizes) => new_contiguous(&sizes, self_.dtype()),
    }
}

/// `view`.
pub fn view(self_: &Tensor, size: &[i64]) -> Result<Tensor> {
    check_inputs("view", &[self_])?;
    view_of(self_, &v::view("view", &strided_of(self_), size)?)
}

/// `reshape`: a view when the strides allow it, else a new contiguous tensor.
pub fn reshape(self_: &Tensor, shape: &[i64]) -> Result<Tensor> {
    check_inputs("reshape", &[self_])?;
    reshaped(self_, v::reshape("reshape", &strided_of(self_), shape)?)
}

/// `permute`.
pub fn permute(self_: &Tensor, dims: &[i64]) -> Result<Tensor> {
    check_inputs("permute", &[self_])?;
    view_of(self_, &v::permute("permute", &strided_of(self_), dims)?)
}

/// `transpose.int`.
pub fn transpose_int(self_: &Tensor, dim0: i64, dim1: i64) -> Result<Tensor> {
    check_inputs("transpose", &[self_])?;
    view_of(
        self_,
        &v::transpose("transpose", &strided_of(self_), dim0, dim1)?,
    )
}

/// `t`.
pub fn t(self_: &Tensor) -> Result<Tensor> {
    check_inputs("t", &[self_])?;
    view_of(self_, &v::t("t", &strided_of(self_))?)
}

/// `expand`.
pub fn expand(self_: &Tensor, size: &[i64], _implicit: bool) -> Result<Tensor> {
    check_inputs("expand", &[self_])?;
    view_of(self_, &v::expand("expand", &strided_of(self_), size)?)
}

/// `squeeze.dim`.
pub fn squeeze_dim(self_: &Tensor, dim: i64) -> Result<Tensor> {
    check_inputs("squeeze", &[self_])?;
    view_of(self_, &v::squeeze_dim("squeeze", &strided_of(self_), dim)?)
}

/// `unsqueeze`.
pub fn unsqueeze(self_: &Tensor, dim: i64) -> Result<Tensor> {
    check_inputs("unsqueeze", &[self_])?;
    view_of(self_, &v::unsqueeze("unsqueeze", &strided_of(self_), dim)?)
}

/// `slice.Tensor`, `select.int`, `narrow`: the part of one dim
/// `opal::rules::view` picked, as a view.
pub fn pick(p: DimPick) -> Result<Tensor> {
    check_inputs("pick", &[p.input])?;
    let (sizes, strides, offset) = p.geometry(p.input);
    p.input.as_strided(&sizes, &strides, offset)
}

/// `flatten.using_ints`: a view when possible, like `reshape`.
pub fn flatten_using_ints(self_: &Tensor, start_dim: i64, end_dim: i64) -> Result<Tensor> {
    check_inputs("flatten", &[self_])?;
    reshaped(
        self_,
        v::flatten("flatten", &strided_of(self_), start_dim, end_dim)?,
    )
}

/// `split.Tensor`: views of equal pieces, the last one possibly shorter.
pub fn split_tensor(self_: &Tensor, split_size: i64, dim: i64) -> Result<Vec<Tensor>> {
    check_inputs("split", &[self_])?;
    v::split("split", &strided_of(self_), split_size, dim)?
        .iter()
        .map(|g| view_of(self_, g))
        .collect()
}

/// `chunk`.
pub fn chunk(self_: &Tensor, chunks: i64, dim: i64) -> Result<Vec<Tensor>> {
    check_inputs("chunk", &[self_])?;
    v::chunk("chunk", &strided_of(self_), chunks, dim)?
        .iter()
        .map(|g| view_of(self_, g))
        .collect()
}

/// Strides a new tensor of `self`'s sizes gets for a `memory_format` request
/// (`None` means preserve).
pub fn strides_for_format(
    op: &str,
    self_: &Tensor,
    format: Option<MemoryFormat>,
) -> Result<Vec<i64>> {
    let sizes = self_.sizes();
    match format.unwrap_or(MemoryFormat::Preserve) {
        MemoryFormat::Preserve => Ok(preserve_strides(sizes, self_.strides())),
        MemoryFormat::Contiguous => Ok(contiguous_strides(sizes)),
        f @ (MemoryFormat::ChannelsLast | MemoryFormat::ChannelsLast3d) => {
            let rank = if f == MemoryFormat::ChannelsLast {
                4
            } else {
                5
            };
            match channels_last_strides(sizes) {
                Some(s) if sizes.len() == rank => Ok(s),
                _ => Err(fail(
                    op,
                    format!(
                        "{f:?} memory format needs a {rank}-d tensor, got {}-d",
                        sizes.len()
                    ),
                )),
            }
        }
    }
}

/// `contiguous`: `self` itself when already in the requested format, else a new
/// tensor in it.
pub fn contiguous(self_: &Tensor, memory_format: MemoryFormat) -> Result<Tensor> {
    check_inputs("contiguous", &[self_])?;
    if memory_format == MemoryFormat::Preserve {
        return Err(fail(
            "contiguous",
            "preserve memory format is unsupported by the contiguous operator",
        ));
    }
    let strides = strides_for_format("contiguous", self_, Some(memory_format))?;
    let already = if memory_format == MemoryFormat::Contiguous {
        is_contiguous(self_.sizes(), self_.strides())
    } else {
        self_.strides() == strides.as_slice()
    };
    if already {
        return Ok(self_.clone());
    }
    new_strided(self_.sizes(), &strides, self_.dtype())
}

/// Rejects a `device` / `layout` request a meta kernel cannot honour.
pub fn check_target(op: &str, layout: Option<Layout>, device: Option<Device>) -> Result<()> {
    if let Some(d) = device {
        if !d.is_meta() {
            return Err(fail(op, format!("cannot produce a tensor on {d:?} from the meta backend (meta tensors have no data)")));
        }
    }
    if let Some(l) = layout {
        if l != Layout::Strided {
            return Err(fail(
                op,
                format!("only the strided layout is supported, got {l:?}"),
            ));
        }
    }
    Ok(())
}

/// `_to_copy`: a new tensor of the requested dtype, keeping the layout unless a
/// memory format is requested.
#[allow(clippy::too_many_arguments)]
pub fn _to_copy(
    self_: &Tensor,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
    _non_blocking: bool,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    check_inputs("_to_copy", &[self_])?;
    check_target("_to_copy", layout, device)?;
    let strides = strides_for_format("_to_copy", self_, memory_format)?;
    Tensor::empty_strided(
        self_.sizes(),
        &strides,
        dtype.unwrap_or(self_.dtype()),
        meta_device(),
    )
}
