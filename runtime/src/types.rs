//! Small value types of the schema grammar that are plain data: [`Layout`],
//! [`MemoryFormat`], [`QScheme`], [`Dimname`], [`Stream`] and [`Opaque`].
//!
//! Owns: these types and their printing/parsing. Must not: know about dispatch.
//! (`Device` lives in `device`, `Generator` in `generator`, `Storage` in `tensor`.)

#![warn(missing_docs)]

use crate::device_type::Device;
use crate::error::{OpalError, Result};
use std::any::Any;
use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};

/// How a tensor's elements are laid out (schema type `Layout`).
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Layout {
    /// Dense, sizes + strides.
    #[default]
    Strided,
    /// Sparse COO.
    Sparse,
    /// Compressed sparse rows.
    SparseCsr,
    /// Compressed sparse columns.
    SparseCsc,
    /// Block CSR.
    SparseBsr,
    /// Block CSC.
    SparseBsc,
    /// MKL-DNN opaque layout.
    Mkldnn,
    /// Jagged (nested) layout.
    Jagged,
}

/// Memory format requests (schema type `MemoryFormat`).
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum MemoryFormat {
    /// Row-major contiguous.
    #[default]
    Contiguous,
    /// Keep the input's format.
    Preserve,
    /// NHWC for 4-d tensors.
    ChannelsLast,
    /// NDHWC for 5-d tensors.
    ChannelsLast3d,
}

/// Quantization schemes (schema type `QScheme`).
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum QScheme {
    /// One scale/zero point, affine.
    #[default]
    PerTensorAffine,
    /// Per-channel scales/zero points, affine.
    PerChannelAffine,
    /// One scale, symmetric.
    PerTensorSymmetric,
    /// Per-channel scales, symmetric.
    PerChannelSymmetric,
    /// Per-channel with float zero points.
    PerChannelAffineFloatQParams,
}

static DIMNAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);

/// A dimension name (schema type `Dimname`): an interned string, so `Copy`.
/// `*` is the wildcard.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Dimname(&'static str);

impl Dimname {
    /// Interns `name`; it must be an identifier or `*`.
    pub fn new(name: &str) -> Result<Self> {
        let ok = name == "*"
            || (name
                .chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_alphanumeric() || c == '_'));
        if !ok {
            return Err(OpalError::msg(format!("invalid dimension name '{name}'")));
        }
        let mut set = DIMNAMES.lock().unwrap_or_else(|e| e.into_inner());
        let set = set.get_or_insert_with(HashSet::new);
        if let Some(s) = set.get(name) {
            return Ok(Dimname(s));
        }
        let s: &'static str = Box::leak(name.to_string().into_boxed_str());
        set.insert(s);
        Ok(Dimname(s))
    }

    /// The wildcard `*`.
    pub const fn wildcard() -> Self {
        Dimname("*")
    }

    /// The name.
    pub const fn as_str(self) -> &'static str {
        self.0
    }

    /// True for `*`.
    pub fn is_wildcard(self) -> bool {
        self.0 == "*"
    }
}

impl fmt::Display for Dimname {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// An execution stream of a device (schema type `Stream`): plain data, the device
/// and a backend-defined id (0 = the default stream).
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Stream {
    /// The device the stream belongs to.
    pub device: Device,
    /// Backend-defined stream id; 0 is the default stream.
    pub id: i64,
}

impl Stream {
    /// The default stream of `device`.
    pub const fn default_for(device: Device) -> Self {
        Stream { device, id: 0 }
    }
}

/// An opaque, shared, type-erased value (schema types `ConstQuantizerPtr`,
/// `GraphModule`, and anything a backend passes through untouched). Clone is a
/// refcount bump.
#[derive(Clone)]
pub struct Opaque {
    value: Arc<dyn Any + Send + Sync>,
    type_name: &'static str,
}

impl Opaque {
    /// Wraps a value.
    pub fn new<T: Any + Send + Sync>(v: T) -> Self {
        Opaque {
            value: Arc::new(v),
            type_name: std::any::type_name::<T>(),
        }
    }

    /// The wrapped value, if it is a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.value.downcast_ref()
    }

    /// The Rust type name of the wrapped value.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// True when both handles share one value.
    pub fn ptr_eq(&self, other: &Opaque) -> bool {
        Arc::ptr_eq(&self.value, &other.value)
    }
}

impl fmt::Debug for Opaque {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Opaque<{}>", self.type_name)
    }
}
