//! [`OpDef`] and [`ArgDef`]: the static description of an operator that generated
//! code emits once per op and passes to [`crate::dispatch::Dispatcher::def`].
//!
//! Owns: the plain-data operator definition. Must not: hold runtime state.

use crate::ivalue::IValue;
use std::any::TypeId;

/// One schema argument.
#[derive(Debug)]
pub struct ArgDef {
    /// Argument name.
    pub name: &'static str,
    /// Schema type text (`Tensor(a!)`, `int[]?`, ...).
    pub ty: &'static str,
    /// The default value, when the schema has one.
    pub default: Option<fn() -> IValue>,
    /// Keyword-only (after `*`).
    pub kwarg_only: bool,
    /// An `out=` argument.
    pub out: bool,
    /// Written by the op (`(a!)`).
    pub mutable: bool,
}

/// A static operator definition.
#[derive(Debug)]
pub struct OpDef {
    /// Qualified name with overload, e.g. `aten::add.Tensor` (no overload: `aten::relu`).
    pub name: &'static str,
    /// Full schema text.
    pub schema: &'static str,
    /// Arguments in schema order (positional then keyword-only).
    pub args: &'static [ArgDef],
    /// Return type texts.
    pub returns: &'static [&'static str],
    /// `TypeId` of the typed kernel fn-pointer type
    /// `fn(DispatchKeySet, <args>) -> Result<<returns>>`.
    pub signature: fn() -> TypeId,
}

impl OpDef {
    /// The namespace (`aten` of `aten::add.Tensor`).
    pub fn namespace(&self) -> &'static str {
        self.name.split_once("::").map_or("", |(ns, _)| ns)
    }

    /// Number of arguments a boxed call takes from the stack.
    pub fn num_args(&self) -> usize {
        self.args.len()
    }
}
