//! Conversions between the host's values ([`IValue`], [`Tensor`], [`DType`],
//! [`Device`]) and the ABI's ([`OpalValue`], codes, tensor handles), and between
//! [`OpalStatus`] and [`OpalError`].
//!
//! A tensor handle is the address of a host [`Tensor`] (itself a refcounted handle):
//! borrowed handles point at a tensor the host keeps alive for the call, owned
//! handles at a `Box<Tensor>` released by `tensor_release`.
//!
//! Owns: value marshalling. Must not: dispatch or call plugins.

use crate::device::{Device, DeviceType};
use crate::dtype::DType;
use crate::error::{OpalError, Result};
use crate::ivalue::IValue;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::types::{Layout, MemoryFormat};
use opal_plugin_abi::{code, device_type as dt, dtype as dc, scalar_kind, tag};
use opal_plugin_abi::{OpalStatus, OpalTensor, OpalValue};

/// The ABI code of a dtype.
#[inline]
pub fn dtype_code(d: DType) -> i32 {
    match d {
        DType::U8 => dc::U8,
        DType::I8 => dc::I8,
        DType::I16 => dc::I16,
        DType::I32 => dc::I32,
        DType::I64 => dc::I64,
        DType::F16 => dc::F16,
        DType::F32 => dc::F32,
        DType::F64 => dc::F64,
        DType::C64 => dc::C64,
        DType::C128 => dc::C128,
        DType::Bool => dc::BOOL,
        DType::BF16 => dc::BF16,
    }
}

/// The dtype of an ABI code.
#[inline]
pub fn dtype_from(code: i64) -> Result<DType> {
    Ok(match i32::try_from(code).unwrap_or(-1) {
        dc::U8 => DType::U8,
        dc::I8 => DType::I8,
        dc::I16 => DType::I16,
        dc::I32 => DType::I32,
        dc::I64 => DType::I64,
        dc::F16 => DType::F16,
        dc::F32 => DType::F32,
        dc::F64 => DType::F64,
        dc::C64 => DType::C64,
        dc::C128 => DType::C128,
        dc::BOOL => DType::Bool,
        dc::BF16 => DType::BF16,
        _ => return Err(OpalError::msg(format!("unknown ABI dtype code {code}"))),
    })
}

/// The ABI code of a device type (CPU, meta, PrivateUse1..3 only).
#[inline]
pub fn device_code(t: DeviceType) -> Result<i32> {
    Ok(match t {
        DeviceType::Cpu => dt::CPU,
        DeviceType::Meta => dt::META,
        DeviceType::PrivateUse1 => dt::PRIVATE_USE1,
        DeviceType::PrivateUse2 => dt::PRIVATE_USE2,
        DeviceType::PrivateUse3 => dt::PRIVATE_USE3,
        other => {
            return Err(OpalError::device(format!(
                "device type '{other}' has no code in the plugin ABI"
            )))
        }
    })
}

/// The device of an ABI code and index (-1: none).
#[inline]
pub fn device_from(code: i64, index: i64) -> Result<Device> {
    let ty = match code as i32 {
        dt::CPU => DeviceType::Cpu,
        dt::META => DeviceType::Meta,
        dt::PRIVATE_USE1 => DeviceType::PrivateUse1,
        dt::PRIVATE_USE2 => DeviceType::PrivateUse2,
        dt::PRIVATE_USE3 => DeviceType::PrivateUse3,
        c => {
            return Err(OpalError::device(format!(
                "unknown ABI device type code {c}"
            )))
        }
    };
    let index = if index < 0 {
        None
    } else {
        Some(
            i16::try_from(index)
                .map_err(|_| OpalError::device(format!("device index {index} out of range")))?,
        )
    };
    Ok(Device::new(ty, index))
}

/// A failure status carrying `e`'s message.
pub fn status_of(e: &OpalError) -> OpalStatus {
    OpalStatus::error(code::ERROR, &e.to_string())
}

/// Reads a status a plugin returned; `who()` (only called on failure) prefixes
/// the message.
///
/// # Safety
/// `s` came from a plugin under the ABI's rules and is consumed once.
pub unsafe fn check(s: OpalStatus, who: impl FnOnce() -> String) -> Result<()> {
    // SAFETY: forwarded contract.
    unsafe { s.into_result() }.map_err(|(c, m)| {
        let who = who();
        let kind = match c {
            code::PANIC => "panicked",
            code::NOT_IMPLEMENTED => "not implemented",
            code::INVALID_ARGUMENT => "invalid argument",
            code::ABI_MISMATCH => "ABI mismatch",
            code::DECLINED => "declined",
            _ => "failed",
        };
        OpalError::msg(format!("{who} {kind}: {m}"))
    })
}

/// A borrowed handle to `t` (valid while `t` is).
pub fn borrow(t: &Tensor) -> OpalTensor {
    OpalTensor(t as *const Tensor as *mut std::ffi::c_void)
}

/// Most boxes [`take`] keeps per thread for [`own`] to reuse (handles are made and
/// taken back on every plugin call that returns a tensor: this keeps the
/// allocator out of it).
const SPARE_HANDLES: usize = 32;

thread_local! {
    /// Boxes of handles taken back ([`take`]), reused by [`own`].
    #[allow(clippy::vec_box, reason = "the boxes are the handles' allocations, kept for reuse")]
    static HANDLES: std::cell::RefCell<Vec<Box<std::mem::MaybeUninit<Tensor>>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// An owned handle to `t`: a `Box<Tensor>` (one of the thread's spare boxes when
/// it has one).
pub fn own(t: Tensor) -> OpalTensor {
    let spare = HANDLES
        .try_with(|h| h.try_borrow_mut().ok().and_then(|mut h| h.pop()))
        .ok()
        .flatten();
    let b = match spare {
        Some(mut b) => {
            b.write(t);
            b
        }
        None => Box::new(std::mem::MaybeUninit::new(t)),
    };
    let p = Box::into_raw(b);
    super::results::issue(p as usize);
    OpalTensor(p.cast())
}

/// The tensor behind a handle.
///
/// # Safety
/// `h` is null or a live handle (borrowed or owned) made by [`borrow`] or [`own`].
pub unsafe fn deref<'a>(h: OpalTensor) -> Result<&'a Tensor> {
    // SAFETY: per the contract, a non-null handle points at a live `Tensor`.
    unsafe { h.0.cast::<Tensor>().as_ref() }
        .ok_or_else(|| OpalError::msg("a null tensor handle was passed to the host"))
}

/// Takes an owned handle back (keeping its box for [`own`]). A null handle, or
/// any address that is not a live handle [`own`] made (a borrowed handle, one
/// already taken back, a foreign pointer), is an `Err` and is not dereferenced.
pub fn take(h: OpalTensor) -> Result<Tensor> {
    if h.0.is_null() {
        return Err(OpalError::msg("a null tensor handle"));
    }
    if !super::results::retire(h.0 as usize) {
        return Err(OpalError::msg(format!(
            "the tensor handle {:p}, which the host did not issue as an owned handle or \
             which was already released (a borrowed argument returned without \
             tensor_retain, a handle released twice, or a foreign pointer)",
            h.0
        )));
    }
    // SAFETY: `own` recorded the address of a leaked `Box` holding an initialised
    // `Tensor` (it writes one before leaking), and `retire` removed the record,
    // so this is the one taker; `MaybeUninit<Tensor>` has `Tensor`'s layout.
    let b = unsafe { Box::from_raw(h.0.cast::<std::mem::MaybeUninit<Tensor>>()) };
    // SAFETY: initialised (above) and read once: the box is then reused or freed,
    // and `MaybeUninit` never drops its content.
    let t = unsafe { b.assume_init_read() };
    let _ = HANDLES.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            if s.len() < SPARE_HANDLES {
                s.push(b);
            }
        }
    });
    Ok(t)
}

/// Borrowed ABI values of host values; the lists they point to live in `lists`.
#[derive(Default)]
pub struct Marshal {
    /// The values.
    pub values: Vec<OpalValue>,
    lists: Vec<Vec<OpalValue>>,
    /// Room for returns.
    pub rets: Vec<OpalValue>,
}

thread_local! {
    /// One spare [`Marshal`] per thread, so a plugin call allocates nothing in the
    /// common case (a nested call while it is out makes a new one).
    static SPARE: std::cell::Cell<Option<Marshal>> = const { std::cell::Cell::new(None) };
}

impl Marshal {
    /// The thread's spare marshal (empty), or a new one.
    pub fn take() -> Marshal {
        SPARE.with(|c| c.take()).unwrap_or_default()
    }

    /// Empties `self` and keeps it as the thread's spare.
    pub fn give_back(mut self) {
        self.values.clear();
        self.lists.clear();
        self.rets.clear();
        SPARE.with(|c| c.set(Some(self)));
    }

    /// Appends the borrowed form of `v` (valid while `v` and `self` are unchanged).
    pub fn push(&mut self, v: &IValue) -> Result<()> {
        let x = self.convert(v)?;
        self.values.push(x);
        Ok(())
    }

    fn list<'a, T: 'a>(
        &mut self,
        elem: u32,
        items: impl IntoIterator<Item = &'a T>,
        f: impl Fn(&mut Self, &'a T) -> Result<OpalValue>,
    ) -> Result<OpalValue> {
        let mut out = Vec::new();
        for i in items {
            out.push(f(self, i)?);
        }
        let v = OpalValue::list(elem, out.as_ptr(), out.len());
        // The heap buffer does not move when `lists` grows.
        self.lists.push(out);
        Ok(v)
    }

    fn convert(&mut self, v: &IValue) -> Result<OpalValue> {
        Ok(match v {
            IValue::None => OpalValue::NONE,
            IValue::Tensor(t) => OpalValue::tensor(borrow(t)),
            IValue::Int(i) => OpalValue::with_i(tag::INT, *i),
            IValue::Double(d) => OpalValue {
                d: *d,
                ..OpalValue::with_i(tag::DOUBLE, 0)
            },
            IValue::Bool(b) => OpalValue::with_i(tag::BOOL, i64::from(*b)),
            IValue::Str(s) => OpalValue {
                ptr: s.as_ptr() as *mut _,
                len: s.len(),
                ..OpalValue::with_i(tag::STR, 0)
            },
            IValue::Scalar(s) => scalar(s),
            IValue::DType(d) => OpalValue::with_i(tag::DTYPE, i64::from(dtype_code(*d))),
            IValue::Device(d) => OpalValue {
                aux: d.index().map_or(0, |i| i as u32 + 1),
                ..OpalValue::with_i(tag::DEVICE, i64::from(device_code(d.device_type())?))
            },
            IValue::Layout(Layout::Strided) => OpalValue::with_i(tag::LAYOUT, 0),
            IValue::MemoryFormat(m) => OpalValue::with_i(
                tag::MEMORY_FORMAT,
                match m {
                    MemoryFormat::Contiguous => 0,
                    MemoryFormat::Preserve => 1,
                    MemoryFormat::ChannelsLast => 2,
                    MemoryFormat::ChannelsLast3d => 3,
                },
            ),
            IValue::IntList(l) => self.list(tag::INT, l, |m, i| m.convert(&IValue::Int(*i)))?,
            IValue::DoubleList(l) => {
                self.list(tag::DOUBLE, l, |m, d| m.convert(&IValue::Double(*d)))?
            }
            IValue::BoolList(l) => self.list(tag::BOOL, l, |m, b| m.convert(&IValue::Bool(*b)))?,
            IValue::ScalarList(l) => self.list(tag::SCALAR, l, |_, s| Ok(scalar(s)))?,
            IValue::TensorList(l) => {
                self.list(tag::TENSOR, l, |_, t| Ok(OpalValue::tensor(borrow(t))))?
            }
            IValue::OptionalTensorList(l) => self.list(tag::TENSOR, l, |_, t| {
                Ok(t.as_ref()
                    .map_or(OpalValue::NONE, |t| OpalValue::tensor(borrow(t))))
            })?,
            IValue::Generator(g) => OpalValue {
                tag: tag::GENERATOR,
                ptr: super::generators::borrow(g).0,
                ..OpalValue::NONE
            },
            other => {
                return Err(OpalError::msg(format!(
                    "a {} value cannot cross the plugin ABI 1.x",
                    other.type_name()
                )))
            }
        })
    }
}

fn scalar(s: &Scalar) -> OpalValue {
    match *s {
        Scalar::Int(i) => OpalValue::scalar(scalar_kind::INT, i, 0.0, 0.0),
        Scalar::Float(f) => OpalValue::scalar(scalar_kind::FLOAT, 0, f, 0.0),
        Scalar::Bool(b) => OpalValue::scalar(scalar_kind::BOOL, i64::from(b), 0.0, 0.0),
        Scalar::Complex(re, im) => OpalValue::scalar(scalar_kind::COMPLEX, 0, re, im),
    }
}

/// The host value of an ABI value. With `owned`, a tensor handle is taken over
/// (kernel returns); without, it is borrowed and cloned (call arguments). Lists and
/// strings are accepted only borrowed.
///
/// # Safety
/// Handles and pointers in `v` follow the ABI's rules for the given ownership.
pub unsafe fn from_abi(v: &OpalValue, owned: bool) -> Result<IValue> {
    Ok(match v.tag {
        tag::NONE => IValue::None,
        tag::TENSOR if owned => IValue::Tensor(take(handle(v))?),
        // SAFETY: forwarded contract.
        tag::TENSOR => IValue::Tensor(unsafe { deref(handle(v)) }?.clone()),
        tag::INT => IValue::Int(v.i),
        tag::DOUBLE => IValue::Double(v.d),
        tag::BOOL => IValue::Bool(v.i != 0),
        tag::SCALAR => IValue::Scalar(match v.aux {
            scalar_kind::INT => Scalar::Int(v.i),
            scalar_kind::FLOAT => Scalar::Float(v.d),
            scalar_kind::BOOL => Scalar::Bool(v.i != 0),
            scalar_kind::COMPLEX => Scalar::Complex(v.d, v.d2),
            k => return Err(OpalError::msg(format!("unknown ABI scalar kind {k}"))),
        }),
        tag::DTYPE => IValue::DType(dtype_from(v.i)?),
        tag::DEVICE => IValue::Device(device_from(v.i, i64::from(v.aux) - 1)?),
        tag::LAYOUT if v.i == 0 => IValue::Layout(Layout::Strided),
        tag::MEMORY_FORMAT => IValue::MemoryFormat(match v.i {
            0 => MemoryFormat::Contiguous,
            1 => MemoryFormat::Preserve,
            2 => MemoryFormat::ChannelsLast,
            3 => MemoryFormat::ChannelsLast3d,
            m => return Err(OpalError::msg(format!("unknown ABI memory format {m}"))),
        }),
        tag::STR if !owned => {
            let s = opal_plugin_abi::OpalStr {
                ptr: v.ptr as *const u8,
                len: v.len,
            };
            // SAFETY: forwarded contract (borrowed bytes valid for the call).
            let s = unsafe { s.as_str() }
                .ok_or_else(|| OpalError::msg("a plugin passed a string that is not UTF-8"))?;
            IValue::Str(s.to_string())
        }
        // SAFETY: forwarded contract (a borrowed generator handle).
        tag::GENERATOR if !owned => IValue::Generator(
            unsafe { super::generators::deref(opal_plugin_abi::OpalGenerator(v.ptr)) }?.clone(),
        ),
        tag::LIST if !owned => {
            // SAFETY: forwarded contract (`len` borrowed values).
            let items = unsafe { opal_plugin_abi::slice(v.ptr as *const OpalValue, v.len) }
                .ok_or_else(|| OpalError::msg("a plugin passed a list with a null pointer"))?;
            let mut vals = Vec::with_capacity(items.len());
            for it in items {
                // SAFETY: forwarded contract.
                vals.push(unsafe { from_abi(it, false) }?);
            }
            list_of(v.aux, vals)?
        }
        t => {
            return Err(OpalError::msg(format!(
                "ABI value tag {t} is not accepted here{}",
                if owned {
                    " (ABI 1.0 returns no lists or strings)"
                } else {
                    ""
                }
            )))
        }
    })
}

fn handle(v: &OpalValue) -> OpalTensor {
    OpalTensor(v.ptr)
}

fn list_of(elem: u32, vals: Vec<IValue>) -> Result<IValue> {
    fn all<T>(vals: Vec<IValue>, f: impl Fn(IValue) -> Option<T>) -> Result<Vec<T>> {
        vals.into_iter()
            .map(|v| {
                let n = v.type_name();
                f(v).ok_or_else(|| {
                    OpalError::msg(format!("a plugin list mixes {n} with other values"))
                })
            })
            .collect()
    }
    Ok(match elem {
        tag::INT => IValue::IntList(all(vals, |v| match v {
            IValue::Int(i) => Some(i),
            _ => None,
        })?),
        tag::DOUBLE => IValue::DoubleList(all(vals, |v| match v {
            IValue::Double(d) => Some(d),
            _ => None,
        })?),
        tag::BOOL => IValue::BoolList(all(vals, |v| match v {
            IValue::Bool(b) => Some(b),
            _ => None,
        })?),
        tag::SCALAR => IValue::ScalarList(all(vals, |v| match v {
            IValue::Scalar(s) => Some(s),
            _ => None,
        })?),
        tag::TENSOR if vals.iter().any(IValue::is_none) => {
            IValue::OptionalTensorList(all(vals, |v| match v {
                IValue::Tensor(t) => Some(Some(t)),
                IValue::None => Some(None),
                _ => None,
            })?)
        }
        tag::TENSOR => IValue::TensorList(all(vals, |v| match v {
            IValue::Tensor(t) => Some(t),
            _ => None,
        })?),
        e => return Err(OpalError::msg(format!("unknown ABI list element tag {e}"))),
    })
}
