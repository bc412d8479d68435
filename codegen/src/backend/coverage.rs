//! The coverage report: for every operator of a native YAML, how a backend runs it
//! (native kernel, adapted pinned kernel, composite, CPU fallback, or not at all),
//! with totals, as text, markdown or JSON. Composites and the fallback's CPU kernels
//! are counted against what the runtime has ([`RuntimeOps`]) when that is known.
//!
//! Owns: the classification per op and its renderings. Must not: read files or
//! emit code.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde::Serialize;

use crate::model::{NativeFunction, NativeFunctions};

use super::compat::Compat;
use super::plan::Plan;
use super::spec::{BackendSpec, FallbackPolicy};

/// How a backend runs one op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// A kernel of the backend for the current schema (or derived from its out=
    /// kernel through `structured_delegate`).
    Native,
    /// A kernel pinned to an older schema, wrapped by a defaulted-argument adapter.
    Adapter,
    /// A composite kernel written in terms of other ops runs on every backend.
    Composite,
    /// The backend's CPU fallback runs the CPU kernel.
    Fallback,
    /// Nothing runs it on this backend.
    Missing,
}

impl Status {
    pub const ALL: [Status; 5] = [
        Status::Native,
        Status::Adapter,
        Status::Composite,
        Status::Fallback,
        Status::Missing,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Native => "native",
            Status::Adapter => "adapter",
            Status::Composite => "composite",
            Status::Fallback => "fallback",
            Status::Missing => "missing",
        }
    }
}

/// One op's line of the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Row {
    pub op: String,
    pub status: Status,
    /// Why (`derived from add.out`, `adds alpha=1`, `no CPU kernel`, ...).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Count per status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub native: usize,
    pub adapter: usize,
    pub composite: usize,
    pub fallback: usize,
    pub missing: usize,
    pub total: usize,
}

impl Totals {
    fn add(&mut self, s: Status) {
        *match s {
            Status::Native => &mut self.native,
            Status::Adapter => &mut self.adapter,
            Status::Composite => &mut self.composite,
            Status::Fallback => &mut self.fallback,
            Status::Missing => &mut self.missing,
        } += 1;
        self.total += 1;
    }

    pub fn get(&self, s: Status) -> usize {
        match s {
            Status::Native => self.native,
            Status::Adapter => self.adapter,
            Status::Composite => self.composite,
            Status::Fallback => self.fallback,
            Status::Missing => self.missing,
        }
    }
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Coverage {
    pub backend: String,
    pub dispatch_key: String,
    pub device: String,
    pub fallback: String,
    pub ops: Vec<Row>,
    pub totals: Totals,
}

/// Output format of [`Coverage::render`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Json,
}

/// What the runtime the backend plugs into really has, when known: its composite
/// kernels (`composites.yaml`) and the ops its CPU backend runs (for the fallback).
/// Without it, coverage goes by the native YAML's `dispatch:` entries, which name
/// PyTorch's kernels and may promise ops a runtime lacks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeOps {
    /// Op name -> alias key of its composite kernel.
    pub composites: HashMap<String, String>,
    /// The ops the CPU backend has a kernel for (its own, derived or autogen); `None`
    /// when the CPU backend is not known.
    pub cpu: Option<HashSet<String>>,
}

impl RuntimeOps {
    /// The ops a backend runs natively by its plan: supported entries and the ops
    /// derived from them (for the CPU backend's YAML, what the fallback can run).
    pub(crate) fn backend_ops(plan: &Plan<'_>) -> HashSet<String> {
        plan.ops
            .iter()
            .map(|o| o.func.func.name.to_string())
            .chain(plan.derived.iter().map(|d| d.func.func.name.to_string()))
            .collect()
    }
}

/// Classifies every op of `natives` for the backend, using its resolved plan, and
/// what the runtime has when `runtime` says.
pub(crate) fn coverage(
    spec: &BackendSpec,
    natives: &NativeFunctions,
    plan: &Plan<'_>,
    runtime: Option<&RuntimeOps>,
) -> Coverage {
    let mut status: HashMap<String, (Status, String)> = HashMap::new();
    for op in &plan.ops {
        let entry = match &op.compat {
            Compat::Identical => (Status::Native, String::new()),
            Compat::Adapter { added } => {
                let args: Vec<String> = added
                    .iter()
                    .map(|a| format!("{}={}", a.name, a.default))
                    .collect();
                (
                    Status::Adapter,
                    format!("pinned kernel predates {}", args.join(", ")),
                )
            }
        };
        status.insert(op.func.func.name.to_string(), entry);
    }
    for d in &plan.derived {
        let from = &plan.ops[d.from];
        let s = match from.compat {
            Compat::Identical => Status::Native,
            Compat::Adapter { .. } => Status::Adapter,
        };
        status.insert(
            d.func.func.name.to_string(),
            (s, format!("derived from {}", from.func.func.name)),
        );
    }
    let failed: HashMap<&str, &str> = plan
        .failed
        .iter()
        .map(|(n, r)| (n.as_str(), r.as_str()))
        .collect();
    let fallback = spec.fallback.value;
    // An op "has a CPU kernel" when its dispatch table (or that of its structured
    // delegate) names CPU or a composite key.
    let dispatch_of: HashMap<String, &NativeFunction> = natives
        .functions
        .iter()
        .map(|f| (f.func.name.to_string(), f))
        .collect();
    let mut rows = Vec::with_capacity(natives.functions.len());
    let mut totals = Totals::default();
    for f in &natives.functions {
        let name = f.func.name.to_string();
        let (s, detail) = if let Some((s, d)) = status.remove(&name) {
            (s, d)
        } else if let Some(reason) = failed.get(name.as_str()) {
            (Status::Missing, (*reason).to_string())
        } else if let Some(rt) = runtime {
            if let Some(key) = rt.composites.get(&name) {
                (Status::Composite, key.clone())
            } else {
                let has_cpu = match &rt.cpu {
                    Some(cpu) => cpu.contains(&name),
                    None => cpu_named(f, &dispatch_of),
                };
                fallback_status(fallback, has_cpu)
            }
        } else if f.has_composite_implicit_autograd_kernel {
            (Status::Composite, "CompositeImplicitAutograd".to_string())
        } else if f.has_composite_explicit_autograd_kernel
            || f.dispatch
                .contains_key("CompositeExplicitAutogradNonFunctional")
        {
            let key = if f.has_composite_explicit_autograd_kernel {
                "CompositeExplicitAutograd"
            } else {
                "CompositeExplicitAutogradNonFunctional"
            };
            (Status::Composite, key.to_string())
        } else {
            fallback_status(fallback, cpu_named(f, &dispatch_of))
        };
        totals.add(s);
        rows.push(Row {
            op: name,
            status: s,
            detail,
        });
    }
    Coverage {
        backend: spec.backend.value.clone(),
        dispatch_key: spec.dispatch_key.value.as_str().to_string(),
        device: spec.device.value.clone(),
        fallback: fallback.as_str().to_string(),
        ops: rows,
        totals,
    }
}

/// Whether the native YAML names a CPU kernel for `f` (or its structured delegate).
fn cpu_named(f: &NativeFunction, dispatch_of: &HashMap<String, &NativeFunction>) -> bool {
    let delegate = f
        .structured_delegate
        .as_ref()
        .and_then(|d| dispatch_of.get(&d.to_string()));
    f.dispatch.contains_key("CPU") || delegate.is_some_and(|d| d.dispatch.contains_key("CPU"))
}

/// An op with no kernel of the backend and no composite: the CPU fallback runs it
/// if there is a CPU kernel.
fn fallback_status(fallback: FallbackPolicy, has_cpu: bool) -> (Status, String) {
    match (fallback, has_cpu) {
        (FallbackPolicy::Cpu, true) => (Status::Fallback, String::new()),
        (FallbackPolicy::Cpu, false) => (
            Status::Missing,
            "no CPU kernel for the fallback".to_string(),
        ),
        (FallbackPolicy::None, _) => (Status::Missing, String::new()),
    }
}

impl Coverage {
    /// The report in `format`; deterministic (native YAML order).
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Text => self.text(),
            Format::Markdown => self.markdown(),
            Format::Json => {
                let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
                s.push('\n');
                s
            }
        }
    }

    fn summary(&self) -> String {
        let parts: Vec<String> = Status::ALL
            .iter()
            .map(|s| format!("{} {}", s.as_str(), self.totals.get(*s)))
            .collect();
        format!("{} ({} ops)", parts.join(", "), self.totals.total)
    }

    fn text(&self) -> String {
        let w = self
            .ops
            .iter()
            .map(|r| r.op.len())
            .max()
            .unwrap_or(2)
            .max(2);
        let mut out = format!(
            "backend {} ({}, device '{}', fallback {})\n",
            self.backend, self.dispatch_key, self.device, self.fallback
        );
        for r in &self.ops {
            let line = format!("{:<w$}  {:<9}  {}", r.op, r.status.as_str(), r.detail);
            out.push_str(line.trim_end());
            out.push('\n');
        }
        let _ = writeln!(out, "total: {}", self.summary());
        out
    }

    fn markdown(&self) -> String {
        let mut out = format!(
            "## Coverage of backend `{}` ({}, device `{}`, fallback `{}`)\n\n",
            self.backend, self.dispatch_key, self.device, self.fallback
        );
        out.push_str("| status | ops |\n|---|---:|\n");
        for s in Status::ALL {
            let _ = writeln!(out, "| {} | {} |", s.as_str(), self.totals.get(s));
        }
        let _ = writeln!(out, "| **total** | **{}** |\n", self.totals.total);
        out.push_str("| op | status | detail |\n|---|---|---|\n");
        for r in &self.ops {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} |",
                r.op,
                r.status.as_str(),
                r.detail.replace('|', "\\|")
            );
        }
        out
    }
}
