//! DType promotion, result_type, Scalar, Device parsing and names, Generator,
//! IValue conversions.

use opal::dispatch::DispatchKey;
use opal::dtype::{promote_types, ResultType};
use opal::{
    DType, Device, DeviceType, Dimname, FromIValue, Generator, IValue, IntoIValue, Scalar, Tensor,
};

#[test]
fn promotion_matches_pytorch_table() {
    use DType::*;
    let cases = [
        (Bool, Bool, Bool),
        (Bool, U8, U8),
        (U8, I8, I16),
        (U8, I32, I32),
        (I8, I64, I64),
        (I16, I32, I32),
        (I64, F16, F16),
        (U8, BF16, BF16),
        (F16, BF16, F32),
        (F16, F32, F32),
        (BF16, F64, F64),
        (F32, C64, C64),
        (F64, C64, C128),
        (F16, C64, C64),
        (I64, C64, C64),
        (C64, C128, C128),
        (Bool, C128, C128),
    ];
    for (a, b, r) in cases {
        assert_eq!(promote_types(a, b), r, "{a} + {b}");
        assert_eq!(promote_types(b, a), r, "{b} + {a}");
    }
}

#[test]
fn result_type_groups_by_priority() {
    use DType::*;
    let rt = |f: &dyn Fn(&mut ResultType)| {
        let mut r = ResultType::new();
        f(&mut r);
        r.finish().unwrap()
    };
    // int tensor + float scalar -> default float
    assert_eq!(
        rt(&|r| {
            r.tensor(I32, 1).scalar(&Scalar::Float(1.5));
        }),
        F32
    );
    // float16 tensor + float scalar stays float16 (same category)
    assert_eq!(
        rt(&|r| {
            r.tensor(F16, 1).scalar(&Scalar::Float(1.5));
        }),
        F16
    );
    // u8 tensor + int scalar stays u8
    assert_eq!(
        rt(&|r| {
            r.tensor(U8, 2).scalar(&Scalar::Int(1000));
        }),
        U8
    );
    // dimensioned int32 + zero-dim int64 -> int32 (zero-dim does not widen ints)
    assert_eq!(
        rt(&|r| {
            r.tensor(I32, 1).tensor(I64, 0);
        }),
        I32
    );
    // dimensioned int32 + zero-dim float64 -> float64 (higher category wins)
    assert_eq!(
        rt(&|r| {
            r.tensor(I32, 1).tensor(F64, 0);
        }),
        F64
    );
    // float32 + zero-dim float64 -> float32
    assert_eq!(
        rt(&|r| {
            r.tensor(F32, 1).tensor(F64, 0);
        }),
        F32
    );
    // float64 tensor + complex scalar -> complex128 (keeps precision)
    assert_eq!(
        rt(&|r| {
            r.tensor(F64, 1).scalar(&Scalar::Complex(1.0, 1.0));
        }),
        C128
    );
    // float32 tensor + complex scalar -> complex64
    assert_eq!(
        rt(&|r| {
            r.tensor(F32, 1).scalar(&Scalar::Complex(1.0, 1.0));
        }),
        C64
    );
    // bool tensor + int scalar -> int64
    assert_eq!(
        rt(&|r| {
            r.tensor(Bool, 1).scalar(&Scalar::Int(1));
        }),
        I64
    );
    // scalars only: int + float -> default float
    assert_eq!(
        rt(&|r| {
            r.scalar(&Scalar::Int(1)).scalar(&Scalar::Float(1.0));
        }),
        F32
    );
    // zero-dim only: the tensors' promotion
    assert_eq!(
        rt(&|r| {
            r.tensor(I16, 0).tensor(U8, 0);
        }),
        I16
    );
    assert!(ResultType::new().finish().is_err());
    // Wrapped-number tensors count as scalars.
    let w = Tensor::wrapped_number(&Scalar::Float(2.0)).unwrap();
    let t = Tensor::from_slice(&[1i32, 2], &[2]).unwrap();
    let mut r = ResultType::new();
    r.add_tensor(&t).add_tensor(&w);
    assert_eq!(r.finish().unwrap(), F32);
}

#[test]
fn of_tensors_agrees_with_the_general_fold() {
    // Tensors of every dtype pairing, 0-dim and 1-dim, and wrapped numbers of each
    // kind: the shortcut for equal dtypes must give what the full fold gives.
    let mut operands = Vec::new();
    for d in DType::ALL {
        operands.push(Tensor::empty(&[2], d, Device::cpu()).unwrap());
        operands.push(Tensor::empty(&[], d, Device::cpu()).unwrap());
    }
    for s in [Scalar::Int(1), Scalar::Float(1.5), Scalar::Bool(true)] {
        operands.push(Tensor::wrapped_number(&s).unwrap());
    }
    for a in &operands {
        for b in &operands {
            for c in [None, Some(a), Some(b)] {
                let mut list = vec![a, b];
                list.extend(c);
                let mut r = ResultType::new();
                for t in &list {
                    r.add_tensor(t);
                }
                let expected = r.finish().map_err(|e| e.to_string());
                let got = ResultType::of_tensors(&list).map_err(|e| e.to_string());
                assert_eq!(
                    got,
                    expected,
                    "{:?}",
                    list.iter()
                        .map(|t| (t.dtype(), t.dim(), t.is_wrapped_number()))
                        .collect::<Vec<_>>()
                );
            }
        }
    }
    assert!(ResultType::of_tensors(&[]).is_err(), "no operand");
}

#[test]
fn dtype_names_and_sizes() {
    for d in DType::ALL {
        assert_eq!(DType::parse(d.name()).unwrap(), d);
        assert_eq!(format!("{d}"), format!("torch.{}", d.name()));
    }
    assert_eq!(DType::C128.size(), 16);
    assert_eq!(DType::BF16.size(), 2);
    assert_eq!(DType::parse("torch.long").unwrap(), DType::I64);
    assert!(DType::parse("quux").is_err());
}

#[test]
fn scalar_conversions_and_printing() {
    assert_eq!(Scalar::from(3i32), Scalar::Int(3));
    assert_eq!(Scalar::from(2.5f32).to_i64(), 2);
    assert!(Scalar::Float(0.5).to_bool());
    assert_eq!(Scalar::Int(3).dtype(), DType::I64);
    assert_eq!(Scalar::Bool(true).to_string(), "True");
    assert_eq!(Scalar::Float(2.0).to_string(), "2.0");
    assert_eq!(Scalar::Complex(1.0, -2.0).to_string(), "(1-2j)");
}

#[test]
fn devices_parse_and_print() {
    assert_eq!(Device::parse("cpu").unwrap(), Device::cpu());
    let c0 = Device::parse("cpu:0").unwrap();
    assert_eq!(c0.index(), Some(0));
    assert_ne!(c0, Device::cpu());
    assert_eq!(c0.to_string(), "cpu:0");
    assert_eq!(Device::parse("meta").unwrap(), Device::meta());
    assert_eq!(
        Device::parse("cuda:1").unwrap().device_type(),
        DeviceType::Cuda
    );
    for bad in ["", "cpu:", "cpu:x", "cpu:-1", "gpu", "cpu:0:1"] {
        assert!(Device::parse(bad).is_err(), "{bad}");
    }
}

// PrivateUse2 carries the name `dispatch.rs` gives it too: the names are process-wide
// and the two modules share one test binary.
#[test]
fn privateuse_backends_coexist() {
    opal::register_privateuse_backend(DispatchKey::PrivateUse2, "npu").unwrap();
    opal::register_privateuse_backend(DispatchKey::PrivateUse3, "tpx").unwrap();
    // idempotent
    opal::register_privateuse_backend(DispatchKey::PrivateUse2, "npu").unwrap();
    // renaming, taken names, bad keys, bad names are errors
    assert!(opal::register_privateuse_backend(DispatchKey::PrivateUse2, "other").is_err());
    assert!(opal::register_privateuse_backend(DispatchKey::PrivateUse3, "npu").is_err());
    assert!(opal::register_privateuse_backend(DispatchKey::CPU, "x").is_err());
    assert!(opal::register_privateuse_backend(DispatchKey::PrivateUse1, "cpu").is_err());
    assert!(opal::register_privateuse_backend(DispatchKey::PrivateUse1, "Bad Name").is_err());
    let d = Device::parse("npu:1").unwrap();
    assert_eq!(d.device_type(), DeviceType::PrivateUse2);
    assert_eq!(d.to_string(), "npu:1");
    assert_eq!(
        Device::parse("tpx").unwrap().backend_key(),
        DispatchKey::PrivateUse3
    );
    assert_eq!(
        Device::parse("privateuseone").unwrap().device_type(),
        DeviceType::PrivateUse1
    );
}

#[test]
fn generator_is_reproducible_and_shared() {
    let g = Generator::new(Device::cpu());
    g.manual_seed(42);
    let a: Vec<u32> = (0..10).map(|_| g.next_u32()).collect();
    g.manual_seed(42);
    let b: Vec<u32> = (0..10).map(|_| g.next_u32()).collect();
    assert_eq!(a, b);
    g.manual_seed(43);
    assert_ne!(a[0], g.next_u32());
    // state save/restore
    g.manual_seed(7);
    g.next_u32();
    let st = g.get_state();
    let x: Vec<u64> = (0..5).map(|_| g.next_u64()).collect();
    g.set_state(&st).unwrap();
    let y: Vec<u64> = (0..5).map(|_| g.next_u64()).collect();
    assert_eq!(x, y);
    assert!(g.set_state(&[1, 2, 3]).is_err());
    // clones share state
    let h = g.clone();
    h.manual_seed(1);
    assert_eq!(g.initial_seed(), 1);
    // uniform and normal are in range / plausible
    let m: f64 = (0..10_000).map(|_| g.next_f64()).sum::<f64>() / 10_000.0;
    assert!((m - 0.5).abs() < 0.02, "{m}");
    let n: f64 = (0..10_000).map(|_| g.next_normal()).sum::<f64>() / 10_000.0;
    assert!(n.abs() < 0.05, "{n}");
    // reserve advances the stream in blocks
    let (seed, off) = g.reserve(4);
    assert_eq!(seed, 1);
    assert_eq!(g.reserve(1).1, off + 4);
    assert!(
        Generator::default_for(DeviceType::Cpu).ptr_eq(&Generator::default_for(DeviceType::Cpu))
    );
    // Known answer for Philox4x32-10 (Random123 test vector: zero counter, zero key).
    assert_eq!(
        opal::generator::philox4x32_10([0; 4], [0; 2]),
        [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
    );
}

#[test]
fn ivalue_round_trips_and_coercions() {
    let t = Tensor::from_slice(&[1.0f32], &[1]).unwrap();
    assert!(Tensor::from_ivalue((&t).into_ivalue()).unwrap().is_same(&t));
    assert_eq!(i64::from_ivalue(5i64.into_ivalue()).unwrap(), 5);
    assert_eq!(f64::from_ivalue(IValue::Int(2)).unwrap(), 2.0);
    assert_eq!(
        Scalar::from_ivalue(IValue::Double(1.5)).unwrap(),
        Scalar::Float(1.5)
    );
    assert_eq!(Vec::<i64>::from_ivalue(IValue::Int(3)).unwrap(), vec![3]);
    assert_eq!(
        Vec::<i64>::from_ivalue((&[1i64, 2][..]).into_ivalue()).unwrap(),
        vec![1, 2]
    );
    assert_eq!(Option::<i64>::from_ivalue(IValue::None).unwrap(), None);
    assert!(matches!(
        Option::<&Tensor>::None.into_ivalue(),
        IValue::None
    ));
    assert!(matches!(
        Some(DType::F16).into_ivalue(),
        IValue::DType(DType::F16)
    ));
    let (a, b): (i64, bool) = FromIValue::from_ivalue((1i64, true).into_ivalue()).unwrap();
    assert_eq!((a, b), (1, true));
    let dn = Dimname::new("batch").unwrap();
    assert_eq!(
        Vec::<Dimname>::from_ivalue(vec![dn].into_ivalue()).unwrap(),
        vec![dn]
    );
    let err = i64::from_ivalue(IValue::Str("x".into())).unwrap_err();
    assert!(
        err.to_string()
            .contains("expected a value of type int, got str"),
        "{err}"
    );
    // `None` is the boxed undefined tensor (see tests/undefined.rs); other values are
    // not tensors.
    assert!(!Tensor::from_ivalue(IValue::None).unwrap().is_defined());
    assert!(Tensor::from_ivalue(IValue::Int(1)).is_err());
    let mut s = vec![IValue::Int(1)];
    assert_eq!(opal::ivalue::pop::<i64>(&mut s).unwrap(), 1);
    assert!(opal::ivalue::pop::<i64>(&mut s).is_err());
}
