//! Function schemas: `name.overload(args) -> returns`.

use super::{Annotation, Loc, Type};

/// `add_`, `__iadd__`, `_foobar_functional`: the operator name without its overload.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BaseOperatorName {
    /// The name with the in-place underscore, dunder underscores and `_functional`
    /// suffix removed (`add` for `add_`, `iadd`... see `dunder_method`).
    pub base: String,
    /// Trailing `_` (in-place variant), or `__i*__` for dunder methods.
    pub inplace: bool,
    /// `__name__` form.
    pub dunder_method: bool,
    /// `_functional` suffix (functional variant of a mutable op).
    pub functional_overload: bool,
}

/// `namespace`-less operator name: base name plus overload (`add.Tensor`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperatorName {
    pub name: BaseOperatorName,
    /// Empty when the schema has no overload.
    pub overload_name: String,
}

/// One argument of a schema.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Argument {
    pub name: String,
    pub ty: Type,
    /// The literal default exactly as written (`1`, `[0,1]`, `None`, `"mean"`, `1e-5`).
    pub default: Option<String>,
    pub annotation: Option<Annotation>,
    pub loc: Loc,
}

impl Argument {
    pub fn is_write(&self) -> bool {
        self.annotation.as_ref().is_some_and(|a| a.is_write)
    }
}

/// Arguments in declaration order, split where the schema splits them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Arguments {
    /// Before the `*` marker.
    pub positional: Vec<Argument>,
    /// After `*`, excluding out arguments.
    pub kwarg_only: Vec<Argument>,
    /// Trailing keyword-only mutable tensor arguments of out= functions.
    pub out: Vec<Argument>,
}

impl Arguments {
    /// All arguments in schema order.
    pub fn all(&self) -> impl Iterator<Item = &Argument> {
        self.positional
            .iter()
            .chain(self.kwarg_only.iter())
            .chain(self.out.iter())
    }

    pub fn len(&self) -> usize {
        self.positional.len() + self.kwarg_only.len() + self.out.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One return value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Return {
    pub name: Option<String>,
    pub ty: Type,
    pub annotation: Option<Annotation>,
    pub loc: Loc,
}

/// What a schema does to its arguments (torchgen's five kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SchemaKind {
    Functional,
    Inplace,
    Out,
    Mutable,
    Scratch,
}

impl SchemaKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaKind::Functional => "functional",
            SchemaKind::Inplace => "inplace",
            SchemaKind::Out => "out",
            SchemaKind::Mutable => "mutable",
            SchemaKind::Scratch => "scratch",
        }
    }
}

/// A parsed `func:` string.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FunctionSchema {
    pub name: OperatorName,
    pub arguments: Arguments,
    pub returns: Vec<Return>,
    /// Location of the whole schema string in the YAML.
    pub loc: Loc,
}
