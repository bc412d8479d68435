//! Resolution of a backend against a native YAML: each `supported:` entry is matched
//! to its native function and classified (identical / adapter / incompatible), and
//! the functional and in-place variants a supported out= kernel provides through
//! `structured_delegate` are derived.
//!
//! The emission plan comes from here too: the emitter's per-op plans of exactly the
//! functions a backend module touches, and one `Entry` per op saying how its trait
//! fn is provided (named kernel, autogen `out=` rule, or left to the backend).
//!
//! Owns: the resolved [`Plan`], the emission plan and their errors. Must not: read
//! files, emit code.

use std::collections::{HashMap, HashSet};

use quote::format_ident;

use crate::diagnostics::Diagnostic;
use crate::emit::plan::{self as eplan, OpPlan};
use crate::model::{
    Argument, FunctionSchema, Loc, NativeFunction, NativeFunctions, OperatorName, SchemaKind,
};

use super::bodies;
use super::compat::{classify, Compat, Incompatibility};
use super::report::{BackendDiagnostic, Note};
use super::spec::{BackendSpec, Located, SupportedOp};

/// Trait methods that move data for the CPU fallback (reserved: no op may map to
/// these names).
pub(crate) const TRANSFER_TO_CPU: &str = "transfer_to_cpu";
/// See [`TRANSFER_TO_CPU`].
pub(crate) const TRANSFER_FROM_CPU: &str = "transfer_from_cpu";

/// One supported op, resolved.
#[derive(Clone, Debug)]
pub(crate) struct PlannedOp<'n> {
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
pub(crate) struct DerivedOp<'n> {
    pub func: &'n NativeFunction,
    /// Index into [`Plan::ops`] of the out= kernel it is derived from.
    pub from: usize,
}

/// A backend resolved against a native YAML.
#[derive(Clone, Debug)]
pub(crate) struct Plan<'n> {
    /// Supported ops that resolved cleanly, in `supported:` order.
    pub(crate) ops: Vec<PlannedOp<'n>>,
    /// `autograd:` ops, registered at the backend's autograd key.
    pub(crate) autograd: Vec<PlannedOp<'n>>,
    /// Derived structured-delegate ops, in native YAML order.
    pub(crate) derived: Vec<DerivedOp<'n>>,
    /// Supported entries that failed (unknown op, incompatible pin), by entry index,
    /// with a one-line reason, for the coverage report.
    pub failed: Vec<(String, String)>,
    /// What resolution accepted but reports: an op listed twice the same way, an
    /// op the native YAML lacks when unknown ops are skipped.
    pub warnings: Vec<BackendDiagnostic>,
}

/// Resolves `spec` against `natives`; problems are returned alongside the partial
/// plan (an empty problem list means the plan is complete).
pub(crate) fn resolve<'n>(
    spec: &'n BackendSpec,
    natives: &'n NativeFunctions,
) -> (Plan<'n>, Vec<BackendDiagnostic>) {
    resolve_with(spec, natives, false)
}

/// [`resolve`], optionally skipping ops the native YAML lacks (`--skip-unknown-ops`:
/// a warning per op, and the rest of the backend is planned).
pub(crate) fn resolve_with<'n>(
    spec: &'n BackendSpec,
    natives: &'n NativeFunctions,
    skip_unknown_ops: bool,
) -> (Plan<'n>, Vec<BackendDiagnostic>) {
    let mut r = Resolver {
        natives,
        by_name: natives
            .functions
            .iter()
            .map(|f| (&f.func.name, f))
            .collect(),
        skip_unknown_ops,
        errors: Vec::new(),
        warnings: Vec::new(),
        failed: Vec::new(),
    };
    let ops = r.supported(&spec.supported);
    let autograd = r.autograd(&spec.autograd);
    let derived = derived(natives, &ops);
    (
        Plan {
            ops,
            derived,
            autograd,
            failed: r.failed,
            warnings: r.warnings,
        },
        r.errors,
    )
}

/// One resolution: the native ops by name and what it reports.
struct Resolver<'n> {
    natives: &'n NativeFunctions,
    by_name: HashMap<&'n OperatorName, &'n NativeFunction>,
    skip_unknown_ops: bool,
    errors: Vec<BackendDiagnostic>,
    warnings: Vec<BackendDiagnostic>,
    /// Entries that failed, with a one-line reason (see [`Plan::failed`]).
    failed: Vec<(String, String)>,
}

impl<'n> Resolver<'n> {
    /// The `supported:` entries that resolve, in order (an entry listed again is
    /// dropped: a warning when it is the same, an error when it differs).
    fn supported(&mut self, entries: &'n [SupportedOp]) -> Vec<PlannedOp<'n>> {
        let mut ops = Vec::new();
        let mut seen: HashMap<&OperatorName, &SupportedOp> = HashMap::new();
        for entry in entries {
            if let Some(first) = seen.get(entry.name()) {
                self.listed_again(first, entry);
                continue;
            }
            seen.insert(entry.name(), entry);
            ops.extend(self.planned(entry));
        }
        ops
    }

    /// The same entry twice is harmless (a warning); two different pins or kernels
    /// for one op cannot both be right.
    fn listed_again(&mut self, first: &SupportedOp, entry: &SupportedOp) {
        let same = first.pinned().map(ToString::to_string)
            == entry.pinned().map(ToString::to_string)
            && first.kernel().map(|k| &k.value) == entry.kernel().map(|k| &k.value);
        let d = Diagnostic::new(
            "opal::backend::duplicate_op",
            entry.loc(),
            format!("'{}' is listed twice in `supported:`", entry.name()),
        )
        .label("listed again here");
        let line = first.loc().line;
        if same {
            self.warnings.push(
                d.hint(format!(
                    "the second listing is ignored; remove it (the first is at line {line})"
                ))
                .into(),
            );
        } else {
            self.errors.push(
                d.hint(format!(
                    "the entries differ (schema or kernel): keep one (the first is at line {line})"
                ))
                .into(),
            );
        }
    }

    /// One `supported:` entry against its native op: unknown, incompatibly pinned,
    /// or planned.
    fn planned(&mut self, entry: &'n SupportedOp) -> Option<PlannedOp<'n>> {
        let name = entry.name().to_string();
        let Some(func) = self.by_name.get(entry.name()).copied() else {
            let loc = match entry {
                SupportedOp::Pinned { schema, .. } => schema.loc,
                SupportedOp::Current { loc, .. } => *loc,
            };
            let mut d = unknown_op(&name, loc, self.natives);
            if self.skip_unknown_ops {
                d.diag.message.push_str(" (skipped: --skip-unknown-ops)");
                self.warnings.push(d);
                self.failed
                    .push((name, "not in the native YAML (skipped)".to_string()));
            } else {
                self.errors.push(d);
                self.failed
                    .push((name, "not in the native YAML".to_string()));
            }
            return None;
        };
        let (pinned, compat) = match entry {
            SupportedOp::Current { .. } => (None, Compat::Identical),
            SupportedOp::Pinned { schema, .. } => match classify(schema, &func.func) {
                Ok(c) => (Some(schema), c),
                Err(inc) => {
                    self.failed
                        .push((name.clone(), format!("incompatible pin: {}", inc.message)));
                    self.errors.push(incompatible_pin(inc, &name, func));
                    return None;
                }
            },
        };
        Some(PlannedOp {
            func,
            pinned,
            compat,
            loc: entry.loc(),
            kernel: entry.kernel(),
        })
    }

    /// The `autograd:` entries that resolve: operator names (no pins), each once.
    fn autograd(&mut self, entries: &'n [SupportedOp]) -> Vec<PlannedOp<'n>> {
        let mut autograd = Vec::new();
        let mut seen: HashMap<&OperatorName, Loc> = HashMap::new();
        for entry in entries {
            let name = entry.name().to_string();
            if seen.insert(entry.name(), entry.loc()).is_some() {
                self.errors.push(
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
                self.errors.push(
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
            match self.by_name.get(entry.name()).copied() {
                Some(func) => autograd.push(PlannedOp {
                    func,
                    pinned: None,
                    compat: Compat::Identical,
                    loc: entry.loc(),
                    kernel: entry.kernel(),
                }),
                None => {
                    self.errors
                        .push(unknown_op(&name, entry.loc(), self.natives));
                    self.failed
                        .push((name, "not in the native YAML".to_string()));
                }
            }
        }
        autograd
    }
}

/// A pinned schema the current one cannot serve, shown at the pin with the
/// current schema as a note.
fn incompatible_pin(inc: Incompatibility, name: &str, func: &NativeFunction) -> BackendDiagnostic {
    BackendDiagnostic {
        diag: Diagnostic::new(
            "opal::backend::incompatible_pin",
            inc.pinned_loc,
            inc.message,
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
    }
}

/// The structured-delegate ops of `natives` whose out= kernel the backend has
/// (and that it does not list itself), in native YAML order.
fn derived<'n>(natives: &'n NativeFunctions, ops: &[PlannedOp<'n>]) -> Vec<DerivedOp<'n>> {
    let supported_idx: HashMap<&OperatorName, usize> = ops
        .iter()
        .enumerate()
        .map(|(i, o)| (&o.func.func.name, i))
        .collect();
    natives
        .functions
        .iter()
        .filter(|f| !supported_idx.contains_key(&f.func.name))
        .filter_map(|f| {
            let d = f.structured_delegate.as_ref()?;
            let from = *supported_idx.get(d)?;
            Some(DerivedOp { func: f, from })
        })
        .collect()
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

// ---------------------------------------------------------------- emission plan
//
// What the backend emitter works from: the emitter's per-op plans (names and Rust
// types) of exactly the functions a backend module touches, and one [`Entry`] per
// supported op with the plan of its current schema, that of its kernel, and how its
// trait fn is provided.

/// One supported op, ready for emission.
pub(super) struct Entry<'p> {
    /// The current schema's plan (what is registered).
    pub(super) cur: &'p OpPlan<'p>,
    /// The kernel's plan (the pinned schema's when pinned, else `cur`).
    pub(super) ker: &'p OpPlan<'p>,
    pub(super) compat: &'p Compat,
    /// An `autograd:` op: the trait fn is `autograd_<op>`, registered at the
    /// backend's autograd key.
    pub(super) autograd: bool,
    /// The kernel function the YAML names (the trait fn forwards to it).
    pub(super) kernel: Option<&'p str>,
    /// For an `out=` op with no named kernel (autogen or not), in a backend with
    /// `out_copy:`: the index in the entries of its functional op (the trait fn
    /// derives from it).
    pub(super) autogen_from: Option<usize>,
}

impl Entry<'_> {
    /// The trait fn's name.
    pub(super) fn fn_ident(&self) -> proc_macro2::Ident {
        if self.autograd {
            format_ident!("{}", crate::ident::autograd_kernel_fn(&self.cur.ident_str))
        } else {
            self.cur.ident()
        }
    }
}

/// The pinned schemas as native functions of their own, for [`module_plans`].
pub(super) fn pinned_functions(plan: &Plan<'_>) -> NativeFunctions {
    NativeFunctions {
        functions: plan
            .ops
            .iter()
            .filter_map(|o| {
                o.pinned.map(|p| NativeFunction {
                    func: p.clone(),
                    ..o.func.clone()
                })
            })
            .collect(),
        known_tags: Vec::new(),
    }
}

/// The emitter's plans of the functions a backend module touches.
pub(super) struct ModulePlans<'a> {
    /// The supported ops, the ops derived from them, and the siblings a derivation
    /// calls (same delegate), with their current schemas.
    pub(super) full: eplan::Plan<'a>,
    /// The schemas pinned kernels were written against ([`pinned_functions`]).
    pub(super) pinned: eplan::Plan<'a>,
}

fn err(loc: Loc, code: &'static str, msg: String) -> BackendDiagnostic {
    Diagnostic::new(code, loc, msg).into()
}

/// Plans the functions the module for `spec` touches (`pinned_nf` from
/// [`pinned_functions`]).
pub(super) fn module_plans<'a>(
    spec: &BackendSpec,
    natives: &'a NativeFunctions,
    plan: &Plan<'a>,
    pinned_nf: &'a NativeFunctions,
) -> Result<ModulePlans<'a>, Vec<BackendDiagnostic>> {
    let ns = spec.namespace.value.as_str();
    let mut wanted: HashSet<&OperatorName> = plan
        .ops
        .iter()
        .chain(&plan.autograd)
        .map(|o| &o.func.func.name)
        .collect();
    let delegates: HashSet<&OperatorName> = plan
        .derived
        .iter()
        .filter_map(|d| d.func.structured_delegate.as_ref())
        .collect();
    wanted.extend(plan.derived.iter().map(|d| &d.func.func.name));
    let reduced: Vec<&NativeFunction> = natives
        .functions
        .iter()
        .filter(|f| {
            wanted.contains(&f.func.name)
                || f.structured_delegate
                    .as_ref()
                    .is_some_and(|d| delegates.contains(d))
        })
        .collect();
    let full = eplan::plan_functions(reduced.into_iter(), ns).map_err(|es| {
        es.into_iter()
            .map(|e| err(spec.backend.loc, "opal::backend::native", e.message))
            .collect::<Vec<_>>()
    })?;
    let pinned = eplan::plan(pinned_nf, ns).map_err(|es| {
        es.into_iter()
            .map(|e| err(e.loc, "opal::backend::pinned", e.message))
            .collect::<Vec<_>>()
    })?;
    Ok(ModulePlans { full, pinned })
}

/// The module's entries, and the derived structured ops whose derivation the
/// emitter supports.
pub(super) struct ModuleEntries<'p> {
    pub(super) entries: Vec<Entry<'p>>,
    pub(super) derived: Vec<&'p OpPlan<'p>>,
}

/// One [`Entry`] per supported and `autograd:` op; every op that cannot be emitted
/// (a schema Rust cannot express, a reserved name, a kernel path that is not one) is
/// an error.
pub(super) fn module_entries<'p>(
    spec: &BackendSpec,
    plan: &'p Plan<'_>,
    plans: &'p ModulePlans<'p>,
) -> Result<ModuleEntries<'p>, Vec<BackendDiagnostic>> {
    let (full, pinned_plan) = (&plans.full, &plans.pinned);
    let by_name: HashMap<&str, usize> = full
        .ops
        .iter()
        .enumerate()
        .map(|(i, o)| (o.op_name.as_str(), i))
        .collect();
    let mut errors = Vec::new();
    for u in &pinned_plan.unsupported {
        errors.push(err(
            u.loc,
            "opal::backend::unsupported_op",
            format!(
                "the pinned schema of '{}' cannot be expressed in Rust: {}",
                u.op, u.reason
            ),
        ));
    }
    let pinned_by_name: HashMap<&str, &OpPlan> = pinned_plan
        .ops
        .iter()
        .map(|o| (o.op_name.as_str(), o))
        .collect();

    let mut entries: Vec<Entry<'p>> = Vec::new();
    let tagged = plan.ops.iter().map(|o| (o, false));
    for (o, autograd) in tagged.chain(plan.autograd.iter().map(|o| (o, true))) {
        entries.extend(entry(
            o,
            autograd,
            full,
            &by_name,
            &pinned_by_name,
            &mut errors,
        ));
    }
    if let Some(copy) = &spec.out_copy {
        if let Err(e) = bodies::kernel_path(&copy.value) {
            errors.push(err(copy.loc, "opal::backend::bad_kernel_path", e));
        }
        link_autogen_outs(&mut entries);
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    // Derived structured ops whose derivation the emitter supports, and the ops
    // their derivation calls.
    let derived = plan
        .derived
        .iter()
        .filter_map(|d| by_name.get(d.func.func.name.to_string().as_str()))
        .map(|&i| &full.ops[i])
        .filter(|o| o.structured.is_some())
        .collect();
    Ok(ModuleEntries { entries, derived })
}

/// The entry of one resolved op `o` (an `autograd:` one when `autograd`): its
/// current and kernel plans (the pinned one for a pin), its kernel path checked;
/// `None` when it cannot be emitted (the reason goes to `errors`, except for a pin
/// Rust cannot express, reported with the pinned plan's unsupported ops).
fn entry<'p>(
    o: &'p PlannedOp<'_>,
    autograd: bool,
    full: &'p eplan::Plan<'p>,
    by_name: &HashMap<&str, usize>,
    pinned_by_name: &HashMap<&str, &'p OpPlan<'p>>,
    errors: &mut Vec<BackendDiagnostic>,
) -> Option<Entry<'p>> {
    let name = o.func.func.name.to_string();
    let Some(&i) = by_name.get(name.as_str()) else {
        let why = full
            .unsupported
            .iter()
            .find(|u| u.op == name)
            .map_or("unknown reason".to_string(), |u| u.reason.clone());
        errors.push(err(
            o.loc,
            "opal::backend::unsupported_op",
            format!("'{name}' cannot be expressed in Rust: {why}"),
        ));
        return None;
    };
    let cur = &full.ops[i];
    if cur.ident_str == TRANSFER_TO_CPU || cur.ident_str == TRANSFER_FROM_CPU {
        errors.push(err(
            o.loc,
            "opal::backend::reserved_name",
            format!(
                "'{name}' maps to the Rust name `{}`, which the kernel trait reserves",
                cur.ident_str
            ),
        ));
        return None;
    }
    let ker = match o.pinned {
        Some(_) => *pinned_by_name.get(name.as_str())?,
        None => cur,
    };
    if let Some(k) = o.kernel {
        if let Err(e) = bodies::kernel_call(&k.value) {
            errors.push(err(k.loc, "opal::backend::bad_kernel_path", e));
        }
    }
    Some(Entry {
        cur,
        ker,
        compat: &o.compat,
        autograd,
        kernel: o.kernel.map(|k| k.value.as_str()),
        autogen_from: None,
    })
}

/// Points each `out=` entry without a kernel of its own at the entry of its
/// functional op, when the backend supports that op: the `autogen:` out= ops, and
/// any other out= op a backend chooses to derive the same way (its out= kernel would
/// only run the functional kernel and copy). The `autogen:` list may sit on the
/// in-place variant (`relu_` lists `relu.out`), so the functional op is found by
/// name and schema: same base name, an overload from [`functional_overloads`] (the
/// first that matches), functional kind, every non-`out` argument of the `out=` op
/// present, and only optional arguments besides.
fn link_autogen_outs(entries: &mut [Entry]) {
    let links: Vec<(usize, usize)> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| !e.autograd && e.kernel.is_none())
        .filter(|(_, e)| e.cur.f.func.kind() == SchemaKind::Out)
        .filter_map(|(i, e)| {
            let out = &e.cur.f.func;
            functional_overloads(&out.name.overload_name)
                .iter()
                .find_map(|o| {
                    entries
                        .iter()
                        .position(|c| !c.autograd && is_functional_of(&c.cur.f.func, out, o))
                })
                .map(|j| (i, j))
        })
        .collect();
    for (i, j) in links {
        entries[i].autogen_from = Some(j);
    }
}

/// The overloads an `out=` overload's functional op may have, most likely first:
/// less the `out`/`_out` suffix (`relu.out` of `relu`, `masked_fill.Scalar_out` of
/// `masked_fill.Scalar`), less its last `_` part (`max.dim_max` of `max.dim`), none
/// (`nll_loss_forward.output` of `nll_loss_forward`).
fn functional_overloads(overload: &str) -> Vec<&str> {
    let suffix = overload
        .strip_suffix("_out")
        .unwrap_or(if overload == "out" { "" } else { overload });
    let mut all = vec![suffix];
    if let Some((head, _)) = overload.rsplit_once('_') {
        all.push(head);
    }
    all.push("");
    all
}

/// Whether `functional`, of overload `functional_overload`, is the functional form
/// of the `out=` schema `out`.
fn is_functional_of(
    functional: &FunctionSchema,
    out: &FunctionSchema,
    functional_overload: &str,
) -> bool {
    if functional.kind() != SchemaKind::Functional
        || functional.name.name.base != out.name.name.base
        || functional.name.overload_name != functional_overload
    {
        return false;
    }
    let f_args: Vec<&Argument> = functional.arguments.all().collect();
    let inputs_present = out
        .arguments
        .all()
        .filter(|a| !out.arguments.out.iter().any(|o| o.name == a.name))
        .all(|a| f_args.iter().any(|f| f.name == a.name && f.ty == a.ty));
    let extras_optional = f_args
        .iter()
        .filter(|f| !out.arguments.all().any(|a| a.name == f.name))
        .all(|f| f.ty.is_optional());
    inputs_present && extras_optional
}
