//! Automatic mixed precision: per-thread, per-device-type enable flags and autocast
//! dtypes, the RAII [`AutocastGuard`], and the [`Caster`] that the kernels generated
//! from `autocast.yaml` (the cast policy, kept as data) use to cast their
//! arguments.
//!
//! Enabling autocast for a device type puts that type's `Autocast*` key into this
//! thread's included key set (and nothing else: with autocast off, the dispatcher
//! does exactly the work it did before). An operator listed in the policy then
//! runs its generated kernel first, which casts the floating tensors on that device
//! through `_to_copy` and calls the operator again with every autocast key
//! excluded, so the cast and the operator are recorded by the autograd layer below
//! (gradients come back in the parameters' dtypes) and composite operators do not
//! cast again inside. Operators not in the policy skip the autocast keys
//! (fallthrough). The dtypes a device accepts come from its hooks
//! ([`crate::device::DeviceHooks::autocast_dtypes`], like PyTorch's
//! `get_amp_supported_dtype`).
//!
//! Owns: the autocast state and guard, the cast rules per [`CastKind`] and the
//! registration of the generated kernels. Must not: list operators (the policy
//! file does) or touch the dispatcher's fast path.

#![warn(missing_docs)]

use crate::device::DeviceType;
use crate::dispatch::tls::{self, ExcludeGuard};
use crate::dispatch::{DispatchKey, DispatchKeySet, Dispatcher};
use crate::dtype::{promote_types, DType};
use crate::error::{OpalError, Result};
use crate::tensor::Tensor;
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Once;

#[allow(
    clippy::too_many_arguments,
    reason = "generated kernels have one parameter per schema argument"
)]
mod kernels {
    include!(concat!(env!("OUT_DIR"), "/opal_autocast/mod.rs"));
}

/// How an autocast kernel treats an operator's floating tensor arguments (the
/// lists of `autocast.yaml`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CastKind {
    /// To the device's autocast dtype (`lower_precision_fp`: matrix products,
    /// convolutions).
    LowerPrecision,
    /// To `float32` (`fp32`: softmax, norms, losses, sums).
    Fp32,
    /// To the widest floating dtype among the arguments (`promote`: `cat`, `stack`).
    Promote,
}

/// The autocast keys, one per device type that has one.
const KEYS: [(DeviceType, DispatchKey); 7] = [
    (DeviceType::Cpu, DispatchKey::AutocastCPU),
    (DeviceType::Cuda, DispatchKey::AutocastCUDA),
    (DeviceType::Xpu, DispatchKey::AutocastXPU),
    (DeviceType::Mps, DispatchKey::AutocastMPS),
    (DeviceType::PrivateUse1, DispatchKey::AutocastPrivateUse1),
    (DeviceType::PrivateUse2, DispatchKey::AutocastPrivateUse2),
    (DeviceType::PrivateUse3, DispatchKey::AutocastPrivateUse3),
];

/// Every autocast key.
const ALL_KEYS: DispatchKeySet = {
    let mut s = DispatchKeySet::empty();
    let mut i = 0;
    while i < KEYS.len() {
        s = s.add(KEYS[i].1);
        i += 1;
    }
    s
};

/// The dtype autocast casts to until [`set_autocast_dtype`] says otherwise.
pub const DEFAULT_DTYPE: DType = DType::F16;

/// This thread's autocast state: enabled device types (bit per type) and dtypes.
#[derive(Clone, Copy)]
struct State {
    enabled: u16,
    dtypes: [DType; DeviceType::COUNT],
}

thread_local! {
    static STATE: Cell<State> = const {
        Cell::new(State { enabled: 0, dtypes: [DEFAULT_DTYPE; DeviceType::COUNT] })
    };
}

fn state() -> State {
    STATE.try_with(Cell::get).unwrap_or(State {
        enabled: 0,
        dtypes: [DEFAULT_DTYPE; DeviceType::COUNT],
    })
}

/// The autocast key of `ty`, or an error naming the device types that have one.
pub fn autocast_key(ty: DeviceType) -> Result<DispatchKey> {
    KEYS.iter()
        .find(|(t, _)| *t == ty)
        .map(|&(_, k)| k)
        .ok_or_else(|| {
            OpalError::device(format!(
                "autocast is not available for device type '{ty}': autocast keys exist for cpu, cuda, xpu, mps and the PrivateUse1..3 backends"
            ))
        })
}

/// The dtypes `ty`'s device runtime accepts for autocast.
pub fn supported_dtypes(ty: DeviceType) -> Result<Vec<DType>> {
    autocast_key(ty)?;
    Ok(crate::device_runtime::hooks(ty)?.autocast_dtypes())
}

fn dtype_list(ds: &[DType]) -> String {
    if ds.is_empty() {
        return "none".to_string();
    }
    ds.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
}

fn check_dtype(ty: DType, device: DeviceType) -> Result<()> {
    let ok = supported_dtypes(device)?;
    if ok.contains(&ty) {
        return Ok(());
    }
    Err(OpalError::device(format!(
        "autocast on device '{device}' does not support dtype {}: the '{device}' device runtime supports {}",
        ty.name(),
        dtype_list(&ok)
    )))
}

/// Whether autocast is on for `ty` on this thread.
pub fn is_autocast_enabled(ty: DeviceType) -> bool {
    state().enabled & (1 << ty as u16) != 0
}

/// The dtype autocast casts to on `ty` on this thread ([`DEFAULT_DTYPE`] unless set).
pub fn autocast_dtype(ty: DeviceType) -> DType {
    state().dtypes[ty as usize]
}

/// Sets this thread's autocast dtype for `ty`; an error (naming the device and the
/// dtypes it supports) when its device runtime does not list `dtype`.
pub fn set_autocast_dtype(ty: DeviceType, dtype: DType) -> Result<()> {
    check_dtype(dtype, ty)?;
    let mut s = state();
    s.dtypes[ty as usize] = dtype;
    let _ = STATE.try_with(|c| c.set(s));
    Ok(())
}

/// Turns autocast for `ty` on or off on this thread (without a guard: the state
/// stays until changed). Turning it on checks that `ty` has an autocast key, a
/// device runtime, and supports the current autocast dtype.
pub fn set_autocast_enabled(ty: DeviceType, enabled: bool) -> Result<()> {
    let key = autocast_key(ty)?;
    if enabled {
        check_dtype(autocast_dtype(ty), ty)?;
        register_kernels();
    }
    apply(ty, key, enabled, autocast_dtype(ty));
    Ok(())
}

/// Writes the state and the included key of `ty`.
fn apply(ty: DeviceType, key: DispatchKey, enabled: bool, dtype: DType) {
    let mut s = state();
    let bit = 1u16 << ty as u16;
    s.enabled = if enabled {
        s.enabled | bit
    } else {
        s.enabled & !bit
    };
    s.dtypes[ty as usize] = dtype;
    let _ = STATE.try_with(|c| c.set(s));
    let key_bits = DispatchKeySet::from_key(key).bits();
    tls::update_included(|inc| {
        if enabled {
            inc | key_bits
        } else {
            inc & !key_bits
        }
    });
}

/// Registers the generated kernels at every autocast key, once per process.
fn register_kernels() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let d = Dispatcher::global();
        for &(_, key) in &KEYS {
            for (name, k) in kernels::kernels() {
                // Fails only for a signature mismatch, which the generated
                // `ops::<op>::kernel(Sig)` rules out; the op would then keep its
                // fallthrough and run without casts.
                if let Ok(h) = d.register_impl(name, key, k) {
                    h.leak();
                }
            }
        }
    });
}

/// The operators the cast policy lists (`aten::mm`, ...), in policy order.
pub fn policy() -> Vec<&'static str> {
    kernels::kernels().into_iter().map(|(n, _)| n).collect()
}

/// Autocast on (with a dtype) or off for one device type for a scope: restores the
/// previous enable flag, dtype and included key when dropped (also on unwinding),
/// so guards nest. Not `Send`: it restores this thread's state.
#[derive(Debug)]
#[must_use = "autocast is set only while the guard lives"]
pub struct AutocastGuard {
    ty: DeviceType,
    key: DispatchKey,
    prev_enabled: bool,
    prev_dtype: DType,
    _this_thread: PhantomData<*const ()>,
}

impl AutocastGuard {
    /// Autocast on for `ty` with its current dtype ([`DEFAULT_DTYPE`] unless set).
    pub fn new(ty: DeviceType) -> Result<AutocastGuard> {
        Self::with(ty, true, autocast_dtype(ty))
    }

    /// Autocast on for `ty`, casting to `dtype`; an error naming the device and
    /// what it supports when its runtime does not list `dtype`.
    pub fn with_dtype(ty: DeviceType, dtype: DType) -> Result<AutocastGuard> {
        Self::with(ty, true, dtype)
    }

    /// Autocast off for `ty` (e.g. a region inside an autocast region that must run
    /// in the inputs' dtypes).
    pub fn disabled(ty: DeviceType) -> Result<AutocastGuard> {
        Self::with(ty, false, autocast_dtype(ty))
    }

    fn with(ty: DeviceType, enabled: bool, dtype: DType) -> Result<AutocastGuard> {
        let key = autocast_key(ty)?;
        if enabled {
            check_dtype(dtype, ty)?;
            register_kernels();
        }
        let guard = AutocastGuard {
            ty,
            key,
            prev_enabled: is_autocast_enabled(ty),
            prev_dtype: autocast_dtype(ty),
            _this_thread: PhantomData,
        };
        apply(ty, key, enabled, dtype);
        Ok(guard)
    }
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        apply(self.ty, self.key, self.prev_enabled, self.prev_dtype);
    }
}

/// Casts the arguments of one autocast kernel call (used by the generated
/// kernels). Made with every tensor argument: it picks the device type (of the
/// first defined tensor) and the target dtype for the [`CastKind`], and excludes
/// every autocast key on this thread until it drops, so the casts and the
/// operator called after them run below autocast.
pub struct Caster {
    /// The dtype to cast eligible tensors to, and their device type; `None`: no
    /// cast (autocast is off for the arguments' device, or nothing is eligible).
    target: Option<(DeviceType, DType)>,
    _below: ExcludeGuard,
}

/// Whether autocast casts `t` for a kernel on device type `ty`: a defined floating
/// tensor on `ty` that is not float64 (float64 is left alone, as in PyTorch).
fn eligible(t: &Tensor, ty: DeviceType) -> bool {
    t.is_defined()
        && t.dtype().is_floating_point()
        && t.dtype() != DType::F64
        && t.device().device_type() == ty
}

impl Caster {
    /// The caster of a call with key set `ks` and tensor arguments `tensors`: it
    /// casts when autocast is on for the arguments' device type and `ks` holds that
    /// type's autocast key.
    pub fn new<'t>(
        ks: DispatchKeySet,
        kind: CastKind,
        tensors: impl Iterator<Item = &'t Tensor> + Clone,
    ) -> Caster {
        let below = ExcludeGuard::new(ALL_KEYS);
        let ty = tensors
            .clone()
            .find(|t| t.is_defined())
            .map(|t| t.device().device_type());
        let on =
            |ty: DeviceType| is_autocast_enabled(ty) && autocast_key(ty).is_ok_and(|k| ks.has(k));
        let target = ty.filter(|&ty| on(ty)).and_then(|ty| {
            let dt = match kind {
                CastKind::LowerPrecision => Some(autocast_dtype(ty)),
                CastKind::Fp32 => Some(DType::F32),
                CastKind::Promote => tensors
                    .filter(|t| eligible(t, ty))
                    .map(|t| t.dtype())
                    .reduce(promote_types),
            };
            dt.map(|dt| (ty, dt))
        });
        Caster {
            target,
            _below: below,
        }
    }

    /// The dtype this call casts to, if it casts.
    pub fn target(&self) -> Option<DType> {
        self.target.map(|(_, d)| d)
    }

    /// `t` cast to the target dtype when it is eligible, else `t` itself.
    pub fn cast(&self, t: &Tensor) -> Result<Tensor> {
        match self.target {
            Some((ty, dt)) if eligible(t, ty) && t.dtype() != dt => t.to_dtype(dt),
            _ => Ok(t.clone()),
        }
    }

    /// [`Caster::cast`] of an optional tensor.
    pub fn cast_opt(&self, t: Option<&Tensor>) -> Result<Option<Tensor>> {
        t.map(|t| self.cast(t)).transpose()
    }

    /// [`Caster::cast`] of each tensor of a list.
    pub fn cast_list(&self, ts: &[Tensor]) -> Result<Vec<Tensor>> {
        ts.iter().map(|t| self.cast(t)).collect()
    }
}
