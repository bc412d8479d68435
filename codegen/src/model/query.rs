//! Derived facts about a schema that follow from its data alone (schema kind, the
//! `self` argument, tensor-options arguments), shared by validation and emission.
//!
//! Owns: pure read-only queries on model values. Must not parse, validate, allocate
//! Rust names or read files.

use super::{Argument, BaseTy, FunctionSchema, SchemaKind, Type};

/// The four keyword-only arguments that torchgen folds into `TensorOptions`, in order.
const TENSOR_OPTIONS: [(&str, BaseTy); 4] = [
    ("dtype", BaseTy::ScalarType),
    ("layout", BaseTy::Layout),
    ("device", BaseTy::Device),
    ("pin_memory", BaseTy::Bool),
];

fn is_option_arg(a: &Argument, name: &str, base: BaseTy) -> bool {
    a.name == name
        && match &a.ty {
            Type::Base(b) => *b == base,
            Type::Optional(inner) => **inner == Type::Base(base),
            Type::List { .. } => false,
        }
}

impl FunctionSchema {
    /// Index of the positional argument named `self`, if any.
    pub fn self_index(&self) -> Option<usize> {
        self.arguments
            .positional
            .iter()
            .position(|a| a.name == "self")
    }

    /// The `self` argument, if any.
    pub fn self_arg(&self) -> Option<&Argument> {
        self.self_index().map(|i| &self.arguments.positional[i])
    }

    /// Positional arguments after `self` (all positional arguments when there is no
    /// `self`), which is where torchgen looks for mutable non-out arguments.
    pub fn post_self_positional(&self) -> &[Argument] {
        match self.self_index() {
            Some(i) => &self.arguments.positional[i + 1..],
            None => &self.arguments.positional,
        }
    }

    /// Range of `arguments.kwarg_only` holding the `dtype, layout, device, pin_memory`
    /// quartet, if present.
    pub fn tensor_options_range(&self) -> Option<std::ops::Range<usize>> {
        let kw = &self.arguments.kwarg_only;
        (0..kw.len().saturating_sub(3)).find_map(|i| {
            let all = TENSOR_OPTIONS
                .iter()
                .zip(&kw[i..i + 4])
                .all(|((n, b), a)| is_option_arg(a, n, *b));
            all.then_some(i..i + 4)
        })
    }

    /// Whether the schema has any tensor-like argument.
    pub fn has_tensor_arg(&self) -> bool {
        self.arguments.all().any(|a| a.ty.is_tensor_like())
    }

    /// Whether the schema has a `Generator` argument.
    pub fn has_generator_arg(&self) -> bool {
        self.arguments
            .all()
            .any(|a| a.ty.base() == BaseTy::Generator)
    }

    /// Whether any argument or return uses `SymInt`.
    pub fn has_symint(&self) -> bool {
        self.arguments.all().any(|a| a.ty.base() == BaseTy::SymInt)
    }

    /// torchgen's schema kind: in-place by name, out/scratch by out arguments,
    /// mutable by written positional arguments after `self`, else functional.
    pub fn kind(&self) -> SchemaKind {
        if self.name.name.inplace {
            SchemaKind::Inplace
        } else if self
            .arguments
            .out
            .iter()
            .any(|a| a.name.starts_with("_scratch_"))
        {
            SchemaKind::Scratch
        } else if !self.arguments.out.is_empty() {
            SchemaKind::Out
        } else if self.post_self_positional().iter().any(Argument::is_write) {
            SchemaKind::Mutable
        } else {
            SchemaKind::Functional
        }
    }

    /// Whether this is an out= function (has out arguments).
    pub fn is_out_fn(&self) -> bool {
        !self.arguments.out.is_empty()
    }
}
