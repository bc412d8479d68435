//! Argument rules of the writes through masks and advanced indices that the CPU
//! and Meta kernels share: `masked_scatter`'s mask and source dtypes, and
//! `index_put`'s values (dtype, and broadcasting to the indexing result).
//!
//! Owns: these checks and their errors (PyTorch's messages). Must not: read tensors.

use crate::{DType, OpalError, Result};

/// `masked_scatter`: a bool mask and a source of `self`'s dtype.
pub fn check_masked_scatter(op: &str, self_: DType, mask: DType, source: DType) -> Result<()> {
    if mask != DType::Bool {
        return Err(OpalError::msg(format!(
            "{op}: only supports boolean masks, but got mask with dtype {mask}"
        )));
    }
    if source != self_ {
        return Err(OpalError::msg(format!(
            "{op}: expected self and source to have same dtypes but got {self_} and {source}"
        )));
    }
    Ok(())
}

/// `index_put`: values of `self`'s dtype.
pub fn check_index_put_dtypes(op: &str, self_: DType, values: DType) -> Result<()> {
    if values != self_ {
        return Err(OpalError::msg(format!(
            "{op}: Index put requires the source and destination dtypes match, got {self_} for the destination and {values} for the source."
        )));
    }
    Ok(())
}

/// The error of values that do not broadcast to the indexing result.
pub fn index_put_shape_mismatch(op: &str, values: &[i64], result: &[i64]) -> OpalError {
    OpalError::shape(format!(
        "{op}: shape mismatch: value tensor of shape {values:?} cannot be broadcast to indexing result of shape {result:?}"
    ))
}
