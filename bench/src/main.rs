//! Opal's benchmark harness.

fn main() {}
