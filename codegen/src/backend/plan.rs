//! Resolution of a backend against a native YAML: each `supported:` entry is matched
//! to its native function and classified (identical / adapter / incompatible), and
//! the functional and in-place variants a supported out= kernel provides through
//! `structured_delegate` are derived.
//!
//! Owns: the resolved [`Plan`] and its errors. Must not: read files, emit code.

use std::collections::HashMap;

use crate::diagnostics::Diagnostic;
use crate::model::{FunctionSchema, Loc, NativeFunction, NativeFunctions, OperatorName};

use super::compat::{classify, Compat};
use super::report::{BackendDiagnostic, Note};
use super::spec::{BackendSpec, Located, SupportedOp};

/// One supported op, resolved.
#[derive(Clone, Debug)]
pub struct PlannedOp<'n> {
    /// The native function the kernel implements (its current schema).
    pub func: &'n NativeFunction,
    /// The schema the kernel was written against, when pinned.
    pub pinned: Option<&'n FunctionSchema>,
    pub compat: Compat,
    /// Where the `supported:` entry is.
    pub loc: Loc,
    /// The kernel function the entry names, if any ([`SupportedOp::kernel`]).
    pub kernel: Option<&'n Located<String>>,
}

impl PlannedOp<'_> {
    /// The schema the kernel's Rust signature follows.
    pub fn kernel_schema(&self) -> &FunctionSchema {
        self.pinned.unwrap_or(&self.func.func)
    }
}

/// An op registered for free because a supported out= kernel is its
/// `structured_delegate`.
#[derive(Clone, Debug)]
pub struct DerivedOp<'n> {
    pub func: &'n NativeFunction,
    /// Index into [`Plan::ops`] of the out= kernel it is derived from.
    pub from: usize,
}

/// A backend resolved against a native YAML.
#[derive(Clone, Debug)]
pub struct Plan<'n> {
    /// Supported ops that resolved cleanly, in `supported:` order.
    pub ops: Vec<PlannedOp<'n>>,
    /// `autograd:` ops, registered at the backend's autograd key.
    pub autograd: Vec<PlannedOp<'n>>,
    /// Derived structured-delegate ops, in native YAML order.
    pub derived: Vec<DerivedOp<'n>>,
    /// Supported entries that failed (unknown op, incompatible pin), by entry index,
    /// with a one-line reason, for the coverage report.
    pub failed: Vec<(String, String)>,
    /// What resolution accepted but reports: an op listed twice the same way, an
    /// op the native YAML lacks when unknown ops are skipped.
    pub warnings: Vec<BackendDiagnostic>,
}

/// Resolves `spec` against `natives`; problems are returned alongside the partial
/// plan (an empty problem list means the plan is complete).
pub fn resolve<'n>(
    spec: &'n BackendSpec,
    natives: &'n NativeFunctions,
) -> (Plan<'n>, Vec<BackendDiagnostic>) {
    resolve_with(spec, natives, false)
}

/// [`resolve`], optionally skipping ops the native YAML lacks (`--skip-unknown-ops`:
/// a warning per op, and the rest of the backend is planned).
pub fn resolve_with<'n>(
    spec: &'n BackendSpec,
    natives: &'n NativeFunctions,
    skip_unknown_ops: bool,
) -> (Plan<'n>, Vec<BackendDiagnostic>) {
    let by_name: HashMap<&OperatorName, &NativeFunction> = natives
        .functions
        .iter()
        .map(|f| (&f.func.name, f))
        .collect();
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut ops: Vec<PlannedOp<'n>> = Vec::new();
    let mut failed = Vec::new();
    let mut seen: HashMap<&OperatorName, &SupportedOp> = HashMap::new();
    for entry in &spec.supported {
        let name = entry.name().to_string();
        if let Some(first) = seen.get(entry.name()) {
            // The same entry twice is harmless (a warning); two different pins or
            // kernels for one op cannot both be right.
            let same = first.pinned().map(ToString::to_string)
                == entry.pinned().map(ToString::to_string)
                && first.kernel().map(|k| &k.value) == entry.kernel().map(|k| &k.value);
            let d = Diagnostic::new(
                "opal::backend::duplicate_op",
                entry.loc(),
                format!("'{name}' is listed twice in `supported:`"),
            )
            .label("listed again here");
            if same {
                warnings.push(
                    d.hint(format!(
                        "the second listing is ignored; remove it (the first is at line {})",
                        first.loc().line
                    ))
                    .into(),
                );
            } else {
                errors.push(
                    d.hint(format!(
                        "the entries differ (schema or kernel): keep one (the first is at line {})",
                        first.loc().line
                    ))
                    .into(),
                );
            }
            continue;
        }
        seen.insert(entry.name(), entry);
        let Some(func) = by_name.get(entry.name()).copied() else {
            let loc = match entry {
                SupportedOp::Pinned { schema, .. } => schema.loc,
                SupportedOp::Current { loc, .. } => *loc,
            };
            if skip_unknown_ops {
                let mut d = unknown_op(&name, loc, natives);
                d.diag.message.push_str(" (skipped: --skip-unknown-ops)");
                warnings.push(d);
                failed.push((name, "not in the native YAML (skipped)".to_string()));
                continue;
            }
            errors.push(unknown_op(&name, loc, natives));
            failed.push((name, "not in the native YAML".to_string()));
            continue;
        };
        let (pinned, compat) = match entry {
            SupportedOp::Current { .. } => (None, Compat::Identical),
            SupportedOp::Pinned { schema, .. } => match classify(schema, &func.func) {
                Ok(c) => (Some(schema), c),
                Err(inc) => {
                    errors.push(BackendDiagnostic {
                        diag: Diagnostic::new(
                            "opal::backend::incompatible_pin",
                            inc.pinned_loc,
                            inc.message.clone(),
                        )
                        .label("the kernel was written against this")
                        .hint(inc.hint),
                        note: Some(Note {
                            loc: if inc.current_loc.is_synthetic() {
                                func.func.loc
                            } else {
                                inc.current_loc
                            },
                            label: format!("current schema of '{name}'"),
                        }),
                    });
                    failed.push((name, format!("incompatible pin: {}", inc.message)));
                    continue;
                }
            },
        };
        ops.push(PlannedOp {
            func,
            pinned,
            compat,
            loc: entry.loc(),
            kernel: entry.kernel(),
        });
    }
    let mut autograd = Vec::new();
    let mut seen_ag: HashMap<&OperatorName, Loc> = HashMap::new();
    for entry in &spec.autograd {
        let name = entry.name().to_string();
        if seen_ag.insert(entry.name(), entry.loc()).is_some() {
            errors.push(
                Diagnostic::new(
                    "opal::backend::duplicate_op",
                    entry.loc(),
                    format!("'{name}' is listed twice in `autograd:`"),
                )
                .label("listed again here")
                .hint("remove one of the entries")
                .into(),
            );
            continue;
        }
        if let SupportedOp::Pinned { schema, .. } = entry {
            errors.push(
                Diagnostic::new(
                    "opal::backend::autograd_pin",
                    schema.loc,
                    format!("`autograd:` lists operator names; '{name}' is given a schema"),
                )
                .label("a pinned schema")
                .hint(format!(
                    "write `- {name}`: autograd kernels implement the current schema"
                ))
                .into(),
            );
            continue;
        }
        match by_name.get(entry.name()).copied() {
            Some(func) => autograd.push(PlannedOp {
                func,
                pinned: None,
                compat: Compat::Identical,
                loc: entry.loc(),
                kernel: entry.kernel(),
            }),
            None => {
                errors.push(unknown_op(&name, entry.loc(), natives));
                failed.push((name, "not in the native YAML".to_string()));
            }
        }
    }
    let supported_idx: HashMap<&OperatorName, usize> = ops
        .iter()
        .enumerate()
        .map(|(i, o)| (&o.func.func.name, i))
        .collect();
    let derived = natives
        .functions
        .iter()
        .filter(|f| !supported_idx.contains_key(&f.func.name))
        .filter_map(|f| {
            let d = f.structured_delegate.as_ref()?;
            let from = *supported_idx.get(d)?;
            Some(DerivedOp { func: f, from })
        })
        .collect();
    (
        Plan {
            ops,
            derived,
            autograd,
            failed,
            warnings,
        },
        errors,
    )
}

/// "'name' is not an operator of the native YAML", with the closest name.
fn unknown_op(name: &str, loc: Loc, natives: &NativeFunctions) -> BackendDiagnostic {
    let names: Vec<String> = natives
        .functions
        .iter()
        .map(|f| f.func.name.to_string())
        .collect();
    let d = Diagnostic::new(
        "opal::backend::unknown_op",
        loc,
        format!("'{name}' is not an operator of the native YAML"),
    )
    .label("unknown operator");
    match crate::suggest::closest(name, names.iter().map(String::as_str)) {
        Some(s) => d.hint(format!("did you mean '{s}'?")),
        None => d.hint("list operators as `name.overload`, as in the native YAML"),
    }
    .into()
}
