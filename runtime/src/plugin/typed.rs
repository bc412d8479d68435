//! Typed bridges (ABI 1.1): host typed kernels that call a plugin's typed entry
//! directly, with no boxing (`docs/abi.md`, "Typed entries").
//!
//! A typed kernel registered with the dispatcher is a plain fn pointer of the op's
//! signature type, so it cannot carry the plugin's entry. Each supported signature
//! ("shape", e.g. `fn(DispatchKeySet, &Tensor, &Tensor, &Scalar) -> Result<Tensor>`)
//! therefore has a pool of [`POOL`] bridges per PrivateUse key, instantiated at
//! compile time (`bridge::<KEY, INDEX>`); binding an op at load time stores its entry
//! in the next free cell of the pool and registers that bridge. A bridge reads its
//! cell (one acquire load), converts its arguments to the C types of the
//! signature code (tensors as borrowed handles, the address of the caller's
//! `Tensor` with no refcount change, next to their metadata) and calls the entry;
//! the returned handle is taken over. A declined call runs the plugin's fallback with the boxed arguments; an
//! error or a caught panic becomes an `Err` naming op and plugin.
//!
//! An op may also have an out entry (ABI 1.2, `docs/abi.md`, "Out entries"): when
//! the call fits the entry's result rule (for `ELEMENTWISE`: every tensor argument
//! defined, with the first one's sizes, dtype and device, and every `Scalar` of a
//! kind that dtype takes), the bridge makes the result itself, with the device's
//! allocator, and calls the out entry to write it; the plugin then makes no call
//! back to the host and no handle crosses back. Other calls take the typed entry.
//!
//! Ops whose signature has no shape here, or whose pool is full, keep the boxed
//! path. Only ops whose plugin schema equals the host's (identity adapter plan) are
//! bound: a typed entry's C signature follows the plugin's schema, and the
//! defaulted-argument adapters need the boxed path.
//!
//! Owns: the shapes, their pools and binding. Must not: parse manifests or decide
//! adapter plans.

use super::host::{info_of, run_fallback, Fallback};
use super::{results, value};
use crate::device::Device;
use crate::dispatch::BoxedKernelFn;
use crate::dispatch::{DispatchKey, DispatchKeySet, KernelFunction, OperatorHandle};
use crate::dtype::DType;
use crate::error::{OpalError, Result};
use crate::ivalue::{FromIValue, IValue, IntoIValue, Stack};
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use opal_plugin_abi::{code, scalar_kind, typed as tc, OpalIntArray, OpalScalar, OpalStatus};
use opal_plugin_abi::{OpalTensor, OpalTensorArg, OpalTensorInfo, OpalTypedFn};
use std::any::TypeId;
use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Arc;

/// Bridges per shape and PrivateUse key: the first `POOL` ops of one signature a
/// plugin binds take the typed path, the others keep the boxed one.
pub const POOL: usize = 16;
const KEYS: usize = 3;

/// The plugin's typed entry for one op (and its out entry, if any), and what a
/// declined call needs. Leaked when bound (plugins are never unloaded), never freed.
pub struct TypedEntry {
    f: OpalTypedFn,
    user: *mut c_void,
    /// The out entry (`ELEMENTWISE`, the one rule of ABI 1.2) and its user pointer.
    out: Option<(OpalTypedFn, *mut c_void)>,
    plugin: Arc<str>,
    op: OperatorHandle,
    fallback: Fallback,
}

// SAFETY: the ABI requires typed entries (and what `user` refers to) to be callable
// from any thread, concurrently (docs/abi.md, "Threads"); the rest is Send + Sync.
unsafe impl Send for TypedEntry {}
// SAFETY: as above; the entry is immutable once bound.
unsafe impl Sync for TypedEntry {}

impl TypedEntry {
    /// An entry for `op` of `plugin`, with the fallback of declined calls.
    pub fn new(
        f: OpalTypedFn,
        user: *mut c_void,
        plugin: Arc<str>,
        op: OperatorHandle,
        fallback: Fallback,
    ) -> TypedEntry {
        TypedEntry {
            f,
            user,
            out: None,
            plugin,
            op,
            fallback,
        }
    }

    /// Adds the out entry `f` (result rule `ELEMENTWISE`) with its user pointer.
    pub fn with_out(mut self, f: OpalTypedFn, user: *mut c_void) -> TypedEntry {
        self.out = Some((f, user));
        self
    }

    /// The call did not return a plain `OK`: takes the return of an `OK` with a
    /// message (freeing the message); otherwise releases what the entry returned,
    /// then runs the fallback for `DECLINED`, or turns the status into an error.
    #[cold]
    #[inline(never)]
    fn failed(
        &self,
        st: OpalStatus,
        ret: Ret,
        ks: DispatchKeySet,
        args: impl FnOnce() -> Stack,
    ) -> Result<Tensor> {
        let name = self.op.name();
        if st.code == code::OK {
            // SAFETY: a status from the plugin, consumed once (frees its message).
            let _ = unsafe { st.into_result() };
            return match ret {
                Ret::Handle(h) => {
                    let stack = args();
                    let first = stack.first().and_then(|v| match v {
                        IValue::Tensor(t) if t.is_defined() => Some(t.device()),
                        _ => None,
                    });
                    self.result(h, first, || results::devices_in(&stack))
                }
                Ret::Out(t) => Ok(t),
            };
        }
        ret.discard();
        if st.code == code::DECLINED {
            // SAFETY: a status from the plugin, consumed once (frees its message).
            let _ = unsafe { st.into_result() };
            let mut stack = args();
            run_fallback(
                &self.plugin,
                &self.fallback,
                &self.op,
                ks,
                &mut stack,
                || {
                    format!(
                    "{name}: plugin '{}''s kernel declined the call and the plugin has no fallback",
                    self.plugin
                )
                },
            )?;
            let v = stack
                .pop()
                .ok_or_else(|| OpalError::msg(format!("{name}: the fallback returned nothing")))?;
            return Tensor::from_ivalue(v);
        }
        // SAFETY: a status from the plugin, consumed once.
        let e = unsafe {
            value::check(st, || {
                format!("{name}: plugin '{}''s typed kernel", self.plugin)
            })
        };
        Err(e
            .err()
            .unwrap_or_else(|| OpalError::msg(format!("{name}: unexpected status"))))
    }
}

impl TypedEntry {
    /// Takes over the handle `h` a typed entry returned, when it is a live owned
    /// handle whose tensor passes the result checks (module `results`; `first`
    /// is the device of the first tensor argument, `args` the devices of all).
    #[inline]
    fn result(
        &self,
        h: OpalTensor,
        first: Option<Device>,
        args: impl FnOnce() -> Vec<Device>,
    ) -> Result<Tensor> {
        value::take(h)
            .and_then(|t| results::check_tensor(&self.plugin, &t, first, args).map(|()| t))
            .map_err(|e| self.refused(e))
    }

    #[cold]
    #[inline(never)]
    fn refused(&self, e: OpalError) -> OpalError {
        OpalError::msg(format!(
            "{}: plugin '{}''s typed kernel returned a value the host refuses: {e}",
            self.op.name(),
            self.plugin
        ))
    }
}

/// What an entry returned: the handle a typed entry wrote, or the result the host
/// made for an out entry.
enum Ret {
    Handle(OpalTensor),
    Out(Tensor),
}

impl Ret {
    /// Drops what a failed call returned (a handle only when it is a live one the
    /// host issued: `take` refuses anything else untouched).
    fn discard(self) {
        match self {
            Ret::Handle(h) if !h.0.is_null() => drop(value::take(h)),
            Ret::Handle(_) => {}
            Ret::Out(t) => drop(t),
        }
    }
}

/// A host argument type of a typed signature: its C type and code (`typed` codes).
pub trait HostArg: IntoIValue + Copy {
    /// The C parameter type.
    type C: Copy;
    /// What the C value points to, made before the call and alive during it.
    type Extra;
    /// The signature code.
    const CODE: u8;
    /// The data the C value points to (tensor metadata).
    fn extra(self) -> Result<Self::Extra>;
    /// The C value (borrowing the host value and `extra` for the call).
    fn to_c(self, extra: &Self::Extra) -> Self::C;
    /// True when this argument (with its `extra`) fits the `ELEMENTWISE` result
    /// rule for a call whose first tensor argument is `first` (defined, with the
    /// metadata `fi`): a tensor with `first`'s sizes, dtype and device, an absent
    /// optional tensor, a `Scalar` of a kind `first`'s dtype takes, or any other
    /// value.
    #[inline(always)]
    fn elementwise_with(self, extra: &Self::Extra, first: &Tensor, fi: &OpalTensorInfo) -> bool {
        let _ = (extra, first, fi);
        true
    }
}

/// A tensor argument's metadata that fits the `ELEMENTWISE` rule with the first
/// one's, `fi` (see [`HostArg::elementwise_with`]): compared on the metadata
/// already made for the call, so the tensors are not read twice.
#[inline(always)]
fn like(ti: &OpalTensorInfo, fi: &OpalTensorInfo) -> bool {
    ti.defined != 0
        && ti.dtype == fi.dtype
        && ti.device_type == fi.device_type
        && ti.device_index == fi.device_index
        && ti.ndim == fi.ndim
        // SAFETY: both infos were made for this call from tensors the caller keeps
        // alive; their arrays hold `ndim` sizes each.
        && unsafe {
            (0..ti.ndim).all(|d| *ti.sizes.add(d) == *fi.sizes.add(d))
        }
}

/// The metadata of `out`, a tensor just made contiguous with the sizes, dtype and
/// device of the argument whose metadata is `like`: only what differs is read
/// (its element count is `like`'s).
#[inline(always)]
fn out_arg(out: &Tensor, like: &OpalTensorInfo) -> OpalTensorArg {
    let (sizes, strides, _, _) = out.geometry();
    OpalTensorArg {
        handle: value::borrow(out),
        info: OpalTensorInfo {
            ndim: sizes.len(),
            sizes: sizes.as_ptr(),
            strides: strides.as_ptr(),
            storage_offset: 0,
            // Null for meta and empty tensors, as `like`'s (same device, same sizes).
            data: if like.data.is_null() {
                std::ptr::null_mut()
            } else {
                out.storage().data_ptr().cast()
            },
            contiguous: 1,
            ..*like
        },
    }
}

/// A tensor argument's handle and metadata.
#[inline(always)]
fn tensor_arg(t: &Tensor) -> Result<OpalTensorArg> {
    Ok(OpalTensorArg {
        handle: value::borrow(t),
        info: info_of(t)?,
    })
}

impl HostArg for &Tensor {
    type C = *const OpalTensorArg;
    type Extra = OpalTensorArg;
    const CODE: u8 = tc::TENSOR;
    #[inline(always)]
    fn extra(self) -> Result<OpalTensorArg> {
        tensor_arg(self)
    }
    #[inline(always)]
    fn to_c(self, extra: &OpalTensorArg) -> *const OpalTensorArg {
        extra
    }
    #[inline(always)]
    fn elementwise_with(self, extra: &OpalTensorArg, _: &Tensor, fi: &OpalTensorInfo) -> bool {
        like(&extra.info, fi)
    }
}

impl HostArg for Option<&Tensor> {
    type C = *const OpalTensorArg;
    type Extra = Option<OpalTensorArg>;
    const CODE: u8 = tc::OPT_TENSOR;
    #[inline(always)]
    fn extra(self) -> Result<Option<OpalTensorArg>> {
        self.map(tensor_arg).transpose()
    }
    #[inline(always)]
    fn to_c(self, extra: &Option<OpalTensorArg>) -> *const OpalTensorArg {
        extra
            .as_ref()
            .map_or(std::ptr::null(), |e| e as *const OpalTensorArg)
    }
    #[inline(always)]
    fn elementwise_with(
        self,
        extra: &Option<OpalTensorArg>,
        _: &Tensor,
        fi: &OpalTensorInfo,
    ) -> bool {
        extra.as_ref().is_none_or(|e| like(&e.info, fi))
    }
}

/// `HostArg` for types whose C value needs nothing beside it.
macro_rules! plain_arg {
    ($($t:ty => $c:ty, $code:expr, |$v:ident| $to:expr;)*) => {$(
        impl HostArg for $t {
            type C = $c;
            type Extra = ();
            const CODE: u8 = $code;
            #[inline(always)]
            fn extra(self) -> Result<()> {
                Ok(())
            }
            #[inline(always)]
            fn to_c(self, _: &()) -> $c {
                let $v = self;
                $to
            }
        }
    )*};
}

plain_arg! {
    i64 => i64, tc::INT, |i| i;
    f64 => f64, tc::FLOAT, |d| d;
    bool => i32, tc::BOOL, |b| i32::from(b);
    DType => i32, tc::DTYPE, |d| value::dtype_code(d);
    Option<DType> => i32, tc::OPT_DTYPE, |d| d.map_or(-1, value::dtype_code);
    &[i64] => OpalIntArray, tc::INT_LIST, |l| OpalIntArray { ptr: l.as_ptr(), len: l.len() };
    // A slice's pointer is never null (an empty one dangles), so null is `None`.
    Option<&[i64]> => OpalIntArray, tc::OPT_INT_LIST, |l| l.map_or(
        OpalIntArray { ptr: std::ptr::null(), len: 0 },
        |l| OpalIntArray { ptr: l.as_ptr(), len: l.len() },
    );
}

impl HostArg for &Scalar {
    type C = OpalScalar;
    type Extra = ();
    const CODE: u8 = tc::SCALAR;
    #[inline(always)]
    fn extra(self) -> Result<()> {
        Ok(())
    }
    #[inline(always)]
    fn to_c(self, _: &()) -> OpalScalar {
        scalar(self)
    }
    /// A `Scalar` the first tensor's dtype takes without promotion: any real
    /// number for a floating dtype, an integer or bool for an integral one, a
    /// bool for bool, anything for a complex one.
    #[inline(always)]
    fn elementwise_with(self, _: &(), first: &Tensor, _: &OpalTensorInfo) -> bool {
        let d = first.dtype();
        match self {
            Scalar::Complex(..) => d.is_complex(),
            Scalar::Float(_) => d.is_floating_point() || d.is_complex(),
            Scalar::Int(_) => d != DType::Bool,
            Scalar::Bool(_) => true,
        }
    }
}

#[inline(always)]
fn scalar(s: &Scalar) -> OpalScalar {
    let (kind, i, d, d2) = match *s {
        Scalar::Int(i) => (scalar_kind::INT, i, 0.0, 0.0),
        Scalar::Float(f) => (scalar_kind::FLOAT, 0, f, 0.0),
        Scalar::Bool(b) => (scalar_kind::BOOL, i64::from(b), 0.0, 0.0),
        Scalar::Complex(re, im) => (scalar_kind::COMPLEX, 0, re, im),
    };
    OpalScalar {
        kind,
        reserved: 0,
        i,
        d,
        d2,
    }
}

/// One shape's binding: its fn-pointer type's `TypeId`, its signature code, and
/// the binder that stores an entry in the pool and returns the kernel.
struct Shape {
    sig: fn() -> TypeId,
    code: fn() -> String,
    bind: fn(usize, TypedEntry, Arc<BoxedKernelFn>) -> Option<KernelFunction>,
}

/// The signature code of argument codes `args` returning `nret` tensors.
fn code_of(args: &[u8], nret: u8) -> String {
    let mut s: Vec<u8> = args.to_vec();
    s.push(tc::RETURNS);
    s.push(b'0' + nret);
    String::from_utf8_lossy(&s).into_owned()
}

/// The [`POOL`] bridges `$f::<$k, 0..POOL>` of one key, as `$sig`s.
macro_rules! pool_row {
    ($f:ident, $sig:ty, $k:literal) => {
        [
            $f::<$k, 0> as $sig,
            $f::<$k, 1>,
            $f::<$k, 2>,
            $f::<$k, 3>,
            $f::<$k, 4>,
            $f::<$k, 5>,
            $f::<$k, 6>,
            $f::<$k, 7>,
            $f::<$k, 8>,
            $f::<$k, 9>,
            $f::<$k, 10>,
            $f::<$k, 11>,
            $f::<$k, 12>,
            $f::<$k, 13>,
            $f::<$k, 14>,
            $f::<$k, 15>,
        ]
    };
}

macro_rules! shapes {
    ($($name:ident: ($a0:ident: &Tensor $(, $a:ident: $t:ty)*);)*) => {
        $(mod $name {
            use super::*;

            pub type Sig = fn(DispatchKeySet, &Tensor $(, $t)*) -> Result<Tensor>;

            static CELLS: [[AtomicPtr<TypedEntry>; POOL]; KEYS] =
                [const { [const { AtomicPtr::new(std::ptr::null_mut()) }; POOL] }; KEYS];
            static NEXT: [AtomicUsize; KEYS] = [const { AtomicUsize::new(0) }; KEYS];

            #[inline(never)]
            fn bridge<const K: usize, const I: usize>(
                ks: DispatchKeySet,
                $a0: &Tensor,
                $($a: $t),*
            ) -> Result<Tensor> {
                let p = CELLS[K][I].load(Ordering::Acquire);
                // SAFETY: non-null cell pointers are leaked `TypedEntry`s, never freed.
                let Some(e) = (unsafe { p.as_ref() }) else {
                    return Err(OpalError::msg("a typed plugin bridge was called unbound"));
                };
                let $a0 = ($a0, HostArg::extra($a0)?);
                $(let $a = ($a, HostArg::extra($a)?);)*
                if let Some((g, user)) = e.out {
                    let fi = &$a0.1.info;
                    if fi.defined != 0 $(&& HostArg::elementwise_with($a.0, &$a.1, $a0.0, fi))* {
                        type OutFn = unsafe extern "C" fn(
                            *mut c_void,
                            <&Tensor as HostArg>::C,
                            $(<$t as HostArg>::C,)*
                            *const OpalTensorArg,
                        ) -> OpalStatus;
                        // SAFETY: the out entry was bound only when its registration's
                        // signature code was this shape's, which names exactly this C
                        // type (the typed entry's, the result last).
                        let g = unsafe { std::mem::transmute::<OpalTypedFn, OutFn>(g) };
                        // The `ELEMENTWISE` rule: a new contiguous tensor like `$a0`,
                        // whose sizes its metadata already holds.
                        // SAFETY: `fi` was made this call from `$a0`, defined, so
                        // `sizes` is its sizes slice, alive while the caller holds it.
                        let sizes = unsafe { std::slice::from_raw_parts(fi.sizes, fi.ndim) };
                        let out = Tensor::empty(sizes, $a0.0.dtype(), $a0.0.device())?;
                        let o = out_arg(&out, fi);
                        // SAFETY: borrowed handles of tensors the caller keeps alive
                        // (and held) for the call, with their metadata (alive until
                        // after the call); the result is new, ours, and alive.
                        let st = unsafe {
                            g(user, HostArg::to_c($a0.0, &$a0.1), $(HostArg::to_c($a.0, &$a.1),)* &o)
                        };
                        if st.code == code::OK && st.msg_ptr.is_null() {
                            return Ok(out);
                        }
                        return e.failed(st, Ret::Out(out), ks, || {
                            vec![$a0.0.into_ivalue() $(, $a.0.into_ivalue())*]
                        });
                    }
                }
                type CFn = unsafe extern "C" fn(
                    *mut c_void,
                    <&Tensor as HostArg>::C,
                    $(<$t as HostArg>::C,)*
                    *mut OpalTensor,
                ) -> OpalStatus;
                // SAFETY: the entry was bound only when its registration's signature
                // code was this shape's, which names exactly this C type.
                let f = unsafe { std::mem::transmute::<OpalTypedFn, CFn>(e.f) };
                let mut out = [OpalTensor(std::ptr::null_mut())];
                // SAFETY: borrowed handles of tensors the caller keeps alive (and held)
                // for the call, with their metadata (alive until after the call);
                // room for the one returned handle.
                let st = unsafe {
                    f(e.user, HostArg::to_c($a0.0, &$a0.1), $(HostArg::to_c($a.0, &$a.1),)* out.as_mut_ptr())
                };
                if st.code == code::OK && st.msg_ptr.is_null() {
                    return e.result(out[0], Some($a0.0.device()), || {
                        results::devices_in(&[$a0.0.into_ivalue() $(, $a.0.into_ivalue())*])
                    });
                }
                e.failed(st, Ret::Handle(out[0]), ks, || {
                    vec![$a0.0.into_ivalue() $(, $a.0.into_ivalue())*]
                })
            }

            fn table(k: usize) -> [Sig; POOL] {
                match k {
                    0 => pool_row!(bridge, Sig, 0),
                    1 => pool_row!(bridge, Sig, 1),
                    _ => pool_row!(bridge, Sig, 2),
                }
            }

            pub(super) fn bind(
                k: usize,
                e: TypedEntry,
                boxed: Arc<BoxedKernelFn>,
            ) -> Option<KernelFunction> {
                let i = NEXT[k].fetch_add(1, Ordering::Relaxed);
                if i >= POOL {
                    return None;
                }
                let e: &'static TypedEntry = Box::leak(Box::new(e));
                CELLS[k][i].store((e as *const TypedEntry).cast_mut(), Ordering::Release);
                Some(KernelFunction::typed(table(k)[i], boxed))
            }

            pub(super) fn code() -> String {
                code_of(&[<&Tensor as HostArg>::CODE $(, <$t as HostArg>::CODE)*], 1)
            }
        })*

        static SHAPES: &[Shape] = &[$(Shape {
            sig: || TypeId::of::<$name::Sig>(),
            code: $name::code,
            bind: $name::bind,
        }),*];
    };
}

shapes! {
    t_t: (a: &Tensor);
    tt_t: (a: &Tensor, b: &Tensor);
    ttt_t: (a: &Tensor, b: &Tensor, c: &Tensor);
    tts_t: (a: &Tensor, b: &Tensor, c: &Scalar);
    ts_t: (a: &Tensor, b: &Scalar);
    tss_t: (a: &Tensor, b: &Scalar, c: &Scalar);
    ti_t: (a: &Tensor, b: i64);
    tl_t: (a: &Tensor, b: &[i64]);
    tlb_t: (a: &Tensor, b: &[i64], c: bool);
    td_t: (a: &Tensor, b: Option<DType>);
    tlbd_opt_t: (a: &Tensor, b: Option<&[i64]>, c: bool, d: Option<DType>);
}

/// The PrivateUse index (0..3) of `key`.
fn key_index(key: DispatchKey) -> Option<usize> {
    match key {
        DispatchKey::PrivateUse1 => Some(0),
        DispatchKey::PrivateUse2 => Some(1),
        DispatchKey::PrivateUse3 => Some(2),
        _ => None,
    }
}

/// The typed kernel for `entry` (registered with signature code `code`) at `key`,
/// with `boxed` serving boxed calls: `Ok(None)` when the op's signature has no
/// shape here or its pool is full (the caller registers the boxed kernel), `Err`
/// when the plugin's code disagrees with the host's signature of the op.
pub fn bind(
    key: DispatchKey,
    code: &str,
    entry: TypedEntry,
    boxed: Arc<BoxedKernelFn>,
) -> std::result::Result<Option<KernelFunction>, String> {
    let Some(def) = entry.op.def() else {
        return Ok(None);
    };
    let Some(k) = key_index(key) else {
        return Ok(None);
    };
    let sig = (def.signature)();
    let Some(shape) = SHAPES.iter().find(|s| (s.sig)() == sig) else {
        return Ok(None);
    };
    let want = (shape.code)();
    if want != code {
        return Err(format!(
            "its typed entry has the signature code '{code}', the host's op needs '{want}'"
        ));
    }
    Ok((shape.bind)(k, entry, boxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_codes_follow_the_abi() {
        assert_eq!(tts_t::code(), "TTs>1");
        assert_eq!(tlbd_opt_t::code(), "TLbd>1");
        let mut seen = std::collections::HashSet::new();
        for s in SHAPES {
            assert!(seen.insert((s.sig)()), "one shape per signature");
        }
    }
}
