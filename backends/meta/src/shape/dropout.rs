//! Argument rules of the dropout family: the probability must lie in `[0, 1]` and
//! the input must be a floating tensor. Outputs keep the input's sizes (the mask is
//! bool), so there is no size formula here.
//!
//! Owns: these checks. Must not: allocate or know about devices.

use super::fail;
use opal::{DType, Result};

/// `p` in `[0, 1]` (NaN is rejected) and `dtype` floating.
pub fn check_dropout(op: &str, p: f64, dtype: DType) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(fail(
            op,
            format!("dropout probability has to be between 0 and 1, but got {p}"),
        ));
    }
    check_float(op, dtype)
}

/// `dtype` floating (dropout scales values, so integers are rejected).
pub fn check_float(op: &str, dtype: DType) -> Result<()> {
    if dtype.is_floating_point() {
        Ok(())
    } else {
        Err(fail(
            op,
            format!("expected a floating point tensor, got {dtype}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probability_and_dtype_rules() {
        assert!(check_dropout("d", 0.0, DType::F32).is_ok());
        assert!(check_dropout("d", 1.0, DType::BF16).is_ok());
        for p in [-0.5, 1.01, f64::NAN] {
            assert!(check_dropout("d", p, DType::F32)
                .unwrap_err()
                .to_string()
                .contains("between 0 and 1"));
        }
        assert!(check_dropout("d", 0.5, DType::I64).is_err());
        assert!(check_float("d", DType::F16).is_ok() && check_float("d", DType::Bool).is_err());
    }
}
