//! Opal's main demo.

fn main() {}
