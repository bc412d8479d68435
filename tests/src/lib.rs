//! Opal's cross-crate tests.

pub mod scratch;
