//! `resize_`: gives `self` new sizes over its storage, growing the storage when
//! needed (PyTorch's `out=` and `resize_` rules). Geometry only, the same on every
//! backend, so one kernel serves CPU, Meta and out-of-tree devices.
//!
//! Owns: `resize_`'s argument checks and its `memory_format` restride. Must not:
//! read or write tensor data (grown storage is left uninitialised, as in PyTorch).

use crate::dispatch::DispatchKeySet;
use crate::error::{OpalError, Result};
use crate::rules::{contiguous_strides, geometry::channels_last_strides};
use crate::{MemoryFormat, Tensor};

/// `resize_`: `self` with sizes `size`, contiguous (or in `memory_format`). Same
/// sizes and no format leave `self`'s strides as they are.
pub(super) fn resize_(
    _ks: DispatchKeySet,
    self_: &Tensor,
    size: &[i64],
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    const OP: &str = "resize_";
    if let Some(s) = size.iter().find(|&&s| s < 0) {
        return Err(OpalError::msg(format!(
            "{OP}: Trying to create tensor with negative dimension {s}: {size:?}"
        )));
    }
    let strides = match memory_format {
        Some(MemoryFormat::Preserve) => {
            return Err(OpalError::msg(format!(
                "{OP}: Unsupported memory format Preserve"
            )))
        }
        Some(f @ (MemoryFormat::ChannelsLast | MemoryFormat::ChannelsLast3d)) => {
            let rank = if f == MemoryFormat::ChannelsLast {
                4
            } else {
                5
            };
            match channels_last_strides(size) {
                Some(s) if size.len() == rank => Some(s),
                _ => {
                    return Err(OpalError::msg(format!(
                        "{OP}: required rank {rank} tensor to use {f:?} format, got size {size:?}"
                    )))
                }
            }
        }
        Some(MemoryFormat::Contiguous) => Some(contiguous_strides(size)),
        None => None,
    };
    if strides.is_none() && self_.sizes() == size {
        return Ok(self_.clone());
    }
    // Grow the storage for the contiguous layout (which needs as many bytes as any
    // dense format of these sizes), then restride to the requested format.
    self_.resize_(size)?;
    if let Some(s) = strides {
        self_.set_geometry_(size, &s)?;
    }
    Ok(self_.clone())
}
