//! A deliberately broken plugin: its `aten::relu` (a boxed kernel and a typed
//! entry) returns, by the manifest's `"config"` word, what a buggy plugin could
//! hand the host, which must refuse each with an `Err` naming the plugin and the
//! op before safe code reads it:
//!
//! - `null`: a null tensor handle;
//! - `borrowed`: the argument's borrowed handle, not retained (the host never
//!   issued it as an owned handle);
//! - `foreign`: the address of a static of this library;
//! - `released`: a handle it made and then released;
//! - `wrong-device`: a new CPU tensor for a call on its own device;
//! - `lying-view`: it asks the host for a view past its argument's storage
//!   (`as_strided`) and for a tensor of an unknown dtype code, then returns the
//!   argument made to look like them; the host refuses the requests;
//! - `panic`: the kernel panics (the SDK catches it at the boundary);
//! - `abort`: the kernel panics inside an `extern "C"` function without a
//!   guard, which aborts the process (the test runs it in a child process).
//!
//! It registers its allocator (host memory) and nothing else: no fallback, no
//! transfer.
//!
//! Owns: nothing but this test fixture. Must not: depend on `opal`.

use opal_plugin_sdk::abi::{self, tag, OpalStatus, OpalStr, OpalTensor, OpalTensorArg, OpalValue};
use opal_plugin_sdk::{
    call_op, export_plugin, DType, Error, HostMemory, Registrar, Result, Tensor, TypedKernel, Value,
};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU8, Ordering};

/// The configured way to fail (an index into [`MODES`]).
static MODE: AtomicU8 = AtomicU8::new(0);

const MODES: [&str; 8] = [
    "null",
    "borrowed",
    "foreign",
    "released",
    "wrong-device",
    "lying-view",
    "panic",
    "abort",
];

/// What `foreign` returns: memory the host never handed out.
static NOT_A_HANDLE: [u64; 4] = [0x5eed, 0, 0, 0];

fn mode() -> &'static str {
    MODES[usize::from(MODE.load(Ordering::Relaxed))]
}

/// The handle the configured mode returns for argument `x` (borrowed), or the
/// error the kernel reports.
fn broken_result(x: &Tensor) -> Result<OpalTensor> {
    match mode() {
        "null" => Ok(OpalTensor(std::ptr::null_mut())),
        "borrowed" => Ok(x.handle()),
        "foreign" => Ok(OpalTensor(NOT_A_HANDLE.as_ptr() as *mut c_void)),
        "released" => {
            let t = Tensor::empty(x.sizes(), DType::F32, x.device()?)?;
            let h = t.handle();
            // Dropping an owned SDK tensor releases its handle.
            drop(t);
            Ok(h)
        }
        "wrong-device" => {
            Tensor::empty(x.sizes(), DType::F32, opal_plugin_sdk::Device::CPU)?.into_raw()
        }
        "lying-view" => {
            // A view reaching 1,000 elements past the argument's storage.
            let far = x.numel().saturating_add(1000);
            call_op(
                "aten::as_strided",
                &[
                    Value::Tensor(x.clone()),
                    Value::List(tag::INT, vec![Value::Int(far)]),
                    Value::List(tag::INT, vec![Value::Int(1)]),
                    Value::None,
                ],
            )?;
            Err(Error::msg("broken plugin: the host made the lying view"))
        }
        "panic" => panic!("broken plugin: the kernel panics"),
        m => Err(Error::msg(format!(
            "broken plugin: mode {m} is not a result"
        ))),
    }
}

/// The boxed `relu`: writes the broken result straight into `rets`.
unsafe extern "C" fn relu_kernel(
    _user: *mut c_void,
    _op: OpalStr,
    args: *const OpalValue,
    nargs: usize,
    rets: *mut OpalValue,
    nrets: usize,
) -> OpalStatus {
    unguarded_panic_if_told();
    let r = std::panic::catch_unwind(|| {
        // SAFETY: the host passes `nargs` borrowed values for the call.
        let args = unsafe { abi::slice(args, nargs) }.ok_or_else(|| Error::msg("no args"))?;
        let a = args.first().ok_or_else(|| Error::msg("no self"))?;
        // SAFETY: the argument's handle is lent for the call.
        let x = unsafe { Tensor::borrowed(OpalTensor(a.ptr)) }?;
        let h = broken_result(&x)?;
        if nrets == 0 || rets.is_null() {
            return Err(Error::msg("no room for the return"));
        }
        // SAFETY: the host passes room for `nrets` (> 0) returns.
        unsafe {
            *rets = OpalValue {
                tag: tag::TENSOR,
                ptr: h.0,
                ..OpalValue::NONE
            }
        };
        Ok(())
    });
    status(r)
}

/// The typed `relu` (`"T>1"`): writes the broken result to `out`.
unsafe extern "C" fn relu_entry(
    _user: *mut c_void,
    x: *const OpalTensorArg,
    out: *mut OpalTensor,
) -> OpalStatus {
    unguarded_panic_if_told();
    let r = std::panic::catch_unwind(|| {
        // SAFETY: the host passes a valid borrowed argument for the call.
        let h = unsafe { x.as_ref() }
            .ok_or_else(|| Error::msg("no self"))?
            .handle;
        // SAFETY: the handle is lent for the call.
        let x = unsafe { Tensor::borrowed(h) }?;
        let h = broken_result(&x)?;
        // SAFETY: the host passes room for one handle.
        unsafe { *out = h };
        Ok(())
    });
    status(r)
}

/// In mode `abort`, panics outside any guard: called first in an `extern "C"`
/// kernel, the panic cannot unwind out of it and aborts the process.
fn unguarded_panic_if_told() {
    if mode() == "abort" {
        panic!("broken plugin: a panic escapes an extern \"C\" kernel");
    }
}

fn status(r: std::thread::Result<Result<()>>) -> OpalStatus {
    match r {
        Ok(Ok(())) => OpalStatus::OK,
        Ok(Err(e)) => OpalStatus::error(abi::code::ERROR, &e.to_string()),
        Err(_) => OpalStatus::error(abi::code::PANIC, "broken plugin: the kernel panicked"),
    }
}

/// `relu` as an SDK kernel, for `panic` (the SDK's trampoline catches it).
fn relu_sdk(args: &[Value]) -> Result<Vec<Value>> {
    let x = args[0].tensor()?;
    broken_result(x).map(|_| Vec::new())
}

fn init(reg: &mut Registrar, config: &str) -> Result<()> {
    let m = MODES
        .iter()
        .position(|m| *m == config.trim())
        .ok_or_else(|| Error::msg(format!("broken plugin: unknown mode '{config}'")))?;
    MODE.store(m as u8, Ordering::Relaxed);
    static MEM: HostMemory = HostMemory {
        host_accessible: true,
    };
    reg.allocator(&MEM)?;
    if mode() == "panic" {
        reg.kernel("aten::relu", relu_sdk)?;
        return Ok(());
    }
    // SAFETY: `relu_kernel` is an ABI kernel (it writes the configured result;
    // that is what this plugin tests) and needs no user pointer.
    unsafe { reg.raw_kernel("aten::relu", relu_kernel, std::ptr::null_mut()) }?;
    // SAFETY: `relu_entry` has the C signature of code `T>1`.
    let typed = unsafe {
        TypedKernel::new(
            b"T",
            std::mem::transmute::<
                unsafe extern "C" fn(
                    *mut c_void,
                    *const OpalTensorArg,
                    *mut OpalTensor,
                ) -> OpalStatus,
                abi::OpalTypedFn,
            >(relu_entry),
        )
    };
    reg.typed_kernel("aten::relu", typed)?;
    Ok(())
}

export_plugin!(init);
