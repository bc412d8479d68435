//! Meta kernel of `randperm` and `randperm.generator` (their `out=` forms are
//! derived in `backend.yaml`): a `[n]` tensor of the requested dtype (int64 by
//! default), from the arguments `opal::rules::random` checked (`rule | kernel`, as
//! in the CPU backend's YAML).
//!
//! Owns: the target check. Must not: restate `randperm`'s argument rules.

use super::new_contiguous;
use super::view::check_target;
use opal::rules::random::Randperm;
use opal::{Result, Tensor};

/// `randperm` / `randperm.generator`.
pub fn randperm(p: Randperm) -> Result<Tensor> {
    check_target("randperm", p.layout, p.device)?;
    new_contiguous(&[p.n], p.dtype)
}
