//! Tensor construction, metadata, views, resize, data access and the borrow model,
//! allocators, and PyTorch-like printing.

use opal::dispatch::DispatchKey;
use opal::tensor::{register_allocator, Allocator, CpuAllocator, KernelAccess};
use opal::{DType, Device, DeviceType, ErrorKind, Scalar, Tensor};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn from_slice_to_vec_item() {
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    assert_eq!(t.sizes(), &[2, 3]);
    assert_eq!(t.strides(), &[3, 1]);
    assert_eq!(t.dim(), 2);
    assert_eq!(t.numel(), 6);
    assert_eq!(t.dtype(), DType::F32);
    assert!(t.is_contiguous());
    assert_eq!(
        t.to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    assert!(t.to_vec::<f64>().is_err(), "dtype checked");
    assert!(t.item().is_err(), "item needs one element");
    assert_eq!(t.get(&[1, -1]).unwrap(), Scalar::Float(6.0));
    assert!(t.get(&[2, 0]).is_err());
    assert!(
        Tensor::from_slice(&[1i64, 2], &[3]).is_err(),
        "length checked"
    );
    let v = Tensor::from_vec(vec![7i16], &[]).unwrap();
    assert_eq!(v.dim(), 0);
    assert_eq!(v.item().unwrap(), Scalar::Int(7));
    let b = Tensor::from_bytes(&1.5f64.to_ne_bytes(), &[1], DType::F64).unwrap();
    assert_eq!(b.item().unwrap(), Scalar::Float(1.5));
    assert_eq!(b.to_bytes().unwrap(), 1.5f64.to_ne_bytes());
    assert!(Tensor::from_bytes(&[2], &[1], DType::Bool).is_err());
    assert!(Tensor::from_bytes(&[0, 0, 0], &[1], DType::F32).is_err());
    let s = Tensor::scalar_tensor(&Scalar::Float(2.75), DType::BF16, Device::cpu()).unwrap();
    assert_eq!(s.item().unwrap(), Scalar::Float(2.75));
    assert_eq!(Tensor::from_scalar(3).unwrap().dtype(), DType::I64);
    let c = Tensor::scalar_tensor(&Scalar::Complex(1.0, -2.0), DType::C64, Device::cpu()).unwrap();
    assert_eq!(c.item().unwrap(), Scalar::Complex(1.0, -2.0));
    let h = Tensor::from_slice(&[half::f16::from_f32(0.5)], &[1]).unwrap();
    assert_eq!(h.item().unwrap(), Scalar::Float(0.5));
}

#[test]
fn empty_is_zeroed_and_keyed() {
    let t = Tensor::empty(&[3], DType::I32, Device::cpu()).unwrap();
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![0, 0, 0]);
    let ks = t.key_set();
    assert!(ks.has(DispatchKey::CPU) && ks.has(DispatchKey::ADInplaceOrView));
    // The autograd key joins only when the tensor takes part in autograd.
    assert!(!ks.has(DispatchKey::AutogradCPU));
    let f = Tensor::empty(&[3], DType::F32, Device::cpu()).unwrap();
    f.set_requires_grad(true).unwrap();
    assert!(f.key_set().has(DispatchKey::AutogradCPU));
    assert_eq!(ks.backends().highest(), Some(DispatchKey::CPU));
    assert!(Tensor::empty(&[-1], DType::F32, Device::cpu()).is_err());
    assert!(Tensor::empty(&[i64::MAX, 4], DType::F32, Device::cpu()).is_err());
    let z = Tensor::empty(&[0, 4], DType::F32, Device::cpu()).unwrap();
    assert_eq!(z.numel(), 0);
    assert_eq!(z.to_vec::<f32>().unwrap(), Vec::<f32>::new());
    let many = Tensor::empty(&[1, 2, 1, 2, 1, 2, 1], DType::U8, Device::cpu()).unwrap();
    assert_eq!(many.strides(), &[8, 4, 4, 2, 2, 1, 1]);
    assert_eq!(many.numel(), 8);
    let es = Tensor::empty_strided(&[2, 3], &[1, 2], DType::F32, Device::cpu()).unwrap();
    assert!(!es.is_contiguous());
    assert_eq!(es.storage().nbytes(), 6 * 4);
}

#[test]
fn views_share_storage() {
    let t = Tensor::from_slice(&[0i64, 1, 2, 3, 4, 5], &[2, 3]).unwrap();
    let tr = t.as_strided(&[3, 2], &[1, 3], 0).unwrap(); // transpose
    assert!(tr.shares_storage(&t));
    assert!(!tr.is_contiguous());
    assert_eq!(tr.to_vec::<i64>().unwrap(), vec![0, 3, 1, 4, 2, 5]);
    let row = t.as_strided(&[3], &[1], 3).unwrap();
    assert_eq!(row.storage_offset(), 3);
    row.write::<i64>().unwrap().fill(9);
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![0, 1, 2, 9, 9, 9]);
    assert!(t.as_strided(&[7], &[1], 0).is_err(), "out of storage");
    assert!(t.as_strided(&[2], &[-1], 1).is_err(), "negative stride");
    let mut w = tr.write::<i64>().unwrap();
    assert!(w.as_mut_slice().is_none(), "non-contiguous has no slice");
    assert!(w.set(&[2, 1], 42));
    drop(w);
    assert_eq!(t.get(&[1, 2]).unwrap(), Scalar::Int(42));
}

#[test]
fn resize_follows_out_rules() {
    let t = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let view = t.as_strided(&[2], &[1], 0).unwrap();
    let sizes_before = t.sizes();
    t.resize_(&[2]).unwrap(); // same size: no-op
    t.resize_(&[2, 3]).unwrap(); // grows in place: views see the new storage
    assert_eq!(sizes_before, &[2], "old metadata stays readable");
    assert_eq!(t.sizes(), &[2, 3]);
    assert_eq!(t.strides(), &[3, 1]);
    assert_eq!(
        t.to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 0.0, 0.0, 0.0, 0.0]
    );
    assert_eq!(view.storage().nbytes(), 24);
    t.resize_(&[1]).unwrap(); // shrink keeps storage
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0]);
    assert!(t.resize_(&[-2]).is_err());
    // Growing a storage that is borrowed elsewhere is refused, not raced.
    let r = view.read::<f32>().unwrap();
    let e = t.resize_(&[100]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::BorrowConflict(_)), "{e}");
    drop(r);
    t.resize_(&[100]).unwrap();
}

#[test]
fn borrows_exclude_conflicting_access() {
    let a = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let alias = a.as_strided(&[1], &[1], 1).unwrap();
    let b = Tensor::from_slice(&[10.0f32, 20.0], &[2]).unwrap();
    {
        let r1 = a.read::<f32>().unwrap();
        let r2 = alias.read::<f32>().unwrap(); // many readers
        assert_eq!(r1.as_slice().unwrap(), &[1.0, 2.0]);
        assert_eq!(r2.to_vec(), vec![2.0]);
        assert!(alias.write::<f32>().is_err(), "no writer while read");
    }
    {
        let mut w = a.write::<f32>().unwrap();
        assert!(alias.read::<f32>().is_err(), "no reader while written");
        assert!(a.to_vec::<f32>().is_err());
        w.as_mut_slice().unwrap()[0] = 5.0;
    }
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![5.0, 2.0]);
    // KernelAccess dedups an input that aliases the output (in-place add).
    {
        let acc = KernelAccess::new(&[&a, &alias, &b], &[&a]).unwrap();
        let pa = acc.write_ptr::<f32>(&a).unwrap();
        let pb = acc.read_ptr::<f32>(&b).unwrap();
        assert!(acc.write_ptr::<f32>(&b).is_err(), "b is only read");
        // SAFETY: both storages are borrowed by `acc`; 2 contiguous elements each.
        unsafe {
            for i in 0..2 {
                *pa.add(i) += *pb.add(i);
            }
        }
        assert!(
            b.read::<f32>().is_ok(),
            "readers coexist with KernelAccess readers"
        );
        assert!(b.write::<f32>().is_err());
        assert!(KernelAccess::new(&[&alias], &[]).is_err(), "a is written");
    }
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![15.0, 22.0]);
    // A failed acquisition releases what it took.
    let w = b.write::<f32>().unwrap();
    assert!(KernelAccess::new(&[&a, &b], &[]).is_err());
    drop(w);
    assert!(a.write::<f32>().is_ok());
    // Many tensors (spill past the inline capacity).
    let ts: Vec<Tensor> = (0..10)
        .map(|i| Tensor::from_slice(&[i as f32], &[1]).unwrap())
        .collect();
    let refs: Vec<&Tensor> = ts.iter().collect();
    let acc = KernelAccess::new(&refs, &[]).unwrap();
    assert!(acc.read_ptr::<f32>(&ts[9]).is_ok());
    assert!(ts[9].write::<f32>().is_err());
    drop(acc);
    assert!(ts[9].write::<f32>().is_ok());
}

#[test]
fn kernel_access_with_ptrs_borrows_once_and_gives_element_addresses() {
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let tail = a.as_strided(&[2], &[1], 1).unwrap(); // shares a's storage, offset 1
    let b = Tensor::from_slice(&[10.0f32, 20.0], &[2]).unwrap();
    {
        // `tail` is read and `a` written: one storage, borrowed exclusively.
        let (_acc, [pt, pb], [pa]) = KernelAccess::with_ptrs([&tail, &b], [&a]).unwrap();
        assert_eq!(pt, pa.wrapping_add(4).cast_const(), "offset applied");
        assert!(a.read::<f32>().is_err() && b.write::<f32>().is_err());
        assert!(b.read::<f32>().is_ok(), "b is only read");
        // SAFETY: the storages are borrowed by `_acc`; 2 elements from each address.
        unsafe {
            let (pt, pb, pa) = (pt.cast::<f32>(), pb.cast::<f32>(), pa.cast::<f32>());
            for i in 0..2 {
                *pa.add(i) = *pt.add(i) + *pb.add(i);
            }
        }
    }
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![12.0, 23.0, 3.0]);
    // A conflict releases what was taken: `a` is free again afterwards.
    let w = b.write::<f32>().unwrap();
    assert!(KernelAccess::with_ptrs([&b], [&a]).is_err());
    drop(w);
    assert!(a.write::<f32>().is_ok());
    // More operands than the inline slots take the general path.
    let ts: Vec<Tensor> = (0..8)
        .map(|i| Tensor::from_slice(&[i as f32], &[1]).unwrap())
        .collect();
    let reads: [&Tensor; 7] = std::array::from_fn(|i| &ts[i]);
    let (acc, rp, [wp]) = KernelAccess::with_ptrs(reads, [&ts[7]]).unwrap();
    // SAFETY: every storage is borrowed by `acc`; one f32 each.
    unsafe { *wp.cast::<f32>() = *rp[6].cast::<f32>() + 1.0 };
    assert!(ts[6].write::<f32>().is_err());
    drop(acc);
    assert_eq!(ts[7].to_vec::<f32>().unwrap(), vec![7.0]);
    let meta = Tensor::empty(&[1], opal::DType::F32, opal::Device::meta()).unwrap();
    assert!(
        KernelAccess::with_ptrs([&meta], []).is_err(),
        "no host data"
    );
}

#[test]
fn kernel_access_scoped_holds_for_the_body_and_releases_on_every_exit() {
    let a = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let out = Tensor::from_slice(&[0.0f32, 0.0], &[2]).unwrap();
    let sum = KernelAccess::scoped([&a], [&out], |[pa], [po]| {
        assert!(
            out.read::<f32>().is_err(),
            "out is held for writing in the body"
        );
        assert!(
            a.write::<f32>().is_err(),
            "a is held for reading in the body"
        );
        // SAFETY: both storages are borrowed for the body; 2 f32 each.
        unsafe {
            let (pa, po) = (pa.cast::<f32>(), po.cast::<f32>());
            for i in 0..2 {
                *po.add(i) = *pa.add(i) * 3.0;
            }
            Ok(*po + *po.add(1))
        }
    })
    .unwrap();
    assert_eq!(sum, 9.0);
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
    assert!(
        a.write::<f32>().is_ok() && out.write::<f32>().is_ok(),
        "released on return"
    );
    // An `Err` from the body is passed through, with the borrows released.
    let r: opal::Result<()> = KernelAccess::scoped([&a], [&out], |_, _| {
        Err(opal::OpalError::msg("body failed"))
    });
    assert!(r.unwrap_err().to_string().contains("body failed"));
    assert!(
        a.write::<f32>().is_ok() && out.write::<f32>().is_ok(),
        "released on Err"
    );
    // A panic in the body releases them too.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _: opal::Result<()> = KernelAccess::scoped([&a], [&out], |_, _| panic!("kernel bug"));
    }));
    assert!(caught.is_err());
    assert!(
        a.write::<f32>().is_ok() && out.write::<f32>().is_ok(),
        "released on panic"
    );
    // A conflict is an `Err` before the body runs.
    let w = a.write::<f32>().unwrap();
    let r = KernelAccess::scoped([&a], [&out], |_, _| -> opal::Result<()> {
        panic!("the body must not run on a conflict")
    });
    assert!(r.is_err());
    drop(w);
    assert!(
        out.write::<f32>().is_ok(),
        "out released after the conflict on a"
    );
    // More operands than the inline slots spill, and are all released afterwards.
    let ts: Vec<Tensor> = (0..6)
        .map(|i| Tensor::from_slice(&[i as f32], &[1]).unwrap())
        .collect();
    let reads: [&Tensor; 5] = std::array::from_fn(|i| &ts[i]);
    KernelAccess::scoped(reads, [&ts[5]], |rp, [wp]| {
        assert!(ts[4].write::<f32>().is_err());
        // SAFETY: every storage is borrowed for the body; one f32 each.
        unsafe { *wp.cast::<f32>() = *rp[4].cast::<f32>() * 10.0 };
        Ok(())
    })
    .unwrap();
    assert!(ts.iter().all(|t| t.write::<f32>().is_ok()));
    assert_eq!(ts[5].to_vec::<f32>().unwrap(), vec![40.0]);
}

/// Writes `v` to the single f32 of `out` through `with_ptrs`, and reports whether
/// the storage was left unborrowed while the access was held.
fn write_one_and_probe(out: &Tensor, v: f32) -> bool {
    let (_acc, [], [p]) = KernelAccess::with_ptrs([], [out]).unwrap();
    // SAFETY: one f32 at `p`; the access is held (or waived by `fill_unshared`).
    unsafe { *p.cast::<f32>() = v };
    out.read::<f32>().is_ok()
}

#[test]
fn fill_unshared_waives_the_borrow_only_for_a_sole_owned_handle() {
    // A fresh tensor with one handle: its result write takes no borrow inside, and
    // the waiver ends with the call.
    let mut fresh = Tensor::empty(&[1], DType::F32, Device::cpu()).unwrap();
    // SAFETY: only this thread touches `fresh` while the closure runs.
    let unborrowed = unsafe { fresh.fill_unshared(|t| write_one_and_probe(t, 3.0)) };
    assert!(unborrowed, "the sole handle's storage is not borrowed");
    assert_eq!(fresh.to_vec::<f32>().unwrap(), vec![3.0]);
    assert!(
        !write_one_and_probe(&fresh, 4.0),
        "after the call the borrow is taken again"
    );

    // A second handle (a clone) or a view keeps the usual borrowing.
    let mut shared = Tensor::empty(&[1], DType::F32, Device::cpu()).unwrap();
    let other = shared.clone();
    // SAFETY: as above.
    let unborrowed = unsafe { shared.fill_unshared(|t| write_one_and_probe(t, 5.0)) };
    assert!(!unborrowed, "a cloned tensor is borrowed as usual");
    assert_eq!(other.to_vec::<f32>().unwrap(), vec![5.0]);
    drop(other);
    let base = Tensor::from_slice(&[0.0f32, 0.0], &[2]).unwrap();
    let mut view = base.as_strided(&[1], &[1], 1).unwrap();
    // SAFETY: as above.
    let unborrowed = unsafe { view.fill_unshared(|t| write_one_and_probe(t, 6.0)) };
    assert!(
        !unborrowed,
        "a view shares its base's storage: borrowed as usual"
    );
    assert_eq!(base.to_vec::<f32>().unwrap(), vec![0.0, 6.0]);

    // An error (or panic) inside still ends the waiver.
    let mut t = Tensor::empty(&[1], DType::F32, Device::cpu()).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: as above.
        unsafe { t.fill_unshared(|_| -> () { panic!("kernel failed") }) }
    }));
    assert!(r.is_err());
    assert!(!write_one_and_probe(&t, 1.0), "waiver cleared on unwind");
}

#[test]
fn tensors_are_send_and_sync_and_threads_read_concurrently() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Tensor>();
    let t = Tensor::from_slice(&(0..1000).map(|i| i as f64).collect::<Vec<_>>(), &[1000]).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..100 {
                    let sum: f64 = t.read::<f64>().unwrap().iter().sum();
                    assert_eq!(sum, 499_500.0);
                }
            });
        }
    });
}

struct CountingAllocator {
    live: AtomicUsize,
}
// SAFETY: delegates to CpuAllocator, which keeps the Allocator contract.
unsafe impl Allocator for CountingAllocator {
    fn allocate(&self, device: Device, nbytes: usize) -> opal::Result<NonNull<u8>> {
        self.live.fetch_add(nbytes, Ordering::SeqCst);
        CpuAllocator.allocate(device, nbytes)
    }
    unsafe fn deallocate(&self, device: Device, ptr: NonNull<u8>, nbytes: usize) {
        self.live.fetch_sub(nbytes, Ordering::SeqCst);
        // SAFETY: forwarded from our caller's contract; allocated by CpuAllocator.
        unsafe { CpuAllocator.deallocate(device, ptr, nbytes) }
    }
}

#[test]
fn out_of_tree_allocator_and_device() {
    static ALLOC: CountingAllocator = CountingAllocator {
        live: AtomicUsize::new(0),
    };
    assert!(Tensor::empty(
        &[1],
        DType::F32,
        Device::new(DeviceType::PrivateUse1, Some(0))
    )
    .is_err());
    opal::register_privateuse_backend(DispatchKey::PrivateUse1, "emu").unwrap();
    register_allocator(DeviceType::PrivateUse1, &ALLOC);
    let dev = Device::parse("emu:0").unwrap();
    let t = Tensor::empty(&[4], DType::F32, dev).unwrap();
    assert_eq!(ALLOC.live.load(Ordering::SeqCst), 16);
    assert_eq!(t.device(), dev);
    assert!(t.key_set().has(DispatchKey::PrivateUse1));
    assert!(!t.key_set().has(DispatchKey::AutogradPrivateUse1));
    t.set_requires_grad(true).unwrap();
    assert!(t.key_set().has(DispatchKey::AutogradPrivateUse1));
    t.set_requires_grad(false).unwrap();
    assert_eq!(t.to_string(), "tensor([0., 0., 0., 0.], device='emu:0')");
    let v = t.as_strided(&[2], &[1], 2).unwrap();
    drop(t);
    assert_eq!(
        ALLOC.live.load(Ordering::SeqCst),
        16,
        "view keeps storage alive"
    );
    drop(v);
    assert_eq!(ALLOC.live.load(Ordering::SeqCst), 0);
}

#[test]
fn meta_tensors_have_no_data() {
    let m = Tensor::empty(&[2, 3], DType::F32, Device::meta()).unwrap();
    assert!(m.key_set().has(DispatchKey::Meta));
    assert!(m.data_ptr::<f32>().is_err());
    assert!(m.to_vec::<f32>().is_err());
    assert_eq!(m.to_string(), "tensor(..., device='meta', size=(2, 3))");
    m.resize_(&[1000, 1000]).unwrap();
    assert_eq!(m.numel(), 1_000_000);
}

#[test]
fn printing_matches_pytorch_repr() {
    let p = |t: Tensor| t.to_string();
    assert_eq!(
        p(Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap()),
        "tensor([1., 2., 3.])"
    );
    assert_eq!(
        p(Tensor::from_slice(&[0.1f32, 0.2, 0.3], &[3]).unwrap()),
        "tensor([0.1000, 0.2000, 0.3000])"
    );
    assert_eq!(
        p(Tensor::from_slice(&[1i64, 2, 3, 4], &[2, 2]).unwrap()),
        "tensor([[1, 2],\n        [3, 4]])"
    );
    assert_eq!(
        p(Tensor::from_slice(&[1i32, 2], &[2]).unwrap()),
        "tensor([1, 2], dtype=torch.int32)"
    );
    assert_eq!(
        p(Tensor::from_slice(&[-1i64, 10], &[2]).unwrap()),
        "tensor([-1, 10])"
    );
    assert_eq!(
        p(Tensor::from_slice(&[3.5f32], &[]).unwrap()),
        "tensor(3.5000)"
    );
    assert_eq!(
        p(Tensor::from_slice(&[true, false], &[2]).unwrap()),
        "tensor([ True, False])"
    );
    assert_eq!(
        p(Tensor::from_slice(&[1e-5f32, 1.0], &[2]).unwrap()),
        "tensor([1.0000e-05, 1.0000e+00])"
    );
    assert_eq!(
        p(Tensor::from_slice(&[1.0f64, 2.0], &[2]).unwrap()),
        "tensor([1., 2.], dtype=torch.float64)"
    );
    assert_eq!(
        p(Tensor::from_slice(&[f32::NAN, 1.5, f32::INFINITY], &[3]).unwrap()),
        "tensor([   nan, 1.5000,    inf])"
    );
    assert_eq!(
        p(Tensor::empty(&[0, 3], DType::F32, Device::cpu()).unwrap()),
        "tensor([], size=(0, 3))"
    );
    assert_eq!(
        p(Tensor::empty(&[0], DType::I32, Device::cpu()).unwrap()),
        "tensor([], dtype=torch.int32)"
    );
    let c = Tensor::from_slice(
        &[
            opal::Complex::new(1.0f32, 2.0),
            opal::Complex::new(3.0, -1.0),
        ],
        &[2],
    )
    .unwrap();
    assert_eq!(p(c), "tensor([1.+2.j, 3.-1.j])");
    let big: Vec<f32> = (0..2000).map(|i| i as f32).collect();
    assert_eq!(
        p(Tensor::from_slice(&big, &[2000]).unwrap()),
        "tensor([   0.,    1.,    2.,  ..., 1997., 1998., 1999.])"
    );
    let big2: Vec<i64> = (0..1200).collect();
    assert_eq!(
        p(Tensor::from_slice(&big2, &[400, 3]).unwrap()),
        "tensor([[   0,    1,    2],\n        [   3,    4,    5],\n        [   6,    7,    8],\n        ...,\n        [1191, 1192, 1193],\n        [1194, 1195, 1196],\n        [1197, 1198, 1199]])"
    );
    let three = Tensor::from_slice(&(0..8i64).collect::<Vec<_>>(), &[2, 2, 2]).unwrap();
    assert_eq!(
        p(three),
        "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])"
    );
    // Long rows wrap at 80 columns like PyTorch.
    let row: Vec<f32> = (0..20).map(|i| i as f32 + 0.5).collect();
    assert_eq!(
        p(Tensor::from_slice(&row, &[20]).unwrap()),
        "tensor([ 0.5000,  1.5000,  2.5000,  3.5000,  4.5000,  5.5000,  6.5000,  7.5000,\n         8.5000,  9.5000, 10.5000, 11.5000, 12.5000, 13.5000, 14.5000, 15.5000,\n        16.5000, 17.5000, 18.5000, 19.5000])"
    );
    let t = Tensor::from_slice(&[1.0f32], &[1]).unwrap();
    assert_eq!(format!("{t:?}"), format!("{t}"));
}

#[test]
fn metadata_reads_race_free_with_resize() {
    let t = Tensor::empty(&[4], DType::F32, Device::cpu()).unwrap();
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                for _ in 0..2000 {
                    // Each read sees one whole metadata version; two separate reads
                    // may see different versions while another thread resizes, so
                    // only per-read invariants are checked.
                    let n: i64 = t.sizes().iter().product();
                    assert!(n == 4 || n == 2, "{n}");
                    let strides = t.strides();
                    assert!(strides == [1] || strides == [2, 1], "{strides:?}");
                }
            });
        }
        s.spawn(|| {
            for i in 0..2000 {
                let shape: &[i64] = if i % 2 == 0 { &[2, 2] } else { &[2] };
                t.resize_(shape).unwrap();
            }
        });
    });
    assert!(t.numel() == 4 || t.numel() == 2);
}

#[test]
fn tiny_and_large_storages() {
    // Tiny CPU tensors keep their bytes inline; values survive growth to the heap.
    let t = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], &[4]).unwrap();
    assert_eq!(t.storage().nbytes(), 32);
    t.resize_(&[64]).unwrap();
    assert_eq!(&t.to_vec::<f64>().unwrap()[..5], &[1.0, 2.0, 3.0, 4.0, 0.0]);
    let big = Tensor::empty(&[1 << 16], DType::F32, Device::cpu()).unwrap();
    assert!(big.to_vec::<f32>().unwrap().iter().all(|x| *x == 0.0));
    let p = big.data_ptr::<f32>().unwrap() as usize;
    assert_eq!(p % 64, 0, "large blocks are 64-byte aligned");
    let c = Tensor::empty(&[1], DType::C128, Device::cpu()).unwrap();
    assert_eq!(c.data_ptr::<opal::Complex<f64>>().unwrap() as usize % 8, 0);
}

/// The CPU allocator's promise (zeroed bytes; 64-aligned from 64 bytes up, below
/// that aligned to `min(16, largest power of two <= n)`) at every size around its
/// padded blocks (64..=960 bytes) and the plain layouts on either side, with blocks
/// freed out of order.
#[test]
fn cpu_blocks_are_zeroed_and_aligned_at_every_size() {
    let dev = Device::cpu();
    let sizes: Vec<usize> = (1..80)
        .chain(950..980)
        .chain([1024, 4095, 4096, 5000])
        .collect();
    let mut blocks = Vec::new();
    for &n in &sizes {
        let p = CpuAllocator.allocate(dev, n).unwrap();
        let pow2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
        let want = if n >= 64 { 64 } else { pow2.min(16) };
        assert_eq!(p.as_ptr() as usize % want, 0, "{n} bytes: {:p}", p.as_ptr());
        // SAFETY: the allocator promises n initialized, writable bytes at p.
        let bytes = unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), n) };
        assert!(bytes.iter().all(|&b| b == 0), "{n} bytes not zeroed");
        bytes.fill(0xA5);
        blocks.push((p, n));
    }
    // Free every other block first, then the rest.
    for &(p, n) in blocks.iter().step_by(2) {
        // SAFETY: allocated above with this size, freed once.
        unsafe { CpuAllocator.deallocate(dev, p, n) };
    }
    for &(p, n) in blocks.iter().skip(1).step_by(2) {
        // SAFETY: allocated above with this size, freed once.
        unsafe { CpuAllocator.deallocate(dev, p, n) };
    }
}

#[test]
fn bad_sizes_name_the_first_problem() {
    let e = Tensor::empty(&[2, -3], DType::F32, Device::cpu()).unwrap_err();
    assert!(
        e.to_string()
            .contains("negative dimension -3 in size [2, -3]"),
        "{e}"
    );
    // The product overflows at the second size, before the negative one is reached.
    let big = 1i64 << 40;
    let e = Tensor::empty(&[big, big, -1], DType::F32, Device::cpu()).unwrap_err();
    assert!(e.to_string().contains("overflows"), "{e}");
    let e = Tensor::empty(&[-1, big, big], DType::F32, Device::cpu()).unwrap_err();
    assert!(e.to_string().contains("negative dimension -1"), "{e}");
}
