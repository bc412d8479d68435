//! Shape ops: views (`view`, `permute`, `slice`, ... all through `as_strided`, no
//! copies), rearrangements (`flip`, `roll`, `repeat`, `tril`/`triu`,
//! `constant_pad_nd`, `cat`, `stack`) and copies (`_to_copy`, `copy_`, `clone`,
//! `contiguous`).
//!
//! Owns: these ops and the byte-level remap helper they (and `index`) share.
//! Must not: touch the runtime's internals or part 1's kernels.

mod copy_ops;
mod rearrange;
pub(crate) mod remap;
mod views;

pub use copy_ops::*;
pub use rearrange::*;
pub use views::*;
