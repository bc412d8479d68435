//! The one error type of Opal.
//!
//! Owns: [`OpalError`], its [`ErrorKind`] and the crate-wide [`Result`] alias.
//! Must not: depend on dispatcher internals (errors carry plain strings and keys), or
//! panic anywhere. Every fallible runtime API returns `Result<_, OpalError>`.

#![warn(missing_docs)]

use crate::keys::DispatchKey;
use std::fmt;

/// The crate-wide result type; the error defaults to [`OpalError`].
pub type Result<T, E = OpalError> = std::result::Result<T, E>;

/// The one error type of Opal.
///
/// It is one pointer wide (the kind is boxed) so `Result<Tensor>` stays two words
/// on the dispatch hot path. Inspect the cause with [`OpalError::kind`].
#[derive(Clone, thiserror::Error)]
#[error("{0}")]
pub struct OpalError(Box<ErrorKind>);

impl fmt::Debug for OpalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Debug prints the message too: test failures and `unwrap` show it readably.
        write!(f, "OpalError({:?}: {})", self.0.name(), self.0)
    }
}

/// What went wrong. Every variant renders a complete, human-readable message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No kernel serves `op` for the highest dispatch key of a call.
    #[error(
        "could not run '{op}' for dispatch key {key} (device '{device}'); kernels exist for: {}",
        list_or_none(available)
    )]
    NoKernel {
        /// Qualified operator name, e.g. `aten::add.Tensor`.
        op: String,
        /// The key the call was dispatched to.
        key: DispatchKey,
        /// The device name that key stands for (e.g. `cpu`, `emu`).
        device: String,
        /// Keys (runtime and alias) with a kernel registered for this op.
        available: Vec<String>,
    },
    /// A backend does not implement an operator (raised by kernels).
    #[error("'{op}' is not implemented for backend '{backend}'")]
    NotImplemented {
        /// Operator name.
        op: String,
        /// Backend name.
        backend: String,
    },
    /// A typed kernel's Rust signature differs from the one its schema requires.
    #[error("kernel for '{op}' has the Rust signature `{kernel}`, but the schema `{schema}` requires `{expected}`")]
    SignatureMismatch {
        /// Operator name.
        op: String,
        /// The schema text of the op.
        schema: String,
        /// Rust type of the rejected kernel.
        kernel: String,
        /// Rust type the op requires, when known (else a description).
        expected: String,
    },
    /// An operator name that is not defined.
    #[error("unknown operator '{0}'")]
    UnknownOp(String),
    /// A second, different definition for an already defined operator.
    #[error("operator '{op}' is already defined with schema `{existing}`; refusing `{new}`")]
    ConflictingDef {
        /// Operator name.
        op: String,
        /// The schema already defined.
        existing: String,
        /// The schema that was refused.
        new: String,
    },
    /// A tensor's dtype is not the one an operation needs.
    #[error("expected dtype {expected}, but the tensor has dtype {actual}")]
    DTypeMismatch {
        /// The dtype needed.
        expected: crate::DType,
        /// The tensor's dtype.
        actual: crate::DType,
    },
    /// Shapes, sizes or strides are invalid for an operation.
    #[error("shape error: {0}")]
    Shape(String),
    /// A tensor's storage is in use in a conflicting way (see `tensor` module docs).
    #[error("storage borrow conflict: {0}")]
    BorrowConflict(String),
    /// A device string or device operation is invalid.
    #[error("device error: {0}")]
    Device(String),
    /// A boxed stack held a value of the wrong type or too few values.
    #[error("boxed calling: {0}")]
    Boxed(String),
    /// Allocation failed.
    #[error("allocation of {nbytes} bytes on {device} failed")]
    Alloc {
        /// Requested size.
        nbytes: usize,
        /// Device name.
        device: String,
    },
    /// Anything else.
    #[error("{0}")]
    Msg(String),
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "(none)".to_string()
    } else {
        v.join(", ")
    }
}

impl ErrorKind {
    fn name(&self) -> &'static str {
        match self {
            ErrorKind::NoKernel { .. } => "NoKernel",
            ErrorKind::NotImplemented { .. } => "NotImplemented",
            ErrorKind::SignatureMismatch { .. } => "SignatureMismatch",
            ErrorKind::UnknownOp(_) => "UnknownOp",
            ErrorKind::ConflictingDef { .. } => "ConflictingDef",
            ErrorKind::DTypeMismatch { .. } => "DTypeMismatch",
            ErrorKind::Shape(_) => "Shape",
            ErrorKind::BorrowConflict(_) => "BorrowConflict",
            ErrorKind::Device(_) => "Device",
            ErrorKind::Boxed(_) => "Boxed",
            ErrorKind::Alloc { .. } => "Alloc",
            ErrorKind::Msg(_) => "Msg",
        }
    }
}

impl OpalError {
    /// A backend does not implement `op`.
    pub fn not_implemented(op: &str, backend: &str) -> Self {
        ErrorKind::NotImplemented {
            op: op.to_string(),
            backend: backend.to_string(),
        }
        .into()
    }

    /// Any other error, described by `text`.
    pub fn msg(text: impl Into<String>) -> Self {
        ErrorKind::Msg(text.into()).into()
    }

    /// A shape/size/stride error.
    pub fn shape(text: impl Into<String>) -> Self {
        ErrorKind::Shape(text.into()).into()
    }

    /// A device error.
    pub fn device(text: impl Into<String>) -> Self {
        ErrorKind::Device(text.into()).into()
    }

    /// A boxed-calling error (wrong value type on a stack, stack too short).
    pub fn boxed(text: impl Into<String>) -> Self {
        ErrorKind::Boxed(text.into()).into()
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.0
    }
}

impl From<ErrorKind> for OpalError {
    #[cold]
    fn from(k: ErrorKind) -> Self {
        OpalError(Box::new(k))
    }
}
