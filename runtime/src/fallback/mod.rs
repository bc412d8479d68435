//! The boxed CPU fallback: runs an operator that a device backend does not implement
//! by copying its tensor arguments to the CPU, calling the operator there (the CPU
//! kernel, or a composite), and copying the results, and every in-place or `out=`
//! mutation, back to the device. Any backend can register it for its key
//! (`Library::fallback(opal::fallback::kernel())`); generated backend registration
//! with `fallback: cpu` does so, and also routes argument values that a pinned kernel
//! predates here.
//!
//! Moving bytes between host and a device is the device's business: a backend
//! registers a [`DeviceTransfer`] for its device type ([`register_transfer`]).
//!
//! Semantics and limits: results go to the device the call asked for — the
//! `device` argument when the call names one (`_to_copy(x, device=cpu)` returns a
//! CPU tensor), otherwise the device of the tensor arguments — as fresh tensors (an
//! op that returns a view of an input returns a copy through the fallback);
//! arguments the schema marks as written (`Tensor(a!)`, lists of them) are updated in
//! place, resized first when the CPU kernel resized them (`out=` rules), and a
//! returned tensor that is a written argument gives back the caller's very tensor
//! (`is_same`). A `Generator?` argument left `None` becomes the default generator of
//! the call's device ([`Generator::default_for_device`]), and while the CPU kernel
//! runs, that generator stands in for the default CPU one (for random ops without a
//! generator argument, like `rand`), so the device's seed, not the CPU's, decides
//! random results. All non-CPU tensors of one call must be on one device.
//!
//! Owns: the fallback and the transfer registry. Must not: know any backend, or
//! register anything by itself.

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

use crate::device::{Device, DeviceType};
use crate::dispatch::{DispatchKeySet, Dispatcher, KernelFunction, OpDef, OperatorHandle};
use crate::error::{OpalError, Result};
use crate::generator::Generator;
use crate::ivalue::{FromIValue, IValue, Stack};
use crate::tensor::Tensor;

/// Copies tensor data between host memory and one device type.
pub trait DeviceTransfer: Send + Sync + 'static {
    /// A new contiguous CPU tensor with the sizes, dtype and values of `src`, a
    /// tensor on this device (any strides).
    fn to_cpu(&self, src: &Tensor) -> Result<Tensor>;

    /// Writes the values of `src`, a CPU tensor, into `dst`, a tensor on this device
    /// with the same sizes and dtype (either may be strided).
    // `self` is the transfer object, not the source; the name pairs with `to_cpu`.
    #[allow(clippy::wrong_self_convention)]
    fn from_cpu(&self, src: &Tensor, dst: &Tensor) -> Result<()>;
}

/// Registered transfers: a leaked `Box<&'static dyn DeviceTransfer>` per device type,
/// or null. Entries are never freed, so readers take no lock.
static TRANSFERS: [AtomicPtr<&'static dyn DeviceTransfer>; DeviceType::COUNT] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; DeviceType::COUNT];

static CALLS: AtomicU64 = AtomicU64::new(0);

/// Makes `t` the way the CPU fallback moves data of `device` (latest wins).
pub fn register_transfer(device: DeviceType, t: &'static dyn DeviceTransfer) {
    let boxed = Box::into_raw(Box::new(t));
    // The previous box is leaked on purpose: a concurrent reader may still hold it.
    TRANSFERS[device as usize].store(boxed, Ordering::Release);
}

/// The transfer registered for `device`.
pub fn transfer(device: DeviceType) -> Result<&'static dyn DeviceTransfer> {
    let p = TRANSFERS[device as usize].load(Ordering::Acquire);
    if p.is_null() {
        return Err(OpalError::device(format!(
            "the CPU fallback cannot move data of device '{device}': no DeviceTransfer is \
             registered for it (opal::fallback::register_transfer)"
        )));
    }
    // SAFETY: non-null entries are leaked boxes from `register_transfer`, never freed.
    Ok(unsafe { *p })
}

/// How many calls the CPU fallback has served in this process (for tests and
/// diagnostics).
pub fn calls() -> u64 {
    CALLS.load(Ordering::Relaxed)
}

/// The fallback as a boxed `KernelFunction`, for `Library::fallback` or `impl_`.
pub fn kernel() -> KernelFunction {
    KernelFunction::boxed(Arc::new(cpu_fallback))
}

/// Runs `def` through the CPU fallback with its arguments boxed on `stack` (schema
/// order) and returns its returns as `R`: `()`, one value, or a tuple. What
/// generated `fallback::<op>` helpers call.
pub fn call<R: FromIValue>(def: &'static OpDef, ks: DispatchKeySet, mut stack: Stack) -> Result<R> {
    let op = Dispatcher::global().def(def)?;
    cpu_fallback(&op, ks, &mut stack)?;
    let n = def.returns.len();
    let at = stack.len().checked_sub(n).ok_or_else(|| {
        OpalError::boxed(format!(
            "CPU fallback: '{}' left {} values, its schema has {n} returns",
            def.name,
            stack.len()
        ))
    })?;
    let mut rets = stack.split_off(at);
    match (n, rets.pop()) {
        (0, _) => R::from_ivalue(IValue::None),
        (1, Some(v)) => R::from_ivalue(v),
        (_, Some(last)) => {
            rets.push(last);
            R::from_ivalue(IValue::Tuple(rets))
        }
        (_, None) => R::from_ivalue(IValue::None),
    }
}

/// Copies `t` to `device` (a new tensor with `t`'s sizes and dtype).
pub fn copy_to_device(t: &Tensor, device: Device) -> Result<Tensor> {
    let dst = Tensor::empty(t.sizes(), t.dtype(), device)?;
    transfer(device.device_type())?.from_cpu(t, &dst)?;
    Ok(dst)
}

/// Copies a tensor of a non-CPU device to a new contiguous CPU tensor.
pub fn copy_to_cpu(t: &Tensor) -> Result<Tensor> {
    transfer(t.device().device_type())?.to_cpu(t)
}

/// A written device tensor and its CPU stand-in, to copy the result back.
struct Written {
    device: Tensor,
    cpu: Tensor,
}

/// Records the one non-CPU device of the call.
fn note_device(target: &mut Option<Device>, d: Device, op: &str) -> Result<()> {
    match target {
        Some(t) if *t != d => Err(OpalError::device(format!(
            "'{op}': expected all tensors on one device, found '{t}' and '{d}'"
        ))),
        Some(_) => Ok(()),
        None => {
            *target = Some(d);
            Ok(())
        }
    }
}

fn to_cpu_tracked(t: &Tensor, target: &mut Option<Device>, op: &str) -> Result<Option<Tensor>> {
    let d = t.device();
    // An undefined tensor (in a list; a lone one is boxed as `None`) has no data to
    // move and no device to note: it stays as it is.
    if d.is_cpu() || !t.is_defined() {
        return Ok(None);
    }
    note_device(target, d, op)?;
    copy_to_cpu(t).map(Some)
}

/// The boxed CPU fallback (see the module docs). `ks` is ignored: the call is
/// re-dispatched from the CPU copies of the arguments.
pub fn cpu_fallback(op: &OperatorHandle, _ks: DispatchKeySet, stack: &mut Stack) -> Result<()> {
    CALLS.fetch_add(1, Ordering::Relaxed);
    let name = op.name();
    #[cfg(feature = "tracing")]
    let _span = tracing::debug_span!(target: "opal", "cpu_fallback", op = %name).entered();
    let def = op
        .def()
        .ok_or_else(|| OpalError::msg(format!("CPU fallback: '{name}' is not defined")))?;
    let n = def.args.len();
    if stack.len() < n {
        return Err(OpalError::boxed(format!(
            "CPU fallback: '{name}' takes {n} arguments, the stack has {}",
            stack.len()
        )));
    }
    let base = stack.len() - n;
    let args = &mut stack[base..];
    let Moved {
        written,
        kept,
        dest,
    } = to_cpu_args(def, args)?;
    // Random CPU kernels without a generator argument draw from the device's.
    let _gen = dest
        .filter(|d| !d.is_cpu() && !d.is_meta())
        .map(|d| Generator::default_for_device(d).stand_in_for_cpu());
    op.call_boxed(stack)?;
    // Mutations: resize (out= rules) and copy back into the caller's tensors.
    for w in &written {
        if w.device.sizes() != w.cpu.sizes() {
            w.device.resize_(w.cpu.sizes())?;
        }
        transfer(w.device.device().device_type())?.from_cpu(&w.cpu, &w.device)?;
    }
    let Some(dest) = dest else {
        return Ok(());
    };
    let nret = def.returns.len();
    if stack.len() < base + nret {
        return Err(OpalError::boxed(format!(
            "CPU fallback: '{name}' returned {} values, its schema has {nret}",
            stack.len() - base
        )));
    }
    // A returned tensor that is a written argument (in-place and out= kernels
    // return their `self`/`out`) becomes the caller's device tensor again.
    // So does a CPU tensor the caller passed (an out= argument already on the CPU),
    // an undefined result (boxed as `None`, or inside a list), and a result the CPU
    // kernel put on another device.
    let back = |t: &Tensor| -> Result<Tensor> {
        match written.iter().find(|w| w.cpu.is_same(t)) {
            Some(w) => Ok(w.device.clone()),
            None if t.device().is_cpu() && !dest.is_cpu() && !kept.iter().any(|k| k.is_same(t)) => {
                copy_to_device(t, dest)
            }
            None => Ok(t.clone()),
        }
    };
    for slot in &mut stack[base..base + nret] {
        match slot {
            IValue::Tensor(t) => *t = back(t)?,
            IValue::TensorList(ts) => {
                for t in ts.iter_mut() {
                    *t = back(t)?;
                }
            }
            IValue::OptionalTensorList(ts) => {
                for t in ts.iter_mut().flatten() {
                    *t = back(t)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// What [`to_cpu_args`] did to one call's arguments.
struct Moved {
    /// The written device tensors, with their CPU stand-ins.
    written: Vec<Written>,
    /// The tensor arguments already on the CPU, passed as they are.
    kept: Vec<Tensor>,
    /// Where results go: the device argument when the call names one, else the
    /// inputs' device (`None`: nothing to move).
    dest: Option<Device>,
}

/// Rewrites the arguments of one call for the CPU: device tensors become CPU
/// copies, a device argument becomes `cpu`, and a `Generator?` left `None` becomes
/// the default generator of the call's device (so its seed, not the CPU's, decides
/// the numbers).
fn to_cpu_args(def: &OpDef, args: &mut [IValue]) -> Result<Moved> {
    let name = def.name;
    let mut inputs: Option<Device> = None;
    let mut requested: Option<Device> = None;
    let mut written: Vec<Written> = Vec::new();
    let mut kept: Vec<Tensor> = Vec::new();
    // Replaces one device tensor by its CPU copy, remembering it when written.
    let mut move_one = |t: &mut Tensor, mutable: bool| -> Result<()> {
        if let Some(cpu) = to_cpu_tracked(t, &mut inputs, name)? {
            if mutable {
                written.push(Written {
                    device: t.clone(),
                    cpu: cpu.clone(),
                });
            }
            *t = cpu;
        }
        Ok(())
    };
    for (a, v) in def.args.iter().zip(args.iter_mut()) {
        match v {
            IValue::Tensor(t) if t.device().is_cpu() => kept.push(t.clone()),
            IValue::Tensor(t) => move_one(t, a.mutable)?,
            IValue::TensorList(ts) => {
                for t in ts.iter_mut() {
                    move_one(t, a.mutable)?;
                }
            }
            IValue::OptionalTensorList(ts) => {
                for t in ts.iter_mut().flatten() {
                    move_one(t, false)?;
                }
            }
            IValue::Device(d) => {
                // The first device argument says where results go (`_to_copy(..,
                // device=cpu)` returns a CPU tensor). Meta stays meta: the CPU
                // kernel's factory makes meta tensors itself.
                requested.get_or_insert(*d);
                if !d.is_meta() {
                    *d = Device::cpu();
                }
            }
            _ => {}
        }
    }
    let dest = requested.or(inputs);
    if let Some(d) = dest.filter(|d| !d.is_cpu() && !d.is_meta()) {
        for (a, v) in def.args.iter().zip(args.iter_mut()) {
            if matches!(v, IValue::None) && a.ty.starts_with("Generator") {
                *v = IValue::Generator(Generator::default_for_device(d));
            }
        }
    }
    Ok(Moved {
        written,
        kept,
        dest,
    })
}
