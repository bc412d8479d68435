//! [`Device`] and [`DeviceType`], device-string parsing, and the registry of names
//! for the `PrivateUse1..3` out-of-tree backends; the public paths are those of
//! `crate::device`, which re-exports this module next to the device runtime.
//!
//! Owns: device identity and names. Must not: allocate memory (that is the allocator
//! registry in `tensor::storage`), know about dispatch tables, or use the device
//! runtime (it is built on this module).

#![warn(missing_docs)]

use crate::error::{OpalError, Result};
use crate::keys::DispatchKey;
use std::fmt;
use std::sync::RwLock;

/// The kind of a device.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DeviceType {
    /// Host memory.
    Cpu,
    /// NVIDIA CUDA.
    Cuda,
    /// Apple Metal.
    Mps,
    /// Intel XPU.
    Xpu,
    /// MTIA.
    Mtia,
    /// Habana HPU.
    Hpu,
    /// Shape-only tensors without data.
    Meta,
    /// Out-of-tree backend 1 (named at runtime, see [`register_privateuse_backend`]).
    PrivateUse1,
    /// Out-of-tree backend 2.
    PrivateUse2,
    /// Out-of-tree backend 3.
    PrivateUse3,
}

impl DeviceType {
    /// Number of device types (for per-device tables).
    pub const COUNT: usize = 10;

    /// Every device type.
    pub const ALL: [DeviceType; 10] = [
        DeviceType::Cpu,
        DeviceType::Cuda,
        DeviceType::Mps,
        DeviceType::Xpu,
        DeviceType::Mtia,
        DeviceType::Hpu,
        DeviceType::Meta,
        DeviceType::PrivateUse1,
        DeviceType::PrivateUse2,
        DeviceType::PrivateUse3,
    ];

    /// The dense backend dispatch key of this device type.
    pub const fn backend_key(self) -> DispatchKey {
        match self {
            DeviceType::Cpu => DispatchKey::CPU,
            DeviceType::Cuda => DispatchKey::CUDA,
            DeviceType::Mps => DispatchKey::MPS,
            DeviceType::Xpu => DispatchKey::XPU,
            DeviceType::Mtia => DispatchKey::MTIA,
            DeviceType::Hpu => DispatchKey::NestedTensorHPU,
            DeviceType::Meta => DispatchKey::Meta,
            DeviceType::PrivateUse1 => DispatchKey::PrivateUse1,
            DeviceType::PrivateUse2 => DispatchKey::PrivateUse2,
            DeviceType::PrivateUse3 => DispatchKey::PrivateUse3,
        }
    }

    fn privateuse_slot(self) -> Option<usize> {
        match self {
            DeviceType::PrivateUse1 => Some(0),
            DeviceType::PrivateUse2 => Some(1),
            DeviceType::PrivateUse3 => Some(2),
            _ => None,
        }
    }

    /// The device type's name: built-in (`cpu`, `cuda`, `meta`, ...) or the name
    /// registered for a PrivateUse slot (`privateuseone` etc. while unregistered).
    pub fn name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "cpu",
            DeviceType::Cuda => "cuda",
            DeviceType::Mps => "mps",
            DeviceType::Xpu => "xpu",
            DeviceType::Mtia => "mtia",
            DeviceType::Hpu => "hpu",
            DeviceType::Meta => "meta",
            p => {
                let slot = p.privateuse_slot().unwrap_or(0);
                let names = PRIVATEUSE_NAMES.read().unwrap_or_else(|e| e.into_inner());
                names[slot].unwrap_or(["privateuseone", "privateusetwo", "privateusethree"][slot])
            }
        }
    }

    /// Parses a device type name: built-in names, `privateuseone..three`, or a name
    /// registered with [`register_privateuse_backend`].
    pub fn parse(s: &str) -> Result<DeviceType> {
        for d in DeviceType::ALL {
            if d.name() == s {
                return Ok(d);
            }
        }
        match s {
            "privateuseone" => Ok(DeviceType::PrivateUse1),
            "privateusetwo" => Ok(DeviceType::PrivateUse2),
            "privateusethree" => Ok(DeviceType::PrivateUse3),
            // An unknown name: autoload backend plugins once, then look again.
            _ if crate::plugin::autoload_for_unknown_device(s)? => DeviceType::parse(s),
            _ => Err(OpalError::device(format!(
                "unknown device type '{s}' (expected cpu, cuda, mps, xpu, mtia, hpu, meta or a registered PrivateUse backend name)"
            ))),
        }
    }
}

impl fmt::Display for DeviceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

static PRIVATEUSE_NAMES: RwLock<[Option<&'static str>; 3]> = RwLock::new([None; 3]);

/// Names the out-of-tree backend of `key` (`PrivateUse1..3`), e.g.
/// `register_privateuse_backend(DispatchKey::PrivateUse1, "emu")`; afterwards `"emu"`,
/// `"emu:0"` parse as that device and errors print that name.
///
/// Idempotent for the same name; renaming a slot, reusing a name of another device,
/// or a key that is not `PrivateUse1..3` is an error. Names are lowercase ASCII
/// identifiers. Several PrivateUse backends coexist, one name each.
pub fn register_privateuse_backend(key: DispatchKey, name: &str) -> Result<()> {
    let ty = match key {
        DispatchKey::PrivateUse1 => DeviceType::PrivateUse1,
        DispatchKey::PrivateUse2 => DeviceType::PrivateUse2,
        DispatchKey::PrivateUse3 => DeviceType::PrivateUse3,
        k => {
            return Err(OpalError::device(format!(
                "register_privateuse_backend needs PrivateUse1, PrivateUse2 or PrivateUse3, got {k}"
            )))
        }
    };
    let valid = !name.is_empty()
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        return Err(OpalError::device(format!(
            "invalid backend name '{name}': use a lowercase identifier"
        )));
    }
    let slot = ty.privateuse_slot().unwrap_or(0);
    let mut names = PRIVATEUSE_NAMES.write().unwrap_or_else(|e| e.into_inner());
    if names[slot] == Some(name) {
        return Ok(());
    }
    if let Some(old) = names[slot] {
        return Err(OpalError::device(format!(
            "{key} is already registered as '{old}', cannot rename it to '{name}'"
        )));
    }
    let builtin = [
        "cpu",
        "cuda",
        "mps",
        "xpu",
        "mtia",
        "hpu",
        "meta",
        "privateuseone",
        "privateusetwo",
        "privateusethree",
    ];
    if builtin.contains(&name) || names.contains(&Some(name)) {
        return Err(OpalError::device(format!(
            "device name '{name}' is already taken"
        )));
    }
    names[slot] = Some(Box::leak(name.to_string().into_boxed_str()));
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "opal", key = %key, name, "registered a PrivateUse backend name");
    Ok(())
}

/// The name registered for a PrivateUse key, if any.
pub fn privateuse_backend_name(key: DispatchKey) -> Option<&'static str> {
    let slot = match key {
        DispatchKey::PrivateUse1 => 0,
        DispatchKey::PrivateUse2 => 1,
        DispatchKey::PrivateUse3 => 2,
        _ => return None,
    };
    PRIVATEUSE_NAMES.read().unwrap_or_else(|e| e.into_inner())[slot]
}

/// A device: a type and an optional index (`cpu` has none, `cpu:0` has 0).
///
/// Like PyTorch, `cpu` and `cpu:0` are different values.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Device {
    ty: DeviceType,
    index: i16,
}

impl Device {
    /// A device of type `ty`; `index` `None` means "the current/only one".
    pub const fn new(ty: DeviceType, index: Option<i16>) -> Self {
        Device {
            ty,
            index: match index {
                Some(i) => i,
                None => -1,
            },
        }
    }

    /// `cpu`.
    pub const fn cpu() -> Self {
        Device::new(DeviceType::Cpu, None)
    }

    /// `meta`.
    pub const fn meta() -> Self {
        Device::new(DeviceType::Meta, None)
    }

    /// Parses `cpu`, `cpu:0`, `meta`, `cuda:1`, a registered PrivateUse name
    /// (`emu`, `emu:1`), ...
    pub fn parse(s: &str) -> Result<Device> {
        let (ty, idx) = match s.split_once(':') {
            Some((t, i)) => {
                let i: i16 = Some(i)
                    .filter(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|i| i.parse().ok())
                    .ok_or_else(|| OpalError::device(format!("invalid device index in '{s}'")))?;
                (t, Some(i))
            }
            None => (s, None),
        };
        Ok(Device::new(DeviceType::parse(ty)?, idx))
    }

    /// The device type.
    pub const fn device_type(self) -> DeviceType {
        self.ty
    }

    /// The index, if any.
    pub const fn index(self) -> Option<i16> {
        if self.index < 0 {
            None
        } else {
            Some(self.index)
        }
    }

    /// True for CPU devices.
    pub const fn is_cpu(self) -> bool {
        matches!(self.ty, DeviceType::Cpu)
    }

    /// True for the meta device.
    pub const fn is_meta(self) -> bool {
        matches!(self.ty, DeviceType::Meta)
    }

    /// The dense backend key of this device.
    pub const fn backend_key(self) -> DispatchKey {
        self.ty.backend_key()
    }
}

impl Default for Device {
    fn default() -> Self {
        Device::cpu()
    }
}

impl fmt::Display for Device {
    /// `cpu`, `cpu:0`, `emu:1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index() {
            Some(i) => write!(f, "{}:{}", self.ty.name(), i),
            None => f.write_str(self.ty.name()),
        }
    }
}

impl std::str::FromStr for Device {
    type Err = OpalError;
    fn from_str(s: &str) -> Result<Self> {
        Device::parse(s)
    }
}

impl From<DeviceType> for Device {
    fn from(t: DeviceType) -> Self {
        Device::new(t, None)
    }
}
