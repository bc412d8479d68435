//! The host's side of the ABI at run time: the [`OpalHostApi`] functions plugins
//! call, the registrar their entry uses, and the bridges that make a plugin's
//! kernels, fallback, allocator and transfer into the runtime's own kinds.
//!
//! Every `extern "C"` function here catches panics (a panic becomes a
//! [`code::PANIC`] status, or a null/no-op where the function returns no status).
//!
//! Owns: those functions and bridges. Must not: read manifests or open libraries.

use super::adapt::{is_default, Plan, Slot};
use super::results;
use super::typed::{self, TypedEntry};
use super::value::{self, Marshal};
use crate::device::Device;
use crate::dispatch::{DispatchKey, DispatchKeySet, Dispatcher, KernelFunction, OperatorHandle};
use crate::error::{OpalError, Result};
use crate::fallback::DeviceTransfer;
use crate::ivalue::{IValue, Stack};
use crate::tensor::{Allocator, KernelAccess, Tensor};
use opal_plugin_abi::{code, OpalAllocator, OpalKernelFn, OpalRegistrar, OpalStatus, OpalStr};
use opal_plugin_abi::{
    OpalHostApi, OpalTensor, OpalTensorInfo, OpalTransfer, OpalTypedFn, OpalValue,
};
use std::collections::HashMap;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::Arc;

/// Runs `f`, turning an `Err` or a panic into a status.
pub(super) fn guarded(what: &str, f: impl FnOnce() -> Result<()>) -> OpalStatus {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => OpalStatus::OK,
        Ok(Err(e)) => value::status_of(&e),
        Err(_) => OpalStatus::error(code::PANIC, &format!("the host panicked in {what}")),
    }
}

unsafe extern "C" fn tensor_retain(t: OpalTensor) -> OpalTensor {
    catch_unwind(|| {
        // SAFETY: the ABI requires a live handle (null is answered with null).
        match unsafe { value::deref(t) } {
            Ok(t) => value::own(t.clone()),
            Err(_) => OpalTensor(std::ptr::null_mut()),
        }
    })
    .unwrap_or(OpalTensor(std::ptr::null_mut()))
}

unsafe extern "C" fn tensor_release(t: OpalTensor) {
    if t.0.is_null() {
        return;
    }
    // A handle that is not a live owned one (a borrowed argument, one released
    // twice) is refused by `take` untouched: there is no status to report it.
    // Dropping a tensor cannot unwind into the plugin: the result of
    // catch_unwind is ignored.
    let _ = catch_unwind(|| drop(value::take(t)));
}

unsafe extern "C" fn tensor_info(t: OpalTensor, out: *mut OpalTensorInfo) -> OpalStatus {
    guarded("tensor_info", || {
        // SAFETY: the ABI requires a live handle.
        let t = unsafe { value::deref(t) }?;
        // SAFETY: `out` is null or points to a writable info of `size` bytes whose
        // `size` is set, as the ABI requires.
        let out = unsafe { InfoOut::checked(out, "tensor_info") }?;
        out.write(info_of(t)?);
        Ok(())
    })
}

/// A plugin's info struct to fill, checked: it holds at least the 1.0 layout, and
/// `size` (what the plugin compiled) says how much of this ABI's layout fits in it.
/// A plugin of an older minor version passes a shorter struct than the host's, so
/// it is written through a raw pointer, never past `size`.
struct InfoOut {
    ptr: NonNull<OpalTensorInfo>,
    size: usize,
}

impl InfoOut {
    /// `out` when it is a plugin's info struct of at least the 1.0 layout's size
    /// (`what` names the calling function in errors).
    ///
    /// # Safety
    /// `out` is null or points to a writable info whose `size` field is set and
    /// whose first `size` bytes are writable.
    #[inline]
    unsafe fn checked(out: *mut OpalTensorInfo, what: &str) -> Result<InfoOut> {
        let ptr = NonNull::new(out)
            .ok_or_else(|| OpalError::msg(format!("{what}: null info pointer")))?;
        // SAFETY: per the contract `size` is readable: every layout starts with it.
        let size = unsafe { std::ptr::addr_of!((*out).size).read() };
        if size < opal_plugin_abi::TENSOR_INFO_SIZE_1_0 {
            return Err(OpalError::msg(format!(
                "{what}: the plugin's info struct has {size} bytes, ABI 1.0 needs {}",
                opal_plugin_abi::TENSOR_INFO_SIZE_1_0
            )));
        }
        Ok(InfoOut { ptr, size })
    }

    /// Writes `info`: whole into a struct of at least this ABI's size, otherwise
    /// its first `size` bytes (the fields of the plugin's older layout: fields are
    /// only appended), with `size` saying so.
    #[inline]
    fn write(self, info: OpalTensorInfo) {
        if self.size >= std::mem::size_of::<OpalTensorInfo>() {
            // SAFETY: the plugin's struct holds this ABI's whole layout (`checked`).
            unsafe { self.ptr.as_ptr().write(info) };
            return;
        }
        let info = OpalTensorInfo {
            size: self.size,
            ..info
        };
        // SAFETY: `size` bytes of the plugin's struct are writable (`checked`), and
        // fewer than `info` has.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&info as *const OpalTensorInfo).cast::<u8>(),
                self.ptr.as_ptr().cast::<u8>(),
                self.size,
            )
        };
    }
}

/// The metadata `tensor_info` writes: what the typed bridge makes per tensor
/// argument on every call, so the geometry is read once and the undefined tensor is
/// the only branch.
#[inline(always)]
pub(super) fn info_of(t: &Tensor) -> Result<OpalTensorInfo> {
    if !t.is_defined() {
        return Ok(OpalTensorInfo::blank());
    }
    let (sizes, strides, offset, numel) = t.geometry();
    let (dtype, dev, contiguous) = (t.dtype(), t.device(), t.is_contiguous());
    let element_size = dtype.size();
    // The element's address in its device's memory (host memory only when the
    // device's allocator says so); none for meta tensors, which have no data.
    let data = if numel > 0 && !dev.is_meta() {
        t.storage()
            .data_ptr()
            .wrapping_add(offset as usize * element_size)
    } else {
        std::ptr::null_mut()
    };
    Ok(OpalTensorInfo {
        size: std::mem::size_of::<OpalTensorInfo>(),
        ndim: sizes.len(),
        sizes: sizes.as_ptr(),
        strides: strides.as_ptr(),
        storage_offset: offset,
        dtype: value::dtype_code(dtype),
        device_type: value::device_code(dev.device_type())?,
        device_index: dev.index().map_or(-1, i32::from),
        defined: 1,
        data: data.cast(),
        element_size,
        numel,
        contiguous: i32::from(contiguous),
        reserved: 0,
    })
}

/// The tensor of `tensor_empty` and `tensor_empty_info`.
///
/// # Safety
/// `sizes` points to `ndim` readable values (or is null).
#[inline]
unsafe fn empty_of(
    sizes: *const i64,
    ndim: usize,
    dtype: i32,
    device_type: i32,
    device_index: i32,
) -> Result<Tensor> {
    // SAFETY: forwarded contract.
    let sizes = unsafe { opal_plugin_abi::slice(sizes, ndim) }
        .ok_or_else(|| OpalError::msg("tensor_empty: null sizes"))?;
    let dev = value::device_from(i64::from(device_type), i64::from(device_index))?;
    Tensor::empty(sizes, value::dtype_from(i64::from(dtype))?, dev)
}

/// Writes the owned handle of `t` to `out`.
///
/// # Safety
/// `out` is null or writable.
#[inline]
unsafe fn put_handle(out: *mut OpalTensor, t: Tensor) -> Result<()> {
    // SAFETY: forwarded contract.
    let out = unsafe { out.as_mut() }.ok_or_else(|| OpalError::msg("tensor_empty: null out"))?;
    *out = value::own(t);
    Ok(())
}

unsafe extern "C" fn tensor_empty(
    sizes: *const i64,
    ndim: usize,
    dtype: i32,
    device_type: i32,
    device_index: i32,
    out: *mut OpalTensor,
) -> OpalStatus {
    guarded("tensor_empty", || {
        // SAFETY: the ABI requires `ndim` readable sizes and a writable `out`.
        unsafe {
            put_handle(
                out,
                empty_of(sizes, ndim, dtype, device_type, device_index)?,
            )
        }
    })
}

unsafe extern "C" fn call_op(
    name: OpalStr,
    args: *const OpalValue,
    nargs: usize,
    rets: *mut OpalValue,
    cap: usize,
    nrets: *mut usize,
) -> OpalStatus {
    guarded("call_op", || {
        // SAFETY: the ABI requires a borrowed string valid for the call.
        let name = unsafe { name.as_str() }
            .ok_or_else(|| OpalError::msg("call_op: the op name is not UTF-8"))?;
        // SAFETY: the ABI requires `nargs` readable values.
        let args = unsafe { opal_plugin_abi::slice(args, nargs) }
            .ok_or_else(|| OpalError::msg(format!("call_op({name}): null arguments")))?;
        let mut stack: Stack = Vec::with_capacity(nargs.max(4));
        for a in args {
            // SAFETY: arguments are borrowed under the ABI's rules.
            stack.push(unsafe { value::from_abi(a, false) }?);
        }
        Dispatcher::global().call_boxed(name, &mut stack)?;
        if stack.len() > cap {
            return Err(OpalError::msg(format!(
                "call_op({name}): {} returns, room for {cap}",
                stack.len()
            )));
        }
        let mut out = Vec::with_capacity(stack.len());
        for r in stack {
            out.push(match r {
                IValue::Tensor(t) => OpalValue::tensor(value::own(t)),
                IValue::Str(_) | IValue::TensorList(_) | IValue::IntList(_) | IValue::List(_) => {
                    return Err(OpalError::msg(format!(
                        "call_op({name}): a {} return cannot cross ABI 1.0",
                        r.type_name()
                    )))
                }
                other => {
                    let mut m = Marshal::default();
                    m.push(&other)?;
                    m.values[0]
                }
            });
        }
        // SAFETY: `rets` has room for `cap` values and `nrets` is writable (ABI).
        unsafe {
            std::ptr::copy_nonoverlapping(out.as_ptr(), rets, out.len());
            *nrets = out.len();
        }
        Ok(())
    })
}

unsafe extern "C" fn tensor_empty_info(
    sizes: *const i64,
    ndim: usize,
    dtype: i32,
    device_type: i32,
    device_index: i32,
    out: *mut OpalTensor,
    info: *mut OpalTensorInfo,
) -> OpalStatus {
    guarded("tensor_empty_info", || {
        // Both destinations are checked before allocating, so that a kernel's
        // result costs one metadata fill (inlined) and no second validation.
        // SAFETY: `info` is null or points to a writable info of `size` bytes whose
        // `size` is set, as the ABI requires.
        let info = unsafe { InfoOut::checked(info, "tensor_empty_info") }?;
        // SAFETY: `out` is null or writable, as the ABI requires.
        let out =
            unsafe { out.as_mut() }.ok_or_else(|| OpalError::msg("tensor_empty_info: null out"))?;
        // SAFETY: the ABI requires `ndim` readable sizes.
        let t = unsafe { empty_of(sizes, ndim, dtype, device_type, device_index) }?;
        // The info's arrays point into the tensor's impl, which the handle keeps.
        info.write(info_of(&t)?);
        *out = value::own(t);
        Ok(())
    })
}

/// The host API table (one, static, shared by every plugin).
pub static HOST_API: OpalHostApi = OpalHostApi {
    size: std::mem::size_of::<OpalHostApi>(),
    abi_major: opal_plugin_abi::ABI_MAJOR,
    abi_minor: opal_plugin_abi::ABI_MINOR,
    tensor_retain,
    tensor_release,
    tensor_info,
    tensor_empty,
    call_op,
    tensor_empty_info,
    current_device: super::device_hooks::current_device,
    current_stream: super::device_hooks::current_stream,
    generator_default: super::generators::generator_default,
    generator_release: super::generators::generator_release,
    generator_manual_seed: super::generators::generator_manual_seed,
    generator_initial_seed: super::generators::generator_initial_seed,
    generator_draw: super::generators::generator_draw,
    generator_reserve: super::generators::generator_reserve,
    generator_get_state: super::generators::generator_get_state,
    generator_set_state: super::generators::generator_set_state,
};

/// A plugin's kernel function and its user pointer.
#[derive(Copy, Clone)]
pub struct RawKernel {
    pub(super) f: OpalKernelFn,
    pub(super) user: *mut c_void,
}

// SAFETY: the ABI requires kernels (and what their user pointer refers to) to be
// callable from any thread, concurrently (docs/abi.md, "Threads").
unsafe impl Send for RawKernel {}
// SAFETY: as above.
unsafe impl Sync for RawKernel {}

/// What runs when a kernel declines or an argument is not at its default.
#[derive(Clone)]
pub enum Fallback {
    /// Nothing: an error.
    None,
    /// The host's CPU fallback.
    Cpu,
    /// The plugin's own boxed fallback.
    Plugin(RawKernel),
}

/// One registered kernel: the plugin's function, the op's adapter plan and what to
/// do when the kernel cannot run.
struct Bridge {
    plugin: Arc<str>,
    kernel: RawKernel,
    plan: Plan,
    fallback: Fallback,
}

pub(super) fn run_fallback(
    plugin: &str,
    fb: &Fallback,
    op: &OperatorHandle,
    ks: DispatchKeySet,
    stack: &mut Stack,
    why: impl FnOnce() -> String,
) -> Result<()> {
    match fb {
        Fallback::Cpu => crate::fallback::cpu_fallback(op, ks, stack),
        Fallback::Plugin(k) => call_raw(plugin, *k, op, stack, None).and_then(|declined| {
            if declined {
                Err(OpalError::msg(format!(
                    "{}: plugin '{plugin}''s fallback declined the call",
                    op.name()
                )))
            } else {
                Ok(())
            }
        }),
        Fallback::None => Err(OpalError::msg(why())),
    }
}

/// Calls a plugin kernel on the arguments at the end of `stack` (the host's
/// schema), passing only the `Keep` slots of `plan`. Returns `true` when the kernel
/// declined (the stack is then unchanged).
fn call_raw(
    plugin: &str,
    k: RawKernel,
    op: &OperatorHandle,
    stack: &mut Stack,
    plan: Option<&Plan>,
) -> Result<bool> {
    let def = op
        .def()
        .ok_or_else(|| OpalError::msg(format!("{}: the op has no schema", op.name())))?;
    let n = def.num_args();
    if stack.len() < n {
        return Err(OpalError::msg(format!(
            "{}: {} arguments on the stack, the schema has {n}",
            op.name(),
            stack.len()
        )));
    }
    let base = stack.len() - n;
    let mut m = Marshal::take();
    for (i, v) in stack[base..].iter().enumerate() {
        if plan.is_none_or(|p| matches!(p.slots.get(i), Some(Slot::Keep) | None)) {
            m.push(v)?;
        }
    }
    Ok(match invoke(plugin, k, op.name(), m, def.returns.len())? {
        None => true,
        Some(rets) => {
            stack.truncate(base);
            stack.extend(rets);
            false
        }
    })
}

/// Calls plugin kernel `k` as op (or backward node) `name` with the arguments in
/// `m` and room for `nrets` returns: `None` when it declined, else its returns
/// (owned by the host).
pub(super) fn invoke(
    plugin: &str,
    k: RawKernel,
    name: &str,
    mut m: Marshal,
    nrets: usize,
) -> Result<Option<Vec<IValue>>> {
    m.rets.resize(nrets, OpalValue::NONE);
    // SAFETY: the plugin's kernel gets borrowed values that live until it returns
    // (what they point to is not touched meanwhile) and room for `nrets` returns.
    let st = unsafe {
        (k.f)(
            k.user,
            OpalStr::borrow(name),
            m.values.as_ptr(),
            m.values.len(),
            m.rets.as_mut_ptr(),
            m.rets.len(),
        )
    };
    if st.code == code::DECLINED {
        // SAFETY: a status from the plugin, consumed once (frees its message).
        let _ = unsafe { st.into_result() };
        release_all(&m.rets);
        m.give_back();
        return Ok(None);
    }
    // SAFETY: a status from the plugin, consumed once.
    if let Err(e) = unsafe { value::check(st, || format!("{name}: plugin '{plugin}''s kernel")) } {
        release_all(&m.rets);
        m.give_back();
        return Err(e);
    }
    let mut out = Vec::with_capacity(nrets);
    let mut err = None;
    for r in &m.rets {
        // SAFETY: returns are owned by the host after the call (ABI); a tensor
        // handle is taken over only when it is a live one the host issued.
        let v = unsafe { value::from_abi(r, true) }.and_then(|v| {
            if let IValue::Tensor(t) = &v {
                // SAFETY: `m.values` are the call's borrowed arguments, still alive.
                let first = unsafe { results::first_device(&m.values) };
                // SAFETY: as above.
                results::check_tensor(plugin, t, first, || unsafe {
                    results::devices_of(&m.values)
                })?;
            }
            Ok(v)
        });
        match v {
            Ok(v) => out.push(v),
            Err(e) => {
                err = err.or_else(|| {
                    Some(OpalError::msg(format!(
                        "{name}: plugin '{plugin}''s kernel returned a value the host refuses: {e}"
                    )))
                })
            }
        }
    }
    m.give_back();
    err.map_or(Ok(Some(out)), Err)
}

/// Releases tensor handles a plugin wrote to `rets` before failing or declining.
fn release_all(rets: &[OpalValue]) {
    for r in rets {
        if r.tag == opal_plugin_abi::tag::TENSOR && !r.ptr.is_null() {
            // SAFETY: handles in `rets` are owned by the host (ABI); released once.
            unsafe { tensor_release(OpalTensor(r.ptr)) };
        }
    }
}

impl Bridge {
    fn call(&self, op: &OperatorHandle, ks: DispatchKeySet, stack: &mut Stack) -> Result<()> {
        if !self.plan.is_identity() {
            let n = self.plan.slots.len();
            let base = stack.len().saturating_sub(n);
            let def = op.def();
            for (i, s) in self.plan.slots.iter().enumerate() {
                let (Slot::Drop(d), Some(v)) = (s, stack.get(base + i)) else {
                    continue;
                };
                if !is_default(v, &d()) {
                    let arg = def.map_or("?", |d| d.args[i].name);
                    let v = format!("{v:?}");
                    return run_fallback(&self.plugin, &self.fallback, op, ks, stack, || {
                        format!(
                            "{}: plugin '{}' was built against '{}', which lacks argument \
                             '{arg}'; it runs only with {arg} at its default, got {arg}={v}, \
                             and the plugin has no fallback",
                            op.name(),
                            self.plugin,
                            self.plan.plugin_schema
                        )
                    });
                }
            }
        }
        if call_raw(&self.plugin, self.kernel, op, stack, Some(&self.plan))? {
            return run_fallback(&self.plugin, &self.fallback, op, ks, stack, || {
                format!(
                    "{}: plugin '{}''s kernel declined the call and the plugin has no fallback",
                    op.name(),
                    self.plugin
                )
            });
        }
        Ok(())
    }
}

/// A plugin's allocator as a runtime [`Allocator`]: its device's, or (ABI 1.4)
/// its device runtime's pinned host allocator.
pub(super) struct PluginAllocator {
    plugin: String,
    raw: OpalAllocator,
    pinned: bool,
}

impl PluginAllocator {
    /// The allocator of `plugin`'s table `raw` (`pinned`: pinned host memory).
    pub(super) fn new(plugin: String, raw: OpalAllocator, pinned: bool) -> Self {
        PluginAllocator {
            plugin,
            raw,
            pinned,
        }
    }
}

/// The alignment the ABI requires of a plugin allocator's blocks.
const ALLOC_ALIGN: usize = 64;

// SAFETY: the ABI requires allocator functions to be callable from any thread.
unsafe impl Send for PluginAllocator {}
// SAFETY: as above.
unsafe impl Sync for PluginAllocator {}

// SAFETY: `alloc` returns `nbytes` usable bytes aligned to 64 or null (ABI); memory
// is host-accessible only when the plugin says so.
unsafe impl Allocator for PluginAllocator {
    fn allocate(&self, device: Device, nbytes: usize) -> Result<NonNull<u8>> {
        let idx = device.index().map_or(0, i32::from);
        // SAFETY: the plugin's allocator, called as the ABI describes.
        let p = unsafe { (self.raw.alloc)(self.raw.user, nbytes, idx) };
        let p = NonNull::new(p).ok_or_else(|| {
            OpalError::msg(format!(
                "plugin '{}''s allocator failed to allocate {nbytes} bytes on {device}",
                self.plugin
            ))
        })?;
        if !(p.as_ptr() as usize).is_multiple_of(ALLOC_ALIGN) {
            // SAFETY: the block came from this allocator's `alloc(nbytes, idx)`;
            // it is handed back, never used.
            unsafe { (self.raw.free)(self.raw.user, p.as_ptr(), nbytes, idx) };
            return Err(OpalError::msg(format!(
                "plugin '{}''s allocator returned {:p} for {nbytes} bytes on {device}, \
                 not aligned to {ALLOC_ALIGN} bytes as the ABI requires",
                self.plugin,
                p.as_ptr()
            )));
        }
        Ok(p)
    }

    unsafe fn deallocate(&self, device: Device, ptr: NonNull<u8>, nbytes: usize) {
        let idx = device.index().map_or(0, i32::from);
        // SAFETY: `ptr` came from this allocator's `alloc(nbytes, idx)` (caller's contract).
        unsafe { (self.raw.free)(self.raw.user, ptr.as_ptr(), nbytes, idx) }
    }

    fn host_accessible(&self) -> bool {
        self.raw.host_accessible != 0
    }

    fn is_pinned(&self) -> bool {
        self.pinned
    }
}

/// A plugin's transfer as a runtime [`DeviceTransfer`].
struct PluginTransfer {
    plugin: String,
    raw: OpalTransfer,
}

// SAFETY: the ABI requires transfer functions to be callable from any thread.
unsafe impl Send for PluginTransfer {}
// SAFETY: as above.
unsafe impl Sync for PluginTransfer {}

impl DeviceTransfer for PluginTransfer {
    fn to_cpu(&self, src: &Tensor) -> Result<Tensor> {
        let dst = Tensor::empty(src.sizes(), src.dtype(), Device::cpu())?;
        let acc = KernelAccess::new(&[src], &[&dst])?;
        // SAFETY: both handles borrow tensors alive for the call; both storages are
        // borrowed by `acc` meanwhile.
        let st =
            unsafe { (self.raw.to_cpu)(self.raw.user, value::borrow(src), value::borrow(&dst)) };
        drop(acc);
        // SAFETY: a status from the plugin, consumed once.
        unsafe { value::check(st, || format!("plugin '{}''s to_cpu", self.plugin)) }?;
        Ok(dst)
    }

    fn from_cpu(&self, src: &Tensor, dst: &Tensor) -> Result<()> {
        let acc = KernelAccess::new(&[src], &[dst])?;
        // SAFETY: as in `to_cpu`.
        let st =
            unsafe { (self.raw.from_cpu)(self.raw.user, value::borrow(src), value::borrow(dst)) };
        drop(acc);
        // SAFETY: a status from the plugin, consumed once.
        unsafe { value::check(st, || format!("plugin '{}''s from_cpu", self.plugin)) }
    }
}

/// What a plugin's entry registered, applied only after the entry succeeded.
pub struct Registration {
    /// The plugin's name.
    pub plugin: Arc<str>,
    /// Its dispatch key.
    pub key: DispatchKey,
    /// Compatible ops and their plans (from the manifest).
    pub plans: HashMap<String, Plan>,
    /// Disabled ops and why (from the manifest).
    pub disabled: HashMap<String, String>,
    kernels: Vec<(String, RawKernel)>,
    /// Typed entries (1.1): op, signature code, entry, user pointer.
    typed: Vec<(String, String, OpalTypedFn, *mut c_void)>,
    /// Out entries (1.2) of a rule this host knows: op, signature code, entry,
    /// user pointer.
    outs: Vec<(String, String, OpalTypedFn, *mut c_void)>,
    fallback: Fallback,
    transfer: Option<OpalTransfer>,
    allocator: Option<OpalAllocator>,
    /// The device runtime (1.4), copied and checked when registered.
    device_hooks: Option<super::device_hooks::Hooks>,
    /// The plugin's ABI minor version: a 1.4 plugin without device hooks gets
    /// the default device runtime, an older one none (as before 1.4).
    pub abi_minor: u32,
    /// The plugin's device name: the namespace of its own operators.
    pub device: String,
    /// Backward kernels of ops the plugin differentiates itself (1.4).
    pub(super) autograd: Vec<super::extend::AutogradKernel>,
    /// The plugin's own operators (1.4).
    pub(super) custom: Vec<super::extend::CustomOp>,
    /// The device's collective communicator (1.4, appended).
    pub(super) communicator: Option<super::comm::PluginCommunicator>,
    /// Ops whose kernel the plugin registered but that stay disabled.
    pub skipped: Vec<String>,
}

impl Registration {
    /// An empty registration for `plugin` at `key`.
    pub fn new(
        plugin: &str,
        key: DispatchKey,
        plans: HashMap<String, Plan>,
        disabled: HashMap<String, String>,
    ) -> Self {
        Registration {
            plugin: Arc::from(plugin),
            key,
            plans,
            disabled,
            kernels: Vec::new(),
            typed: Vec::new(),
            outs: Vec::new(),
            fallback: Fallback::None,
            transfer: None,
            allocator: None,
            device_hooks: None,
            abi_minor: opal_plugin_abi::ABI_MINOR,
            device: plugin.to_string(),
            autograd: Vec::new(),
            custom: Vec::new(),
            communicator: None,
            skipped: Vec::new(),
        }
    }

    /// The registrar table whose `ctx` is `self` (valid while `self` is not moved).
    pub fn registrar(&mut self) -> OpalRegistrar {
        OpalRegistrar {
            size: std::mem::size_of::<OpalRegistrar>(),
            ctx: (self as *mut Registration).cast(),
            register_kernel,
            register_fallback,
            use_cpu_fallback,
            register_allocator,
            register_typed_kernel,
            register_out_kernel,
            register_device_hooks,
            register_autograd_kernel: super::extend::register_autograd_kernel,
            register_custom_op: super::extend::register_custom_op,
            register_communicator: super::comm::register_communicator,
        }
    }

    /// The device services the plugin offers, registered for its device type: its
    /// allocator, device hooks (the default ones from ABI 1.4 on), communicator and
    /// CPU-fallback transfer.
    fn install_device_services(&mut self) -> Result<()> {
        let dev = crate::device::DeviceType::ALL
            .into_iter()
            .find(|d| d.backend_key() == self.key)
            .ok_or_else(|| OpalError::msg(format!("no device type for {}", self.key)))?;
        if let Some(a) = self.allocator.take() {
            let a: &'static PluginAllocator = Box::leak(Box::new(PluginAllocator::new(
                self.plugin.to_string(),
                a,
                false,
            )));
            crate::tensor::register_allocator(dev, a);
        }
        match self.device_hooks.take() {
            Some(h) => crate::device_runtime::register_hooks(dev, h.into_device_hooks(dev))?,
            None if self.abi_minor >= 4 => crate::device_runtime::register_hooks(
                dev,
                Box::new(super::device_hooks::DefaultHooks),
            )?,
            None => {}
        }
        if let Some(c) = self.communicator.take() {
            super::comm::install(dev, c);
        }
        if let Some(t) = self.transfer.take() {
            let t: &'static PluginTransfer = Box::leak(Box::new(PluginTransfer {
                plugin: self.plugin.to_string(),
                raw: t,
            }));
            crate::fallback::register_transfer(dev, t);
        }
        Ok(())
    }

    /// The typed kernel of op `name` from the plugin's typed entry (and its out
    /// entry, when their codes agree), bridged to `boxed` for what the entry does
    /// not serve; `None` (with a warning saying why) when no bridge fits. Only an
    /// op whose plugin schema is the host's has the host's C signature, so the
    /// caller asks only for those.
    fn typed_kernel(
        &self,
        name: &str,
        boxed: &Arc<crate::dispatch::BoxedKernelFn>,
    ) -> Option<KernelFunction> {
        let entry = self.typed.iter().rev().find(|t| t.0 == name);
        let op = Dispatcher::global().find(name);
        match (entry, op) {
            (Some((_, code, f, user)), Some(op)) => {
                let mut e =
                    TypedEntry::new(*f, *user, self.plugin.clone(), op, self.fallback.clone());
                if let Some((_, out_code, g, out_user)) =
                    self.outs.iter().rev().find(|o| o.0 == name)
                {
                    match out_refusal(&op, code, out_code) {
                        None => e = e.with_out(*g, *out_user),
                        Some(why) => crate::warning::warn(
                            "opal::plugin",
                            &format!(
                                "plugin '{}': op {name} keeps its typed entry only: {why}",
                                self.plugin
                            ),
                        ),
                    }
                }
                match typed::bind(self.key, code, e, boxed.clone()) {
                    Ok(k) => k,
                    Err(why) => {
                        crate::warning::warn(
                            "opal::plugin",
                            &format!(
                                "plugin '{}': op {name} keeps its boxed kernel: {why}",
                                self.plugin
                            ),
                        );
                        None
                    }
                }
            }
            _ => None,
        }
    }

    /// Registers everything with the runtime; returns the ops that got a kernel,
    /// each with whether it got a typed bridge (warnings say why a typed entry was
    /// refused).
    pub fn apply(mut self) -> Result<Vec<(String, bool)>> {
        self.install_device_services()?;
        let mut lib = crate::dispatch::Library::new("aten", self.key);
        match &self.fallback {
            Fallback::None => {}
            Fallback::Cpu => {
                lib.fallback(crate::fallback::kernel())?;
            }
            Fallback::Plugin(k) => {
                let (k, plugin) = (*k, self.plugin.clone());
                lib.fallback(KernelFunction::from_boxed_fn(move |op, ks, stack| {
                    run_fallback(&plugin, &Fallback::Plugin(k), op, ks, stack, String::new)
                }))?;
            }
        }
        let mut done = Vec::new();
        for (name, kernel) in std::mem::take(&mut self.kernels) {
            let Some(plan) = self.plans.get(&name).cloned() else {
                continue;
            };
            let identity = plan.is_identity();
            let b = Bridge {
                plugin: self.plugin.clone(),
                kernel,
                plan,
                fallback: self.fallback.clone(),
            };
            let boxed: Arc<crate::dispatch::BoxedKernelFn> =
                Arc::new(move |op, ks, st| b.call(op, ks, st));
            let typed_kernel = if identity {
                self.typed_kernel(&name, &boxed)
            } else {
                None
            };
            let is_typed = typed_kernel.is_some();
            lib.impl_(
                &name,
                typed_kernel.unwrap_or_else(|| KernelFunction::boxed(boxed)),
            )?;
            done.push((name, is_typed));
        }
        lib.leak();
        super::extend::apply(&self.plugin, self.key, self.autograd, self.custom)?;
        Ok(done)
    }
}

/// Why the out entry (signature code `out_code`) of `op`, whose typed entry has the
/// code `typed_code`, is not bound, or `None` when it is: the codes must agree
/// (one C signature but for the result), and an op that writes an argument (an
/// in-place or `out=` op) has no result to make.
fn out_refusal(op: &OperatorHandle, typed_code: &str, out_code: &str) -> Option<String> {
    if out_code != typed_code {
        return Some(format!(
            "its out entry has the signature code '{out_code}', its typed entry '{typed_code}'"
        ));
    }
    let def = op.def()?;
    if let Some(a) = def.args.iter().find(|a| a.out || a.mutable) {
        return Some(format!(
            "it writes its argument '{}', so it has no out entry",
            a.name
        ));
    }
    None
}

/// The registration behind a registrar's `ctx`.
///
/// # Safety
/// `ctx` is the `ctx` of a registrar made by [`Registration::registrar`] whose
/// registration is alive and not otherwise borrowed (during the entry call).
impl Registration {
    /// The qualified op name and the signature code a typed or out entry registers
    /// (`f`, the registrar function, names a string that is not UTF-8); `None` for
    /// an op the manifest disables.
    ///
    /// # Safety
    /// `name` and `signature` are borrowed strings valid for the call.
    unsafe fn entry_names(
        &self,
        f: &str,
        name: OpalStr,
        signature: OpalStr,
    ) -> Result<Option<(String, String)>> {
        // SAFETY: the caller's promise.
        let (name, code) = unsafe { (name.as_str(), signature.as_str()) };
        let name = name.ok_or_else(|| OpalError::msg(format!("{f}: the op name is not UTF-8")))?;
        let code =
            code.ok_or_else(|| OpalError::msg(format!("{f}: the signature is not UTF-8")))?;
        let name = qualified(name);
        Ok((!self.disabled.contains_key(&name)).then(|| (name, code.to_string())))
    }
}

pub(super) unsafe fn reg<'a>(ctx: *mut c_void) -> Result<&'a mut Registration> {
    // SAFETY: forwarded contract.
    unsafe { ctx.cast::<Registration>().as_mut() }
        .ok_or_else(|| OpalError::msg("null registrar context"))
}

unsafe extern "C" fn register_kernel(
    ctx: *mut c_void,
    name: OpalStr,
    kernel: OpalKernelFn,
    user: *mut c_void,
) -> OpalStatus {
    guarded("register_kernel", || {
        // SAFETY: called during the entry with the registrar's own ctx (ABI).
        let r = unsafe { reg(ctx) }?;
        // SAFETY: a borrowed string valid for the call (ABI).
        let name = unsafe { name.as_str() }
            .ok_or_else(|| OpalError::msg("register_kernel: the op name is not UTF-8"))?;
        let name = qualified(name);
        if r.disabled.contains_key(&name) {
            r.skipped.push(name);
            return Ok(());
        }
        if !r.plans.contains_key(&name) {
            return Err(OpalError::msg(format!(
                "plugin '{}' registers a kernel for '{name}', which its manifest does not list",
                r.plugin
            )));
        }
        r.kernels.push((name, RawKernel { f: kernel, user }));
        Ok(())
    })
}

unsafe extern "C" fn register_fallback(
    ctx: *mut c_void,
    kernel: OpalKernelFn,
    user: *mut c_void,
) -> OpalStatus {
    guarded("register_fallback", || {
        // SAFETY: called during the entry with the registrar's own ctx (ABI).
        let r = unsafe { reg(ctx) }?;
        r.fallback = Fallback::Plugin(RawKernel { f: kernel, user });
        Ok(())
    })
}

/// A copy of the table a plugin passes at `p` (`size(t)` is its `size` field), or
/// an `Err` naming the entry `f` when `p` is null (a null `noun`) or the table is
/// smaller than ABI 1.0's (`table` of so many bytes).
///
/// # Safety
/// `p` is null or points to a readable `T`.
unsafe fn abi_table<T: Copy>(
    p: *const T,
    size: fn(&T) -> usize,
    f: &str,
    noun: &str,
    table: &str,
) -> Result<T> {
    // SAFETY: null or readable (the caller's promise).
    let t = unsafe { p.as_ref() }.ok_or_else(|| OpalError::msg(format!("{f}: null {noun}")))?;
    let need = std::mem::size_of::<T>();
    if size(t) < need {
        return Err(OpalError::msg(format!(
            "{f}: {table} of {} bytes, ABI 1.0 needs {need}",
            size(t)
        )));
    }
    Ok(*t)
}

unsafe extern "C" fn use_cpu_fallback(ctx: *mut c_void, t: *const OpalTransfer) -> OpalStatus {
    guarded("use_cpu_fallback", || {
        // SAFETY: called during the entry with the registrar's own ctx (ABI).
        let r = unsafe { reg(ctx) }?;
        // SAFETY: null or a readable transfer table (ABI).
        let t = unsafe {
            abi_table(
                t,
                |t| t.size,
                "use_cpu_fallback",
                "transfer",
                "transfer table",
            )
        }?;
        r.transfer = Some(t);
        r.fallback = Fallback::Cpu;
        Ok(())
    })
}

unsafe extern "C" fn register_allocator(ctx: *mut c_void, a: *const OpalAllocator) -> OpalStatus {
    guarded("register_allocator", || {
        // SAFETY: called during the entry with the registrar's own ctx (ABI).
        let r = unsafe { reg(ctx) }?;
        // SAFETY: null or a readable allocator table (ABI).
        let a = unsafe { abi_table(a, |a| a.size, "register_allocator", "allocator", "table") }?;
        r.allocator = Some(a);
        Ok(())
    })
}

unsafe extern "C" fn register_typed_kernel(
    ctx: *mut c_void,
    name: OpalStr,
    signature: OpalStr,
    entry: OpalTypedFn,
    user: *mut c_void,
) -> OpalStatus {
    guarded("register_typed_kernel", || {
        // SAFETY: called during the entry with the registrar's own ctx (ABI).
        let r = unsafe { reg(ctx) }?;
        // SAFETY: borrowed strings valid for the call (ABI).
        let Some((name, code)) =
            (unsafe { r.entry_names("register_typed_kernel", name, signature) })?
        else {
            return Ok(());
        };
        if !r.kernels.iter().any(|k| k.0 == name) {
            return Err(OpalError::msg(format!(
                "plugin '{}' registers a typed entry for '{name}' before (or without) its \
                 boxed kernel",
                r.plugin
            )));
        }
        r.typed.push((name, code, entry, user));
        Ok(())
    })
}

unsafe extern "C" fn register_out_kernel(
    ctx: *mut c_void,
    name: OpalStr,
    signature: OpalStr,
    rule: u32,
    entry: OpalTypedFn,
    user: *mut c_void,
) -> OpalStatus {
    guarded("register_out_kernel", || {
        // SAFETY: called during the entry with the registrar's own ctx (ABI).
        let r = unsafe { reg(ctx) }?;
        // SAFETY: borrowed strings valid for the call (ABI).
        let Some((name, code)) =
            (unsafe { r.entry_names("register_out_kernel", name, signature) })?
        else {
            return Ok(());
        };
        if !r.typed.iter().any(|t| t.0 == name) {
            return Err(OpalError::msg(format!(
                "plugin '{}' registers an out entry for '{name}' before (or without) its \
                 typed entry",
                r.plugin
            )));
        }
        // A rule of a later minor version: the typed entry serves every call.
        if rule == opal_plugin_abi::result_rule::ELEMENTWISE {
            r.outs.push((name, code, entry, user));
        }
        Ok(())
    })
}

unsafe extern "C" fn register_device_hooks(
    ctx: *mut c_void,
    hooks: *const opal_plugin_abi::OpalDeviceHooks,
) -> OpalStatus {
    guarded("register_device_hooks", || {
        // SAFETY: called during the entry with the registrar's own ctx (ABI).
        let r = unsafe { reg(ctx) }?;
        // SAFETY: null or a readable table, with what it points to, for the call
        // (ABI).
        r.device_hooks = Some(unsafe { super::device_hooks::Hooks::copy(&r.plugin, hooks) }?);
        Ok(())
    })
}

/// A plugin's op name as the dispatcher knows it: `add.Tensor` is `aten::add.Tensor`.
pub(super) fn qualified(name: &str) -> String {
    if name.contains("::") {
        name.to_string()
    } else {
        format!("aten::{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opal_plugin_abi::TENSOR_INFO_SIZE_1_0;

    /// An info buffer of this ABI's size, every byte `0xAB`, whose `size` says
    /// `size`.
    fn canary_info(size: usize) -> OpalTensorInfo {
        let mut info = OpalTensorInfo::blank();
        // SAFETY: `info` is a plain `repr(C)` struct of integers and raw pointers,
        // for which any bit pattern is valid.
        unsafe {
            std::ptr::write_bytes(
                (&mut info as *mut OpalTensorInfo).cast::<u8>(),
                0xAB,
                std::mem::size_of::<OpalTensorInfo>(),
            )
        };
        info.size = size;
        info
    }

    /// The bytes of `info` from `from` on.
    fn tail(info: &OpalTensorInfo, from: usize) -> Vec<u8> {
        // SAFETY: `info` is initialised (see `canary_info`) and this size.
        let all = unsafe {
            std::slice::from_raw_parts(
                (info as *const OpalTensorInfo).cast::<u8>(),
                std::mem::size_of::<OpalTensorInfo>(),
            )
        };
        all[from..].to_vec()
    }

    fn info_of_handle(t: &Tensor, size: usize) -> (OpalStatus, OpalTensorInfo) {
        let mut info = canary_info(size);
        // SAFETY: a live borrowed handle and a writable info of its `size`.
        let st = unsafe { tensor_info(value::borrow(t), &mut info) };
        (st, info)
    }

    /// ABI 1.3: the host fills the element count and contiguity; for the
    /// shorter info of a plugin built for 1.2 or older it writes that plugin's
    /// fields only, saying so in `size`; shorter than 1.0 is refused.
    #[test]
    fn tensor_info_fills_1_3_fields_and_never_writes_past_the_plugins_size() {
        let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
        let (st, full) = info_of_handle(&t, std::mem::size_of::<OpalTensorInfo>());
        assert_eq!(st.code, code::OK);
        assert_eq!(full.size, std::mem::size_of::<OpalTensorInfo>());
        assert_eq!(
            (full.ndim, full.numel, full.contiguous, full.reserved),
            (2, 6, 1, 0)
        );

        let tr = t.as_strided(&[3, 2], &[1, 3], 0).unwrap();
        let (st, info) = info_of_handle(&tr, std::mem::size_of::<OpalTensorInfo>());
        assert_eq!(st.code, code::OK);
        assert_eq!((info.numel, info.contiguous), (6, 0), "a transposed view");

        let (st, short) = info_of_handle(&t, TENSOR_INFO_SIZE_1_0);
        assert_eq!(st.code, code::OK);
        assert_eq!(short.size, TENSOR_INFO_SIZE_1_0);
        assert_eq!(
            (short.ndim, short.dtype, short.data),
            (2, full.dtype, full.data)
        );
        assert!(
            tail(&short, TENSOR_INFO_SIZE_1_0)
                .iter()
                .all(|&b| b == 0xAB),
            "nothing written past the 1.0 layout"
        );

        let (st, _) = info_of_handle(&t, TENSOR_INFO_SIZE_1_0 - 8);
        // SAFETY: a host status, consumed once.
        let (c, e) = unsafe { st.into_result() }.unwrap_err();
        assert!(c != code::OK && e.contains("ABI 1.0 needs"), "{c}: {e}");
    }

    /// `tensor_empty_info` honours a plugin's shorter info the same way.
    #[test]
    fn tensor_empty_info_honours_a_shorter_info() {
        let mut info = canary_info(TENSOR_INFO_SIZE_1_0);
        let mut h = OpalTensor(std::ptr::null_mut());
        let sizes = [2i64, 2];
        // SAFETY: readable sizes, writable handle and info of its `size`.
        let st = unsafe {
            tensor_empty_info(
                sizes.as_ptr(),
                2,
                opal_plugin_abi::dtype::F32,
                opal_plugin_abi::device_type::CPU,
                -1,
                &mut h,
                &mut info,
            )
        };
        assert_eq!(st.code, code::OK);
        assert_eq!(
            (info.size, info.ndim, info.element_size),
            (TENSOR_INFO_SIZE_1_0, 2, 4)
        );
        assert!(tail(&info, TENSOR_INFO_SIZE_1_0).iter().all(|&b| b == 0xAB));
        // SAFETY: the new owned handle, released once.
        unsafe { tensor_release(h) };
    }
}
