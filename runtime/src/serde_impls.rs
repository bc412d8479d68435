//! `Serialize`/`Deserialize` for the value types whose derived form would not be
//! the right one (the `serde` feature; the other plain types derive theirs):
//! [`Device`] as `{"type": "Cuda", "index": 1}` (`index` null for none) rather than
//! its private fields, and [`Dimname`] as its name, checked and interned again when
//! read.
//!
//! Owns: these impls. Must not: change the types.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::device::{Device, DeviceType};
use crate::types::Dimname;

/// The serialized form of a [`Device`].
#[derive(Serialize, Deserialize)]
struct DeviceRepr {
    #[serde(rename = "type")]
    ty: DeviceType,
    index: Option<i16>,
}

impl Serialize for Device {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        DeviceRepr {
            ty: self.device_type(),
            index: self.index(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Device {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = DeviceRepr::deserialize(d)?;
        if let Some(i) = r.index.filter(|i| *i < 0) {
            return Err(D::Error::custom(format!(
                "invalid device index {i}: an index is 0 or more"
            )));
        }
        Ok(Device::new(r.ty, r.index))
    }
}

impl Serialize for Dimname {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Dimname {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Dimname::new(&name).map_err(D::Error::custom)
    }
}
