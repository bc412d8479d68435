//! What a boxed call holds: the storages of the tensors among its stack arguments,
//! for the whole call, as a typed call's generated entry point holds its arguments.
//!
//! Owns: telling a boxed call's read tensors from its written ones (by the op's
//! [`ArgDef`]s) and laying them out by schema position. Must not: take holds or
//! run the checks itself: the tensor module's op-call interface
//! ([`with_op_holds_dyn`] over [`OpArg`]s, with [`OpChecks`]) does that, the same
//! code a typed call runs.

use super::opdef::ArgDef;
use crate::error::Result;
use crate::ivalue::Stack;
use crate::tensor::{with_op_holds_dyn, OpArg, OpChecks};
use crate::Tensor;

/// [`with_op_holds_dyn`] for a boxed call: the arguments are the last `args.len()`
/// values of `stack`, written when their [`ArgDef`] says `mutable`; bit `i` of
/// `checks.no_overlap` is the `i`-th schema argument.
pub fn with_stack_holds<T>(
    op: &str,
    args: &[ArgDef],
    checks: OpChecks,
    stack: &mut Stack,
    body: impl FnOnce(&mut Stack) -> Result<T>,
) -> Result<T> {
    let first = stack.len().saturating_sub(args.len());
    // Handles of their own: `body` pops the arguments off the stack and may drop
    // them before the holds are released. One flat list, and each argument's span
    // of it with whether it is written.
    let mut tensors: Vec<Option<Tensor>> = Vec::new();
    let mut spans: Vec<(usize, usize, bool)> = Vec::with_capacity(args.len());
    for (v, a) in stack[first..].iter().zip(args) {
        let start = tensors.len();
        v.for_each_tensor(|t| tensors.push(Some(t.clone())));
        spans.push((start, tensors.len(), a.mutable));
    }
    // A written argument leaves an empty read in its place, so a read's index is
    // its schema position (what `no_overlap` counts).
    let mut reads = Vec::with_capacity(spans.len());
    let mut writes = Vec::new();
    for &(start, end, mutable) in &spans {
        let arg = OpArg::OptList(&tensors[start..end]);
        if mutable {
            writes.push(arg);
            reads.push(OpArg::OptList(&[]));
        } else {
            reads.push(arg);
        }
    }
    with_op_holds_dyn(op, checks, &reads, &writes, || body(stack))
}
