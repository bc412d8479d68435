//! Opal runtime: tensors, dispatch keys, the dispatcher and generated ops.

pub mod ops;
