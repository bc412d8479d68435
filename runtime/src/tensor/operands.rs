//! What the layers below the tensor learn from tensor operands: their dispatch keys
//! ([`TensorKeys`], `DispatchKeySet::with_tensor` and its siblings) and their
//! result dtype (`ResultType::of_tensors`, `ResultType::add_tensor`). The key-set
//! and dtype types are defined below the tensor and never name it; these methods
//! extend them here.
//!
//! Owns: reading operands' key sets, dtypes and wrapped-number flags. Must not:
//! compute promotion (that is `dtype::ResultType`) or key priority (`keys`).

use super::Tensor;
use crate::dtype::{DType, ResultType};
use crate::error::Result;
use crate::keys::DispatchKeySet;

/// Key sets with the keys of tensor operands added.
impl DispatchKeySet {
    /// `self ∪ t.key_set()`.
    #[inline]
    #[must_use]
    pub fn with_tensor(self, t: &Tensor) -> Self {
        self | t.key_set()
    }

    /// `self ∪ t.key_set()` when `t` is `Some`.
    #[inline]
    #[must_use]
    pub fn with_opt_tensor(self, t: Option<&Tensor>) -> Self {
        match t {
            Some(t) => self | t.key_set(),
            None => self,
        }
    }

    /// `self ∪` the key sets of all `ts`.
    #[inline]
    #[must_use]
    pub fn with_tensors(self, ts: &[Tensor]) -> Self {
        ts.iter().fold(self, |s, t| s | t.key_set())
    }

    /// `self ∪` the key sets of the present tensors of `ts`.
    #[inline]
    #[must_use]
    pub fn with_opt_tensors(self, ts: &[Option<Tensor>]) -> Self {
        ts.iter().flatten().fold(self, |s, t| s | t.key_set())
    }

    /// `self ∪` the keys of any value holding tensors (see [`TensorKeys`]).
    #[inline]
    #[must_use]
    pub fn with<T: TensorKeys + ?Sized>(self, v: &T) -> Self {
        self | v.tensor_keys()
    }
}

/// Values that may contain tensors and contribute their dispatch keys to a call.
pub trait TensorKeys {
    /// The union of the key sets of all contained tensors.
    fn tensor_keys(&self) -> DispatchKeySet;
}

impl TensorKeys for Tensor {
    #[inline]
    fn tensor_keys(&self) -> DispatchKeySet {
        self.key_set()
    }
}
impl TensorKeys for Option<&Tensor> {
    #[inline]
    fn tensor_keys(&self) -> DispatchKeySet {
        self.map_or(DispatchKeySet::empty(), Tensor::key_set)
    }
}
impl TensorKeys for Option<Tensor> {
    #[inline]
    fn tensor_keys(&self) -> DispatchKeySet {
        self.as_ref()
            .map_or(DispatchKeySet::empty(), Tensor::key_set)
    }
}
impl TensorKeys for [Tensor] {
    #[inline]
    fn tensor_keys(&self) -> DispatchKeySet {
        DispatchKeySet::empty().with_tensors(self)
    }
}
impl TensorKeys for [Option<Tensor>] {
    #[inline]
    fn tensor_keys(&self) -> DispatchKeySet {
        DispatchKeySet::empty().with_opt_tensors(self)
    }
}

/// Result dtypes of tensor operands.
impl ResultType {
    /// PyTorch's `result_type` of tensor operands only (wrapped numbers count as
    /// scalars, as in [`ResultType::add_tensor`]).
    ///
    /// Operands of one dtype, none a wrapped number, promote to that dtype whatever
    /// their dimension categories; that case (most calls of a binary op) is answered
    /// from the dtypes alone, without the category bookkeeping.
    #[inline]
    pub fn of_tensors(tensors: &[&Tensor]) -> Result<DType> {
        if let Some((first, rest)) = tensors.split_first() {
            let d = first.dtype();
            if !first.is_wrapped_number()
                && rest
                    .iter()
                    .all(|t| t.dtype() == d && !t.is_wrapped_number())
            {
                return Ok(d);
            }
        }
        let mut r = ResultType::new();
        for t in tensors {
            r.add_tensor(t);
        }
        r.finish()
    }

    /// Adds a tensor operand.
    pub fn add_tensor(&mut self, t: &Tensor) -> &mut Self {
        if t.is_wrapped_number() {
            self.wrapped_of(t.dtype().category())
        } else {
            self.tensor(t.dtype(), t.dim())
        }
    }
}
