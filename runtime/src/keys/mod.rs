//! Dispatch keys and key sets: [`DispatchKey`] (every key a kernel can be
//! registered for, their priority and relations) and [`DispatchKeySet`] (a `u64`
//! bit set of runtime keys), plus the dense backend key of each device type.
//!
//! Owns: the key vocabulary every layer shares (a tensor carries its key set, an
//! error names the key a call missed). Must not: hold state, or know about
//! tensors, operators or kernels; `dispatch` re-exports both types and builds the
//! dispatcher on them.

pub mod key;
mod keyset;

pub use key::DispatchKey;
pub use keyset::DispatchKeySet;
