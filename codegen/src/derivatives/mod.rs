//! `derivatives.yaml` as codegen input: PyTorch's file of derivative formulas
//! (and Opal's own), loaded into a located model and checked against a native
//! model.
//!
//! - [`model`]: plain immutable data (entries, dispatch sections, formulas).
//! - [`expr`]: the formula language, lexed and parsed into an expression tree.
//! - `load` (private): YAML to model, with the place of every entry, key and formula.
//! - `validate` (private): names in entries and formulas against the native model.
//! - `helpers` (private): the vocabulary formulas use beyond native ops, as data.
//!
//! Entry points: [`load_derivatives`], [`load_derivatives_str`].

pub mod expr;
pub(crate) mod helpers;
mod load;
pub mod model;
mod validate;

use std::path::Path;

use crate::diagnostics::Diagnostics;
use crate::model::NativeFunctions;
pub(crate) use load::parse_derivatives;
pub use model::*;
pub(crate) use validate::NativeVocabulary;

/// Loads and validates the `derivatives.yaml` at `path` against `native`.
pub fn load_derivatives(
    path: impl AsRef<Path>,
    native: &NativeFunctions,
) -> Result<Derivatives, Diagnostics> {
    crate::load::with_text(path.as_ref(), |src, name| {
        load_derivatives_str(src, name, native)
    })
}

/// Loads and validates `derivatives.yaml` text; `path` is only used in messages.
pub fn load_derivatives_str(
    src: &str,
    path: &str,
    native: &NativeFunctions,
) -> Result<Derivatives, Diagnostics> {
    let (model, mut errs) = parse_derivatives(src);
    errs.extend(validate::validate(&model, &NativeVocabulary::new(native)));
    Diagnostics::or_ok(model, errs, path, src)
}
