//! [`Inspection`]: what a program uses, and for a device how each operator would
//! run there: natively, through a composite kernel, through the device's CPU
//! fallback, or not at all.
//!
//! Owns: the report and its text form. Must not: change dispatcher state.

use crate::plan::{classify, Target};
use crate::program::ExportedProgram;
use opal::dispatch::{DispatchKey, DispatchKeySet, Dispatcher};
use opal::Device;
use std::collections::BTreeMap;
use std::fmt;

/// How one operator runs on the inspected device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Support {
    /// A kernel registered for the device's backend key.
    Native,
    /// A composite kernel (written in terms of other ops).
    Composite,
    /// No kernel of its own: the device's fallback (the CPU fallback) runs it.
    CpuFallback,
    /// Handled by the interpreter itself (`getitem`, `sym_size`, int arithmetic).
    Interpreter,
    /// Cannot run: the reason.
    Missing(String),
}

/// One target of the graph.
#[derive(Clone, Debug)]
pub struct OpUse {
    /// The serialized target (`torch.ops.aten.addmm.default`).
    pub target: String,
    /// The dispatcher's name (`aten::addmm`), for ATen targets.
    pub op: Option<String>,
    /// Nodes using it.
    pub count: usize,
    /// How it runs on the inspected device.
    pub support: Support,
}

/// The report of [`ExportedProgram::inspect`].
#[derive(Clone, Debug)]
pub struct Inspection {
    /// The archive's path.
    pub archive: String,
    /// The inspected device.
    pub device: Device,
    /// Schema version (major, minor).
    pub schema_version: (i64, i64),
    /// Number of nodes.
    pub nodes: usize,
    /// Bytes of stored tensors.
    pub weight_bytes: u64,
    /// The user inputs.
    pub inputs: Vec<crate::InputSpec>,
    /// Number of user outputs.
    pub outputs: usize,
    /// Every target, sorted by name.
    pub ops: Vec<OpUse>,
}

impl Inspection {
    /// Targets with the given support.
    pub fn with(&self, pred: impl Fn(&Support) -> bool) -> Vec<&OpUse> {
        self.ops.iter().filter(|o| pred(&o.support)).collect()
    }

    /// True when every target can run on the device.
    pub fn runnable(&self) -> bool {
        !self
            .ops
            .iter()
            .any(|o| matches!(o.support, Support::Missing(_)))
    }
}

fn support_of(target: &str, device: Device) -> (Option<String>, Support) {
    let name = match classify(target) {
        Target::Aten(n) => n,
        Target::Builtin(_) => return (None, Support::Interpreter),
        Target::Other => {
            return (
                None,
                Support::Missing("not an ATen operator or a supported builtin".into()),
            )
        }
    };
    if name.starts_with("aten::sym_") {
        return (Some(name), Support::Interpreter);
    }
    let Some(h) = Dispatcher::global()
        .find(&name)
        .filter(|h| h.def().is_some())
    else {
        return (Some(name), Support::Missing("not defined in Opal".into()));
    };
    let key = device.backend_key();
    let keys = h.registered_keys();
    let support = if keys.contains(&key) {
        Support::Native
    } else if keys.iter().any(|k| {
        matches!(
            k,
            DispatchKey::CompositeImplicitAutograd
                | DispatchKey::CompositeExplicitAutograd
                | DispatchKey::CompositeExplicitAutogradNonFunctional
        )
    }) {
        Support::Composite
    } else {
        match h.resolve_key(DispatchKeySet::from_key(key)) {
            Ok(_) if !device.is_cpu() => Support::CpuFallback,
            Ok(k) => Support::Missing(format!("resolves to {k:?} only")),
            Err(e) => Support::Missing(e.to_string()),
        }
    };
    (Some(name), support)
}

impl ExportedProgram {
    /// The operators the program uses and, for `device`, how each would run.
    pub fn inspect(&self, device: Device) -> Inspection {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for n in &self.program.nodes {
            *counts.entry(n.target.as_str()).or_default() += 1;
        }
        let ops = counts
            .into_iter()
            .map(|(target, count)| {
                let (op, support) = support_of(target, device);
                OpUse {
                    target: target.to_string(),
                    op,
                    count,
                    support,
                }
            })
            .collect();
        Inspection {
            archive: self.name.clone(),
            device,
            schema_version: self.program.schema,
            nodes: self.program.nodes.len(),
            weight_bytes: self.weight_bytes,
            inputs: self.inputs(),
            outputs: self.num_outputs(),
            ops,
        }
    }
}

impl fmt::Display for Inspection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "archive: {}", self.archive)?;
        writeln!(
            f,
            "schema {}.{}, {} nodes, {} bytes of weights",
            self.schema_version.0, self.schema_version.1, self.nodes, self.weight_bytes
        )?;
        for (i, inp) in self.inputs.iter().enumerate() {
            let sizes: Vec<String> = inp
                .sizes
                .iter()
                .zip(&inp.traced)
                .map(|(s, t)| s.map_or(format!("dyn({t})"), |s| s.to_string()))
                .collect();
            writeln!(
                f,
                "input.{i}: {} {} [{}]",
                inp.name,
                inp.dtype,
                sizes.join(", ")
            )?;
        }
        writeln!(f, "outputs: {}", self.outputs)?;
        writeln!(f, "device: {}", self.device)?;
        for o in &self.ops {
            let how = match &o.support {
                Support::Native => "native".to_string(),
                Support::Composite => "composite".to_string(),
                Support::CpuFallback => "cpu fallback".to_string(),
                Support::Interpreter => "interpreter".to_string(),
                Support::Missing(why) => format!("MISSING: {why}"),
            };
            writeln!(
                f,
                "  {:<50} x{:<4} {how}",
                o.op.as_deref().unwrap_or(&o.target),
                o.count
            )?;
        }
        let missing = self.with(|s| matches!(s, Support::Missing(_))).len();
        write!(
            f,
            "{} targets, {} native, {} composite, {} cpu fallback, {} missing",
            self.ops.len(),
            self.with(|s| *s == Support::Native).len(),
            self.with(|s| *s == Support::Composite).len(),
            self.with(|s| *s == Support::CpuFallback).len(),
            missing
        )
    }
}
