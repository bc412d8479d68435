//! The runtime's composite kernels as codegen input: a YAML file
//! (`runtime/composites.yaml`) mapping each composite alias key to the operators
//! whose one kernel, written over other operators, serves every backend, and the
//! Rust function that is that kernel:
//!
//! ```yaml
//! CompositeImplicitAutograd:
//!   - reshape: composite::shape::reshape
//! CompositeExplicitAutograd:
//!   - split.Tensor: composite::shape::split_tensor
//! ```
//!
//! `crate::emit::composites` turns it into the registration function the
//! dispatcher calls when it is created; `crate::backend::coverage` reads it to know
//! which composites a runtime really has.
//!
//! Owns: the file's shape, its located errors and the rules an entry must meet (the
//! operator exists, is listed once, the kernel is a Rust path). Must not: produce
//! tokens.

use std::path::Path;

use crate::diagnostics::{Diagnostic, Diagnostics, ListedOnce};
use crate::model::{Loc, NativeFunctions};
use crate::parse::node::Node;
use crate::parse::outline::LineIndex;
use crate::parse::read_document;

/// The alias keys a composite kernel may be registered under.
pub const KEYS: [&str; 2] = ["CompositeImplicitAutograd", "CompositeExplicitAutograd"];

/// One composite kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CompositeKernel {
    /// `name` or `name.overload`, as in `native_functions.yaml`.
    pub op: String,
    /// One of [`KEYS`].
    pub key: &'static str,
    /// The kernel function's path from the crate root (`composite::shape::reshape`).
    pub kernel: String,
    /// Where the operator is named.
    pub loc: Loc,
}

/// Reads the file's entries and every problem of its shape (operators are checked
/// by [`validate`]).
pub(crate) fn parse(src: &str) -> (Vec<CompositeKernel>, Vec<Diagnostic>) {
    let mut errs = Vec::new();
    let mut out = Vec::new();
    let doc = match read_document(src) {
        Ok(d) => d,
        Err(d) => return (out, vec![d]),
    };
    let idx = LineIndex::new(src);
    let at = |n: &Node<'_>, fallback: Loc| idx.first_loc(n).unwrap_or(fallback);
    let shape_err = |loc: Loc, message: String, hint: &str| {
        Diagnostic::new("opal::composites_shape", loc, message)
            .label("here")
            .hint(hint.to_string())
    };
    let pairs = match doc {
        Node::Map(pairs) => pairs,
        Node::Null => Vec::new(),
        other => {
            errs.push(shape_err(
                Loc::START,
                format!("the file is {}, not a mapping", other.describe()),
                "map `CompositeImplicitAutograd` and `CompositeExplicitAutograd` to lists of `op: kernel_path`",
            ));
            return (out, errs);
        }
    };
    for (k, v) in &pairs {
        let kloc = at(k, Loc::START);
        let Some(key) = k.as_str().and_then(|s| KEYS.into_iter().find(|&c| c == s)) else {
            let hint = k
                .as_str()
                .and_then(|s| crate::suggest::did_you_mean(s, KEYS))
                .unwrap_or_else(|| format!("the keys are `{}`", KEYS.join("`, `")));
            errs.push(
                Diagnostic::new(
                    "opal::composites_key",
                    kloc,
                    format!("{} is not a composite key", k.describe()),
                )
                .label("unknown key")
                .hint(hint),
            );
            continue;
        };
        let items = match v {
            Node::Seq(items) => items.as_slice(),
            Node::Null => &[],
            other => {
                errs.push(shape_err(
                    at(other, kloc),
                    format!("`{key}` maps to {}, not a list", other.describe()),
                    "write one `- op: kernel_path` line per operator",
                ));
                continue;
            }
        };
        for item in items {
            let loc = at(item, kloc);
            let entry = match item {
                Node::Map(kv) if kv.len() == 1 => kv[0].0.as_str().zip(kv[0].1.as_str()),
                _ => None,
            };
            let Some((op, kernel)) = entry else {
                errs.push(shape_err(
                    loc,
                    format!("expected `op: kernel_path`, found {}", item.describe()),
                    "name the operator as in native_functions.yaml and the kernel function from the crate root: `- reshape: composite::shape::reshape`",
                ));
                continue;
            };
            if syn::parse_str::<syn::Path>(kernel).is_err() {
                let kloc = match item {
                    Node::Map(kv) => at(&kv[0].1, loc),
                    _ => loc,
                };
                errs.push(
                    Diagnostic::new(
                        "opal::composites_kernel",
                        kloc,
                        format!("`{kernel}` is not the path of a Rust function"),
                    )
                    .label("expected a path such as `composite::shape::reshape`")
                    .hint("name the kernel function from the crate root (`module::function`)"),
                );
                continue;
            }
            out.push(CompositeKernel {
                op: op.to_string(),
                key,
                kernel: kernel.to_string(),
                loc,
            });
        }
    }
    (out, errs)
}

/// Checks the entries against the native model: each operator exists and is listed
/// once.
pub(crate) fn validate(kernels: &[CompositeKernel], natives: &NativeFunctions) -> Vec<Diagnostic> {
    let names: Vec<String> = natives
        .functions
        .iter()
        .map(|f| f.func.name.to_string())
        .collect();
    let mut errs = Vec::new();
    let mut listed = ListedOnce::new("opal::composites_duplicate");
    for k in kernels {
        if let Some(d) = listed.again(&k.op, k.loc) {
            errs.push(d);
            continue;
        }
        if !names.contains(&k.op) {
            let hint = crate::suggest::did_you_mean(&k.op, names.iter().map(String::as_str))
                .unwrap_or_else(|| "name it as in native_functions.yaml: `name.overload`".into());
            errs.push(
                Diagnostic::new(
                    "opal::composites_unknown_op",
                    k.loc,
                    format!("`{}` is not an operator of the native YAML", k.op),
                )
                .label("unknown operator")
                .hint(hint),
            );
        }
    }
    errs
}

/// Loads and checks `composites.yaml` text; `path` is only used in messages.
pub(crate) fn load_str(
    src: &str,
    path: &str,
    natives: &NativeFunctions,
) -> Result<Vec<CompositeKernel>, Diagnostics> {
    let (kernels, mut errs) = parse(src);
    errs.extend(validate(&kernels, natives));
    Diagnostics::or_ok(kernels, errs, path, src)
}

/// Loads and checks a `composites.yaml` file.
pub(crate) fn load(
    path: &Path,
    natives: &NativeFunctions,
) -> Result<Vec<CompositeKernel>, Diagnostics> {
    crate::load::with_text(path, |src, name| load_str(src, name, natives))
}
