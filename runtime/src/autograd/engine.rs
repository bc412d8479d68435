//! The backward engine: runs a recorded graph from outputs to inputs.
//!
//! Nodes run once every gradient for them has arrived (dependency counting over
//! the part of the graph reachable from the outputs), on the calling thread, with
//! grad mode off. Gradients reaching the same place are summed; a gradient whose
//! shape is a broadcast of its input's is summed back to that shape, and one of
//! another dtype is cast to the input's dtype. Separate graphs may run on separate
//! threads at once.
//!
//! Owns: graph discovery, ordering, gradient routing and accumulation, and
//! releasing saved tensors. Must not: know any node's formula.

use super::grad_mode::NoGradGuard;
use super::node::{Edge, EdgeTarget, InputMeta, Node};
use crate::error::{OpalError, Result};
use crate::{ops, Tensor};
use std::collections::HashMap;
use std::sync::Arc;

/// Options of [`backward`] and [`grad`].
#[derive(Clone, Copy, Debug, Default)]
pub struct GradOptions {
    /// Keep the graph's saved tensors, so backward can run through it again.
    pub retain_graph: bool,
}

/// Computes the gradients of `outputs` with respect to the leaves they depend on
/// and accumulates them into the leaves' `.grad`. `grad_outputs` gives the
/// gradient of each output; empty, every output must have one element and gets 1.
pub fn backward(outputs: &[Tensor], grad_outputs: &[Tensor], opts: GradOptions) -> Result<()> {
    run(outputs, grad_outputs, opts, None).map(|_| ())
}

/// Returns the gradients of `outputs` with respect to `inputs` (`None` for an input
/// the outputs do not depend on) without touching any `.grad`.
pub fn grad(
    outputs: &[Tensor],
    inputs: &[Tensor],
    grad_outputs: &[Tensor],
    opts: GradOptions,
) -> Result<Vec<Option<Tensor>>> {
    for (i, t) in inputs.iter().enumerate() {
        if !t.requires_grad() {
            return Err(OpalError::msg(format!(
                "grad: input {i} does not require grad (set_requires_grad(true) on it, or on what it is computed from)"
            )));
        }
    }
    run(outputs, grad_outputs, opts, Some(inputs))
}

/// Identity of a node: its address.
fn node_id(n: &Arc<dyn Node>) -> usize {
    Arc::as_ptr(n) as *const () as usize
}

/// Where an input of [`grad`] receives its gradient.
#[derive(PartialEq)]
enum Slot {
    Leaf(usize),
    Node(usize, usize),
}

fn slot_of(e: &Edge) -> Option<Slot> {
    match &e.target {
        EdgeTarget::None => None,
        EdgeTarget::Leaf(t) => Some(Slot::Leaf(t.impl_addr())),
        EdgeTarget::Node(n, i) => Some(Slot::Node(node_id(n), *i)),
    }
}

struct Task {
    node: Arc<dyn Node>,
    /// Edges into this node from nodes that have not run yet.
    deps: usize,
    /// Gradients received so far, one per forward output of the node.
    grads: Vec<Option<Tensor>>,
}

fn run(
    outputs: &[Tensor],
    grad_outputs: &[Tensor],
    opts: GradOptions,
    capture: Option<&[Tensor]>,
) -> Result<Vec<Option<Tensor>>> {
    if !grad_outputs.is_empty() && grad_outputs.len() != outputs.len() {
        return Err(OpalError::msg(format!(
            "backward: {} gradients given for {} outputs",
            grad_outputs.len(),
            outputs.len()
        )));
    }
    let _no_grad = NoGradGuard::new();
    let mut roots = Vec::with_capacity(outputs.len());
    for (i, out) in outputs.iter().enumerate() {
        let edge = out.gradient_edge();
        if !edge.is_used() {
            return Err(OpalError::msg(format!(
                "backward: element {i} of the outputs does not require grad and does not have a grad_fn"
            )));
        }
        let g = match grad_outputs.get(i) {
            Some(g) => {
                if g.sizes() != out.sizes() {
                    return Err(OpalError::msg(format!(
                        "backward: gradient {i} has shape {:?}, but its output has shape {:?}",
                        g.sizes(),
                        out.sizes()
                    )));
                }
                g.clone()
            }
            None if out.numel() == 1 => ops::ones_like(out)?,
            None => {
                return Err(OpalError::msg(format!(
                    "backward: a gradient can be implied only for one-element outputs (output {i} has shape {:?}); pass grad_outputs",
                    out.sizes()
                )))
            }
        };
        roots.push((edge, g));
    }
    let captures: Option<Vec<Option<Slot>>> =
        capture.map(|ins| ins.iter().map(|t| slot_of(&t.gradient_edge())).collect());
    let mut captured: Vec<Option<Tensor>> = vec![None; capture.map_or(0, <[Tensor]>::len)];

    let mut tasks = discover(roots.iter().map(|(e, _)| e));
    let mut hooked = match capture {
        None if super::hooks::any() => hooked_leaves(roots.iter().map(|(e, _)| e), &tasks),
        _ => HashMap::new(),
    };
    for (edge, g) in roots {
        route(
            &edge,
            Some(g),
            &mut tasks,
            &captures,
            &mut captured,
            "backward",
        )?;
        leaf_reached(&edge, &mut hooked)?;
    }
    let mut ready: Vec<usize> = tasks
        .iter()
        .filter(|(_, t)| t.deps == 0)
        .map(|(id, _)| *id)
        .collect();
    while let Some(id) = ready.pop() {
        let Some(task) = tasks.remove(&id) else {
            continue;
        };
        if let Some(slots) = &captures {
            for (k, s) in slots.iter().enumerate() {
                if let Some(Slot::Node(n, i)) = s {
                    if *n == id {
                        captured[k] = task.grads[*i].clone();
                    }
                }
            }
        }
        let node = task.node;
        let in_grads = if task.grads.iter().all(Option::is_none) {
            vec![None; node.next_edges().len()]
        } else {
            node.apply(&task.grads)?
        };
        if !opts.retain_graph {
            node.release_saved();
        }
        for (edge, g) in node.next_edges().iter().zip(in_grads) {
            route(edge, g, &mut tasks, &captures, &mut captured, node.name())?;
            leaf_reached(edge, &mut hooked)?;
            if let EdgeTarget::Node(next, _) = &edge.target {
                let nid = node_id(next);
                if let Some(t) = tasks.get_mut(&nid) {
                    t.deps -= 1;
                    if t.deps == 0 {
                        ready.push(nid);
                    }
                }
            }
        }
    }
    Ok(captured)
}

/// For each leaf with post-accumulate-grad hooks, the number of edges into it
/// from the roots and the graph's nodes: its gradient is final once that many
/// have been routed.
fn hooked_leaves<'e>(
    roots: impl Iterator<Item = &'e Edge>,
    tasks: &'e Tasks,
) -> HashMap<usize, usize> {
    let mut counts = HashMap::new();
    let nodes = tasks.values().flat_map(|t| t.node.next_edges().iter());
    for e in roots.chain(nodes) {
        if let EdgeTarget::Leaf(t) = &e.target {
            let addr = t.impl_addr();
            if super::hooks::has(addr) {
                *counts.entry(addr).or_insert(0) += 1;
            }
        }
    }
    counts
}

/// Counts one routed edge into a hooked leaf; the last one runs its hooks.
fn leaf_reached(edge: &Edge, hooked: &mut HashMap<usize, usize>) -> Result<()> {
    if hooked.is_empty() {
        return Ok(());
    }
    if let EdgeTarget::Leaf(t) = &edge.target {
        if let Some(n) = hooked.get_mut(&t.impl_addr()) {
            *n -= 1;
            if *n == 0 {
                return super::hooks::fire(t);
            }
        }
    }
    Ok(())
}

/// The graph's nodes by address. Keys are addresses of live nodes (no adversary
/// picks them), so SipHash's flood resistance buys nothing; it was about 1% of a
/// small model's training step.
type Tasks = HashMap<usize, Task, std::hash::BuildHasherDefault<AddrHasher>>;

/// Hashes one `usize` address: a multiply by an odd constant, folded so that the
/// low bits (zero in aligned addresses) come from the high ones.
#[derive(Default)]
struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_usize(&mut self, x: usize) {
        self.0 = (self.0 ^ x as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

/// Every node reachable from `roots`, with the number of edges into it.
fn discover<'e>(roots: impl Iterator<Item = &'e Edge>) -> Tasks {
    let mut tasks = Tasks::default();
    let mut stack: Vec<Arc<dyn Node>> = Vec::new();
    let visit = |n: &Arc<dyn Node>, tasks: &mut Tasks, stack: &mut Vec<_>| {
        let id = node_id(n);
        if let std::collections::hash_map::Entry::Vacant(slot) = tasks.entry(id) {
            slot.insert(Task {
                node: n.clone(),
                deps: 0,
                grads: vec![None; n.num_outputs()],
            });
            stack.push(n.clone());
        }
        id
    };
    for e in roots {
        if let EdgeTarget::Node(n, _) = &e.target {
            visit(n, &mut tasks, &mut stack);
        }
    }
    while let Some(n) = stack.pop() {
        for e in n.next_edges() {
            if let EdgeTarget::Node(next, _) = &e.target {
                let id = visit(next, &mut tasks, &mut stack);
                if let Some(t) = tasks.get_mut(&id) {
                    t.deps += 1;
                }
            }
        }
    }
    tasks
}

/// Sends gradient `g` along `edge`: into the target node's buffer, into a captured
/// input of [`grad`], or into a leaf's `.grad`.
fn route(
    edge: &Edge,
    g: Option<Tensor>,
    tasks: &mut Tasks,
    captures: &Option<Vec<Option<Slot>>>,
    captured: &mut [Option<Tensor>],
    from: &str,
) -> Result<()> {
    let (Some(g), Some(meta)) = (g, &edge.meta) else {
        return Ok(());
    };
    if !g.is_defined() {
        return Ok(());
    }
    let g = conform(g, meta, from)?;
    match &edge.target {
        EdgeTarget::None => {}
        EdgeTarget::Node(n, i) => {
            if let Some(t) = tasks.get_mut(&node_id(n)) {
                let Some(slot) = t.grads.get_mut(*i) else {
                    return Err(OpalError::msg(format!(
                        "{from}: gradient sent to output {i} of {}, which has {} outputs",
                        n.name(),
                        n.num_outputs()
                    )));
                };
                *slot = Some(sum(slot.take(), g)?);
            }
        }
        EdgeTarget::Leaf(t) => match captures {
            Some(slots) => {
                let here = Slot::Leaf(t.impl_addr());
                for (k, s) in slots.iter().enumerate() {
                    if s.as_ref() == Some(&here) {
                        captured[k] = Some(sum(captured[k].take(), g.clone())?);
                    }
                }
            }
            None => t.accumulate_grad(g)?,
        },
    }
    Ok(())
}

/// `acc + g` (just `g` when nothing was there yet).
pub(super) fn sum(acc: Option<Tensor>, g: Tensor) -> Result<Tensor> {
    match acc {
        None => Ok(g),
        Some(a) => ops::add_tensor(&a, &g),
    }
}

/// Brings a gradient to its input's shape and dtype: sums broadcast dimensions
/// away and casts; any other mismatch is an `Err` naming the node.
fn conform(g: Tensor, meta: &InputMeta, from: &str) -> Result<Tensor> {
    if g.device() != meta.device {
        return Err(OpalError::msg(format!(
            "{from}: gradient on {} for an input on {}",
            g.device(),
            meta.device
        )));
    }
    let g = if g.sizes() == meta.sizes.as_slice() {
        g
    } else {
        sum_to(&g, &meta.sizes).ok_or_else(|| {
            OpalError::msg(format!(
                "{from}: gradient of shape {:?} for an input of shape {:?}",
                g.sizes(),
                meta.sizes
            ))
        })??
    };
    if g.dtype() == meta.dtype {
        return Ok(g);
    }
    ops::_to_copy::with(
        &g,
        ops::_to_copy::Options {
            dtype: Some(meta.dtype),
            ..Default::default()
        },
    )
}

/// `g` summed to `sizes` (which it is a broadcast of); `None` when it is not.
fn sum_to(g: &Tensor, sizes: &[i64]) -> Option<Result<Tensor>> {
    let gs = g.sizes();
    let lead = gs.len().checked_sub(sizes.len())?;
    let mut dims: Vec<i64> = (0..lead as i64).collect();
    for (i, &s) in sizes.iter().enumerate() {
        let have = gs[lead + i];
        if s == 1 && have != 1 {
            dims.push((lead + i) as i64);
        } else if s != have {
            return None;
        }
    }
    Some((|| {
        let summed = ops::sum_dim_intlist::with(
            g,
            Some(&dims),
            ops::sum_dim_intlist::Options {
                keepdim: true,
                ..Default::default()
            },
        )?;
        ops::reshape(&summed, sizes)
    })())
}
