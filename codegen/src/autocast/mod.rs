//! Autocast cast policy as codegen input: a YAML file (`runtime/autocast.yaml` for
//! Opal's own operators) that sorts operators into the three ways automatic mixed
//! precision treats them, loaded into a located policy and checked against a
//! native model; [`Builder`] writes the kernels the `emit` submodule generates
//! from it (on the operator plans of `crate::emit::plan`).
//!
//! The file is a mapping from a cast kind to a list of operator names
//! (`name` or `name.overload`, exactly as in `native_functions.yaml`):
//!
//! ```yaml
//! lower_precision_fp: [mm, addmm]   # floating inputs cast to the autocast dtype
//! fp32: [_softmax]                  # floating inputs cast to float32
//! promote: [cat]                    # floating inputs cast to the widest among them
//! ```
//!
//! Owns: the file's shape, its located errors and the rules an operator must meet
//! to be listed (it exists, is functional, takes tensors, lists no tensor twice).
//! Must not: produce tokens (that is `emit`) or decide casting
//! at run time (the runtime's `autocast` module does).

mod emit;

use std::path::{Path, PathBuf};

use crate::diagnostics::{Diagnostic, Diagnostics, ListedOnce};
use crate::emit::plan::OpPlan;
use crate::model::{BaseTy, Loc, NativeFunctions, Type};
use crate::parse::node::Node;
use crate::parse::outline::LineIndex;
use crate::parse::read_document;

/// How an autocast kernel treats an operator's floating-point tensor inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CastKind {
    /// Cast to the device's autocast dtype (`float16` by default).
    LowerPrecision,
    /// Cast to `float32`.
    Fp32,
    /// Cast to the widest floating dtype among the inputs.
    Promote,
}

impl CastKind {
    /// The file's key for this kind.
    pub const fn key(self) -> &'static str {
        match self {
            CastKind::LowerPrecision => "lower_precision_fp",
            CastKind::Fp32 => "fp32",
            CastKind::Promote => "promote",
        }
    }

    /// Every kind, in file order.
    pub const ALL: [CastKind; 3] = [CastKind::LowerPrecision, CastKind::Fp32, CastKind::Promote];
}

/// One listed operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PolicyEntry {
    /// `name` or `name.overload`.
    pub op: String,
    pub cast: CastKind,
    /// Where the name is in the file.
    pub loc: Loc,
}

/// A loaded cast policy, entries in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Policy {
    pub entries: Vec<PolicyEntry>,
}

/// Reads policy text: the entries that loaded and every problem of the file's shape
/// (not yet checked against operators; see [`validate`]).
pub(crate) fn parse_policy(src: &str) -> (Policy, Vec<Diagnostic>) {
    let mut errs = Vec::new();
    let mut out = Policy::default();
    let doc: Node<'_> = match read_document(src) {
        Ok(d) => d,
        Err(d) => return (out, vec![d]),
    };
    let idx = LineIndex::new(src);
    let at = |n: &Node<'_>, fallback: Loc| idx.first_loc(n).unwrap_or(fallback);
    let keys = CastKind::ALL.map(CastKind::key).join("`, `");
    let pairs = match doc {
        Node::Map(pairs) => pairs,
        Node::Null => Vec::new(),
        other => {
            let d = Diagnostic::new(
                "opal::autocast_shape",
                Loc::START,
                format!("the policy is {}, not a mapping", other.describe()),
            )
            .label("top level")
            .hint(format!("map each of `{keys}` to a list of operator names"));
            return (out, vec![d]);
        }
    };
    for (k, v) in &pairs {
        let kloc = at(k, Loc::START);
        let Some(cast) = k
            .as_str()
            .and_then(|s| CastKind::ALL.into_iter().find(|c| c.key() == s))
        else {
            errs.push(
                Diagnostic::new(
                    "opal::autocast_key",
                    kloc,
                    format!("unknown cast kind {}", k.describe()),
                )
                .label("not a cast kind")
                .hint(format!("the cast kinds are `{keys}`")),
            );
            continue;
        };
        let items = match v {
            Node::Seq(items) => items.as_slice(),
            Node::Null => &[],
            other => {
                errs.push(
                    Diagnostic::new(
                        "opal::autocast_shape",
                        at(other, kloc),
                        format!("`{}` maps to {}, not a list", cast.key(), other.describe()),
                    )
                    .label("expected a list of operator names")
                    .hint("write the operators as a YAML list: `[mm, addmm]` or `- mm` lines"),
                );
                continue;
            }
        };
        for item in items {
            let loc = at(item, kloc);
            match item.as_str() {
                Some(op) => out.entries.push(PolicyEntry {
                    op: op.to_string(),
                    cast,
                    loc,
                }),
                None => errs.push(
                    Diagnostic::new(
                        "opal::autocast_shape",
                        loc,
                        format!("expected an operator name, found {}", item.describe()),
                    )
                    .label("not a name")
                    .hint("write `name` or `name.overload` as in native_functions.yaml"),
                ),
            }
        }
    }
    (out, errs)
}

/// Why an operator cannot have an autocast kernel, if it cannot.
fn unfit(op: &OpPlan<'_>) -> Option<String> {
    let func = op.schema_fn();
    if func.is_out_fn() || func.arguments.all().any(|a| a.is_write()) {
        return Some("it writes to an argument; autocast applies to functional operators".into());
    }
    let mut tensors = 0;
    for a in func.arguments.all() {
        match tensor_arg(&a.ty) {
            Some(TensorArg::Unsupported) => {
                return Some(format!(
                    "its argument `{}` has type `{}`, which autocast kernels cannot cast",
                    a.name, a.ty
                ))
            }
            Some(_) => tensors += 1,
            None => {}
        }
    }
    (tensors == 0).then(|| "it has no tensor argument to cast".to_string())
}

/// How a schema argument holds tensors, for the emitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TensorArg {
    /// `Tensor`.
    One,
    /// `Tensor?`.
    Optional,
    /// `Tensor[]`.
    List,
    /// Anything else holding tensors (`Tensor?[]`).
    Unsupported,
}

/// [`TensorArg`] of a type, `None` when it holds no tensor.
pub(crate) fn tensor_arg(ty: &Type) -> Option<TensorArg> {
    let is_tensor = |t: &Type| matches!(t, Type::Base(BaseTy::Tensor));
    match ty {
        t if is_tensor(t) => Some(TensorArg::One),
        Type::Optional(inner) if is_tensor(inner) => Some(TensorArg::Optional),
        Type::List { elem, .. } if is_tensor(elem) => Some(TensorArg::List),
        Type::Optional(inner) | Type::List { elem: inner, .. } => {
            tensor_arg(inner).map(|_| TensorArg::Unsupported)
        }
        Type::Base(_) => None,
    }
}

/// Checks each entry against the planned operators: it must exist, be listed once
/// and be fit for an autocast kernel.
pub(crate) fn validate(policy: &Policy, ops: &[OpPlan<'_>]) -> Vec<Diagnostic> {
    let mut errs = Vec::new();
    let mut listed = ListedOnce::new("opal::autocast_duplicate");
    for e in &policy.entries {
        if let Some(d) = listed.again(&e.op, e.loc) {
            errs.push(d);
            continue;
        }
        let Some(op) = ops.iter().find(|o| o.op_name == e.op) else {
            errs.push(unknown_op(e, ops));
            continue;
        };
        if let Some(why) = unfit(op) {
            errs.push(
                Diagnostic::new(
                    "opal::autocast_unfit",
                    e.loc,
                    format!("operator `{}` cannot have an autocast kernel: {why}", e.op),
                )
                .label("listed here")
                .hint(format!(
                    "list the functional overload instead (schema: `{}`)",
                    op.schema
                )),
            );
        }
    }
    errs
}

fn unknown_op(e: &PolicyEntry, ops: &[OpPlan<'_>]) -> Diagnostic {
    let base = e.op.split('.').next().unwrap_or(&e.op);
    let related: Vec<&str> = ops
        .iter()
        .map(|o| o.op_name.as_str())
        .filter(|n| {
            let b = n.split('.').next().unwrap_or(n);
            b == base
                || (base.len() >= 3 && b.trim_start_matches('_') == base.trim_start_matches('_'))
        })
        .take(8)
        .collect();
    let hint = if related.is_empty() {
        "list operators by `name` or `name.overload` as native_functions.yaml defines them"
            .to_string()
    } else {
        format!("operators with a similar name: `{}`", related.join("`, `"))
    };
    Diagnostic::new(
        "opal::autocast_unknown_op",
        e.loc,
        format!("unknown operator `{}` in the `{}` list", e.op, e.cast.key()),
    )
    .label("no such operator")
    .hint(hint)
}

/// Errors of [`Builder::generate`]: the same as the operator layer's builder.
pub use crate::builder::Error;

/// Generates the autocast kernels of a cast policy into `<out_dir>/mod.rs`, for the
/// runtime crate (`crate::ops` paths): used by `opal`'s build script.
#[derive(Clone, Debug, Default)]
pub struct Builder {
    native_yaml: Option<PathBuf>,
    policy: Option<PathBuf>,
    out_dir: Option<PathBuf>,
    namespace: Option<String>,
}

impl Builder {
    /// A builder with nothing set (namespace `aten`).
    pub fn new() -> Self {
        Self::default()
    }

    setters! {
        /// The `native_functions.yaml` the policy names operators of.
        native_yaml(path: impl AsRef<Path>) => native_yaml = Some(path.as_ref().to_path_buf());

        /// The cast policy file.
        policy(path: impl AsRef<Path>) => policy = Some(path.as_ref().to_path_buf());

        /// Where `mod.rs` goes.
        out_dir(dir: impl AsRef<Path>) => out_dir = Some(dir.as_ref().to_path_buf());

        /// The operators' namespace (default `aten`).
        namespace(ns: impl Into<String>) => namespace = Some(ns.into());
    }

    /// [`Builder::generate`], printing the diagnostics and exiting with status 1 on
    /// failure (what a build script wants).
    pub fn generate_or_exit(self) {
        if let Err(e) = self.generate() {
            eprintln!("{e}");
            std::process::exit(1)
        }
    }

    /// Loads both files, checks the policy and writes `mod.rs` when its bytes
    /// changed. Prints `cargo:rerun-if-changed` for the policy.
    pub fn generate(self) -> Result<(), Error> {
        let cfg = |what: &str| Error::Config(format!("no {what} given"));
        let native = self
            .native_yaml
            .ok_or_else(|| cfg("native_functions.yaml"))?;
        let policy_path = self.policy.ok_or_else(|| cfg("policy file"))?;
        let out_dir = self.out_dir.ok_or_else(|| cfg("output directory"))?;
        let ns = self.namespace.unwrap_or_else(|| "aten".to_string());
        println!("cargo:rerun-if-changed={}", policy_path.display());
        let model = crate::load(&native).map_err(Error::Load)?;
        let text = crate::load::with_text(&policy_path, |src, name| {
            generate_str(&model, src, name, &ns)
        })
        .map_err(Error::Load)?;
        let io = |path: &Path, error| Error::Io {
            path: path.to_path_buf(),
            error,
        };
        std::fs::create_dir_all(&out_dir).map_err(|e| io(&out_dir, e))?;
        let path = out_dir.join("mod.rs");
        if !std::fs::read(&path).is_ok_and(|old| old == text.as_bytes()) {
            std::fs::write(&path, text).map_err(|e| io(&path, e))?;
        }
        Ok(())
    }
}

/// Loads and checks policy text `src` (named `path` in messages) against `model` and
/// returns the generated, formatted kernels file.
pub(crate) fn generate_str(
    model: &NativeFunctions,
    src: &str,
    path: &str,
    namespace: &str,
) -> Result<String, Diagnostics> {
    let plan = crate::emit::plan::plan(model, namespace).map_err(|errs| {
        let mut d = Diagnostics::new(path, src);
        for e in errs {
            d.push(Diagnostic::new("opal::codegen", e.loc, e.message));
        }
        d
    })?;
    let (policy, mut errs) = parse_policy(src);
    errs.extend(validate(&policy, &plan.ops));
    if !errs.is_empty() {
        return Err(Diagnostics::sorted(path, src, errs));
    }
    emit::generate(&policy, &plan.ops, path).map_err(|e| {
        Diagnostics::sorted(
            path,
            src,
            vec![Diagnostic::new("opal::codegen", Loc::START, e)],
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NATIVE: &str = "- func: mm(Tensor self, Tensor mat2) -> Tensor\n- func: mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)\n- func: cat(Tensor[] tensors, int dim=0) -> Tensor\n- func: ones(int[] size) -> Tensor\n";

    fn errors(policy: &str) -> Vec<String> {
        let model = crate::load_str(NATIVE, "native.yaml", None).unwrap();
        match generate_str(&model, policy, "autocast.yaml", "aten") {
            Ok(_) => Vec::new(),
            Err(d) => d
                .items
                .iter()
                .map(|i| format!("{}:{} {}", i.loc.line, i.loc.col, i.message))
                .collect(),
        }
    }

    #[test]
    fn good_policy_generates_one_kernel_per_entry() {
        let model = crate::load_str(NATIVE, "native.yaml", None).unwrap();
        let text = generate_str(
            &model,
            "lower_precision_fp: [mm]\npromote: [cat]\n",
            "p.yaml",
            "aten",
        )
        .unwrap();
        assert!(text.contains("pub fn mm(ks: DispatchKeySet"), "{text}");
        assert!(text.contains("pub fn cat(ks: DispatchKeySet"), "{text}");
        assert!(text.contains("Schema: `aten::cat(Tensor[] tensors, int dim=0) -> Tensor`"));
        assert!(text.contains("CastKind::Promote"));
        // Deterministic: the same input gives the same bytes.
        let again = generate_str(
            &model,
            "lower_precision_fp: [mm]\npromote: [cat]\n",
            "p.yaml",
            "aten",
        )
        .unwrap();
        assert_eq!(text, again);
    }

    #[test]
    fn bad_policies_are_located_errors() {
        assert_eq!(
            errors("fp32:\n  - mmm\n"),
            ["2:5 unknown operator `mmm` in the `fp32` list"]
        );
        assert_eq!(
            errors("fp16: [mm]\n"),
            ["1:1 unknown cast kind the string `fp16`"]
        );
        assert_eq!(
            errors("fp32: [mm]\npromote: [mm]\n"),
            ["2:11 operator `mm` is listed twice"]
        );
        let e = errors("fp32: [mm.out, ones]\n");
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].starts_with("1:8 operator `mm.out` cannot have an autocast kernel: it writes"));
        assert!(e[1].contains("`ones` cannot have an autocast kernel: it has no tensor argument"));
        assert_eq!(
            errors("fp32: mm\n"),
            ["1:7 `fp32` maps to the string `mm`, not a list"]
        );
        assert_eq!(
            errors("- mm\n"),
            ["1:1 the policy is a list, not a mapping"]
        );
        assert_eq!(errors("fp32: [mm\n").len(), 1);
        assert_eq!(
            errors("fp32: [[mm]]\n"),
            ["1:9 expected an operator name, found a list"]
        );
    }
}
