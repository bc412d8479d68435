//! The checks every operator call makes on its tensor arguments before a kernel
//! runs, as PyTorch makes them: the **device rule** (all tensor arguments on one
//! device) and the **memory-overlap rules** for written tensors.
//!
//! Owns: [`OpChecks`] (which checks an op wants; generated from the schema), the
//! overlap classification of tensor pairs, and the error texts. Must not: borrow
//! storages (that is `hold`, which runs these checks once the arguments are held, so
//! no geometry changes under them) or know kernels.
//!
//! Every check is O(operands): a written tensor's internal overlap is decided from
//! its sizes and strides, a pair's overlap from their address ranges.

use super::Tensor;
use crate::device::Device;
use crate::error::{OpalError, Result};

/// How an op's tensor arguments must agree on their device.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DeviceRule {
    /// No check: the op moves data between devices (`_to_copy`, `copy_`, ...).
    Any,
    /// All defined tensors on one device (schema default, `device_check: ExactSame`).
    /// A wrapped number (a zero-dim CPU tensor standing for a Python number) is
    /// exempt.
    Same,
    /// As `Same`, but zero-dim CPU inputs are exempt too: they act as scalars
    /// (`device_check: NoCheck` ops, whose kernels broadcast them, as PyTorch's
    /// element-wise ops do).
    SameOrCpuScalar,
}

/// The checks an operator call makes (see the module docs); generated per op.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OpChecks {
    /// The device rule.
    pub devices: DeviceRule,
    /// Whether written (`(a!)`) tensors are checked for overlap: off for the ops that
    /// change a tensor's geometry without writing data (tag `inplace_view`).
    pub write_overlap: bool,
    /// The inputs that may share no element with a written tensor, not even all of
    /// them ([`check_no_overlap`]'s rule): bit `i` is the `i`-th read argument as
    /// the typed entry passes its reads, or the `i`-th schema argument in a boxed
    /// call. Zero for most ops, whose fast path then skips the check.
    pub no_overlap: u64,
}

impl OpChecks {
    /// No checks (boxed calls of boxed kernels, which make their own).
    pub const NONE: OpChecks = OpChecks {
        devices: DeviceRule::Any,
        write_overlap: false,
        no_overlap: 0,
    };
}

/// Whether two devices are the same one: an index-less device is the current one,
/// which is index 0 until device guards exist.
#[inline]
fn same_device(a: Device, b: Device) -> bool {
    a == b
        || (a.device_type() == b.device_type() && a.index().unwrap_or(0) == b.index().unwrap_or(0))
}

/// Checks the device rule over `reads` and `writes` (defined tensors only).
#[inline]
pub(crate) fn check_devices<'t>(
    op: &str,
    rule: DeviceRule,
    reads: impl Iterator<Item = &'t Tensor>,
    writes: impl Iterator<Item = &'t Tensor>,
) -> Result<()> {
    if rule == DeviceRule::Any {
        return Ok(());
    }
    let exempt = |t: &Tensor| {
        t.device().is_cpu()
            && t.dim() == 0
            && (t.is_wrapped_number() || rule == DeviceRule::SameOrCpuScalar)
    };
    let mut common: Option<Device> = None;
    let mut visit = |t: &Tensor| -> Result<()> {
        let d = t.device();
        match common {
            None => common = Some(d),
            Some(c) if same_device(c, d) => {}
            Some(c) => return Err(device_error(op, c, d)),
        }
        Ok(())
    };
    // Outputs first: an exempt scalar input never decides the device, and a
    // written tensor is never exempt.
    for t in writes.filter(|t| t.is_defined()) {
        visit(t)?;
    }
    for t in reads.filter(|t| t.is_defined() && !exempt(t)) {
        visit(t)?;
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn device_error(op: &str, a: Device, b: Device) -> OpalError {
    OpalError::device(format!(
        "{op}: expected all tensors to be on the same device, but found at least two \
         devices, {a} and {b} (move them with _to_copy / Tensor::to first)"
    ))
}

/// How two tensors' elements share memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// No element in common.
    No,
    /// The same elements in the same order (e.g. the same tensor).
    Full,
    /// Some elements in common, or the same ones in another order.
    Partial,
    /// Not decided cheaply (a layout with gaps); treated as no overlap, as PyTorch
    /// does.
    TooHard,
}

/// Whether the elements of `t` occupy a dense block without gaps or repeats, in
/// some order of its dimensions (PyTorch's "non-overlapping and dense").
pub fn is_non_overlapping_and_dense(t: &Tensor) -> bool {
    if t.is_contiguous() {
        return true;
    }
    let mut dims: Vec<(i64, i64)> = t
        .sizes()
        .iter()
        .zip(t.strides())
        .filter(|(&s, _)| s != 1)
        .map(|(&s, &st)| (st, s))
        .collect();
    dims.sort_unstable();
    let mut expected: i64 = 1;
    for (stride, size) in dims {
        if stride != expected {
            return false;
        }
        expected = match expected.checked_mul(size) {
            Some(e) => e,
            None => return false,
        };
    }
    true
}

/// Whether several elements of `t` are one memory location: `Full` when some
/// dimension of size > 1 has stride 0 (an expanded tensor), `No` when the layout is
/// dense, else `TooHard`.
pub fn internal_overlap(t: &Tensor) -> Overlap {
    if is_non_overlapping_and_dense(t) {
        return Overlap::No;
    }
    if t.sizes()
        .iter()
        .zip(t.strides())
        .any(|(&s, &st)| s > 1 && st == 0)
    {
        return Overlap::Full;
    }
    Overlap::TooHard
}

/// How the elements of `a` and `b` share memory (PyTorch's rules: only dense
/// layouts are compared, by their address ranges).
pub fn overlap(a: &Tensor, b: &Tensor) -> Overlap {
    if a.is_same(b) {
        return Overlap::Full;
    }
    if a.numel() == 0 || b.numel() == 0 || !a.shares_storage(b) {
        return Overlap::No;
    }
    if !is_non_overlapping_and_dense(a) || !is_non_overlapping_and_dense(b) {
        return Overlap::TooHard;
    }
    let range = |t: &Tensor| {
        let start = t.storage_offset() as i128 * t.element_size() as i128;
        (start, start + t.numel() as i128 * t.element_size() as i128)
    };
    let ((a0, a1), (b0, b1)) = (range(a), range(b));
    if a0 == b0 && a1 == b1 {
        return if a.strides() == b.strides() && a.sizes() == b.sizes() {
            Overlap::Full
        } else {
            Overlap::Partial
        };
    }
    if a0 < b1 && b0 < a1 {
        Overlap::Partial
    } else {
        Overlap::No
    }
}

/// The stricter rule of ops that read their inputs while writing `out` in another
/// order than element by element (`cat`, gathers, scatters): `out` may share no
/// element with any input, not even all of them (`x.add_(x)` is fine for an
/// element-wise op, `cat([x, y], out=x)` is not). Layouts too irregular to compare
/// pass, as in PyTorch.
pub fn check_no_overlap<'t>(
    op: &str,
    out: &Tensor,
    inputs: impl IntoIterator<Item = &'t Tensor>,
) -> Result<()> {
    for (i, t) in inputs.into_iter().enumerate() {
        refuse_any_overlap(op, out, i, t)?;
    }
    Ok(())
}

fn refuse_any_overlap(op: &str, out: &Tensor, position: usize, t: &Tensor) -> Result<()> {
    if t.is_defined()
        && out.is_defined()
        && matches!(overlap(out, t), Overlap::Full | Overlap::Partial)
    {
        return Err(OpalError::msg(format!(
            "{op}: unsupported operation: some elements of the input tensor (at position \
             {position}) and the written-to tensor refer to a single memory location; clone() \
             the input or use another out"
        )));
    }
    Ok(())
}

/// [`check_no_overlap`] for every written tensor against the reads whose position
/// (the first of each pair, as [`OpChecks::no_overlap`] numbers them) is in `mask`.
pub(crate) fn check_no_overlap_masked<'t>(
    op: &str,
    mask: u64,
    reads: impl Iterator<Item = (usize, &'t Tensor)>,
    writes: impl Iterator<Item = &'t Tensor> + Clone,
) -> Result<()> {
    for (i, r) in reads.filter(|&(i, _)| i < 64 && mask >> i & 1 == 1) {
        for w in writes.clone() {
            refuse_any_overlap(op, w, i, r)?;
        }
    }
    Ok(())
}

/// The overlap rules for the written tensors of a call: none may have internal
/// overlap, and none may partly overlap another argument (full overlap, e.g.
/// `x.add_(x)`, is fine).
pub(crate) fn check_write_overlap<'t>(
    op: &str,
    reads: impl Iterator<Item = &'t Tensor> + Clone,
    writes: impl Iterator<Item = &'t Tensor> + Clone,
) -> Result<()> {
    for (i, w) in writes.clone().enumerate() {
        if !w.is_defined() {
            continue;
        }
        if internal_overlap(w) == Overlap::Full {
            return Err(OpalError::msg(format!(
                "{op}: unsupported operation: more than one element of the written-to tensor \
                 refers to a single memory location (sizes {:?}, strides {:?}); clone() it \
                 before writing to it",
                w.sizes(),
                w.strides()
            )));
        }
        let others = reads.clone().chain(writes.clone().skip(i + 1));
        for r in others.filter(|r| r.is_defined()) {
            if w.shares_storage(r) && overlap(w, r) == Overlap::Partial {
                return Err(OpalError::msg(format!(
                    "{op}: unsupported operation: some elements of an input tensor and the \
                     written-to tensor refer to a single memory location; clone() the input \
                     before the operation"
                )));
            }
        }
    }
    Ok(())
}
