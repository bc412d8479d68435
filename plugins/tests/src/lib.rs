//! Shared helpers of the plugin tests.
