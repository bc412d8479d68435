//! Opal's cross-crate tests.
