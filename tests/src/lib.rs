//! Opal's cross-crate tests.

pub mod golden;
pub mod scratch;
