//! Per-op dtype rules on top of the runtime's promotion lattice: which result dtype an
//! op produces from its operands, and which casts `out=` / in-place results allow.
//!
//! Owns: op-family dtype rules (float-promoting unary ops, integer-to-int64 sums,
//! comparisons, `alpha` checks, PyTorch's `can_cast`). Must not: reimplement
//! `promote_types` / `result_type` (the runtime's `opal::dtype` owns those).

use super::fail;
use opal::dtype::{default_dtype, ResultType};
use opal::{DType, Result, Scalar};

/// One operand of a result-type computation without a tensor at hand.
#[derive(Copy, Clone, Debug)]
pub enum Operand<'a> {
    /// A tensor of this dtype and rank (rank 0 counts as a zero-dim tensor).
    Tensor(DType, usize),
    /// A Python-style number (a wrapped scalar).
    Scalar(&'a Scalar),
}

/// PyTorch's `result_type` over tensors of any rank and scalars.
pub fn result_type(operands: &[Operand<'_>]) -> Result<DType> {
    let mut rt = ResultType::new();
    for o in operands {
        match *o {
            Operand::Tensor(d, dim) => rt.tensor(d, dim),
            Operand::Scalar(s) => rt.scalar(s),
        };
    }
    rt.finish()
}

/// Result dtype of ops that compute in floating point (`exp`, `sqrt`, true `div`):
/// integers and bool become the default float dtype.
pub fn to_float(d: DType) -> DType {
    if d.is_integral(true) {
        default_dtype()
    } else {
        d
    }
}

/// Accumulating ops (`sum`, `prod`, `cumsum`) widen integers and bool to int64
/// unless a dtype is requested.
pub fn accumulate_dtype(input: DType, requested: Option<DType>) -> DType {
    match requested {
        Some(d) => d,
        None if input.is_integral(true) => DType::I64,
        None => input,
    }
}

/// `mean` and `vector_norm`-style ops: a requested dtype wins, else the input must be
/// floating or complex (integers are an error, not a silent promotion).
pub fn float_reduction_dtype(op: &str, input: DType, requested: Option<DType>) -> Result<DType> {
    let d = requested.unwrap_or(input);
    if d.is_floating_point() || d.is_complex() {
        Ok(d)
    } else {
        Err(fail(
            op,
            format!(
                "could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}",
                input.name()
            ),
        ))
    }
}

/// The check shared by every `out=` variant: the computed result dtype must be
/// castable to the given output tensor's dtype.
pub fn check_out_cast(op: &str, result: DType, out: DType) -> Result<()> {
    if opal::rules::can_cast(result, out) {
        Ok(())
    } else {
        Err(fail(
            op,
            format!(
                "result type {} can't be cast to the desired output type {}",
                result.name(),
                out.name()
            ),
        ))
    }
}

/// Ops whose `out=` must have exactly the result dtype (non-TensorIterator kernels).
pub fn check_out_exact(op: &str, result: DType, out: DType) -> Result<()> {
    if result == out {
        Ok(())
    } else {
        Err(fail(
            op,
            format!(
                "expected out tensor to have dtype {}, but got {} instead",
                result.name(),
                out.name()
            ),
        ))
    }
}

/// Rejects dtypes an op has no kernel for (e.g. `bitwise_and` on floats).
pub fn require(op: &str, d: DType, ok: bool, what: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(fail(
            op,
            format!("not implemented for '{}' ({what})", d.name()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Operand::{Scalar as S, Tensor as T};

    #[test]
    fn scalars_do_not_upcast_tensors_of_their_category() {
        let two = Scalar::Float(2.0);
        assert_eq!(
            result_type(&[T(DType::F16, 2), S(&two)]).unwrap(),
            DType::F16
        );
        assert_eq!(
            result_type(&[T(DType::I32, 2), S(&two)]).unwrap(),
            DType::F32
        );
        let i = Scalar::Int(3);
        assert_eq!(result_type(&[T(DType::U8, 1), S(&i)]).unwrap(), DType::U8);
    }

    #[test]
    fn zero_dim_tensors_promote_only_across_categories() {
        assert_eq!(
            result_type(&[T(DType::F32, 2), T(DType::F64, 0)]).unwrap(),
            DType::F32
        );
        assert_eq!(
            result_type(&[T(DType::I64, 2), T(DType::F64, 0)]).unwrap(),
            DType::F64
        );
    }

    #[test]
    fn dtype_families() {
        assert_eq!(to_float(DType::I64), DType::F32);
        assert_eq!(to_float(DType::F64), DType::F64);
        assert_eq!(accumulate_dtype(DType::Bool, None), DType::I64);
        assert_eq!(accumulate_dtype(DType::F32, Some(DType::F64)), DType::F64);
        assert!(float_reduction_dtype("mean", DType::I64, None).is_err());
    }
}
