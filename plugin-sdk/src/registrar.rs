//! [`Registrar`]: what a plugin's `init` registers (kernels, a fallback, an
//! allocator, a device transfer), and the `extern "C"` trampolines the host calls.
//!
//! Owns: registration and the trampolines (each catches panics). Must not: keep
//! the registrar past `init` (the host's table is valid only during the entry).

use crate::abi::{self, OpalAllocator, OpalRegistrar, OpalStatus, OpalStr, OpalTensor};
use crate::abi::{OpalTransfer, OpalValue};
use crate::value::{from_abi, into_return};
use crate::{check, guarded, Error, Result, Tensor, Value};
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A kernel: the op's arguments (as many as the plugin's schema has) in, its
/// returns out. `Err(Error::declined())` hands the call to the fallback.
pub type KernelFn = fn(&[Value]) -> Result<Vec<Value>>;

/// Device memory for the plugin's device type.
pub trait Allocator: Send + Sync + 'static {
    /// `nbytes` (> 0) bytes aligned to 64 on device `index`, or null.
    fn alloc(&self, nbytes: usize, index: i32) -> *mut u8;
    /// Frees what [`Allocator::alloc`] returned.
    ///
    /// # Safety
    /// `ptr` came from `alloc(nbytes, index)` of this allocator and is freed once.
    unsafe fn free(&self, ptr: *mut u8, nbytes: usize, index: i32);
    /// Whether the host may read and write the memory directly.
    fn host_accessible(&self) -> bool;
}

/// Device memory kept in 64-aligned, zeroed host blocks: what an emulated device
/// or a test plugin needs. `host_accessible` says whether the host may touch it
/// directly (an emulator says no, so that data moves only through its transfer).
pub struct HostMemory {
    /// See [`Allocator::host_accessible`].
    pub host_accessible: bool,
}

impl Allocator for HostMemory {
    fn alloc(&self, nbytes: usize, _index: i32) -> *mut u8 {
        match std::alloc::Layout::from_size_align(nbytes.max(1), 64) {
            // SAFETY: a non-zero size and a valid alignment.
            Ok(l) => unsafe { std::alloc::alloc_zeroed(l) },
            Err(_) => std::ptr::null_mut(),
        }
    }

    unsafe fn free(&self, ptr: *mut u8, nbytes: usize, _index: i32) {
        if let Ok(l) = std::alloc::Layout::from_size_align(nbytes.max(1), 64) {
            // SAFETY: `ptr` came from `alloc` with this layout (caller's contract).
            unsafe { std::alloc::dealloc(ptr, l) }
        }
    }

    fn host_accessible(&self) -> bool {
        self.host_accessible
    }
}

/// Copies between host memory and the plugin's device.
pub trait Transfer: Send + Sync + 'static {
    /// Writes device tensor `src` (any strides) into `dst`, a contiguous CPU tensor.
    fn to_cpu(&self, src: &Tensor, dst: &Tensor) -> Result<()>;
    /// Writes CPU tensor `src` into device tensor `dst` (same sizes and dtype).
    // `self` is the transfer object, not the source; the name pairs with `to_cpu`.
    #[allow(clippy::wrong_self_convention)]
    fn from_cpu(&self, src: &Tensor, dst: &Tensor) -> Result<()>;
}

/// The registrar of a plugin's `init`.
pub struct Registrar<'a> {
    raw: &'a OpalRegistrar,
}

impl<'a> Registrar<'a> {
    pub(crate) fn new(raw: &'a OpalRegistrar) -> Result<Self> {
        // A 1.0 host's registrar ends before the 1.1 fields (checked where used).
        if raw.size < abi::REGISTRAR_SIZE_1_0 {
            return Err(Error {
                code: abi::code::ABI_MISMATCH,
                message: format!(
                    "the host's registrar has {} bytes, the plugin needs at least {}",
                    raw.size,
                    abi::REGISTRAR_SIZE_1_0
                ),
            });
        }
        Ok(Registrar { raw })
    }

    /// Registers `k` for op `name` (`aten::relu`; it must be in the manifest). An op
    /// the host disabled (incompatible schema) is skipped and reported by the host.
    pub fn kernel(&mut self, name: &str, k: KernelFn) -> Result<&mut Self> {
        // SAFETY: the registrar is valid during init; `k` is a fn pointer, alive for
        // the process (the library is never unloaded).
        let st = unsafe {
            (self.raw.register_kernel)(
                self.raw.ctx,
                OpalStr::borrow(name),
                kernel_trampoline,
                k as *mut c_void,
            )
        };
        // SAFETY: a host status, consumed once.
        unsafe { check(st) }?;
        Ok(self)
    }

    /// Registers the `extern "C"` kernel `k` for op `name` as it is, with `user`
    /// passed back to every call: for kernels that write ABI values themselves
    /// (a test plugin's deliberately wrong returns, a kernel generated in C).
    ///
    /// # Safety
    /// `k` follows the ABI's kernel contract (docs/abi.md: it catches panics and
    /// writes only owned handles to `rets`, or whatever a test means to break),
    /// and `user` is valid for the process, from any thread.
    pub unsafe fn raw_kernel(
        &mut self,
        name: &str,
        k: abi::OpalKernelFn,
        user: *mut c_void,
    ) -> Result<&mut Self> {
        // SAFETY: the registrar is valid during init; `k` and `user` per the contract.
        let st =
            unsafe { (self.raw.register_kernel)(self.raw.ctx, OpalStr::borrow(name), k, user) };
        // SAFETY: a host status, consumed once.
        unsafe { check(st) }?;
        Ok(self)
    }

    /// Registers the typed entry `k` (ABI 1.1, see [`crate::typed`]) for op `name`,
    /// whose boxed kernel must be registered already: the host calls the entry for
    /// typed calls when it has a bridge for the op's signature and the plugin's
    /// schema is the host's; the boxed kernel serves everything else. A 1.0 host
    /// (whose registrar lacks the function) keeps the boxed kernel: `Ok`.
    pub fn typed_kernel(&mut self, name: &str, k: crate::TypedKernel) -> Result<&mut Self> {
        let end = std::mem::offset_of!(OpalRegistrar, register_typed_kernel)
            + std::mem::size_of::<usize>();
        if !abi::has_field(self.raw.size, end) {
            return Ok(self);
        }
        // SAFETY: the registrar is valid during init and its size covers the field;
        // the entry is a fn pointer alive for the process (the library is never
        // unloaded) of the signature its code names (`TypedKernel::new`'s contract).
        let st = unsafe {
            (self.raw.register_typed_kernel)(
                self.raw.ctx,
                OpalStr::borrow(name),
                OpalStr::borrow(&k.code),
                k.entry,
                std::ptr::null_mut(),
            )
        };
        // SAFETY: a host status, consumed once.
        unsafe { check(st) }?;
        Ok(self)
    }

    /// Registers the out entry `k` (ABI 1.2, see [`crate::out_entry!`]) for op
    /// `name`, whose typed entry must be registered already: when the host bound
    /// the typed entry and the call fits `k`'s result rule, the host makes the
    /// result and calls the out entry to write it; the typed entry serves the other
    /// calls. A 1.0 or 1.1 host (whose registrar lacks the function) keeps the typed
    /// entry: `Ok`.
    pub fn out_kernel(&mut self, name: &str, k: crate::OutKernel) -> Result<&mut Self> {
        let end =
            std::mem::offset_of!(OpalRegistrar, register_out_kernel) + std::mem::size_of::<usize>();
        if !abi::has_field(self.raw.size, end) {
            return Ok(self);
        }
        // SAFETY: the registrar is valid during init and its size covers the field;
        // the entry is a fn pointer alive for the process (the library is never
        // unloaded) of the out-entry signature its code names (`OutKernel::new`'s
        // contract).
        let st = unsafe {
            (self.raw.register_out_kernel)(
                self.raw.ctx,
                OpalStr::borrow(name),
                OpalStr::borrow(&k.code),
                k.rule,
                k.entry,
                std::ptr::null_mut(),
            )
        };
        // SAFETY: a host status, consumed once.
        unsafe { check(st) }?;
        Ok(self)
    }

    /// Registers `k` as the boxed fallback of every op without a kernel (it gets
    /// the host schema's arguments).
    pub fn fallback(&mut self, k: KernelFn) -> Result<&mut Self> {
        // SAFETY: as in `kernel`.
        let st = unsafe {
            (self.raw.register_fallback)(self.raw.ctx, kernel_trampoline, k as *mut c_void)
        };
        // SAFETY: a host status, consumed once.
        unsafe { check(st) }?;
        Ok(self)
    }

    /// Runs ops without a kernel (and declined calls) on the host's CPU, moving
    /// data with `t`.
    pub fn cpu_fallback(&mut self, t: &'static dyn Transfer) -> Result<&mut Self> {
        let user: &'static &'static dyn Transfer = Box::leak(Box::new(t));
        let table = OpalTransfer {
            size: std::mem::size_of::<OpalTransfer>(),
            user: user as *const &dyn Transfer as *mut c_void,
            to_cpu: to_cpu_trampoline,
            from_cpu: from_cpu_trampoline,
        };
        // SAFETY: the registrar is valid during init; the host copies the table.
        let st = unsafe { (self.raw.use_cpu_fallback)(self.raw.ctx, &table) };
        // SAFETY: a host status, consumed once.
        unsafe { check(st) }?;
        Ok(self)
    }

    /// Makes `a` the allocator of the plugin's device.
    pub fn allocator(&mut self, a: &'static dyn Allocator) -> Result<&mut Self> {
        let table = allocator_table(a);
        // SAFETY: the registrar is valid during init; the host copies the table.
        let st = unsafe { (self.raw.register_allocator)(self.raw.ctx, &table) };
        // SAFETY: a host status, consumed once.
        unsafe { check(st) }?;
        Ok(self)
    }
}

impl Registrar<'_> {
    /// Makes `rt` the device runtime of the plugin's device type (ABI 1.4: device
    /// count, current device, streams, events, memory statistics, pinned memory,
    /// backend metadata, autocast dtypes). On a host older than 1.4 (whose
    /// registrar lacks the function) this is an `ABI_MISMATCH` error naming both
    /// versions: a plugin that cannot run without its device runtime returns it
    /// from `init`, so the host refuses the plugin with that message; one that
    /// can run without (as a synchronous one-stream device) ignores it.
    pub fn device_runtime(&mut self, rt: &'static dyn crate::DeviceRuntime) -> Result<&mut Self> {
        self.needs_1_4("a device runtime")?;
        let table = crate::device::table(rt);
        // SAFETY: the registrar is valid during init and its size covers the
        // field; the host copies the table and what it points to (all leaked,
        // alive for the process).
        let st = unsafe { (self.raw.register_device_hooks)(self.raw.ctx, &table) };
        // SAFETY: a host status, consumed once.
        unsafe { check(st) }?;
        Ok(self)
    }
}

impl Registrar<'_> {
    /// The host's table (for registrations defined in other modules).
    pub(crate) fn raw(&self) -> &OpalRegistrar {
        self.raw
    }

    /// An `ABI_MISMATCH` error naming both versions when the host's registrar
    /// lacks the 1.4 function `what`.
    fn needs_1_4(&self, what: &str) -> Result<()> {
        if abi::has_field(self.raw.size, abi::REGISTRAR_SIZE_1_4_BEFORE_COMM) {
            return Ok(());
        }
        let (major, minor) = crate::host()
            .map(|h| (h.abi_major, h.abi_minor))
            .unwrap_or((abi::ABI_MAJOR, 3));
        Err(Error {
            code: abi::code::ABI_MISMATCH,
            message: format!(
                "the plugin was built for ABI {}.{} and registers {what}, which needs \
                 ABI 1.4; this host has ABI {major}.{minor}",
                abi::ABI_MAJOR,
                abi::ABI_MINOR
            ),
        })
    }

    /// Differentiates op `name` itself (ABI 1.4): the host records a node named
    /// `node` whose backward is `backward`, called with the gradients of the op's
    /// tensor returns (`Value::None` for none), then its tensor arguments, then its
    /// tensor returns, and returning one gradient per tensor argument
    /// (`Value::None`: none). The op must be in the manifest with the host's
    /// schema. An `ABI_MISMATCH` error on an older host.
    pub fn autograd_kernel(
        &mut self,
        name: &str,
        node: &str,
        backward: KernelFn,
    ) -> Result<&mut Self> {
        self.needs_1_4("a backward kernel")?;
        // SAFETY: the registrar is valid during init and its size covers the
        // field; `backward` is a fn pointer alive for the process.
        let st = unsafe {
            (self.raw.register_autograd_kernel)(
                self.raw.ctx,
                OpalStr::borrow(name),
                OpalStr::borrow(node),
                kernel_trampoline,
                backward as *mut c_void,
            )
        };
        // SAFETY: a host status, consumed once.
        unsafe { check(st) }?;
        Ok(self)
    }

    /// Declares an operator of the plugin's namespace (its device name) with
    /// `kernel` (ABI 1.4): `schema` is qualified and has no default values
    /// (`emu::fused_add_relu(Tensor self, Tensor other) -> Tensor`). An
    /// `ABI_MISMATCH` error on an older host.
    pub fn custom_op(&mut self, schema: &str, kernel: KernelFn) -> Result<&mut Self> {
        self.needs_1_4("its own operator")?;
        // SAFETY: as in `autograd_kernel`.
        let st = unsafe {
            (self.raw.register_custom_op)(
                self.raw.ctx,
                OpalStr::borrow(schema),
                kernel_trampoline,
                kernel as *mut c_void,
            )
        };
        // SAFETY: a host status, consumed once.
        unsafe { check(st) }?;
        Ok(self)
    }
}

/// The ABI table of `a` (its `user` leaked: the host keeps calling it).
pub(crate) fn allocator_table(a: &'static dyn Allocator) -> OpalAllocator {
    let user: &'static &'static dyn Allocator = Box::leak(Box::new(a));
    OpalAllocator {
        size: std::mem::size_of::<OpalAllocator>(),
        user: user as *const &dyn Allocator as *mut c_void,
        alloc: alloc_trampoline,
        free: free_trampoline,
        host_accessible: i32::from(a.host_accessible()),
    }
}

/// Calls the [`KernelFn`] in `user` with the converted arguments.
unsafe extern "C" fn kernel_trampoline(
    user: *mut c_void,
    op: OpalStr,
    args: *const OpalValue,
    nargs: usize,
    rets: *mut OpalValue,
    nrets: usize,
) -> OpalStatus {
    // SAFETY: the op name is borrowed for the call.
    let name = unsafe { op.as_str() }.unwrap_or("?");
    guarded(
        || format!("the plugin's kernel for {name}"),
        || {
            // SAFETY: `user` is the `KernelFn` registered with this trampoline.
            let k: KernelFn = unsafe { std::mem::transmute::<*mut c_void, KernelFn>(user) };
            // SAFETY: the host passes `nargs` borrowed values for the call.
            let raw =
                unsafe { abi::slice(args, nargs) }.ok_or_else(|| Error::msg("null arguments"))?;
            let mut vals = Vec::with_capacity(raw.len());
            for v in raw {
                // SAFETY: borrowed arguments (ABI).
                vals.push(unsafe { from_abi(v, false) }?);
            }
            let out = k(&vals)?;
            if out.len() != nrets {
                return Err(Error::msg(format!(
                    "{name}: the kernel returned {} values, the op has {nrets}",
                    out.len()
                )));
            }
            for (i, v) in out.into_iter().enumerate() {
                let r = into_return(v)?;
                // SAFETY: `rets` has room for `nrets` values (ABI), i < nrets.
                unsafe { *rets.add(i) = r };
            }
            Ok(())
        },
    )
}

/// The transfer behind `user`.
///
/// # Safety
/// `user` is the leaked `&dyn Transfer` of [`Registrar::cpu_fallback`].
unsafe fn transfer<'a>(user: *mut c_void) -> &'a dyn Transfer {
    // SAFETY: forwarded contract.
    unsafe { *(user as *const &'static dyn Transfer) }
}

unsafe extern "C" fn to_cpu_trampoline(
    user: *mut c_void,
    src: OpalTensor,
    dst: OpalTensor,
) -> OpalStatus {
    guarded(
        || "the plugin's to_cpu".to_string(),
        || {
            let (s, d) = (
                Tensor::from_handle(src, false)?,
                Tensor::from_handle(dst, false)?,
            );
            // SAFETY: the host passes back the user pointer of this table.
            unsafe { transfer(user) }.to_cpu(&s, &d)
        },
    )
}

unsafe extern "C" fn from_cpu_trampoline(
    user: *mut c_void,
    src: OpalTensor,
    dst: OpalTensor,
) -> OpalStatus {
    guarded(
        || "the plugin's from_cpu".to_string(),
        || {
            let (s, d) = (
                Tensor::from_handle(src, false)?,
                Tensor::from_handle(dst, false)?,
            );
            // SAFETY: the host passes back the user pointer of this table.
            unsafe { transfer(user) }.from_cpu(&s, &d)
        },
    )
}

/// The allocator behind `user`.
///
/// # Safety
/// `user` is the leaked `&dyn Allocator` of [`Registrar::allocator`].
unsafe fn allocator<'a>(user: *mut c_void) -> &'a dyn Allocator {
    // SAFETY: forwarded contract.
    unsafe { *(user as *const &'static dyn Allocator) }
}

unsafe extern "C" fn alloc_trampoline(user: *mut c_void, nbytes: usize, index: i32) -> *mut u8 {
    // A panic is an allocation failure (null).
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the host passes back the user pointer of this table.
        unsafe { allocator(user) }.alloc(nbytes, index)
    }))
    .unwrap_or(std::ptr::null_mut())
}

unsafe extern "C" fn free_trampoline(user: *mut c_void, ptr: *mut u8, nbytes: usize, index: i32) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the host passes back the user pointer and a pointer from `alloc`.
        unsafe { allocator(user).free(ptr, nbytes, index) }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{OpalAllocator, OpalKernelFn, OpalTransfer, OpalTypedFn};
    use std::sync::atomic::{AtomicUsize, Ordering};

    static OUT_CALLS: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn reg_kernel(
        _: *mut c_void,
        _: OpalStr,
        _: OpalKernelFn,
        _: *mut c_void,
    ) -> OpalStatus {
        OpalStatus::OK
    }
    unsafe extern "C" fn reg_fallback(
        _: *mut c_void,
        _: OpalKernelFn,
        _: *mut c_void,
    ) -> OpalStatus {
        OpalStatus::OK
    }
    unsafe extern "C" fn cpu_fb(_: *mut c_void, _: *const OpalTransfer) -> OpalStatus {
        OpalStatus::OK
    }
    unsafe extern "C" fn reg_alloc(_: *mut c_void, _: *const OpalAllocator) -> OpalStatus {
        OpalStatus::OK
    }
    unsafe extern "C" fn reg_typed(
        _: *mut c_void,
        _: OpalStr,
        _: OpalStr,
        _: OpalTypedFn,
        _: *mut c_void,
    ) -> OpalStatus {
        OpalStatus::OK
    }
    unsafe extern "C" fn reg_out(
        _: *mut c_void,
        _: OpalStr,
        _: OpalStr,
        _: u32,
        _: OpalTypedFn,
        _: *mut c_void,
    ) -> OpalStatus {
        OUT_CALLS.fetch_add(1, Ordering::Relaxed);
        OpalStatus::OK
    }
    static HOOKS_CALLS: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn reg_hooks(_: *mut c_void, t: *const abi::OpalDeviceHooks) -> OpalStatus {
        // SAFETY: the registrar passes the SDK's table, readable for the call.
        let t = unsafe { &*t };
        assert_eq!(t.size, abi::DEVICE_HOOKS_SIZE_1_4);
        assert_eq!((t.device_count, t.available), (3, 1));
        HOOKS_CALLS.fetch_add(1, Ordering::Relaxed);
        OpalStatus::OK
    }

    unsafe extern "C" fn reg_autograd(
        _: *mut c_void,
        _: OpalStr,
        _: OpalStr,
        _: OpalKernelFn,
        _: *mut c_void,
    ) -> OpalStatus {
        OpalStatus::OK
    }
    unsafe extern "C" fn reg_custom(
        _: *mut c_void,
        _: OpalStr,
        _: OpalKernelFn,
        _: *mut c_void,
    ) -> OpalStatus {
        OpalStatus::OK
    }
    unsafe extern "C" fn reg_comm(_: *mut c_void, _: *const abi::OpalCommunicator) -> OpalStatus {
        OpalStatus::OK
    }

    fn registrar(size: usize) -> OpalRegistrar {
        OpalRegistrar {
            size,
            ctx: std::ptr::null_mut(),
            register_kernel: reg_kernel,
            register_fallback: reg_fallback,
            use_cpu_fallback: cpu_fb,
            register_allocator: reg_alloc,
            register_typed_kernel: reg_typed,
            register_out_kernel: reg_out,
            register_device_hooks: reg_hooks,
            register_autograd_kernel: reg_autograd,
            register_custom_op: reg_custom,
            register_communicator: reg_comm,
        }
    }

    struct NoComm;
    impl crate::Communicator for NoComm {
        fn all_reduce(
            &self,
            _: &Tensor,
            _: crate::ReduceOp,
            _: &crate::Group,
            _: i64,
        ) -> Result<()> {
            Err(Error::declined())
        }
    }

    /// A 1.4 host from before `register_communicator` was appended keeps every
    /// other 1.4 registration, and refuses a communicator with an ABI mismatch
    /// naming the sizes; a host with the field takes it.
    #[test]
    fn a_communicator_needs_the_appended_registrar_field() {
        static C: NoComm = NoComm;
        let raw = registrar(abi::REGISTRAR_SIZE_1_4_BEFORE_COMM);
        let mut r = Registrar::new(&raw).unwrap();
        assert!(r.needs_1_4("a device runtime").is_ok());
        let e = match r.communicator(&C) {
            Err(e) => e,
            Ok(_) => panic!("a registrar without register_communicator took a communicator"),
        };
        assert_eq!(e.code, abi::code::ABI_MISMATCH);
        assert!(e.message.contains("register_communicator"), "{}", e.message);
        let raw = registrar(std::mem::size_of::<OpalRegistrar>());
        assert!(Registrar::new(&raw).unwrap().communicator(&C).is_ok());
    }

    struct Three;
    impl crate::DeviceRuntime for Three {
        fn device_count(&self) -> usize {
            3
        }
    }

    /// A 1.4 plugin on a 1.3 host (a registrar without `register_device_hooks`)
    /// gets an ABI mismatch naming both versions; on a 1.4 host its table is
    /// registered.
    #[test]
    fn a_device_runtime_needs_a_1_4_registrar() {
        static RT: Three = Three;
        let raw = registrar(abi::REGISTRAR_SIZE_1_3);
        let e = match Registrar::new(&raw).unwrap().device_runtime(&RT) {
            Err(e) => e,
            Ok(_) => panic!("a 1.3 registrar took a device runtime"),
        };
        assert_eq!(e.code, abi::code::ABI_MISMATCH);
        assert!(
            e.message
                .contains("registers a device runtime, which needs ABI 1.4")
                && e.message.contains("this host has ABI 1.3"),
            "{}",
            e.message
        );
        assert_eq!(HOOKS_CALLS.load(Ordering::Relaxed), 0);
        let raw = registrar(std::mem::size_of::<OpalRegistrar>());
        Registrar::new(&raw).unwrap().device_runtime(&RT).unwrap();
        assert_eq!(HOOKS_CALLS.load(Ordering::Relaxed), 1);
    }

    crate::out_entry! {
        fn relu_out(self_: Tensor) -> out(ELEMENTWISE) = |_: &crate::Tensor, _: &crate::Tensor| Ok(());
    }

    /// A 1.2 plugin on a 1.1 host (a registrar without `register_out_kernel`)
    /// registers no out entry and succeeds; on a 1.2 host the entry is registered
    /// with the typed entry's code and its rule.
    #[test]
    fn out_entries_are_registered_only_where_the_registrar_has_the_function() {
        let mut raw = registrar(abi::REGISTRAR_SIZE_1_1);
        let k = relu_out();
        assert_eq!((k.code(), k.rule()), ("T>1", abi::result_rule::ELEMENTWISE));
        Registrar::new(&raw)
            .unwrap()
            .out_kernel("aten::relu", k.clone())
            .unwrap();
        assert_eq!(
            OUT_CALLS.load(Ordering::Relaxed),
            0,
            "a 1.1 host: not called"
        );
        raw.size = std::mem::size_of::<OpalRegistrar>();
        Registrar::new(&raw)
            .unwrap()
            .out_kernel("aten::relu", k)
            .unwrap();
        assert_eq!(OUT_CALLS.load(Ordering::Relaxed), 1);
    }
}
