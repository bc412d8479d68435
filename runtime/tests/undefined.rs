//! The undefined tensor (PyTorch's "no tensor", e.g. a gradient `output_mask` did not
//! request): what each accessor gives, boxing to and from `IValue::None`, and the
//! dispatcher's error when an op gets nothing but undefined tensors.

use crate::common;

use common::{call, typed, Sig};
use opal::dispatch::{DispatchKey, DispatchKeySet, Dispatcher, Library, OpSlot};
use opal::tensor::KernelAccess;
use opal::{DType, Device, ErrorKind, FromIValue, IValue, IntoIValue, Result, Tensor};

fn defined() -> Tensor {
    Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap()
}

/// The error is the undefined-tensor one, not a dtype, device or shape complaint
/// about its placeholder metadata.
fn says_undefined<T>(r: Result<T>, what: &str) {
    match r {
        Ok(_) => panic!("{what}: expected an error for an undefined tensor"),
        Err(e) => assert!(
            e.to_string().contains("the tensor is undefined"),
            "{what}: {e}"
        ),
    }
}

#[test]
fn metadata_accessors_give_an_empty_dataless_tensor() {
    let u = Tensor::undefined();
    assert!(!u.is_defined());
    assert!(defined().is_defined());
    assert!(Tensor::empty(&[0], DType::F32, Device::meta())
        .unwrap()
        .is_defined());
    assert_eq!(u.key_set(), DispatchKeySet::empty());
    assert_eq!(u.sizes(), &[0]);
    assert_eq!(u.strides(), &[1]);
    assert_eq!((u.dim(), u.numel(), u.storage_offset()), (1, 0, 0));
    assert!(u.is_contiguous());
    assert!(!u.is_wrapped_number());
    assert_eq!((u.dtype(), u.element_size()), (DType::F32, 4));
    assert_eq!(u.device(), Device::meta());
    assert_eq!(u.storage().nbytes(), 0);
    assert!(!u.storage().is_host_accessible());
    assert_eq!(u.storage_handle().nbytes(), 0);
}

#[test]
fn all_undefined_handles_are_the_same_tensor() {
    let (a, b) = (Tensor::undefined(), Tensor::default());
    assert!(a.is_same(&b));
    assert_eq!(a, b.clone());
    assert!(!a.is_same(&defined()));
    // Handles made and dropped on many threads share the sentinel's count; it never
    // reaches zero, so the sentinel survives.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..10_000 {
                    let t = Tensor::undefined();
                    assert!(!t.clone().is_defined());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(Tensor::undefined().is_same(&a));
    assert_eq!(Tensor::undefined().sizes(), &[0]);
}

#[test]
fn data_access_is_an_error_that_says_undefined() {
    let u = Tensor::undefined();
    says_undefined(u.to_vec::<f32>(), "to_vec::<f32>");
    // A dtype that differs from the placeholder f32: still the undefined error.
    says_undefined(u.to_vec::<i64>(), "to_vec::<i64>");
    says_undefined(u.to_bytes(), "to_bytes");
    says_undefined(u.item(), "item");
    says_undefined(u.get(&[0]), "get");
    says_undefined(u.read::<f32>().map(|_| ()), "read");
    says_undefined(u.write::<f64>().map(|_| ()), "write");
    says_undefined(u.data_ptr::<f32>(), "data_ptr::<f32>");
    says_undefined(u.data_ptr::<u8>(), "data_ptr::<u8>");
    says_undefined(u.raw_data_ptr(), "raw_data_ptr");
    let acc = KernelAccess::new(&[&u], &[]).unwrap();
    says_undefined(acc.read_ptr::<f32>(&u), "KernelAccess::read_ptr");
    drop(acc);
    says_undefined(
        KernelAccess::with_ptrs([&u], []).map(|_| ()),
        "KernelAccess::with_ptrs",
    );
}

#[test]
fn resize_and_views_refuse_it_and_leave_the_sentinel_alone() {
    let u = Tensor::undefined();
    says_undefined(u.resize_(&[4, 4]), "resize_");
    says_undefined(u.resize_(&[0]), "resize_ to its own size");
    says_undefined(u.as_strided(&[0], &[1], 0), "as_strided");
    let fresh = Tensor::undefined();
    assert_eq!((fresh.sizes(), fresh.numel()), (&[0i64][..], 0));
}

#[test]
fn display_and_debug_say_undefined() {
    let u = Tensor::undefined();
    assert_eq!(u.to_string(), "tensor(undefined)");
    assert_eq!(format!("{u:?}"), "tensor(undefined)");
    assert_eq!(
        format!("{:?}", (defined(), u)),
        "(tensor([1., 2.]), tensor(undefined))"
    );
    // An empty defined tensor still prints as one.
    assert_eq!(
        Tensor::from_slice::<f32>(&[], &[0]).unwrap().to_string(),
        "tensor([])"
    );
}

#[test]
fn boxes_as_none_and_none_unboxes_to_undefined() {
    let u = Tensor::undefined();
    assert!(matches!(u.clone().into_ivalue(), IValue::None));
    assert!(matches!((&u).into_ivalue(), IValue::None));
    assert!(matches!(Some(u.clone()).into_ivalue(), IValue::None));
    assert!(!Tensor::from_ivalue(IValue::None).unwrap().is_defined());
    // An undefined tensor left inside `IValue::Tensor` stays what it is.
    assert!(!Tensor::from_ivalue(IValue::Tensor(u.clone()))
        .unwrap()
        .is_defined());
    // Defined tensors are untouched, and other values are still type errors.
    let d = defined();
    assert!(Tensor::from_ivalue(d.clone().into_ivalue())
        .unwrap()
        .is_same(&d));
    let e = Tensor::from_ivalue(IValue::Int(1)).unwrap_err();
    assert!(
        e.to_string()
            .contains("expected a value of type Tensor, got int"),
        "{e}"
    );
    // Optional tensors keep `None` as `None`.
    assert!(Option::<Tensor>::from_ivalue(IValue::None)
        .unwrap()
        .is_none());

    // The returns of a backward op whose middle gradient was not requested.
    let rets = (d.clone(), u.clone(), d.clone()).into_ivalue();
    let IValue::Tuple(items) = &rets else {
        panic!("expected a tuple, got {}", rets.type_name());
    };
    assert!(matches!(
        items.as_slice(),
        [IValue::Tensor(_), IValue::None, IValue::Tensor(_)]
    ));
    let (a, b, c) = <(Tensor, Tensor, Tensor)>::from_ivalue(rets).unwrap();
    assert!(a.is_same(&d) && c.is_same(&d));
    assert!(!b.is_defined());
    // In lists an undefined tensor stays a tensor (a list has no `None` element).
    let IValue::TensorList(ts) = vec![d, u].into_ivalue() else {
        panic!("expected a tensor list");
    };
    assert!(ts[0].is_defined() && !ts[1].is_defined());
    // It adds no dispatch keys.
    assert_eq!(
        IValue::Tensor(Tensor::undefined()).tensor_keys(),
        DispatchKeySet::empty()
    );
}

fn one(_: DispatchKeySet, _: &Tensor) -> Result<i64> {
    Ok(1)
}

unary_def!(UNDEF_DEF, "test::undef");
#[test]
fn an_op_given_only_undefined_tensors_has_no_kernel() {
    static OP: OpSlot<Sig> = OpSlot::new(&UNDEF_DEF);
    let mut lib = Library::new("test", DispatchKey::CPU);
    lib.impl_("undef", typed(one)).unwrap();
    lib.impl_for("undef", DispatchKey::Meta, typed(one))
        .unwrap();
    assert_eq!(call(&OP, &defined()).unwrap(), 1);
    let e = call(&OP, &Tensor::undefined()).unwrap_err();
    assert!(matches!(
        e.kind(),
        ErrorKind::NoKernel {
            key: DispatchKey::Undefined,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "could not run 'test::undef' for dispatch key Undefined (device 'undefined'); kernels exist for: CPU, Meta"
    );
    // Boxed: `None` (how an undefined tensor boxes) dispatches the same way.
    for v in [IValue::None, IValue::Tensor(Tensor::undefined())] {
        let mut s = vec![v];
        let boxed = Dispatcher::global()
            .call_boxed("test::undef", &mut s)
            .unwrap_err();
        assert_eq!(boxed.to_string(), e.to_string());
    }
}
