//! [`Error`]: what every fallible call of this crate returns, one message naming
//! the archive, the node or entry, and what is wrong or missing.
//!
//! Owns: the error type and its conversions. Must not: decide policy (callers
//! choose the words).

use std::fmt;

/// An error of loading or running an exported program. The message names the
/// archive (when one is involved), the node or entry, and what is wrong.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    msg: String,
}

/// This crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with this message.
    pub fn new(msg: impl Into<String>) -> Error {
        Error { msg: msg.into() }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.msg
    }

    /// The same error with `ctx` (an archive path, a node) in front.
    pub fn context(self, ctx: impl fmt::Display) -> Error {
        Error {
            msg: format!("{ctx}: {}", self.msg),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({:?})", self.msg)
    }
}

impl std::error::Error for Error {}

impl From<opal::OpalError> for Error {
    fn from(e: opal::OpalError) -> Error {
        Error::new(e.to_string())
    }
}

/// `Err(Error::new(format!(...)))`.
macro_rules! bail {
    ($($t:tt)*) => { return Err($crate::error::Error::new(format!($($t)*))) };
}
pub(crate) use bail;
