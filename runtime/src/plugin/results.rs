//! What the host checks before it believes a plugin: the record of the owned
//! tensor handles it issued, and the checks of every tensor a plugin's kernel
//! returns.
//!
//! A plugin is foreign code: a bug in it must surface as an `Err` naming the
//! plugin and the op, not as a host that reads freed or foreign memory. So:
//!
//! - every owned handle the host gives out ([`super::value::own`]) is recorded
//!   here, and a handle a plugin hands back (a kernel's return, a
//!   `tensor_release`) is taken over only when it is recorded, live. A null
//!   handle, a borrowed argument's handle returned without `tensor_retain`, a
//!   handle already released or any other address the host never issued is
//!   refused without being dereferenced;
//! - a returned tensor's sizes, strides, storage offset and dtype must fit in
//!   its storage (the host's own constructors ensure it; checked again because
//!   safe code reads the result's elements next);
//! - a returned tensor must be on the plugin's device type, on the device of one
//!   of the call's tensor arguments (an op returning an argument, `_copy_from`
//!   into a CPU destination), or on a device the call names (`_to_copy(...,
//!   device=cpu)`).
//!
//! Owns: the issued-handle record and the result checks. Must not: marshal
//! values (that is `value`) or call plugins.

use crate::device::{Device, DeviceType};
use crate::error::{OpalError, Result};
use crate::ivalue::IValue;
use crate::tensor::Tensor;
use opal_plugin_abi::{tag, OpalValue};
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

/// Shards of the record, so threads returning handles at once rarely share a lock.
const SHARDS: usize = 16;

/// Hashes a handle address (already well spread above its alignment bits).
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8 | u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64 >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Shard = Mutex<HashSet<usize, BuildHasherDefault<AddrHasher>>>;

/// The live owned handles, by address.
static ISSUED: [Shard; SHARDS] =
    [const { Mutex::new(HashSet::with_hasher(BuildHasherDefault::new())) }; SHARDS];

fn shard(addr: usize) -> &'static Shard {
    // Boxes are at least 8-aligned: the bits above pick the shard.
    &ISSUED[(addr >> 4 ^ addr >> 10) % SHARDS]
}

/// Records `addr` as a live owned handle (called when one is made).
#[inline]
pub(super) fn issue(addr: usize) {
    shard(addr)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(addr);
}

/// Removes `addr` from the record: true when it was a live owned handle (the
/// caller then takes it over), false for anything else (nothing is touched).
#[inline]
pub(super) fn retire(addr: usize) -> bool {
    shard(addr)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&addr)
}

/// The bytes `t`'s geometry reaches into its storage (checked arithmetic: an
/// overflow or a negative size, stride or offset is `None`). An empty tensor
/// reaches nothing.
fn reach(t: &Tensor) -> Option<u64> {
    let (sizes, strides) = (t.sizes(), t.strides());
    if sizes.len() != strides.len() {
        return None;
    }
    let mut last = u64::try_from(t.storage_offset()).ok()?;
    for (s, st) in sizes.iter().zip(strides) {
        let (s, st) = (u64::try_from(*s).ok()?, u64::try_from(*st).ok()?);
        if s == 0 {
            return Some(0);
        }
        last = last.checked_add((s - 1).checked_mul(st)?)?;
    }
    last.checked_add(1)?.checked_mul(t.element_size() as u64)
}

/// Checks a tensor plugin `plugin`'s kernel returned (see the module docs).
/// `first` is the device of the call's first tensor argument: a result there
/// needs nothing more; otherwise `args` gives the devices the call holds or
/// names. The error says what is wrong (the caller names the op and the plugin).
#[inline]
pub(super) fn check_tensor(
    plugin: &str,
    t: &Tensor,
    first: Option<Device>,
    args: impl FnOnce() -> Vec<Device>,
) -> Result<()> {
    if !t.is_defined() {
        return Ok(());
    }
    let storage = t.storage();
    if reach(t).is_none_or(|r| r > storage.nbytes() as u64) {
        return Err(misfit(t));
    }
    let dev = t.device();
    if storage.device().device_type() != dev.device_type() {
        return Err(OpalError::msg(format!(
            "a tensor on {dev} whose storage is on {}",
            storage.device()
        )));
    }
    if first.is_some_and(|f| same(f, dev)) {
        return Ok(());
    }
    elsewhere(plugin, dev, args)
}

#[cold]
#[inline(never)]
fn misfit(t: &Tensor) -> OpalError {
    OpalError::msg(format!(
        "a {} tensor of sizes {:?}, strides {:?} and storage offset {} that does not fit \
         in its storage of {} bytes",
        t.dtype(),
        t.sizes(),
        t.strides(),
        t.storage_offset(),
        t.storage().nbytes()
    ))
}

/// A result not on the first argument's device: it must be on the plugin's
/// device type or on a device the call holds or names.
#[cold]
#[inline(never)]
fn elsewhere(plugin: &str, dev: Device, args: impl FnOnce() -> Vec<Device>) -> Result<()> {
    let own = plugin_device(plugin);
    if own == Some(dev.device_type()) {
        return Ok(());
    }
    let named = args();
    if named.iter().any(|d| same(*d, dev)) {
        return Ok(());
    }
    let named: Vec<String> = named.iter().map(ToString::to_string).collect();
    Err(OpalError::msg(format!(
        "a tensor on {dev}, which is neither the plugin's device type ({}) nor a device \
         of the call's arguments ({})",
        own.map_or("unknown", |d| d.name()),
        if named.is_empty() {
            "none".to_string()
        } else {
            named.join(", ")
        }
    )))
}

/// One device, an index-less one being index 0 (as the device rule says).
fn same(a: Device, b: Device) -> bool {
    a.device_type() == b.device_type() && a.index().unwrap_or(0) == b.index().unwrap_or(0)
}

/// The device type of loaded plugin `plugin` (by its dispatch key).
fn plugin_device(plugin: &str) -> Option<DeviceType> {
    let key = super::key_of(plugin)?;
    DeviceType::ALL.into_iter().find(|d| d.backend_key() == key)
}

/// The device of the first tensor among the ABI arguments `args`.
///
/// # Safety
/// As for [`devices_of`].
#[inline]
pub(super) unsafe fn first_device(args: &[OpalValue]) -> Option<Device> {
    let a = args.iter().find(|a| a.tag == tag::TENSOR)?;
    // SAFETY: forwarded contract (a borrowed handle of a live call).
    let t = unsafe { super::value::deref(opal_plugin_abi::OpalTensor(a.ptr)) }.ok()?;
    t.is_defined().then(|| t.device())
}

/// The devices the ABI arguments `args` hold or name: tensors' (borrowed handles
/// the host made for the call, lists included) and `Device` values'.
///
/// # Safety
/// `args` are the borrowed values of a call that has not returned to its caller
/// (their handles are alive).
pub(super) unsafe fn devices_of(args: &[OpalValue]) -> Vec<Device> {
    let mut out = Vec::new();
    for a in args {
        if matches!(a.tag, tag::TENSOR | tag::DEVICE | tag::LIST) {
            // SAFETY: forwarded contract (borrowed values of a live call).
            if let Ok(v) = unsafe { super::value::from_abi(a, false) } {
                collect(&v, &mut out);
            }
        }
    }
    out
}

/// The devices host values `args` hold or name (as [`devices_of`]).
pub(super) fn devices_in(args: &[IValue]) -> Vec<Device> {
    let mut out = Vec::new();
    for a in args {
        collect(a, &mut out);
    }
    out
}

fn collect(v: &IValue, out: &mut Vec<Device>) {
    match v {
        IValue::Tensor(t) if t.is_defined() => out.push(t.device()),
        IValue::Device(d) => out.push(*d),
        IValue::TensorList(ts) => {
            out.extend(ts.iter().filter(|t| t.is_defined()).map(Tensor::device))
        }
        IValue::OptionalTensorList(ts) => out.extend(
            ts.iter()
                .flatten()
                .filter(|t| t.is_defined())
                .map(Tensor::device),
        ),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_issued_live_handles_retire_once() {
        let b = Box::new(7u64);
        let addr = &*b as *const u64 as usize;
        assert!(!retire(addr), "never issued");
        issue(addr);
        assert!(retire(addr));
        assert!(!retire(addr), "already taken back");
        assert!(!retire(0));
    }

    #[test]
    fn geometry_reach_counts_the_last_element() {
        let t = Tensor::from_slice(&[0f32; 6], &[2, 3]).unwrap();
        assert_eq!(reach(&t), Some(24));
        let v = t.as_strided(&[2], &[3], 2).unwrap();
        assert_eq!(reach(&v), Some(24));
        let e = t.as_strided(&[0, 5], &[100, 1], 1).unwrap();
        assert_eq!(reach(&e), Some(0));
    }
}
