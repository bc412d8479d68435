//! Bool tensors hold only 0 and 1 bytes: large bool results made from
//! recycled CPU memory work, and no other dtype's view can write into a bool
//! tensor's storage (its bytes could become 2, which no kernel may read as bool).

use opal::{ops, DType, Scalar, Tensor};

#[test]
fn large_bool_results_from_recycled_memory_work() {
    opal_cpu::init().unwrap();
    let n = 1 << 18;
    for _ in 0..3 {
        // Leaves blocks full of 0x40400000 (3.0f32) in the CPU allocator's cache.
        let junk = ops::full(&[n], &Scalar::Float(3.0)).unwrap();
        drop(ops::mul_tensor(&junk, &junk).unwrap());
        drop(junk);
        let x = Tensor::from_vec(vec![1.0f32; n as usize], &[n]).unwrap();
        let zero = Tensor::from_vec(vec![0.0f32; n as usize], &[n]).unwrap();
        let b = ops::gt_tensor(&x, &zero).unwrap();
        assert_eq!(b.dtype(), DType::Bool);
        assert!(b.to_vec::<bool>().unwrap().iter().all(|&v| v));
        let nb = ops::logical_not(&b).unwrap();
        assert!(nb.to_vec::<bool>().unwrap().iter().all(|&v| !v));
    }
}

#[test]
fn other_dtypes_cannot_alias_a_bool_storage() {
    opal_cpu::init().unwrap();
    let b = Tensor::from_slice(&[true, false, true, true], &[4]).unwrap();
    let bytes = Tensor::from_storage(b.storage_handle(), &[4], &[1], 0, DType::U8);
    let msg = bytes
        .expect_err("a u8 view of a bool storage could write 2")
        .to_string();
    assert!(msg.contains("bool"), "{msg}");
    // And the other way: a bool view over a byte tensor's storage.
    let u = Tensor::from_slice(&[1u8, 0, 1, 0], &[4]).unwrap();
    let msg = Tensor::from_storage(u.storage_handle(), &[4], &[1], 0, DType::Bool)
        .expect_err("a bool view of a u8 storage could read 2")
        .to_string();
    assert!(msg.contains("bool"), "{msg}");
    // Views of the same dtype are fine.
    let v = Tensor::from_storage(b.storage_handle(), &[2], &[1], 2, DType::Bool).unwrap();
    assert_eq!(v.to_vec::<bool>().unwrap(), vec![true, true]);
}
