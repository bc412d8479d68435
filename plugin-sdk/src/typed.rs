//! Typed entries (ABI 1.1): per op, an `extern "C"` function whose parameters follow
//! the op's schema (`docs/abi.md`, "Typed entries"), so that the host calls it
//! without boxing. [`typed_entry!`](crate::typed_entry) writes one around a Rust
//! function; [`crate::Registrar::typed_kernel`] registers it after the op's boxed
//! kernel (which still serves boxed calls, adapted calls and hosts without a typed
//! bridge for the op).
//!
//! The argument classes are the marker types of this module ([`Tensor`],
//! [`OptTensor`], [`Int`], [`Float`], [`Bool`], [`Scalar`], [`DType`],
//! [`OptDType`], [`IntList`], [`OptIntList`]); each names its C type, its
//! signature code and the Rust parameter the kernel gets (the same types as the
//! generated `<Backend>PluginKernels` methods).
//!
//! Out entries (ABI 1.2) take the same arguments and, last, the result the host
//! made by a result rule ([`crate::abi::result_rule`]), to write instead of making
//! one: [`out_entry!`](crate::out_entry) writes one around a Rust function, and
//! [`crate::Registrar::out_kernel`] registers it after the op's typed entry.
//!
//! Owns: the typed argument conversions and the entry macros. Must not: keep
//! borrowed arguments past the call.

use crate::abi::OpalTensorArg;
use crate::abi::{self, scalar_kind, typed as tc, OpalIntArray, OpalScalar, OpalTensor};
use crate::{Error, Result};

/// An argument class of a typed entry.
pub trait TypedArg {
    /// The C parameter type.
    type Abi: Copy;
    /// What the entry makes of the C value for the call.
    type Local;
    /// What the kernel function receives.
    type Param<'a>
    where
        Self: 'a;
    /// The signature code ([`abi::typed`]).
    const CODE: u8;
    /// The local value of a C argument.
    ///
    /// # Safety
    /// `a` is an argument the host passed to a typed entry, valid for the call (a
    /// borrowed handle, an array of `len` elements), and the local is dropped
    /// before the entry returns.
    unsafe fn local(a: Self::Abi) -> Result<Self::Local>;
    /// The kernel's parameter, borrowing the local.
    fn param(l: &Self::Local) -> Self::Param<'_>;
}

macro_rules! class {
    ($(#[$doc:meta])* $name:ident, $abi:ty, $local:ty, $param:ty, $code:expr,
     |$a:ident| $mk:expr, |$l:ident| $pass:expr) => {
        $(#[$doc])*
        pub struct $name;
        impl TypedArg for $name {
            type Abi = $abi;
            type Local = $local;
            type Param<'a> = $param;
            const CODE: u8 = $code;
            #[inline(always)]
            unsafe fn local($a: $abi) -> Result<$local> {
                $mk
            }
            #[inline(always)]
            fn param($l: &$local) -> Self::Param<'_> {
                $pass
            }
        }
    };
}

class!(
    /// `Tensor`, `Tensor(a!)`: a borrowed handle with its metadata; the kernel gets
    /// `&Tensor`.
    Tensor, *const OpalTensorArg, crate::Tensor, &'a crate::Tensor, tc::TENSOR,
    // SAFETY: the host passes an argument valid for the call (`local`'s contract).
    |a| unsafe { crate::Tensor::from_arg(a) }, |l| l
);
class!(
    /// `Tensor?`: as [`Tensor`], null for `None`; the kernel gets `Option<&Tensor>`.
    OptTensor, *const OpalTensorArg, Option<crate::Tensor>, Option<&'a crate::Tensor>,
    tc::OPT_TENSOR,
    // SAFETY: the host passes an argument valid for the call (`local`'s contract).
    |a| if a.is_null() { Ok(None) } else { unsafe { crate::Tensor::from_arg(a) }.map(Some) },
    |l| l.as_ref()
);
class!(
    /// `int`, `SymInt`: `i64`.
    Int, i64, i64, i64, tc::INT, |a| Ok(a), |l| *l
);
class!(
    /// `float`: `f64`.
    Float, f64, f64, f64, tc::FLOAT, |a| Ok(a), |l| *l
);
class!(
    /// `bool`: `i32` 0 or 1 (any non-zero is true); the kernel gets `bool`.
    Bool, i32, bool, bool, tc::BOOL, |a| Ok(a != 0), |l| *l
);
class!(
    /// `Scalar`: an [`OpalScalar`]; the kernel gets [`crate::Scalar`].
    Scalar, OpalScalar, crate::Scalar, crate::Scalar, tc::SCALAR, |a| scalar(a), |l| *l
);
class!(
    /// `ScalarType`: a dtype code; the kernel gets [`crate::DType`].
    DType, i32, crate::DType, crate::DType, tc::DTYPE,
    |a| crate::DType::from_code(i64::from(a)), |l| *l
);
class!(
    /// `ScalarType?`: a dtype code or -1; the kernel gets `Option<DType>`.
    OptDType, i32, Option<crate::DType>, Option<crate::DType>, tc::OPT_DTYPE,
    |a| if a == -1 { Ok(None) } else { crate::DType::from_code(i64::from(a)).map(Some) },
    |l| *l
);
class!(
    /// `int[]`: a borrowed array; the kernel gets `&[i64]`.
    IntList, OpalIntArray, Ints, &'a [i64], tc::INT_LIST,
    |a| Ints::new(a).and_then(|l| l.ok_or_else(|| Error::msg("a null int[] argument"))),
    |l| l.as_slice()
);
class!(
    /// `int[]?`: a borrowed array, null for `None`; the kernel gets `Option<&[i64]>`.
    OptIntList, OpalIntArray, Option<Ints>, Option<&'a [i64]>, tc::OPT_INT_LIST,
    |a| Ints::new(a), |l| l.as_ref().map(Ints::as_slice)
);

#[inline]
fn scalar(a: OpalScalar) -> Result<crate::Scalar> {
    Ok(match a.kind {
        scalar_kind::INT => crate::Scalar::Int(a.i),
        scalar_kind::FLOAT => crate::Scalar::Float(a.d),
        scalar_kind::BOOL => crate::Scalar::Bool(a.i != 0),
        scalar_kind::COMPLEX => crate::Scalar::Complex(a.d, a.d2),
        k => return Err(Error::msg(format!("unknown scalar kind {k}"))),
    })
}

/// A borrowed `int[]` argument (valid for the call that passed it).
pub struct Ints(OpalIntArray);

impl Ints {
    /// `None` for a null pointer (with length 0); an error for null with a length.
    fn new(a: OpalIntArray) -> Result<Option<Ints>> {
        match (a.ptr.is_null(), a.len) {
            (true, 0) => Ok(None),
            (true, _) => Err(Error::msg("an int[] argument with a null pointer")),
            _ => Ok(Some(Ints(a))),
        }
    }

    /// The elements.
    pub fn as_slice(&self) -> &[i64] {
        // SAFETY: made only by `TypedArg::local` from a non-null host array of `len`
        // elements valid for the call, and locals do not outlive the call.
        unsafe { abi::slice(self.0.ptr, self.0.len) }.unwrap_or(&[])
    }
}

/// A typed entry ready to register: its signature code and the erased function.
#[derive(Clone, Debug)]
pub struct TypedKernel {
    pub(crate) code: String,
    pub(crate) entry: abi::OpalTypedFn,
}

impl TypedKernel {
    /// An entry whose arguments have the codes `args` and that returns one tensor.
    ///
    /// # Safety
    /// `entry` is an `extern "C"` function of exactly the C signature those codes
    /// name (`docs/abi.md`): `OpalStatus (void*, <one C type per code>, OpalTensor*)`,
    /// which catches panics and writes one owned handle on success.
    pub unsafe fn new(args: &[u8], entry: abi::OpalTypedFn) -> TypedKernel {
        let mut code = String::from_utf8_lossy(args).into_owned();
        code.push(char::from(tc::RETURNS));
        code.push('1');
        TypedKernel { code, entry }
    }

    /// The signature code (`"TTs>1"`).
    pub fn code(&self) -> &str {
        &self.code
    }
}

/// Runs a typed entry's body, turning an `Err` or a panic into a status (used by
/// [`typed_entry!`](crate::typed_entry)).
#[doc(hidden)]
#[inline]
pub fn __guard(name: &str, f: impl FnOnce() -> Result<()>) -> abi::OpalStatus {
    crate::guarded(|| format!("the plugin's typed kernel {name}"), f)
}

/// Writes the returned tensor as an owned handle (used by
/// [`typed_entry!`](crate::typed_entry)).
///
/// # Safety
/// `rets` has room for one handle (the host's typed call passes it).
#[doc(hidden)]
#[inline]
pub unsafe fn __write_return(rets: *mut OpalTensor, t: crate::Tensor) -> Result<()> {
    let h = t.into_owned_handle()?;
    // SAFETY: per the contract.
    unsafe { *rets = h };
    Ok(())
}

/// `$entry` (an `unsafe extern "C" fn(user, each class's `Abi`, $last) -> status`)
/// as the ABI's type-erased [`abi::OpalTypedFn`]: the shared last step of
/// [`typed_entry!`] and [`out_entry!`], whose constructors say which signature the
/// host calls it through.
#[doc(hidden)]
#[macro_export]
macro_rules! __erase_entry {
    ($entry:expr; $($t:ident),*; $last:ty) => {{
        type Entry = unsafe extern "C" fn(
            *mut ::std::ffi::c_void,
            $(<$crate::typed::$t as $crate::typed::TypedArg>::Abi,)*
            $last,
        ) -> $crate::abi::OpalStatus;
        let f: Entry = $entry;
        // SAFETY: a fn pointer's type is erased by a plain copy; calling it is the
        // business of whoever knows its signature (the kernel constructors' rule).
        unsafe { ::std::mem::transmute::<Entry, $crate::abi::OpalTypedFn>(f) }
    }};
}

/// Unpacks a typed or out entry's C arguments into locals of the same names (the
/// shared first step of [`typed_entry!`] and [`out_entry!`]); returns the error of
/// the first argument that does not unpack.
#[doc(hidden)]
#[macro_export]
macro_rules! __typed_locals {
    ($($a:ident : $t:ident),*) => {
        $(
            // SAFETY: the host passes each argument valid for the call; the local
            // is dropped when the entry's closure returns.
            let $a = unsafe { <$crate::typed::$t as $crate::typed::TypedArg>::local($a) }?;
        )*
    };
}

/// Defines a function returning the [`TypedKernel`] of a typed entry that converts
/// its C arguments per class, calls `$f` with the kernel parameters and returns its
/// tensor as a new handle; panics are caught.
///
/// ```ignore
/// typed_entry! {
///     /// `add.Tensor`
///     fn add_typed(self_: Tensor, other: Tensor, alpha: Scalar) -> Tensor = add;
/// }
/// reg.kernel("aten::add.Tensor", add_boxed)?.typed_kernel("aten::add.Tensor", add_typed())?;
/// ```
///
/// A generic form, `fn name<K: Trait>(..) -> Tensor = K::method;`, serves generated
/// code.
#[macro_export]
macro_rules! typed_entry {
    ($(#[$m:meta])* $vis:vis fn $name:ident $(<$g:ident : $bound:path>)?
        ($($a:ident : $t:ident),* $(,)?) -> Tensor = $f:expr;) => {
        $(#[$m])*
        $vis fn $name $(<$g: $bound>)? () -> $crate::typed::TypedKernel {
            #[allow(non_snake_case, clippy::too_many_arguments)]
            unsafe extern "C" fn entry $(<$g: $bound>)? (
                _user: *mut ::std::ffi::c_void,
                $($a: <$crate::typed::$t as $crate::typed::TypedArg>::Abi,)*
                rets: *mut $crate::abi::OpalTensor,
            ) -> $crate::abi::OpalStatus {
                $crate::typed::__guard(stringify!($name), || {
                    $crate::__typed_locals!($($a: $t),*);
                    let r = ($f)($(<$crate::typed::$t as $crate::typed::TypedArg>::param(&$a)),*)?;
                    // SAFETY: the host's typed call passes room for one handle.
                    unsafe { $crate::typed::__write_return(rets, r) }
                })
            }
            let erased = $crate::__erase_entry!(
                entry $(::<$g>)?; $($t),*; *mut $crate::abi::OpalTensor
            );
            // SAFETY: `erased` is `entry`, which has exactly the C signature the
            // classes' codes name (each class's `Abi` is the C type of its code),
            // catches panics, and writes one owned handle on success.
            unsafe {
                $crate::typed::TypedKernel::new(
                    &[$(<$crate::typed::$t as $crate::typed::TypedArg>::CODE),*],
                    erased,
                )
            }
        }
    };
}

/// An out entry ready to register (ABI 1.2): its signature code, the rule by which
/// the host makes its result ([`abi::result_rule`]) and the erased function.
#[derive(Clone, Debug)]
pub struct OutKernel {
    pub(crate) code: String,
    pub(crate) rule: u32,
    pub(crate) entry: abi::OpalTypedFn,
}

impl OutKernel {
    /// An out entry whose arguments have the codes `args`, writing a result made by
    /// `rule`.
    ///
    /// # Safety
    /// `entry` is an `extern "C"` function of exactly the C signature of an out entry
    /// with those codes (`docs/abi.md`): `OpalStatus (void*, <one C type per code>,
    /// const OpalTensorArg*)`, which catches panics.
    pub unsafe fn new(args: &[u8], rule: u32, entry: abi::OpalTypedFn) -> OutKernel {
        // SAFETY: forwarded contract (the code is built the same way).
        let code = unsafe { TypedKernel::new(args, entry) }.code;
        OutKernel { code, rule, entry }
    }

    /// The signature code (`"TTs>1"`, the typed entry's).
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The result rule ([`abi::result_rule`]).
    pub fn rule(&self) -> u32 {
        self.rule
    }
}

/// The result tensor of an out entry (used by [`out_entry!`](crate::out_entry)).
///
/// # Safety
/// `out` is the pointer the host passed to an out entry (valid for the call); the
/// tensor is dropped before the entry returns.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn __out(out: *const OpalTensorArg) -> Result<crate::Tensor> {
    // SAFETY: per the contract.
    unsafe { crate::Tensor::from_arg(out) }
}

/// Defines a function returning the [`OutKernel`] of an out entry (ABI 1.2) that
/// converts its C arguments per class and calls `$f` with the kernel parameters
/// and, last, the result the host made by the rule (`ELEMENTWISE`:
/// [`abi::result_rule::ELEMENTWISE`]), as `&Tensor` to write; panics are caught.
///
/// ```ignore
/// out_entry! {
///     /// `add.Tensor`, into a result the host made like `self`.
///     fn add_out_entry(self_: Tensor, other: Tensor, alpha: Scalar) -> out(ELEMENTWISE) = add_into;
/// }
/// // fn add_into(a: &Tensor, b: &Tensor, alpha: Scalar, out: &Tensor) -> Result<()>
/// reg.kernel("aten::add.Tensor", add_boxed)?
///     .typed_kernel("aten::add.Tensor", add_typed())?
///     .out_kernel("aten::add.Tensor", add_out_entry())?;
/// ```
///
/// A generic form, `fn name<K: Trait>(..) -> out(RULE) = K::method;`, serves
/// generated code.
#[macro_export]
macro_rules! out_entry {
    ($(#[$m:meta])* $vis:vis fn $name:ident $(<$g:ident : $bound:path>)?
        ($($a:ident : $t:ident),* $(,)?) -> out($rule:ident) = $f:expr;) => {
        $(#[$m])*
        $vis fn $name $(<$g: $bound>)? () -> $crate::typed::OutKernel {
            #[allow(non_snake_case, clippy::too_many_arguments)]
            unsafe extern "C" fn entry $(<$g: $bound>)? (
                _user: *mut ::std::ffi::c_void,
                $($a: <$crate::typed::$t as $crate::typed::TypedArg>::Abi,)*
                out: *const $crate::abi::OpalTensorArg,
            ) -> $crate::abi::OpalStatus {
                $crate::typed::__guard(stringify!($name), || {
                    $crate::__typed_locals!($($a: $t),*);
                    // SAFETY: the host passes the result valid for the call; the
                    // borrowed tensor is dropped when this closure returns.
                    let out = unsafe { $crate::typed::__out(out) }?;
                    ($f)($(<$crate::typed::$t as $crate::typed::TypedArg>::param(&$a),)* &out)
                })
            }
            let erased = $crate::__erase_entry!(
                entry $(::<$g>)?; $($t),*; *const $crate::abi::OpalTensorArg
            );
            // SAFETY: `erased` is `entry`, which has exactly the out-entry C
            // signature of the classes' codes (each `Abi` the C type of its code,
            // then the result's `const OpalTensorArg*`) and catches panics.
            unsafe {
                $crate::typed::OutKernel::new(
                    &[$(<$crate::typed::$t as $crate::typed::TypedArg>::CODE),*],
                    $crate::abi::result_rule::$rule,
                    erased,
                )
            }
        }
    };
}
