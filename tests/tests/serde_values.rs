//! The runtime's `serde` feature (enabled for this crate): every plain value type
//! goes through JSON and comes back equal, with the documented forms for `Device`
//! and `Dimname`, and bad input is an error rather than a wrong value.

use opal::dtype::Category;
use opal::{
    Complex, DType, Device, DeviceType, Dimname, Layout, MemoryFormat, QScheme, Scalar, Stream,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Serializes `v`, checks the JSON text when one is given, reads it back.
fn round_trip<T>(v: T, json: Option<&str>)
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let text = serde_json::to_string(&v).expect("serializes");
    if let Some(j) = json {
        assert_eq!(text, j, "JSON form of {v:?}");
    }
    let back: T = serde_json::from_str(&text).expect("deserializes");
    assert_eq!(back, v, "round trip through {text}");
}

#[test]
fn dtypes_and_categories_round_trip() {
    for d in DType::ALL {
        round_trip(d, None);
    }
    round_trip(DType::BF16, Some("\"BF16\""));
    for c in [
        Category::Bool,
        Category::Integral,
        Category::Floating,
        Category::Complex,
    ] {
        round_trip(c, None);
    }
    round_trip(Complex::new(1.5f32, -2.0), Some(r#"{"re":1.5,"im":-2.0}"#));
}

#[test]
fn devices_round_trip_as_type_and_index() {
    round_trip(Device::cpu(), Some(r#"{"type":"Cpu","index":null}"#));
    round_trip(
        Device::new(DeviceType::Cuda, Some(1)),
        Some(r#"{"type":"Cuda","index":1}"#),
    );
    round_trip(Device::new(DeviceType::PrivateUse2, Some(0)), None);
    round_trip(Device::meta(), None);
    // `cpu` and `cpu:0` stay different values, as in PyTorch.
    let cpu0: Device = serde_json::from_str(r#"{"type":"Cpu","index":0}"#).unwrap();
    assert_ne!(cpu0, Device::cpu());
    assert_eq!(cpu0.index(), Some(0));
    let err = serde_json::from_str::<Device>(r#"{"type":"Cpu","index":-2}"#).unwrap_err();
    assert!(err.to_string().contains("invalid device index -2"), "{err}");
    assert!(serde_json::from_str::<Device>(r#"{"type":"Tpu","index":null}"#).is_err());
    for t in DeviceType::ALL {
        round_trip(t, None);
        round_trip(Device::new(t, Some(3)), None);
    }
    round_trip(DeviceType::Mps, Some("\"Mps\""));
}

#[test]
fn scalars_round_trip_with_their_kind() {
    round_trip(Scalar::Bool(true), Some(r#"{"Bool":true}"#));
    round_trip(
        Scalar::Int(i64::MIN),
        Some(r#"{"Int":-9223372036854775808}"#),
    );
    round_trip(Scalar::Float(0.1), Some(r#"{"Float":0.1}"#));
    round_trip(
        Scalar::Complex(1.0, -0.5),
        Some(r#"{"Complex":[1.0,-0.5]}"#),
    );
    // An integer stays an integer: it is not read back as a float.
    let s: Scalar = serde_json::from_str(r#"{"Int":3}"#).unwrap();
    assert_eq!(s, Scalar::Int(3));
}

#[test]
fn schema_value_types_round_trip() {
    for l in [
        Layout::Strided,
        Layout::Sparse,
        Layout::SparseCsr,
        Layout::SparseCsc,
        Layout::SparseBsr,
        Layout::SparseBsc,
        Layout::Mkldnn,
        Layout::Jagged,
    ] {
        round_trip(l, None);
    }
    for m in [
        MemoryFormat::Contiguous,
        MemoryFormat::Preserve,
        MemoryFormat::ChannelsLast,
        MemoryFormat::ChannelsLast3d,
    ] {
        round_trip(m, None);
    }
    round_trip(MemoryFormat::ChannelsLast, Some("\"ChannelsLast\""));
    for q in [
        QScheme::PerTensorAffine,
        QScheme::PerChannelAffine,
        QScheme::PerTensorSymmetric,
        QScheme::PerChannelSymmetric,
        QScheme::PerChannelAffineFloatQParams,
    ] {
        round_trip(q, None);
    }
    round_trip(
        Stream {
            device: Device::new(DeviceType::Cuda, Some(0)),
            id: 7,
        },
        Some(r#"{"device":{"type":"Cuda","index":0},"id":7}"#),
    );
}

#[test]
fn dimnames_round_trip_as_their_name_and_are_checked() {
    round_trip(Dimname::new("batch").unwrap(), Some("\"batch\""));
    round_trip(Dimname::wildcard(), Some("\"*\""));
    let err = serde_json::from_str::<Dimname>("\"not a name\"").unwrap_err();
    assert!(err.to_string().contains("invalid dimension name"), "{err}");
}
