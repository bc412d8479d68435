//! The stable C ABI between an Opal host and a backend plugin, version
//! [`ABI_MAJOR`].[`ABI_MINOR`]: `#[repr(C)]` tables, values and status codes only.
//! `docs/abi.md` is the specification; this crate is its Rust transcription, compiled
//! by both sides (the host in `opal-runtime`, plugins through `opal-plugin-sdk`).
//!
//! Rules every table follows: its first field is `size` (the byte size of the table
//! as its producer compiled it); fields are only ever appended, in a later minor
//! version; a reader uses a field only when `size` covers it ([`has_field`]).
//! No Rust type crosses the boundary. Besides the types, the crate has the few
//! helpers both sides need to make and read statuses and strings ([`OpalStatus::error`],
//! [`OpalStatus::into_result`], [`OpalStr::borrow`]): each side compiles its own
//! copy, so a message is always freed by the code of the side that allocated it.
//!
//! Owns: the ABI's types, constants and those helpers. Must not: contain other
//! behaviour (the host's loader is `opal::plugin`, the plugin side is `opal-plugin-sdk`).

#![no_std]
#![warn(missing_docs)]

extern crate alloc;

mod comm;
mod device;

pub use comm::{
    reduce_op, OpalCommGroup, OpalCommunicator, COMMUNICATOR_SIZE_1_4, COMM_GROUP_SIZE_1_4,
};
pub use device::{
    OpalDeviceHooks, OpalEvent, OpalMemoryStats, OpalOwnedStr, DEVICE_HOOKS_SIZE_1_4,
};

use alloc::boxed::Box;
use alloc::string::String;
use core::ffi::c_void;

/// Major version: a host loads only plugins of the same major version.
pub const ABI_MAJOR: u32 = 1;
/// Minor version: grows when fields are appended to a table; a plugin of a lower or
/// higher minor version loads, and each side checks `size` before using new fields.
/// 1.1 added typed entries ([`OpalRegistrar::register_typed_kernel`], [`typed`])
/// and [`OpalHostApi::tensor_empty_info`]; 1.2 added out entries
/// ([`OpalRegistrar::register_out_kernel`], [`result_rule`]); 1.3 added the
/// element count and contiguity to [`OpalTensorInfo`] ([`OpalTensorInfo::numel`],
/// [`OpalTensorInfo::contiguous`]); 1.4 added the device runtime
/// ([`OpalRegistrar::register_device_hooks`], [`OpalDeviceHooks`]) and the
/// current device and stream ([`OpalHostApi::current_device`],
/// [`OpalHostApi::current_stream`]), generators ([`OpalHostApi::generator_default`]
/// and the functions after it, [`tag::GENERATOR`]), and then a device's own
/// collective communicator ([`OpalRegistrar::register_communicator`],
/// [`OpalCommunicator`]).
pub const ABI_MINOR: u32 = 4;

/// Name of the data symbol ([`OpalAbiVersion`]) every plugin exports; the host reads
/// it (reading runs no plugin code) before calling anything.
pub const VERSION_SYMBOL: &str = "opal_plugin_abi_version";
/// Default name of the entry function ([`OpalPluginEntry`]); a manifest may name
/// another one with `"entry"`.
pub const ENTRY_SYMBOL: &str = "opal_plugin_init";

/// True when a table whose `size` field says `size` contains the field that ends at
/// byte `end` (`offset_of!(T, f) + size_of::<F>()`).
pub const fn has_field(size: usize, end: usize) -> bool {
    size >= end
}

/// The version a plugin was built against (the data symbol [`VERSION_SYMBOL`]).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OpalAbiVersion {
    /// [`ABI_MAJOR`] of the plugin's build.
    pub major: u32,
    /// [`ABI_MINOR`] of the plugin's build.
    pub minor: u32,
}

/// Status codes of every fallible ABI function.
pub mod code {
    /// Success.
    pub const OK: i32 = 0;
    /// A kernel declines this call: the host runs the plugin's fallback (the CPU
    /// fallback or the plugin's own) as if no kernel were registered.
    pub const DECLINED: i32 = 1;
    /// An argument was invalid (wrong type, null handle, bad UTF-8, ...).
    pub const INVALID_ARGUMENT: i32 = 2;
    /// The callee does not implement this.
    pub const NOT_IMPLEMENTED: i32 = 3;
    /// A Rust panic was caught at the boundary; the message says where.
    pub const PANIC: i32 = 4;
    /// Any other error; the message says what.
    pub const ERROR: i32 = 5;
    /// An ABI version or table size is not supported.
    pub const ABI_MISMATCH: i32 = 6;
}

/// A borrowed UTF-8 string: valid for the duration of the call it is passed to.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct OpalStr {
    /// First byte (may dangle when `len` is 0).
    pub ptr: *const u8,
    /// Length in bytes.
    pub len: usize,
}

/// Frees a message buffer made by the side that allocated it.
pub type OpalFreeFn = unsafe extern "C" fn(ptr: *mut u8, len: usize);

/// The result of a fallible ABI function: a code ([`code`]) and, unless the code is
/// [`code::OK`], an owned UTF-8 message that the receiver frees with `msg_free`
/// (allocated by the side that made the status, freed by the same side's code).
#[repr(C)]
#[derive(Debug)]
pub struct OpalStatus {
    /// One of [`code`].
    pub code: i32,
    /// The message bytes (null for none).
    pub msg_ptr: *mut u8,
    /// The message length in bytes.
    pub msg_len: usize,
    /// Frees `msg_ptr`/`msg_len`; `None` when there is no message.
    pub msg_free: Option<OpalFreeFn>,
}

/// Frees a message made by [`OpalStatus::error`] in this copy of the crate.
///
/// # Safety
/// `ptr`/`len` come from one [`OpalStatus::error`] of this copy, freed once.
pub unsafe extern "C" fn free_message(ptr: *mut u8, len: usize) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: per the contract, `ptr`/`len` are a leaked `Box<[u8]>` of this copy.
    drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(ptr, len)) });
}

impl OpalStatus {
    /// Success, no message.
    pub const OK: OpalStatus = OpalStatus {
        code: code::OK,
        msg_ptr: core::ptr::null_mut(),
        msg_len: 0,
        msg_free: None,
    };

    /// A failure with `code` and an owned copy of `message`, freed by [`free_message`].
    pub fn error(code: i32, message: &str) -> OpalStatus {
        let bytes: Box<[u8]> = Box::from(message.as_bytes());
        let len = bytes.len();
        OpalStatus {
            code,
            msg_ptr: Box::into_raw(bytes).cast::<u8>(),
            msg_len: len,
            msg_free: Some(free_message),
        }
    }

    /// Reads the status and frees its message: `Ok(())` for [`code::OK`], else the
    /// code and the message (lossy UTF-8; empty when there is none).
    ///
    /// # Safety
    /// The status came from the other side under the ABI's rules (its message, if
    /// any, is `msg_len` readable bytes freed by `msg_free`) and is consumed once.
    #[inline]
    pub unsafe fn into_result(self) -> Result<(), (i32, String)> {
        if self.code == code::OK && self.msg_ptr.is_null() {
            return Ok(());
        }
        let text = if self.msg_ptr.is_null() || self.msg_len == 0 {
            String::new()
        } else {
            // SAFETY: the producer promises `msg_len` readable bytes at `msg_ptr`.
            let bytes = unsafe { core::slice::from_raw_parts(self.msg_ptr, self.msg_len) };
            String::from_utf8_lossy(bytes).into_owned()
        };
        if let Some(free) = self.msg_free {
            // SAFETY: freed once, by the producer's own function, as the ABI says.
            unsafe { free(self.msg_ptr, self.msg_len) };
        }
        if self.code == code::OK {
            Ok(())
        } else {
            Err((self.code, text))
        }
    }
}

impl OpalStr {
    /// Borrows `s` (valid while `s` is).
    #[inline]
    pub fn borrow(s: &str) -> OpalStr {
        OpalStr {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }

    /// The string, or `None` for a null pointer or invalid UTF-8.
    ///
    /// # Safety
    /// `ptr` is null or points to `len` readable bytes that outlive `'a`.
    pub unsafe fn as_str<'a>(self) -> Option<&'a str> {
        if self.ptr.is_null() {
            return if self.len == 0 { Some("") } else { None };
        }
        // SAFETY: per the contract, `len` readable bytes live for `'a`.
        let bytes = unsafe { core::slice::from_raw_parts(self.ptr, self.len) };
        core::str::from_utf8(bytes).ok()
    }
}

/// A tensor handle: a reference the host counts. Every handle a side receives as
/// "owned" must be released exactly once (`tensor_release`); handles in kernel
/// arguments are borrowed for the call.
#[repr(transparent)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OpalTensor(pub *mut c_void);

/// Value tags of [`OpalValue`].
pub mod tag {
    /// An absent optional / undefined tensor.
    pub const NONE: u32 = 0;
    /// A tensor: `ptr` is an [`super::OpalTensor`] handle.
    pub const TENSOR: u32 = 1;
    /// `int`: `i`.
    pub const INT: u32 = 2;
    /// `float`: `d`.
    pub const DOUBLE: u32 = 3;
    /// `bool`: `i` is 0 or 1.
    pub const BOOL: u32 = 4;
    /// `str`: `ptr`/`len` are UTF-8 bytes.
    pub const STR: u32 = 5;
    /// `Scalar`: `aux` is a [`super::scalar_kind`], the value in `i` / `d` / `d`+`d2`.
    pub const SCALAR: u32 = 6;
    /// `ScalarType`: `i` is a [`super::dtype`] code.
    pub const DTYPE: u32 = 7;
    /// `Device`: `i` is a [`super::device_type`] code, `aux` the index + 1 (0: none).
    pub const DEVICE: u32 = 8;
    /// A list (`int[]`, `float[]`, `bool[]`, `Tensor[]`, `Tensor?[]`, `Scalar[]`):
    /// `ptr`/`len` are an array of [`super::OpalValue`], `aux` the element tag.
    pub const LIST: u32 = 9;
    /// `Layout`: `i` is 0 (strided) or 1 (sparse) etc., as the host numbers them.
    pub const LAYOUT: u32 = 10;
    /// `MemoryFormat`: `i` is the host's code (0 contiguous, 1 preserve,
    /// 2 channels-last, 3 channels-last-3d).
    pub const MEMORY_FORMAT: u32 = 11;
    /// (1.4) `Generator`: `ptr` is a borrowed [`super::OpalGenerator`] handle.
    pub const GENERATOR: u32 = 12;
}

/// Kinds of a [`tag::SCALAR`] value.
pub mod scalar_kind {
    /// `i` holds the integer.
    pub const INT: u32 = 0;
    /// `d` holds the float.
    pub const FLOAT: u32 = 1;
    /// `i` is 0 or 1.
    pub const BOOL: u32 = 2;
    /// `d` + i·`d2`.
    pub const COMPLEX: u32 = 3;
}

/// dtype codes (PyTorch's `ScalarType` numbering).
pub mod dtype {
    /// uint8
    pub const U8: i32 = 0;
    /// int8
    pub const I8: i32 = 1;
    /// int16
    pub const I16: i32 = 2;
    /// int32
    pub const I32: i32 = 3;
    /// int64
    pub const I64: i32 = 4;
    /// float16
    pub const F16: i32 = 5;
    /// float32
    pub const F32: i32 = 6;
    /// float64
    pub const F64: i32 = 7;
    /// complex64
    pub const C64: i32 = 9;
    /// complex128
    pub const C128: i32 = 10;
    /// bool
    pub const BOOL: i32 = 11;
    /// bfloat16
    pub const BF16: i32 = 15;
}

/// Device type codes.
pub mod device_type {
    /// The host CPU.
    pub const CPU: i32 = 0;
    /// The meta device (shapes only).
    pub const META: i32 = 1;
    /// PrivateUse1.
    pub const PRIVATE_USE1: i32 = 2;
    /// PrivateUse2.
    pub const PRIVATE_USE2: i32 = 3;
    /// PrivateUse3.
    pub const PRIVATE_USE3: i32 = 4;
}

/// One boxed value (a schema argument or return). A flat struct rather than a
/// union so that every bit pattern is valid to read; which fields mean something
/// depends on `tag` ([`tag`]). Ownership of what `ptr` points to depends on where
/// the value is (see `docs/abi.md`, "Values").
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct OpalValue {
    /// One of [`tag`].
    pub tag: u32,
    /// Tag-dependent: scalar kind, device index + 1, list element tag.
    pub aux: u32,
    /// Integer payload.
    pub i: i64,
    /// Float payload (real part).
    pub d: f64,
    /// Second float payload (imaginary part).
    pub d2: f64,
    /// Pointer payload: tensor handle, string bytes, list items.
    pub ptr: *mut c_void,
    /// Length of what `ptr` points to (bytes or items).
    pub len: usize,
}

impl OpalValue {
    /// `None`.
    pub const NONE: OpalValue = OpalValue {
        tag: tag::NONE,
        aux: 0,
        i: 0,
        d: 0.0,
        d2: 0.0,
        ptr: core::ptr::null_mut(),
        len: 0,
    };

    /// A value of `tag` with the integer payload `i` (ints, bools, codes).
    pub const fn with_i(tag: u32, i: i64) -> OpalValue {
        OpalValue {
            tag,
            i,
            ..OpalValue::NONE
        }
    }

    /// A tensor value.
    pub const fn tensor(h: OpalTensor) -> OpalValue {
        OpalValue {
            tag: tag::TENSOR,
            ptr: h.0,
            ..OpalValue::NONE
        }
    }

    /// A `Scalar` of [`scalar_kind`] `kind` with its payload.
    pub const fn scalar(kind: u32, i: i64, d: f64, d2: f64) -> OpalValue {
        OpalValue {
            tag: tag::SCALAR,
            aux: kind,
            i,
            d,
            d2,
            ptr: core::ptr::null_mut(),
            len: 0,
        }
    }

    /// A borrowed list of `len` values with element tag `elem`.
    pub const fn list(elem: u32, items: *const OpalValue, len: usize) -> OpalValue {
        OpalValue {
            tag: tag::LIST,
            aux: elem,
            ptr: items as *mut c_void,
            len,
            ..OpalValue::NONE
        }
    }
}

/// The slice at `ptr`/`len` (empty for `len` 0, `None` for a null pointer with a
/// non-zero length).
///
/// # Safety
/// `ptr` is null or points to `len` initialised `T` that outlive `'a`.
#[inline]
pub unsafe fn slice<'a, T>(ptr: *const T, len: usize) -> Option<&'a [T]> {
    if len == 0 {
        Some(&[])
    } else if ptr.is_null() {
        None
    } else {
        // SAFETY: per the contract.
        Some(unsafe { core::slice::from_raw_parts(ptr, len) })
    }
}

/// What the host tells about a tensor ([`OpalHostApi::tensor_info`]). The arrays
/// and the data pointer are valid while the handle they came from is alive and its
/// geometry unchanged (inside a kernel call: until the kernel returns).
///
/// The fields after `element_size` are 1.3's: a host of an older minor version
/// fills a shorter struct (`size` [`TENSOR_INFO_SIZE_1_0`]), so a reader uses them
/// only when `size` covers them.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct OpalTensorInfo {
    /// Byte size of this struct as the host filled it.
    pub size: usize,
    /// Number of dimensions.
    pub ndim: usize,
    /// `ndim` sizes.
    pub sizes: *const i64,
    /// `ndim` strides, in elements.
    pub strides: *const i64,
    /// Storage offset, in elements (already applied to `data`).
    pub storage_offset: i64,
    /// [`dtype`] code.
    pub dtype: i32,
    /// [`device_type`] code.
    pub device_type: i32,
    /// Device index (-1: none).
    pub device_index: i32,
    /// 1 when the tensor is defined, 0 for an undefined tensor.
    pub defined: i32,
    /// Address of the first element in its device's memory (dereferenceable by the
    /// host only when the device's allocator is host-accessible), or null for meta
    /// tensors and empty tensors.
    pub data: *mut c_void,
    /// Bytes per element.
    pub element_size: usize,
    /// (1.3) Number of elements (the product of `sizes`; 0 for an undefined
    /// tensor).
    pub numel: i64,
    /// (1.3) 1 when the tensor is row-major contiguous, 0 otherwise: every
    /// dimension of size other than 1 has the stride of the product of the sizes
    /// after it (dimensions of size 1 may have any stride); a tensor without
    /// elements is contiguous, an undefined one is not.
    pub contiguous: i32,
    /// (1.3) Zero: pads the struct to a multiple of 8 bytes explicitly.
    pub reserved: i32,
}

/// The size of the 1.0 layout of [`OpalTensorInfo`], unchanged until 1.2 (the
/// host refuses a shorter info, and a 1.3 reader of an info this short computes
/// [`OpalTensorInfo::numel`] and [`OpalTensorInfo::contiguous`] from the sizes and
/// strides).
pub const TENSOR_INFO_SIZE_1_0: usize = core::mem::offset_of!(OpalTensorInfo, numel);

impl OpalTensorInfo {
    /// An info of this ABI's size with nothing filled in (undefined tensor, codes
    /// -1), for the host to fill.
    pub const fn blank() -> Self {
        OpalTensorInfo {
            size: core::mem::size_of::<OpalTensorInfo>(),
            ndim: 0,
            sizes: core::ptr::null(),
            strides: core::ptr::null(),
            storage_offset: 0,
            dtype: -1,
            device_type: -1,
            device_index: -1,
            defined: 0,
            data: core::ptr::null_mut(),
            element_size: 0,
            numel: 0,
            contiguous: 0,
            reserved: 0,
        }
    }
}

/// The host's functions, handed to the plugin's entry. Grows by appending fields.
#[repr(C)]
pub struct OpalHostApi {
    /// Byte size of this table as the host compiled it.
    pub size: usize,
    /// The host's ABI major version.
    pub abi_major: u32,
    /// The host's ABI minor version.
    pub abi_minor: u32,
    /// A new owned reference to the same tensor.
    pub tensor_retain: unsafe extern "C" fn(t: OpalTensor) -> OpalTensor,
    /// Releases an owned reference (null is ignored).
    pub tensor_release: unsafe extern "C" fn(t: OpalTensor),
    /// Fills `out` (whose `size` the caller sets) with the tensor's metadata.
    pub tensor_info: unsafe extern "C" fn(t: OpalTensor, out: *mut OpalTensorInfo) -> OpalStatus,
    /// A new uninitialised contiguous tensor (owned) of `ndim` sizes, a [`dtype`]
    /// code, on a device ([`device_type`] code, index or -1), allocated by that
    /// device's allocator.
    pub tensor_empty: unsafe extern "C" fn(
        sizes: *const i64,
        ndim: usize,
        dtype: i32,
        device_type: i32,
        device_index: i32,
        out: *mut OpalTensor,
    ) -> OpalStatus,
    /// Calls operator `name` (`aten::add.Tensor`) with `nargs` arguments (borrowed)
    /// through the host's dispatcher. Returns go to `rets` (capacity `cap`; `*nrets`
    /// receives the count); tensors there are owned by the caller; list and string
    /// returns are refused in ABI 1.0.
    pub call_op: unsafe extern "C" fn(
        name: OpalStr,
        args: *const OpalValue,
        nargs: usize,
        rets: *mut OpalValue,
        cap: usize,
        nrets: *mut usize,
    ) -> OpalStatus,
    /// (1.1) [`OpalHostApi::tensor_empty`] that also fills `info` (whose `size`
    /// the caller sets) for the new tensor, as [`OpalHostApi::tensor_info`] would:
    /// one call instead of two for a kernel's result.
    pub tensor_empty_info: unsafe extern "C" fn(
        sizes: *const i64,
        ndim: usize,
        dtype: i32,
        device_type: i32,
        device_index: i32,
        out: *mut OpalTensor,
        info: *mut OpalTensorInfo,
    ) -> OpalStatus,
    /// (1.4) This thread's current device index of a device type ([`device_type`]
    /// code), as `DeviceGuard` and `set_device` set it (0 until set); -1 for an
    /// unknown code. No status: it cannot fail otherwise.
    pub current_device: unsafe extern "C" fn(device_type: i32) -> i32,
    /// (1.4) This thread's current stream id of device `index` of a device type
    /// (0, the default stream, until set); -1 for an unknown code. Kernels that
    /// queue work read it to pick their queue.
    pub current_stream: unsafe extern "C" fn(device_type: i32, index: i32) -> i64,
    /// (1.4) An owned handle (released with [`OpalHostApi::generator_release`])
    /// to the default generator of device `index` of a device type (-1: the
    /// thread's current device); each index has its own.
    pub generator_default:
        unsafe extern "C" fn(device_type: i32, index: i32, out: *mut OpalGenerator) -> OpalStatus,
    /// (1.4) Releases an owned generator handle (null is ignored).
    pub generator_release: unsafe extern "C" fn(g: OpalGenerator),
    /// (1.4) Seeds the generator: its stream restarts at offset 0 of `seed`.
    pub generator_manual_seed: unsafe extern "C" fn(g: OpalGenerator, seed: u64) -> OpalStatus,
    /// (1.4) Writes the generator's seed to `out`.
    pub generator_initial_seed: unsafe extern "C" fn(g: OpalGenerator, out: *mut u64) -> OpalStatus,
    /// (1.4) Draws `n` values of [`draw`] kind `kind` into `out` (room for `n`
    /// of them), in order, under one lock: exactly the numbers the host's own
    /// kernels draw for that kind.
    pub generator_draw:
        unsafe extern "C" fn(g: OpalGenerator, kind: u32, n: usize, out: *mut c_void) -> OpalStatus,
    /// (1.4) Reserves `blocks` Philox-4x32-10 blocks for a kernel that generates
    /// them itself: writes the seed (the key) and the first block's offset (the
    /// counter) and advances the generator past them.
    pub generator_reserve: unsafe extern "C" fn(
        g: OpalGenerator,
        blocks: u64,
        seed: *mut u64,
        offset: *mut u64,
    ) -> OpalStatus,
    /// (1.4) Writes the generator's state (at most `cap` bytes) to `buf` and its
    /// length to `len`; a `cap` too small writes nothing, sets `len` and fails.
    pub generator_get_state: unsafe extern "C" fn(
        g: OpalGenerator,
        buf: *mut u8,
        cap: usize,
        len: *mut usize,
    ) -> OpalStatus,
    /// (1.4) Restores a state from `generator_get_state` (a refused state
    /// changes nothing).
    pub generator_set_state:
        unsafe extern "C" fn(g: OpalGenerator, bytes: *const u8, len: usize) -> OpalStatus,
}

/// A generator handle: a host generator (its state shared by every handle to it).
/// Owned handles (from [`OpalHostApi::generator_default`]) are released once;
/// borrowed ones ([`tag::GENERATOR`] arguments) are valid for the call.
#[repr(transparent)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OpalGenerator(pub *mut c_void);

/// Kinds of [`OpalHostApi::generator_draw`]: what one value is.
pub mod draw {
    /// `u32`: 32 random bits.
    pub const U32: u32 = 0;
    /// `f32`: uniform in `[0, 1)` from 24 random bits (the host's `rand` for
    /// float32).
    pub const UNIFORM_F32: u32 = 1;
    /// `f64`: uniform in `[0, 1)` from 53 random bits (the host's `rand` for
    /// float64).
    pub const UNIFORM_F64: u32 = 2;
    /// `f64`: standard normal (the host's `randn`).
    pub const NORMAL_F64: u32 = 3;
}

/// The size of the 1.0 layout of [`OpalHostApi`].
pub const HOST_API_SIZE_1_0: usize = core::mem::offset_of!(OpalHostApi, tensor_empty_info);

/// The size of the 1.1 to 1.3 layout of [`OpalHostApi`] (a 1.4 plugin checks
/// `size` covers [`OpalHostApi::current_device`] before calling it).
pub const HOST_API_SIZE_1_3: usize = core::mem::offset_of!(OpalHostApi, current_device);

/// A kernel: `user` is the pointer given at registration; `op` the qualified op
/// name; `args` borrowed; `rets` has room for `nrets` values (the op's returns),
/// pre-set to [`OpalValue::NONE`]. Tensor handles written to `rets` are owned by
/// the host after the call. Return [`code::DECLINED`] to run the fallback instead.
pub type OpalKernelFn = unsafe extern "C" fn(
    user: *mut c_void,
    op: OpalStr,
    args: *const OpalValue,
    nargs: usize,
    rets: *mut OpalValue,
    nrets: usize,
) -> OpalStatus;

/// A device allocator of the plugin's device type.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct OpalAllocator {
    /// Byte size of this struct as the plugin compiled it.
    pub size: usize,
    /// Passed back to both functions.
    pub user: *mut c_void,
    /// `nbytes` (> 0) bytes aligned to 64 on device `index`, or null on failure.
    pub alloc: unsafe extern "C" fn(user: *mut c_void, nbytes: usize, device_index: i32) -> *mut u8,
    /// Frees what `alloc` returned, with the same size and index.
    pub free:
        unsafe extern "C" fn(user: *mut c_void, ptr: *mut u8, nbytes: usize, device_index: i32),
    /// 1 when the host may read and write this memory directly.
    pub host_accessible: i32,
}

/// Copies between host memory and the plugin's device, used by the host's CPU
/// fallback and device transfers.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct OpalTransfer {
    /// Byte size of this struct as the plugin compiled it.
    pub size: usize,
    /// Passed back to both functions.
    pub user: *mut c_void,
    /// Writes device tensor `src` (any strides) into `dst`, a contiguous CPU tensor
    /// the host made with the same sizes and dtype.
    pub to_cpu:
        unsafe extern "C" fn(user: *mut c_void, src: OpalTensor, dst: OpalTensor) -> OpalStatus,
    /// Writes CPU tensor `src` into device tensor `dst` (same sizes and dtype).
    pub from_cpu:
        unsafe extern "C" fn(user: *mut c_void, src: OpalTensor, dst: OpalTensor) -> OpalStatus,
}

/// What a plugin may register during its entry (valid only during that call).
#[repr(C)]
pub struct OpalRegistrar {
    /// Byte size of this table as the host compiled it.
    pub size: usize,
    /// Host state for this plugin; pass it back as `ctx`.
    pub ctx: *mut c_void,
    /// Registers a kernel for op `name` at the plugin's dispatch key. The op must be
    /// listed in the manifest; `user` is passed back to `kernel`.
    pub register_kernel: unsafe extern "C" fn(
        ctx: *mut c_void,
        name: OpalStr,
        kernel: OpalKernelFn,
        user: *mut c_void,
    ) -> OpalStatus,
    /// Registers a boxed fallback for every op without a kernel at the plugin's key.
    pub register_fallback: unsafe extern "C" fn(
        ctx: *mut c_void,
        kernel: OpalKernelFn,
        user: *mut c_void,
    ) -> OpalStatus,
    /// Uses the host's CPU fallback (copies through `transfer`) for ops without a
    /// kernel; also what [`code::DECLINED`] runs.
    pub use_cpu_fallback:
        unsafe extern "C" fn(ctx: *mut c_void, transfer: *const OpalTransfer) -> OpalStatus,
    /// Makes `alloc` the allocator of new tensors on the plugin's device.
    pub register_allocator:
        unsafe extern "C" fn(ctx: *mut c_void, alloc: *const OpalAllocator) -> OpalStatus,
    /// (1.1) Registers a typed entry for op `name`, whose C signature is described
    /// by `signature` ([`typed`]); `entry` is that function, erased; `user` is passed
    /// back as its first argument. The op's boxed kernel must be registered first:
    /// it serves boxed calls and the calls the typed entry cannot take. A host that
    /// has no typed bridge for the op's signature keeps the boxed kernel only.
    pub register_typed_kernel: unsafe extern "C" fn(
        ctx: *mut c_void,
        name: OpalStr,
        signature: OpalStr,
        entry: OpalTypedFn,
        user: *mut c_void,
    ) -> OpalStatus,
    /// (1.2) Registers an out entry for op `name`: a typed entry ([`typed`], the
    /// same `signature` code) that writes its result into a tensor the host made by
    /// `rule` ([`result_rule`]) instead of making one. Its C signature is the typed
    /// entry's with the last parameter `const OpalTensorArg* out` (the result,
    /// borrowed, for the entry to write) instead of `OpalTensor* rets`. The op's
    /// typed entry must be registered first: it serves the calls the rule does not
    /// cover. A host that did not bind the typed entry, or does not know `rule`,
    /// ignores the out entry.
    pub register_out_kernel: unsafe extern "C" fn(
        ctx: *mut c_void,
        name: OpalStr,
        signature: OpalStr,
        rule: u32,
        entry: OpalTypedFn,
        user: *mut c_void,
    ) -> OpalStatus,
    /// (1.4) Makes `hooks` the device runtime of the plugin's device type (device
    /// count, current device, streams, events, memory statistics, pinned memory,
    /// backend metadata, autocast dtypes). The host copies the table (and what it
    /// points to) during the call; `hooks.user` must stay valid for the process.
    pub register_device_hooks:
        unsafe extern "C" fn(ctx: *mut c_void, hooks: *const OpalDeviceHooks) -> OpalStatus,
    /// (1.4) Differentiates op `name` (listed in the manifest, with the host's
    /// schema) itself: the host registers a kernel at the plugin's autograd key
    /// (ahead of the one generated from derivatives) that runs the op below the
    /// autograd keys and, when an input requires grad, records a node named
    /// `node` whose backward calls `backward` (a kernel) with the gradients of
    /// the op's tensor returns (`NONE` for none), then its tensor arguments, then
    /// its tensor returns; `backward` returns one gradient per tensor argument
    /// (`NONE`: none).
    pub register_autograd_kernel: unsafe extern "C" fn(
        ctx: *mut c_void,
        name: OpalStr,
        node: OpalStr,
        backward: OpalKernelFn,
        user: *mut c_void,
    ) -> OpalStatus,
    /// (1.4) Declares an operator of the plugin's own namespace (its device
    /// name): `schema` is qualified (`emu::fused_add_relu(Tensor self, Tensor
    /// other) -> Tensor`, no default values), and `kernel` serves it at the
    /// plugin's dispatch key. Callable by name (`Dispatcher::call_boxed`) and
    /// from exported programs (`torch.ops.emu.fused_add_relu.default`).
    pub register_custom_op: unsafe extern "C" fn(
        ctx: *mut c_void,
        schema: OpalStr,
        kernel: OpalKernelFn,
        user: *mut c_void,
    ) -> OpalStatus,
    /// (1.4, appended last) Makes `comm` the collective communicator of the
    /// plugin's device type: `opal-distributed` runs the collectives it has a
    /// function for through it. The host copies the table during the call;
    /// `comm.user` must stay valid for the process. A plugin checks `size`
    /// covers this field ([`REGISTRAR_SIZE_1_4_BEFORE_COMM`] does not).
    pub register_communicator:
        unsafe extern "C" fn(ctx: *mut c_void, comm: *const OpalCommunicator) -> OpalStatus,
}

/// The size of the 1.4 layout of [`OpalRegistrar`] before
/// [`OpalRegistrar::register_communicator`] was appended: a host of that layout
/// has every other 1.4 function.
pub const REGISTRAR_SIZE_1_4_BEFORE_COMM: usize =
    core::mem::offset_of!(OpalRegistrar, register_communicator);

/// The size of the 1.0 layout of [`OpalRegistrar`] (a reader of an older producer's
/// table checks `size` against this before using the 1.0 fields).
pub const REGISTRAR_SIZE_1_0: usize = core::mem::offset_of!(OpalRegistrar, register_typed_kernel);

/// The size of the 1.1 layout of [`OpalRegistrar`] (a plugin checks `size` covers
/// [`OpalRegistrar::register_out_kernel`] before calling it).
pub const REGISTRAR_SIZE_1_1: usize = core::mem::offset_of!(OpalRegistrar, register_out_kernel);

/// The size of the 1.2 and 1.3 layout of [`OpalRegistrar`] (a plugin checks
/// `size` covers [`OpalRegistrar::register_device_hooks`] before calling it).
pub const REGISTRAR_SIZE_1_3: usize = core::mem::offset_of!(OpalRegistrar, register_device_hooks);

/// How the host makes the result of an out entry
/// ([`OpalRegistrar::register_out_kernel`], ABI 1.2).
///
/// An out entry's C type is a typed entry's ([`typed`]) with the last parameter
/// `const OpalTensorArg* out` instead of `OpalTensor* rets`:
///
/// `OpalStatus entry(void* user, <one parameter per code>, const OpalTensorArg* out)`
///
/// `out` is the result the host made by the registration's rule, borrowed, with its
/// metadata: the entry writes its elements (the tensor is the entry's alone during
/// the call) and returns [`code::OK`]; the host then returns that
/// tensor. On [`code::DECLINED`] or an error the host drops
/// it and proceeds as for the typed entry (the fallback, or the error).
pub mod result_rule {
    /// Elementwise: when every tensor argument is defined and has the sizes, dtype
    /// and device of the first one, the result is a new contiguous tensor of those
    /// sizes, dtype and device (from the device's allocator), and the host calls the
    /// out entry; otherwise it calls the op's typed entry. The plugin declares it
    /// only for ops whose result then has that geometry (`add.Tensor`, `relu`, ...);
    /// an entry that finds other arguments (an `alpha` its dtype cannot take) returns
    /// [`super::code::DECLINED`] or an error, as any kernel.
    pub const ELEMENTWISE: u32 = 1;
}

/// An erased typed entry: a function whose real C signature the `signature` string
/// of its registration describes ([`typed`]); it is called only through that type.
pub type OpalTypedFn = unsafe extern "C" fn();

/// A `Scalar` passed by value to a typed entry.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct OpalScalar {
    /// A [`scalar_kind`].
    pub kind: u32,
    /// Zero.
    pub reserved: u32,
    /// The integer (and bool 0/1) payload.
    pub i: i64,
    /// The float payload (real part).
    pub d: f64,
    /// The imaginary part.
    pub d2: f64,
}

/// A tensor argument of a typed entry: the borrowed handle and its metadata, as
/// [`OpalHostApi::tensor_info`] would give them (so the entry needs no call back to
/// the host to read them). Both are valid for the call; the handle is borrowed.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct OpalTensorArg {
    /// The borrowed handle.
    pub handle: OpalTensor,
    /// Its metadata (`info.size` is the host's struct size).
    pub info: OpalTensorInfo,
}

/// An `int[]` passed to a typed entry: borrowed, `len` elements at `ptr`. For
/// `int[]?`, a null `ptr` is `None` (an empty list has a non-null `ptr`).
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct OpalIntArray {
    /// The first element (null: `None` for `int[]?`; with `len` 0 an empty list).
    pub ptr: *const i64,
    /// Number of elements.
    pub len: usize,
}

/// Typed entries (ABI 1.1): per op, a C function whose parameters follow the op's
/// schema. The signature string of a registration is one code per argument, in
/// schema order, then `>` and the number of returned tensors (`"TTs>1"` for
/// `add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`). The
/// function is
///
/// `OpalStatus entry(void* user, <one parameter per code>, OpalTensor* rets)`
///
/// with `rets` room for the returned tensors, pre-set to null: each is a new handle
/// the host takes over (as a boxed kernel's returns). Tensor arguments are
/// [`OpalTensorArg`]s: borrowed handles (the host keeps them alive and held for the
/// call; no refcount changes) with their metadata.
/// Returning [`code::DECLINED`] runs the fallback with the call's arguments, as for
/// boxed kernels. Ops with other argument types or returns have no typed entry.
pub mod typed {
    /// `Tensor`, `Tensor(a!)`: a `const` [`super::OpalTensorArg`] pointer (borrowed).
    pub const TENSOR: u8 = b'T';
    /// `Tensor?`: a `const` [`super::OpalTensorArg`] pointer, null for `None`.
    pub const OPT_TENSOR: u8 = b't';
    /// `int`, `SymInt`: `i64`.
    pub const INT: u8 = b'i';
    /// `float`: `f64`.
    pub const FLOAT: u8 = b'f';
    /// `bool`: `i32` 0 or 1.
    pub const BOOL: u8 = b'b';
    /// `Scalar`: an [`super::OpalScalar`] by value.
    pub const SCALAR: u8 = b's';
    /// `ScalarType`: `i32`, a [`super::dtype`] code.
    pub const DTYPE: u8 = b'D';
    /// `ScalarType?`: `i32`, a [`super::dtype`] code or -1 for `None`.
    pub const OPT_DTYPE: u8 = b'd';
    /// `int[]`, `SymInt[]`, `int[N]`: an [`super::OpalIntArray`].
    pub const INT_LIST: u8 = b'l';
    /// `int[]?`: an [`super::OpalIntArray`], null `ptr` for `None`.
    pub const OPT_INT_LIST: u8 = b'L';
    /// Separates the argument codes from the number of returned tensors.
    pub const RETURNS: u8 = b'>';
}

/// The entry function ([`ENTRY_SYMBOL`]): called once, after the manifest and the
/// version symbol were validated. `config` is the manifest's `"config"` string.
pub type OpalPluginEntry = unsafe extern "C" fn(
    host: *const OpalHostApi,
    reg: *const OpalRegistrar,
    config: OpalStr,
) -> OpalStatus;
