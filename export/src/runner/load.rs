//! The runner's load-time passes over its plan: steps whose results do not
//! depend on the user inputs run once and become stored values, and stored
//! transposed weights that only products read are made row-major.
//!
//! Owns: those passes. Must not: change what any step computes (a folded
//! value is the step's own result, a copied weight has the same values).

use super::{Frame, Runner};
use crate::plan::{Fill, Kind, SymOut};
use opal::IValue;

/// Largest result (bytes as traced) folded at load: a folded value stays in
/// memory for the runner's life, where a run's value is freed after its last use.
const FOLD_MAX_BYTES: u64 = 1 << 20;

/// `aten` operators whose results differ from call to call, or whose contents
/// are unspecified: never folded.
const NOT_FOLDED: [&str; 12] = [
    "rand",
    "bernoulli",
    "dropout",
    "normal",
    "uniform",
    "multinomial",
    "exponential",
    "geometric",
    "cauchy",
    "poisson",
    "empty",
    "seed",
];

/// Whether a step may run once at load when everything it reads is known.
fn foldable(kind: &Kind) -> bool {
    match kind {
        Kind::Op {
            op, traced_bytes, ..
        } => {
            let name = op.name();
            name.starts_with("aten::")
                && !NOT_FOLDED.iter().any(|w| name.contains(w))
                && *traced_bytes <= FOLD_MAX_BYTES
        }
        Kind::Pointwise { sizes, outputs, .. } => {
            let n = sizes.iter().product::<i64>().max(0) as u64;
            n.saturating_mul(4 * outputs.len() as u64) <= FOLD_MAX_BYTES
        }
        Kind::Alias { .. } | Kind::Size { .. } | Kind::Int { .. } | Kind::View { .. } => true,
        // The fused and direct CPU steps are not folded (in the models they
        // read values each run makes).
        _ => false,
    }
}

impl Runner {
    /// Runs, once at load, every step whose result does not depend on the user
    /// inputs (a causal mask built from `arange`, rotary tables from stored
    /// frequencies, a weight's transpose), and keeps the values later steps read
    /// as stored values, so a run starts after them. Not folded: operators
    /// outside `aten`, random or uninitialised results, results over
    /// [`FOLD_MAX_BYTES`], and every step of a program with an operator that
    /// writes to an argument (a later in-place write would change the kept value
    /// for the next run). A step that fails here is left in the plan, so its
    /// error comes from the run as before.
    pub(super) fn fold_constants(&mut self) {
        let mutates = self.plan.steps.iter().any(|s| match &s.kind {
            Kind::Op { op, .. } => op.def().is_some_and(|d| d.args.iter().any(|a| a.mutable)),
            _ => false,
        });
        if mutates {
            return;
        }
        let mut known = vec![false; self.plan.slots];
        let mut f = Frame::new(self.plan.slots, self.plan.max_stack);
        for (slot, v) in &self.stored {
            known[*slot] = true;
            f.env[*slot] = Some(v.clone());
        }
        // A graph output is a new tensor on every run, never one the runner keeps
        // (the caller may write to it).
        let mut output = vec![false; self.plan.slots];
        for o in &self.plan.outputs {
            if let SymOut::Slot(s) = o {
                output[*s] = true;
            }
        }
        let mut folded = vec![false; self.plan.steps.len()];
        let mut buf = Vec::new();
        for (i, step) in self.plan.steps.iter().enumerate() {
            buf.clear();
            step.kind.reads(&mut buf);
            if !buf.iter().all(|&r| known[r]) || !foldable(&step.kind) {
                continue;
            }
            buf.clear();
            step.kind.writes(&mut buf);
            if buf.iter().any(|&w| output[w]) {
                continue;
            }
            if self.step(step, &mut f, u64::MAX).is_err() {
                continue;
            }
            folded[i] = true;
            buf.clear();
            step.kind.writes(&mut buf);
            for &w in &buf {
                known[w] = true;
            }
        }
        if !folded.contains(&true) {
            return;
        }
        // Keep what a remaining step or a graph output reads.
        let mut needed = vec![false; self.plan.slots];
        for (step, _) in self.plan.steps.iter().zip(&folded).filter(|(_, f)| !**f) {
            buf.clear();
            step.kind.reads(&mut buf);
            for &r in &buf {
                needed[r] = true;
            }
        }
        for (s, &o) in output.iter().enumerate() {
            needed[s] |= o;
        }
        self.stored = f
            .env
            .into_iter()
            .enumerate()
            .filter(|(s, v)| known[*s] && needed[*s] && v.is_some())
            .filter_map(|(s, v)| Some((s, v?)))
            .collect();
        let steps = std::mem::take(&mut self.plan.steps);
        self.plan.steps = steps
            .into_iter()
            .zip(folded)
            .filter(|(_, f)| !f)
            .map(|(s, _)| s)
            .collect();
    }

    /// Copies each stored transposed matrix that only products read as their
    /// right operand (`mm` / `addmm`'s `mat2`, a shared-matrix `bmm`'s: a
    /// linear layer's weight after its `permute` was folded at load) into row-major order, once: the
    /// product kernels then read its rows in place instead of packing them on
    /// every run. Same values and memory; a matrix anything else reads keeps
    /// its layout.
    pub(super) fn contiguous_weights(&mut self) {
        let mut mat2 = vec![false; self.plan.slots];
        let mut other = vec![false; self.plan.slots];
        let mut buf = Vec::new();
        for step in &self.plan.steps {
            buf.clear();
            step.kind.reads(&mut buf);
            if let Kind::SharedRhsBmm { matrix, .. } = &step.kind {
                mat2[*matrix] = true;
                if let Some(k) = buf.iter().position(|x| x == matrix) {
                    buf.swap_remove(k);
                }
            }
            if let Kind::Op { op, fills, .. } = &step.kind {
                let pos = op
                    .def()
                    .filter(|_| matches!(op.name(), "aten::mm" | "aten::addmm"))
                    .and_then(|d| d.args.iter().position(|a| a.name == "mat2"));
                for (p, f) in fills {
                    if let (true, Fill::Value(s)) = (Some(*p) == pos, f) {
                        mat2[*s] = true;
                        // That read is the product's own; any other one counts.
                        if let Some(k) = buf.iter().position(|x| x == s) {
                            buf.swap_remove(k);
                        }
                    }
                }
            }
            for &r in &buf {
                other[r] = true;
            }
        }
        for o in &self.plan.outputs {
            if let SymOut::Slot(s) = o {
                other[*s] = true;
            }
        }
        for (slot, v) in &mut self.stored {
            let IValue::Tensor(t) = v else { continue };
            let transposed = t.dim() == 2
                && t.dtype() == opal::DType::F32
                && t.strides() == [1, t.sizes()[0]]
                && t.sizes()[0] > 1
                && t.sizes()[1] > 1;
            if !mat2[*slot] || other[*slot] || !transposed {
                continue;
            }
            if let Ok(c) = opal::ops::TensorOps::contiguous(t) {
                *t = c;
            }
        }
    }
}
