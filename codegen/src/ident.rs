//! Schema -> Rust naming and type translation: the one place where operator,
//! argument and type names of the schema language become Rust identifiers and types.
//!
//! Owns: the overload naming rule, argument renaming (`self` -> `self_`, keywords ->
//! raw identifiers), the per-op module layout names (`Sig`, `DEF`, `Options`, ...),
//! the schema type -> Rust type table of `docs/design.md` (borrowed argument form and
//! owned form) and the owned -> borrowed conversion used when forwarding values.
//! Must not: emit whole items (that is `crate::emit`), parse schemas, or read files.
//!
//! # Naming rule
//!
//! An operator `name.overload` becomes the Rust identifier
//! `stem [+ "_" + lowercase(overload)] [+ "_"]`, where `stem` is the name without the
//! trailing `_` of an in-place operator, the overload part is present when the
//! overload is, and the final `_` when the operator is in-place (dunder names such as
//! `__iand__` stay whole): `add.Tensor` -> `add_tensor`, `add_.Tensor` ->
//! `add_tensor_`, `add.out` -> `add_out`, `relu` -> `relu`, `relu_` -> `relu_`,
//! `__and__.Scalar` -> `__and___scalar`, `mT` -> `mT`. In-place operators thus keep
//! PyTorch's and Rust's trailing-underscore convention (`t.add_tensor_(&u)`).
//! The operator name keeps its case (PyTorch has both `t` and `T`). The identifier
//! depends on nothing but the operator's own name and overload, so adding overloads
//! never renames existing functions. Two operators that would map to the same
//! identifier are reported as a codegen error (this never happens for PyTorch 2.15:
//! a test checks the whole file). Rust keywords become raw identifiers (`r#where`).
//! Operator identifiers that would clash with the output's top level (its own items
//! such as `prelude`, `support`, `init`, the file modules `ops_NNN` and `methods`,
//! the runtime names of the `prelude`, the std prelude, primitive types,
//! `std`/`core`/`alloc`) get `_op` appended (`prelude` -> `prelude_op`); argument names that would clash inside generated functions (`ks`,
//! `opts`, `DEF`, `SLOT`, `None`, `Tensor`, `default`, ...) get `_` (`DEF` -> `DEF_`).
//! A name that still collides after that is a located error (operators) or leaves
//! the operator out with its reason (arguments).
//!
//! The identifier names both a free function (all defaults applied) and a module of
//! the same name holding everything else about the operator (`Sig`, `DEF`, `call`,
//! `with`, `Options`, `redispatch`, `boxed`, `kernel`, ...). Functions and modules
//! live in different Rust namespaces, so they never clash.

use std::collections::HashSet;
use std::sync::OnceLock;

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};

use crate::ast;
pub(crate) use crate::ast::ident;
use crate::ast::NOT_RAW;
use crate::hash::FastHash;
use crate::model::{BaseTy, OperatorName, Type};

/// Operator identifiers that would clash with what the generated output's top level
/// defines or uses unqualified: its own items, the `prelude` names, and the std
/// prelude, primitive types and crates its code names (an operator `Tensor` would
/// shadow the type, one named `prelude` would be a second module of that name).
/// Such operators get [`RESERVED_OP_SUFFIX`] (`prelude` -> `prelude_op`).
const RESERVED_OPS: &[&str] = &[
    "prelude",
    "support",
    "init",
    "def_all",
    "register_backend_select",
    "ALL_DEFS",
    METHODS_TRAIT,
    "Option",
    "Some",
    "None",
    "Result",
    "Ok",
    "Err",
    "Vec",
    "String",
    "Box",
    "ToString",
    "ToOwned",
    "Clone",
    "Copy",
    "Default",
    "Debug",
    "Send",
    "Sync",
    "Sized",
    "Unpin",
    "Drop",
    "drop",
    "Fn",
    "FnMut",
    "FnOnce",
    "From",
    "Into",
    "TryFrom",
    "TryInto",
    "AsRef",
    "AsMut",
    "Iterator",
    "IntoIterator",
    "Extend",
    "PartialEq",
    "PartialOrd",
    "Eq",
    "Ord",
    "std",
    "core",
    "alloc",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "isize",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
    "f32",
    "f64",
    "bool",
    "char",
    "str",
];

/// What a reserved operator identifier gets appended.
pub(crate) const RESERVED_OP_SUFFIX: &str = "_op";

/// Argument identifiers that would clash inside generated functions: their own
/// parameters and items (`ks`, `opts`, `DEF`, `SLOT`, `ALL_DEFS`), values of the std
/// prelude and the `prelude` (a parameter named `None` or `Some` is a pattern, not
/// a binding), and methods every `Options` has (`default`, `clone`: a setter of that
/// name would hide them). Such arguments get a trailing `_` (`DEF` -> `DEF_`).
const RESERVED_ARGS: &[&str] = &[
    "ks", "opts", "DEF", "SLOT", "ALL_DEFS", "Some", "None", "Ok", "Err", "default", "clone",
];

/// Name of the extension trait carrying `Tensor` methods.
pub(crate) const METHODS_TRAIT: &str = "TensorOps";
/// The module `methods.rs` becomes in the generated output.
pub(crate) const METHODS_MODULE: &str = "methods";

/// The module a generated file of operators becomes (`ops_000.rs` -> `ops_000`,
/// `methods.rs` -> `methods`): each file is a module of its own, so its lint
/// allowances are written once, on the module, not on each item.
pub(crate) fn file_module(file: &str) -> &str {
    file.strip_suffix(".rs").unwrap_or(file)
}

/// Whether `ident` names one of the output's file modules (`ops_NNN`, `methods`),
/// which an operator of that name would collide with.
fn is_file_module(ident: &str) -> bool {
    ident == METHODS_MODULE
        || ident
            .strip_prefix("ops_")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Per-op module item: the options struct (only for ops with defaulted arguments).
pub(crate) const OPTIONS: &str = "Options";

/// Whether `s` is a plain Rust identifier (ASCII letters, digits, `_`; not starting
/// with a digit; not `_` alone).
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c == '_' || c.is_ascii_alphabetic() => {}
        _ => return false,
    }
    s != "_" && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// The Rust identifier string (without `r#`) of an operator, by the naming rule in
/// the module docs. Errors when the name cannot be a Rust identifier.
pub fn op_ident(name: &OperatorName) -> Result<String, String> {
    let full = name.name.to_string();
    let inplace = name.name.inplace && !name.name.dunder_method;
    let stem = match full.strip_suffix('_') {
        Some(stem) if inplace => stem,
        _ => full.as_str(),
    };
    let mut ident = stem.to_string();
    if !name.overload_name.is_empty() {
        ident.push('_');
        ident.push_str(&name.overload_name.to_lowercase());
    }
    if inplace {
        ident.push('_');
    }
    if !is_identifier(&ident) {
        return Err(format!("operator name `{name}` is not a Rust identifier"));
    }
    if NOT_RAW.contains(&ident.as_str()) {
        return Ok(format!("{ident}_"));
    }
    if RESERVED_OPS.contains(&ident.as_str()) || in_prelude(&ident) || is_file_module(&ident) {
        return Ok(format!("{ident}{RESERVED_OP_SUFFIX}"));
    }
    Ok(ident)
}

/// Whether `name` is one of the runtime names the generated `prelude` re-exports.
fn in_prelude(name: &str) -> bool {
    PRELUDE.iter().any(|(_, names)| names.contains(&name))
}

/// Name of the `Tensor` method that takes an options value, for the op method `m`:
/// `add_tensor` -> `add_tensor_with`, in-place `add_tensor_` -> `add_tensor_with_`.
pub(crate) fn with_method(m: &str) -> String {
    match m.strip_suffix('_') {
        Some(stem) if !stem.ends_with('_') => format!("{stem}_with_"),
        _ => format!("{m}_with"),
    }
}

/// The kernel trait of a backend: `Emu` -> `EmuKernels`.
pub(crate) fn backend_trait(backend: &str) -> String {
    format!("{backend}Kernels")
}

/// A backend's trait fn for its own autograd kernel of op `op_ident`
/// (`sigmoid` -> `autograd_sigmoid`).
pub(crate) fn autograd_kernel_fn(op_ident: &str) -> String {
    format!("autograd_{op_ident}")
}

/// The name a starter kernel gives an argument it does not use yet: `self_` ->
/// `_self_`, raw `r#type` -> `_type`.
pub(crate) fn unused_arg(arg: &str) -> String {
    format!("_{}", arg.trim_start_matches("r#"))
}

/// The Rust name of a schema argument: `self` -> `self_`, other keywords stay and
/// become raw identifiers when turned into an [`Ident`](proc_macro2::Ident).
pub(crate) fn arg_ident(name: &str) -> Result<String, String> {
    if !is_identifier(name) {
        return Err(format!("argument name `{name}` is not a Rust identifier"));
    }
    if name.starts_with("__") {
        return Err(format!(
            "argument name `{name}` starts with `__`, which generated code reserves for its locals"
        ));
    }
    if is_reserved_arg(name) {
        return Ok(format!("{name}_"));
    }
    Ok(name.to_string())
}

/// Whether an argument named `name` clashes with what generated code names:
/// [`NOT_RAW`], [`RESERVED_ARGS`] or the prelude. One set of all three, built
/// once: every argument of every op asks, and scanning the lists took about a
/// twentieth of `check`'s instructions on PyTorch's YAML.
fn is_reserved_arg(name: &str) -> bool {
    static RESERVED: OnceLock<HashSet<&str, FastHash>> = OnceLock::new();
    RESERVED
        .get_or_init(|| {
            let prelude = PRELUDE.iter().flat_map(|(_, names)| names.iter());
            NOT_RAW
                .iter()
                .chain(RESERVED_ARGS)
                .chain(prelude)
                .copied()
                .collect()
        })
        .contains(name)
}

/// Whether an identifier needs `#[allow(non_snake_case)]`: PyTorch's `T`, `mH`, ...
/// and dunder operators (`__and___scalar`), which rustc does not count as snake case.
pub(crate) fn needs_non_snake_allow(s: &str) -> bool {
    s.chars().any(|c| c.is_ascii_uppercase()) || s.trim_matches('_').contains("__")
}

/// How values of a type are passed to typed functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Passing {
    /// Passed as-is (`i64`, `f64`, `bool`, `DType`, `Device`, ... and `Option`s of them).
    Value,
    /// Passed as `&T` (`Tensor`, `Scalar`, `Generator`, ... and lists as `&[T]`, `str` as `&str`).
    Ref,
    /// Passed as `Option<&T>` / `Option<&[T]>` / `Option<&str>` (`.as_ref()` / `.as_deref()`).
    OptRef,
    /// `Option<&[T]>` / `Option<&str>` from `Option<Vec<T>>` / `Option<String>`.
    OptDeref,
}

/// The type table, as `syn` types (the emitters build syntax trees; the token forms
/// serve the backend generator). Types are written by their short names (`Tensor`, `Scalar`,
/// `DType`, `Option`, `Vec`): every generated scope imports the generated `prelude`
/// module, which re-exports exactly these names from the runtime by absolute path
/// (see [`PRELUDE`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Types;

/// Runtime names the generated `prelude` re-exports: (path under the runtime root,
/// names). Generated code uses these names unqualified.
pub(crate) const PRELUDE: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "DType",
            "Device",
            "Dimname",
            "FromIValue",
            "Generator",
            "IValue",
            "IntoIValue",
            "Layout",
            "MemoryFormat",
            "Opaque",
            "OpalError",
            "QScheme",
            "Result",
            "Scalar",
            "Stack",
            "Storage",
            "Stream",
            "Tensor",
        ],
    ),
    (
        "dispatch",
        &[
            "ArgDef",
            "BoxedKernelFn",
            "DispatchKey",
            "DispatchKeySet",
            "Dispatcher",
            "Kernel",
            "KernelFunction",
            "OpDef",
            "OpSlot",
            "OperatorHandle",
        ],
    ),
];

impl Types {
    fn base_owned(&self, b: BaseTy) -> syn::Type {
        let name = match b {
            BaseTy::Tensor => "Tensor",
            BaseTy::Int | BaseTy::SymInt | BaseTy::DeviceIndex => "i64",
            BaseTy::DimVector => return ast::ty_generic("Vec", [ast::ty("i64")]),
            BaseTy::Float => "f64",
            BaseTy::Bool | BaseTy::SymBool => "bool",
            BaseTy::Str => "String",
            BaseTy::Scalar => "Scalar",
            BaseTy::ScalarType => "DType",
            BaseTy::Layout => "Layout",
            BaseTy::Device => "Device",
            BaseTy::MemoryFormat => "MemoryFormat",
            BaseTy::Generator => "Generator",
            BaseTy::Dimname => "Dimname",
            BaseTy::Storage => "Storage",
            BaseTy::Stream => "Stream",
            BaseTy::QScheme => "QScheme",
            BaseTy::ConstQuantizerPtr | BaseTy::GraphModule => "Opaque",
        };
        ast::ty(name)
    }

    /// How a base type is passed when not wrapped.
    fn base_passing(b: BaseTy) -> Passing {
        match b {
            BaseTy::Tensor
            | BaseTy::Str
            | BaseTy::Scalar
            | BaseTy::Generator
            | BaseTy::Storage
            | BaseTy::ConstQuantizerPtr
            | BaseTy::GraphModule
            | BaseTy::DimVector => Passing::Ref,
            _ => Passing::Value,
        }
    }

    /// How a (possibly wrapped) type is passed.
    pub fn passing(ty: &Type) -> Passing {
        match ty {
            Type::Base(b) => Self::base_passing(*b),
            Type::List { .. } => Passing::Ref,
            Type::Optional(inner) => match &**inner {
                Type::List { .. } | Type::Base(BaseTy::Str) | Type::Base(BaseTy::DimVector) => {
                    Passing::OptDeref
                }
                Type::Base(b) if Self::base_passing(*b) == Passing::Ref => Passing::OptRef,
                _ => Passing::Value,
            },
        }
    }

    /// The owned Rust type (options fields, returns, boxed unpacking).
    pub fn owned_type(&self, ty: &Type) -> syn::Type {
        match ty {
            Type::Base(b) => self.base_owned(*b),
            Type::Optional(inner) => ast::ty_generic("Option", [self.owned_type(inner)]),
            Type::List { elem, .. } => ast::ty_generic("Vec", [self.owned_type(elem)]),
        }
    }

    /// The borrowed argument type of typed signatures and stubs.
    pub fn arg_type(&self, ty: &Type) -> syn::Type {
        match ty {
            Type::Base(BaseTy::Str) => ast::ty_ref(ast::ty("str")),
            Type::Base(BaseTy::DimVector) => ast::ty_ref(ast::ty_slice(ast::ty("i64"))),
            Type::Base(b) => {
                let t = self.base_owned(*b);
                match Self::base_passing(*b) {
                    Passing::Ref => ast::ty_ref(t),
                    _ => t,
                }
            }
            Type::List { elem, .. } => ast::ty_ref(ast::ty_slice(self.owned_type(elem))),
            Type::Optional(inner) => match Self::passing(ty) {
                Passing::Value => ast::ty_generic("Option", [self.owned_type(inner)]),
                _ => ast::ty_generic("Option", [self.arg_type(inner)]),
            },
        }
    }

    /// The Rust return type for a list of schema return types: `()`, one owned type,
    /// or a tuple.
    pub fn returns_type<'a>(&self, tys: impl ExactSizeIterator<Item = &'a Type>) -> syn::Type {
        let n = tys.len();
        let mut ts = tys.map(|t| self.owned_type(t));
        match ts.next() {
            Some(t) if n == 1 => t,
            first => ast::ty_tuple(first.into_iter().chain(ts)),
        }
    }

    /// `Result<T>` of the runtime.
    pub fn result_type(&self, t: syn::Type) -> syn::Type {
        ast::ty_generic("Result", [t])
    }

    /// [`Types::arg_type`] as tokens.
    pub fn arg(&self, ty: &Type) -> TokenStream {
        self.arg_type(ty).into_token_stream()
    }

    /// [`Types::returns_type`] as tokens.
    pub fn returns<'a>(&self, tys: impl ExactSizeIterator<Item = &'a Type>) -> TokenStream {
        self.returns_type(tys).into_token_stream()
    }

    /// `Result<T>` of the runtime, as tokens.
    pub fn result(&self, t: TokenStream) -> TokenStream {
        quote!(Result<#t>)
    }
}

/// Converts an owned place expression (a local or a field, of the type's owned form)
/// into the argument form, without moving out of it.
pub(crate) fn owned_to_arg(expr: syn::Expr, ty: &Type) -> syn::Expr {
    match Types::passing(ty) {
        Passing::Value => expr,
        Passing::Ref => ast::reference(expr),
        Passing::OptRef => ast::method(expr, "as_ref", None, []),
        Passing::OptDeref => ast::method(expr, "as_deref", None, []),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BaseOperatorName;

    fn name(base: &str, inplace: bool, overload: &str) -> OperatorName {
        OperatorName {
            name: BaseOperatorName {
                base: base.to_string(),
                inplace,
                dunder_method: false,
                functional_overload: false,
            },
            overload_name: overload.to_string(),
        }
    }

    #[test]
    fn naming_rule() {
        assert_eq!(
            op_ident(&name("add", false, "Tensor")).unwrap(),
            "add_tensor"
        );
        assert_eq!(
            op_ident(&name("add", true, "Tensor")).unwrap(),
            "add_tensor_"
        );
        assert_eq!(op_ident(&name("relu", true, "")).unwrap(), "relu_");
        assert_eq!(with_method("add_tensor_"), "add_tensor_with_");
        assert_eq!(with_method("add_tensor"), "add_tensor_with");
        assert!(needs_non_snake_allow("__and___scalar"));
        assert!(!needs_non_snake_allow("__and__"));
        assert!(!needs_non_snake_allow("add_tensor_"));
        assert_eq!(op_ident(&name("add", false, "out")).unwrap(), "add_out");
        assert_eq!(op_ident(&name("relu", false, "")).unwrap(), "relu");
        assert_eq!(op_ident(&name("mT", false, "")).unwrap(), "mT");
        assert_eq!(
            op_ident(&name("sum", false, "dim_IntList")).unwrap(),
            "sum_dim_intlist"
        );
        assert_eq!(ident("where").to_string(), "r#where");
        assert_eq!(arg_ident("self").unwrap(), "self_");
        assert_eq!(ident(&arg_ident("unsafe").unwrap()).to_string(), "r#unsafe");
        assert!(arg_ident("__x").is_err());
        assert!(arg_ident("a-b").is_err());
        assert!(needs_non_snake_allow("mT"));
    }

    #[test]
    fn reserved_names_are_mangled() {
        for (op, want) in [
            ("prelude", "prelude_op"),
            ("support", "support_op"),
            ("methods", "methods_op"),
            ("ops_001", "ops_001_op"),
            ("ops_x", "ops_x"),
            ("TensorOps", "TensorOps_op"),
            ("Tensor", "Tensor_op"),
            ("DispatchKey", "DispatchKey_op"),
            ("Some", "Some_op"),
            ("u8", "u8_op"),
            ("call", "call"),
            ("DEF", "DEF"),
        ] {
            assert_eq!(op_ident(&name(op, false, "")).unwrap(), want);
        }
        // Only the whole identifier counts: overloads and in-place names are free.
        assert_eq!(op_ident(&name("prelude", true, "")).unwrap(), "prelude_");
        assert_eq!(op_ident(&name("prelude", false, "x")).unwrap(), "prelude_x");
        for (arg, want) in [
            ("DEF", "DEF_"),
            ("SLOT", "SLOT_"),
            ("ks", "ks_"),
            ("opts", "opts_"),
            ("None", "None_"),
            ("Tensor", "Tensor_"),
            ("default", "default_"),
            ("Self", "Self_"),
            ("value", "value"),
        ] {
            assert_eq!(arg_ident(arg).unwrap(), want);
        }
    }

    fn ts(t: TokenStream) -> String {
        t.to_string().replace(' ', "")
    }

    #[test]
    fn type_table() {
        let t = Types;
        let opt = |t: Type| Type::Optional(Box::new(t));
        let list = |t: Type| Type::List {
            elem: Box::new(t),
            size: None,
        };
        let b = Type::Base;
        assert_eq!(ts(t.arg(&b(BaseTy::Tensor))), "&Tensor");
        assert_eq!(ts(t.arg(&opt(b(BaseTy::Tensor)))), "Option<&Tensor>");
        assert_eq!(ts(t.arg(&list(b(BaseTy::Tensor)))), "&[Tensor]");
        assert_eq!(
            ts(t.arg(&list(opt(b(BaseTy::Tensor))))),
            "&[Option<Tensor>]"
        );
        assert_eq!(ts(t.arg(&b(BaseTy::SymInt))), "i64");
        assert_eq!(ts(t.arg(&list(b(BaseTy::SymInt)))), "&[i64]");
        assert_eq!(ts(t.arg(&opt(list(b(BaseTy::Int))))), "Option<&[i64]>");
        assert_eq!(ts(t.arg(&b(BaseTy::Str))), "&str");
        assert_eq!(ts(t.arg(&opt(b(BaseTy::Str)))), "Option<&str>");
        assert_eq!(ts(t.arg(&b(BaseTy::ScalarType))), "DType");
        assert_eq!(ts(t.arg(&opt(b(BaseTy::Device)))), "Option<Device>");
        assert_eq!(ts(t.arg(&b(BaseTy::Scalar))), "&Scalar");
        assert_eq!(
            ts(t.owned_type(&b(BaseTy::Str)).into_token_stream()),
            "String"
        );
        assert_eq!(ts(t.arg(&b(BaseTy::GraphModule))), "&Opaque");
        let x = |ty: &Type| ts(owned_to_arg(ast::p(&["x"]), ty).into_token_stream());
        assert_eq!(x(&opt(list(b(BaseTy::Int)))), "x.as_deref()");
        assert_eq!(x(&opt(b(BaseTy::Tensor))), "x.as_ref()");
        assert_eq!(x(&b(BaseTy::Int)), "x");
        assert_eq!(x(&b(BaseTy::Tensor)), "&x");
        assert_eq!(
            ts(t.returns([b(BaseTy::Tensor), b(BaseTy::Int)].iter())),
            "(Tensor,i64)"
        );
        assert_eq!(ts(t.returns([].iter())), "()");
    }
}
