//! The device-runtime suite: on the example `emu` device, device counts and availability,
//! the per-thread current device and its guard, index validation wherever a device
//! makes tensors, per-index generators, memory statistics through `opal::device`,
//! pinned host memory, moving tensors between cpu and emu, printing emu
//! tensors, streams (asynchronous kernels, the current stream, ordering between
//! streams), events (query, synchronize, waits, timing) and autocast. Files and
//! backend metadata are in `device_serialize.rs`.
//!
//! One body, two builds: `tests/device_runtime.rs` runs it on the linked emu,
//! `plugins/tests/tests/emu_device_runtime.rs` on the emu plugin (its
//! `crate::common` loads the plugin). The few things only the device itself can
//! say (its pool's bytes, pinned bytes, a slow kernel) come from `crate::common`.
//!
//! Memory counters and default generators are process-wide, and the harness runs
//! tests on several threads, so every test that allocates emu memory or draws
//! random numbers holds `common::serial`.

use std::time::{Duration, Instant};

use opal::autocast::{self, AutocastGuard};
use opal::device::{self, DeviceGuard, Event, StreamGuard};
use opal::ops::TensorOps;
use opal::{ops, DType, Device, DeviceType, Generator, Scalar, Stream, Tensor};

use crate::common::{self, allocated, emu, floats, msg, serial, setup};

// ---- device count and availability ----

#[test]
fn emu_has_two_devices_and_emu2_one() {
    setup();
    let expected = common::expected_device_count();
    assert_eq!(
        device::device_count(DeviceType::PrivateUse1).unwrap(),
        expected
    );
    if std::env::var_os("OPAL_EMU_DEVICES").is_none() {
        assert_eq!(expected, 2);
    }
    assert_eq!(device::device_count(DeviceType::PrivateUse2).unwrap(), 1);
    assert_eq!(device::device_count(DeviceType::Cpu).unwrap(), 1);
}

#[test]
fn registered_types_are_available_and_others_are_not() {
    setup();
    assert!(device::is_available(DeviceType::PrivateUse1));
    assert!(device::is_available(DeviceType::PrivateUse2));
    assert!(device::is_available(DeviceType::Cpu));
    assert!(!device::is_available(DeviceType::Cuda));
    let types = device::registered_device_types();
    for t in [
        DeviceType::Cpu,
        DeviceType::PrivateUse1,
        DeviceType::PrivateUse2,
    ] {
        assert!(types.contains(&t), "{t} is registered");
    }
    assert_eq!(device::accelerator(), Some(DeviceType::PrivateUse1));
}

#[test]
fn device_count_of_a_type_without_runtime_names_what_exists() {
    setup();
    let m = msg(device::device_count(DeviceType::Cuda));
    assert!(m.contains("'cuda'"), "{m}");
    assert!(m.contains("cpu, emu, emu2"), "{m}");
}

#[test]
fn registering_hooks_whose_init_fails_is_refused() {
    struct Broken;
    impl device::DeviceHooks for Broken {
        fn init(&self) -> opal::Result<()> {
            Err(opal::OpalError::device("no driver"))
        }
        fn device_count(&self) -> usize {
            1
        }
    }
    setup();
    let m = msg(device::register_hooks(
        DeviceType::PrivateUse3,
        Box::new(Broken),
    ));
    assert!(m.contains("no driver"), "{m}");
    assert!(device::hooks(DeviceType::PrivateUse3).is_err());
}

// ---- current device per thread ----

#[test]
fn current_device_starts_at_zero() {
    setup();
    assert_eq!(device::current_device(DeviceType::PrivateUse1), 0);
    assert_eq!(device::current_device(DeviceType::Cpu), 0);
}

#[test]
fn set_device_changes_this_threads_current_device_only() {
    setup();
    device::set_device(emu(1)).unwrap();
    assert_eq!(device::current_device(DeviceType::PrivateUse1), 1);
    let other = std::thread::spawn(|| device::current_device(DeviceType::PrivateUse1))
        .join()
        .unwrap();
    assert_eq!(other, 0, "another thread keeps its own current device");
    assert_eq!(
        device::current_device(DeviceType::PrivateUse2),
        0,
        "other types are unaffected"
    );
    device::set_device(emu(0)).unwrap();
    assert_eq!(device::current_device(DeviceType::PrivateUse1), 0);
}

#[test]
fn exchange_device_returns_the_previous_index() {
    setup();
    assert_eq!(device::exchange_device(emu(1)).unwrap(), 0);
    assert_eq!(device::exchange_device(emu(0)).unwrap(), 1);
    assert_eq!(device::current_device(DeviceType::PrivateUse1), 0);
}

#[test]
fn set_device_rejects_bad_indices_and_missing_ones() {
    setup();
    let m = msg(device::set_device(emu(5)));
    assert!(m.contains("'emu:5'") && m.contains("2 devices"), "{m}");
    assert!(m.contains("emu:0 to emu:1"), "{m}");
    let m = msg(device::set_device(Device::new(
        DeviceType::PrivateUse1,
        None,
    )));
    assert!(m.contains("needs a device with an index"), "{m}");
    let m = msg(device::set_device(Device::new(DeviceType::Cuda, Some(0))));
    assert!(m.contains("'cuda'"), "{m}");
    assert_eq!(device::current_device(DeviceType::PrivateUse1), 0);
}

#[test]
fn guard_restores_the_device_on_drop() {
    setup();
    {
        let g = DeviceGuard::new(emu(1)).unwrap();
        assert_eq!(g.original_index(), 0);
        assert_eq!(device::current_device(DeviceType::PrivateUse1), 1);
    }
    assert_eq!(device::current_device(DeviceType::PrivateUse1), 0);
}

#[test]
fn nested_guards_restore_in_order() {
    setup();
    let outer = DeviceGuard::new(emu(1)).unwrap();
    {
        let _inner = DeviceGuard::new(emu(0)).unwrap();
        assert_eq!(device::current_device(DeviceType::PrivateUse1), 0);
    }
    assert_eq!(device::current_device(DeviceType::PrivateUse1), 1);
    drop(outer);
    assert_eq!(device::current_device(DeviceType::PrivateUse1), 0);
}

/// A tensor always carries a concrete device: one made or moved to `emu` (no index)
/// lands on the current emu device, `emu:0` outside any guard, as PyTorch does.
#[test]
fn tensors_made_or_moved_without_an_index_get_the_current_device() {
    setup();
    // Allocates on emu: keeps out of the way of the tests counting pool bytes.
    let _s = serial();
    let any_emu = Device::new(DeviceType::PrivateUse1, None);
    let host = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let made = |dev| ops::zeros::call(&[2], Some(DType::F32), None, Some(dev), None).unwrap();
    assert_eq!(made(any_emu).device(), emu(0));
    assert_eq!(host.to(any_emu).unwrap().device(), emu(0));
    assert_eq!(
        Tensor::empty(&[2], DType::F32, any_emu).unwrap().device(),
        emu(0)
    );
    {
        let _g = DeviceGuard::new(emu(1)).unwrap();
        assert_eq!(made(any_emu).device(), emu(1));
        assert_eq!(host.to(any_emu).unwrap().device(), emu(1));
        assert_eq!(
            Tensor::empty(&[2], DType::F32, any_emu).unwrap().device(),
            emu(1)
        );
        // An explicit index wins over the guard.
        assert_eq!(made(emu(0)).device(), emu(0));
        let y = (&made(any_emu) + &made(any_emu)).unwrap();
        assert_eq!(y.device(), emu(1));
    }
    assert_eq!(made(any_emu).device(), emu(0));
}

#[test]
fn guard_restores_the_device_when_a_panic_unwinds() {
    setup();
    let r = std::panic::catch_unwind(|| {
        let _g = DeviceGuard::new(emu(1)).unwrap();
        assert_eq!(device::current_device(DeviceType::PrivateUse1), 1);
        panic!("boom");
    });
    assert!(r.is_err());
    assert_eq!(device::current_device(DeviceType::PrivateUse1), 0);
}

#[test]
fn a_guard_on_an_invalid_device_changes_nothing() {
    setup();
    assert!(DeviceGuard::new(emu(7)).is_err());
    assert_eq!(device::current_device(DeviceType::PrivateUse1), 0);
}

// ---- index validation ----

#[test]
fn empty_on_a_missing_device_names_it_and_the_count() {
    let _s = serial();
    let m = msg(Tensor::empty(&[2], DType::F32, emu(7)));
    assert!(m.contains("'emu:7'"), "{m}");
    assert!(m.contains("emu has 2 devices"), "{m}");
    let m = msg(Tensor::empty_strided(&[2], &[1], DType::F32, emu(2)));
    assert!(m.contains("'emu:2'"), "{m}");
    let m = msg(Tensor::empty(
        &[1],
        DType::F32,
        Device::new(DeviceType::PrivateUse2, Some(1)),
    ));
    assert!(
        m.contains("'emu2:1'") && m.contains("emu2 has 1 device "),
        "{m}"
    );
}

#[test]
fn factory_ops_validate_the_device() {
    let _s = serial();
    let m = msg(ops::full::call(
        &[2],
        &Scalar::Float(1.0),
        Some(DType::F32),
        None,
        Some(emu(3)),
        None,
    ));
    assert!(m.contains("'emu:3'"), "{m}");
    let ok = ops::full::call(
        &[2],
        &Scalar::Float(1.0),
        Some(DType::F32),
        None,
        Some(emu(1)),
        None,
    )
    .unwrap();
    assert_eq!(ok.device(), emu(1));
}

#[test]
fn to_validates_the_target_device() {
    let _s = serial();
    let t = floats(&[1.0, 2.0], &[2]);
    let m = msg(t.to(emu(9)));
    assert!(m.contains("'emu:9'") && m.contains("2 devices"), "{m}");
    let m = msg(t.to(Device::new(DeviceType::Cpu, Some(1))));
    assert!(
        m.contains("'cpu:1'") && m.contains("cpu has 1 device "),
        "{m}"
    );
}

// ---- generators per device index ----

#[test]
fn each_index_has_its_own_default_generator_and_emu_means_the_current_one() {
    let _s = serial();
    let g0 = Generator::default_for_device(emu(0));
    let g1 = Generator::default_for_device(emu(1));
    assert!(!g0.ptr_eq(&g1));
    assert_eq!(g1.device(), emu(1));
    let plain = Device::new(DeviceType::PrivateUse1, None);
    assert!(Generator::default_for_device(plain).ptr_eq(&g0));
    let _g = DeviceGuard::new(emu(1)).unwrap();
    assert!(Generator::default_for_device(plain).ptr_eq(&g1));
}

#[test]
fn new_for_validates_the_device() {
    setup();
    let g = Generator::new_for(emu(1)).unwrap();
    assert_eq!(g.device(), emu(1));
    let m = msg(Generator::new_for(emu(4)));
    assert!(m.contains("'emu:4'"), "{m}");
}

#[test]
fn manual_seed_and_initial_seed() {
    setup();
    let g = Generator::new_for(emu(0)).unwrap();
    g.manual_seed(1234);
    assert_eq!(g.initial_seed(), 1234);
    let a: Vec<u64> = (0..4).map(|_| g.next_u64()).collect();
    g.manual_seed(1234);
    let b: Vec<u64> = (0..4).map(|_| g.next_u64()).collect();
    assert_eq!(a, b);
}

#[test]
fn seed_picks_a_fresh_seed_and_reports_it() {
    setup();
    let g = Generator::new_for(emu(1)).unwrap();
    let s1 = g.seed();
    assert_eq!(g.initial_seed(), s1);
    let s2 = g.seed();
    assert_ne!(s1, s2, "two calls give different seeds");
}

#[test]
fn state_round_trip_replays_the_stream() {
    setup();
    let g = Generator::new_for(emu(1)).unwrap();
    g.manual_seed(7);
    g.next_u32(); // mid-block: the buffered words are part of the state
    let state = g.get_state();
    let a: Vec<u32> = (0..9).map(|_| g.next_u32()).collect();
    let h = Generator::new_for(emu(0)).unwrap();
    h.set_state(&state).unwrap();
    let b: Vec<u32> = (0..9).map(|_| h.next_u32()).collect();
    assert_eq!(a, b);
    assert_eq!(h.initial_seed(), 7);
}

#[test]
fn a_state_of_the_wrong_length_is_an_error() {
    setup();
    let g = Generator::new_for(emu(1)).unwrap();
    let before = g.get_state();
    let m = msg(g.set_state(&before[..20]));
    assert!(m.contains("'emu:1'") && m.contains("20 bytes"), "{m}");
    assert_eq!(g.get_state(), before, "a refused state changes nothing");
}

fn rand_on(d: Device) -> Vec<f32> {
    let t = ops::rand::call(&[6], Some(DType::F32), None, Some(d), None).expect("rand");
    assert_eq!(t.device(), d);
    t.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap()
}

#[test]
fn seeding_emu1_does_not_affect_emu0() {
    let _s = serial();
    let (g0, g1) = (
        Generator::default_for_device(emu(0)),
        Generator::default_for_device(emu(1)),
    );
    g0.manual_seed(5);
    let first = rand_on(emu(0));
    g0.manual_seed(5);
    g1.manual_seed(99);
    let on1 = rand_on(emu(1));
    assert_eq!(
        rand_on(emu(0)),
        first,
        "emu:0's stream is untouched by emu:1"
    );
    g1.manual_seed(99);
    assert_eq!(rand_on(emu(1)), on1, "emu:1 reproduces from its own seed");
    assert_ne!(on1, first);
}

// ---- memory statistics ----

#[test]
fn allocated_grows_with_a_tensor_and_shrinks_when_it_drops() {
    let _s = serial();
    let d = emu(0);
    let before = allocated(d);
    let t = Tensor::empty(&[100], DType::F32, d).unwrap(); // 400 bytes -> 448 (64-byte blocks)
    assert_eq!(allocated(d), before + 448);
    drop(t);
    assert_eq!(allocated(d), before);
}

#[test]
fn peak_tracks_the_high_water_mark_and_resets() {
    let _s = serial();
    let d = emu(0);
    device::reset_peak_memory_stats(d).unwrap();
    let base = allocated(d);
    assert_eq!(device::max_memory_allocated(d).unwrap(), base);
    let a = Tensor::empty(&[256], DType::F32, d).unwrap(); // 1024 bytes
    let b = Tensor::empty(&[16], DType::F32, d).unwrap(); // 64 bytes
    drop(a);
    assert_eq!(device::max_memory_allocated(d).unwrap(), base + 1088);
    device::reset_peak_memory_stats(d).unwrap();
    assert_eq!(device::max_memory_allocated(d).unwrap(), base + 64);
    drop(b);
}

#[test]
fn freed_blocks_stay_reserved_until_empty_cache() {
    let _s = serial();
    let d = emu(0);
    device::empty_cache(d).unwrap();
    assert_eq!(device::memory_reserved(d).unwrap(), allocated(d));
    let t = Tensor::empty(&[1000], DType::F64, d).unwrap(); // 8000 -> 8000 bytes
    let with = device::memory_reserved(d).unwrap();
    drop(t);
    assert_eq!(
        device::memory_reserved(d).unwrap(),
        with,
        "cached, still reserved"
    );
    assert_eq!(allocated(d) + 8000, with);
    device::empty_cache(d).unwrap();
    assert_eq!(device::memory_reserved(d).unwrap(), allocated(d));
}

#[test]
fn a_cached_block_serves_the_next_request_of_its_size() {
    let _s = serial();
    let d = emu(0);
    let t = Tensor::empty(&[333], DType::F32, d).unwrap();
    let addr = t.storage().data_ptr() as usize;
    drop(t);
    let reserved = device::memory_reserved(d).unwrap();
    let u = Tensor::empty(&[333], DType::F32, d).unwrap();
    assert_eq!(
        u.storage().data_ptr() as usize,
        addr,
        "the cached block is reused"
    );
    assert_eq!(device::memory_reserved(d).unwrap(), reserved);
}

#[test]
fn each_device_index_has_its_own_pool() {
    let _s = serial();
    let (a0, a1) = (allocated(emu(0)), allocated(emu(1)));
    let t = Tensor::empty(&[32], DType::F32, emu(1)).unwrap(); // 128 bytes
    assert_eq!(allocated(emu(1)), a1 + 128);
    assert_eq!(allocated(emu(0)), a0, "emu:0 is unaffected");
    assert_eq!(common::pool_bytes_in_use(emu(1)), a1 + 128);
    drop(t);
    assert_eq!(allocated(emu(1)), a1);
}

#[test]
fn a_device_without_index_allocates_on_the_current_device() {
    let _s = serial();
    let plain = Device::new(DeviceType::PrivateUse1, None);
    let a1 = allocated(emu(1));
    let _g = DeviceGuard::new(emu(1)).unwrap();
    assert_eq!(
        allocated(plain),
        a1,
        "stats of `emu` are the current device's"
    );
    let t = Tensor::empty(&[16], DType::F32, plain).unwrap();
    assert_eq!(allocated(emu(1)), a1 + 64);
    drop(_g);
    drop(t); // freed into emu:1's pool although emu:0 is current again
    assert_eq!(allocated(emu(1)), a1);
}

#[test]
fn memory_functions_name_bad_devices_and_missing_statistics() {
    let _s = serial();
    let m = msg(device::memory_allocated(emu(5)));
    assert!(m.contains("'emu:5'"), "{m}");
    let m = msg(device::memory_reserved(Device::cpu()));
    assert!(m.contains("cpu") && m.contains("does not report"), "{m}");
    device::empty_cache(Device::cpu()).expect("nothing to release on the cpu");
    let m = msg(device::max_memory_allocated(Device::new(
        DeviceType::Cuda,
        Some(0),
    )));
    assert!(m.contains("'cuda'"), "{m}");
}

// ---- pinned memory ----

#[test]
fn pin_memory_copies_into_pinned_host_memory() {
    let _s = serial();
    let t = floats(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    assert!(!t.is_pinned());
    let before = common::pinned_bytes_in_use();
    let p = t.pin_memory().unwrap();
    assert!(p.is_pinned());
    assert!(p.device().is_cpu());
    assert_eq!(p.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
    assert_eq!(common::pinned_bytes_in_use(), before + 16);
    assert!(p.pin_memory().unwrap().is_same(&p), "already pinned");
    drop(p);
    assert_eq!(common::pinned_bytes_in_use(), before);
}

#[test]
fn pinned_tensors_of_strided_views_hold_the_logical_values() {
    let _s = serial();
    let t = floats(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let col = t.as_strided(&[2], &[3], 1).unwrap();
    let p = col.pin_memory_for(DeviceType::PrivateUse2).unwrap();
    assert!(p.is_pinned());
    assert_eq!(p.to_vec::<f32>().unwrap(), vec![2.0, 5.0]);
    let on = p.to(emu(0)).unwrap();
    assert_eq!(
        on.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap(),
        vec![2.0, 5.0]
    );
}

#[test]
fn pin_memory_of_a_device_tensor_or_without_host_allocator_fails() {
    let _s = serial();
    let e = floats(&[1.0], &[1]).to(emu(0)).unwrap();
    assert!(!e.is_pinned());
    let m = msg(e.pin_memory());
    assert!(
        m.contains("only cpu tensors") && m.contains("'emu:0'"),
        "{m}"
    );
    let m = msg(floats(&[1.0], &[1]).pin_memory_for(DeviceType::Cpu));
    assert!(m.contains("'cpu' has no host allocator"), "{m}");
}

// ---- moving tensors ----

#[test]
fn to_emu_and_back_keeps_values_for_several_dtypes() {
    let _s = serial();
    let f = floats(&[1.5, -2.0, 3.25], &[3]);
    let back = f.to(emu(0)).unwrap().to(Device::cpu()).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![1.5, -2.0, 3.25]);
    let i = Tensor::from_slice(&[i64::MIN, 0, i64::MAX], &[3]).unwrap();
    let e = i.to(emu(1)).unwrap();
    assert_eq!(e.device(), emu(1));
    assert_eq!(
        e.to(Device::cpu()).unwrap().to_vec::<i64>().unwrap(),
        vec![i64::MIN, 0, i64::MAX]
    );
    let b = Tensor::from_slice(&[true, false], &[2]).unwrap();
    let rb = b.to(emu(0)).unwrap().to(Device::cpu()).unwrap();
    assert_eq!(rb.to_vec::<bool>().unwrap(), vec![true, false]);
}

#[test]
fn to_the_same_device_and_dtype_is_the_tensor_itself() {
    let _s = serial();
    let e = floats(&[1.0], &[1]).to(emu(0)).unwrap();
    assert!(e.to(emu(0)).unwrap().is_same(&e));
    assert!(e.to_dtype(DType::F32).unwrap().is_same(&e));
    let c = floats(&[1.0], &[1]);
    assert!(c.to(Device::cpu()).unwrap().is_same(&c));
}

#[test]
fn to_dtype_converts_on_the_device() {
    let _s = serial();
    let e = floats(&[1.0, 2.5], &[2]).to(emu(0)).unwrap();
    let d = e.to_dtype(DType::F64).unwrap();
    assert_eq!((d.device(), d.dtype()), (emu(0), DType::F64));
    assert_eq!(
        d.to(Device::cpu()).unwrap().to_vec::<f64>().unwrap(),
        vec![1.0, 2.5]
    );
}

#[test]
fn to_device_dtype_moves_and_converts_at_once() {
    let _s = serial();
    let c = floats(&[1.0, 7.0, -3.0], &[3]);
    let e = c.to_device_dtype(emu(1), DType::I32).unwrap();
    assert_eq!((e.device(), e.dtype()), (emu(1), DType::I32));
    assert_eq!(
        e.to(Device::cpu()).unwrap().to_vec::<i32>().unwrap(),
        vec![1, 7, -3]
    );
    let back = e.to_device_dtype(Device::cpu(), DType::F32).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![1.0, 7.0, -3.0]);
}

#[test]
fn to_between_emu_devices_copies_into_the_other_pool() {
    let _s = serial();
    let e0 = floats(&[4.0, 5.0], &[2]).to(emu(0)).unwrap();
    let a1 = allocated(emu(1));
    let e1 = e0.to(emu(1)).unwrap();
    assert_eq!(e1.device(), emu(1));
    assert_eq!(allocated(emu(1)), a1 + 64);
    assert_eq!(
        e1.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap(),
        vec![4.0, 5.0]
    );
}

#[test]
fn strided_views_move_by_their_logical_values() {
    let _s = serial();
    let c = floats(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let t = c.as_strided(&[3, 2], &[1, 3], 0).unwrap(); // the transpose
    let back = t.to(emu(0)).unwrap().to(Device::cpu()).unwrap();
    assert_eq!(
        back.to_vec::<f32>().unwrap(),
        vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
}

#[test]
fn to_an_undefined_tensor_is_an_error() {
    setup();
    let m = msg(Tensor::undefined().to(emu(0)));
    assert!(m.contains("undefined"), "{m}");
}

// ---- printing ----

#[test]
fn emu_tensors_print_their_values_with_the_device() {
    let _s = serial();
    let e = floats(&[1.0, 2.0, 3.0], &[3]).to(emu(1)).unwrap();
    assert_eq!(e.to_string(), "tensor([1., 2., 3.], device='emu:1')");
    let i = Tensor::from_slice(&[1i32, -2], &[2])
        .unwrap()
        .to(emu(0))
        .unwrap();
    assert_eq!(
        i.to_string(),
        "tensor([ 1, -2], device='emu:0', dtype=torch.int32)"
    );
}

#[test]
fn empty_emu_tensors_print_like_empty_cpu_ones() {
    let _s = serial();
    let e = Tensor::empty(&[0], DType::F32, emu(0)).unwrap();
    assert_eq!(e.to_string(), "tensor([], device='emu:0')");
}

#[test]
fn factories_with_pin_memory_make_pinned_cpu_tensors() {
    let _s = serial();
    let z = ops::zeros::call(&[3], Some(DType::F32), None, None, Some(true)).unwrap();
    assert!(z.is_pinned() && z.device().is_cpu());
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0; 3]);
    let f = ops::full::call(&[2], &Scalar::Int(7), None, None, None, Some(true)).unwrap();
    assert!(f.is_pinned());
    assert_eq!(f.to_vec::<i64>().unwrap(), vec![7, 7]);
    let like = ops::ones_like::call(&f, None, None, None, Some(true), None).unwrap();
    assert!(like.is_pinned());
    let plain = ops::zeros::call(&[3], Some(DType::F32), None, None, Some(false)).unwrap();
    assert!(!plain.is_pinned());
}

// ---- streams ----
//
// `common::hold` stands for a slow kernel: work queued on that stream after it
// starts later (the linked emu runs kernels on a worker thread per device; the
// emu plugin's streams are timelines whose kernels compute at once).

fn hold(s: Stream, ms: u64) {
    common::hold(s, Duration::from_millis(ms));
}

#[test]
fn each_device_starts_on_its_default_stream() {
    setup();
    for i in 0..2 {
        let s = device::current_stream(emu(i)).unwrap();
        assert_eq!(s, Stream::default_for(emu(i)));
        assert_eq!(device::default_stream(emu(i)).unwrap().id, 0);
    }
    // Without an index: the thread's current device.
    let _g = DeviceGuard::new(emu(1)).unwrap();
    let s = device::current_stream(Device::parse("emu").unwrap()).unwrap();
    assert_eq!(s.device, emu(1));
}

#[test]
fn new_streams_are_distinct_and_not_the_default() {
    setup();
    let a = device::new_stream(emu(0)).unwrap();
    let b = device::new_stream(emu(0)).unwrap();
    assert!(a.id != 0 && b.id != 0 && a != b, "{a:?} {b:?}");
    assert_eq!(a.device, emu(0));
    assert!(a.query().unwrap());
    let m = msg(device::new_stream(emu(7)));
    assert!(m.contains("'emu:7'"), "{m}");
}

#[test]
fn stream_guard_sets_stream_and_device_and_restores_them() {
    setup();
    let s = device::new_stream(emu(1)).unwrap();
    {
        let g = StreamGuard::new(s).unwrap();
        assert_eq!(g.original_stream(), Stream::default_for(emu(1)));
        assert_eq!(device::current_stream(emu(1)).unwrap(), s);
        assert_eq!(device::current_device(DeviceType::PrivateUse1), 1);
        assert_eq!(device::current_stream(emu(0)).unwrap().id, 0);
    }
    assert_eq!(device::current_stream(emu(1)).unwrap().id, 0);
    assert_eq!(device::current_device(DeviceType::PrivateUse1), 0);
    let r = std::panic::catch_unwind(|| {
        let _g = StreamGuard::new(s).unwrap();
        panic!("inside the guard");
    });
    assert!(r.is_err());
    assert_eq!(device::current_stream(emu(1)).unwrap().id, 0);
}

#[test]
fn current_streams_are_per_thread() {
    setup();
    let s = device::new_stream(emu(0)).unwrap();
    device::set_stream(s).unwrap();
    let other = std::thread::spawn(|| device::current_stream(emu(0)).unwrap().id)
        .join()
        .unwrap();
    assert_eq!(other, 0);
    assert_eq!(
        device::exchange_stream(Stream::default_for(emu(0))).unwrap(),
        s
    );
}

#[test]
fn unknown_streams_are_errors_naming_the_device() {
    setup();
    let m = msg(device::set_stream(Stream {
        device: emu(0),
        id: 99,
    }));
    assert!(m.contains("'emu:0'") && m.contains("no stream 99"), "{m}");
    let m = msg(StreamGuard::new(Stream {
        device: emu(5),
        id: 0,
    }));
    assert!(m.contains("'emu:5'"), "{m}");
    let m = msg(Stream {
        device: Device::parse("emu").unwrap(),
        id: 0,
    }
    .synchronize());
    assert!(m.contains("without an index"), "{m}");
}

#[test]
fn kernels_run_asynchronously_and_copies_to_the_host_wait() {
    let _s = serial();
    let s = device::new_stream(emu(0)).unwrap();
    let _g = StreamGuard::new(s).unwrap();
    let x = floats(&[1.0, 2.0], &[2]).to(emu(0)).unwrap();
    hold(s, 250);
    let y = ops::add_tensor(&x, &x).unwrap();
    assert!(!s.query().unwrap(), "the add is still queued");
    let t = Instant::now();
    assert_eq!(
        y.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap(),
        [2.0, 4.0]
    );
    assert!(t.elapsed() >= Duration::from_millis(100), "the copy waited");
    assert!(s.query().unwrap());
}

#[test]
fn streams_overtake_each_other_unless_an_event_orders_them() {
    let _s = serial();
    let (a, b) = (
        device::new_stream(emu(0)).unwrap(),
        device::new_stream(emu(0)).unwrap(),
    );
    let x = floats(&[0.0, 0.0], &[2]).to(emu(0)).unwrap();
    let one = floats(&[1.0, 1.0], &[2]).to(emu(0)).unwrap();
    device::synchronize(emu(0)).unwrap();
    let read_on = |s: Stream| {
        let _g = StreamGuard::new(s).unwrap();
        x.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap()
    };
    // Without an event, stream b reads x before a's (held) add has run, where
    // kernels queue; where they compute at once, the add is already there.
    {
        let _g = StreamGuard::new(a).unwrap();
        hold(a, 300);
        x.add_tensor_(&one).unwrap();
    }
    let before_a = if common::KERNELS_QUEUE { 0.0 } else { 1.0 };
    assert_eq!(read_on(b), [before_a; 2], "b overtook a");
    a.synchronize().unwrap();
    assert_eq!(read_on(b), [1.0, 1.0]);
    // With an event recorded after the add and waited on by b, b sees it.
    let done = Event::new(false);
    {
        let _g = StreamGuard::new(a).unwrap();
        hold(a, 100);
        x.add_tensor_(&one).unwrap();
        done.record_current(emu(0)).unwrap();
    }
    b.wait_event(&done).unwrap();
    assert_eq!(read_on(b), [2.0, 2.0], "b waited for the event");
    assert!(done.query().unwrap());
}

#[test]
fn synchronize_waits_for_every_stream_of_the_device() {
    let _s = serial();
    let s = device::new_stream(emu(1)).unwrap();
    hold(s, 80);
    let t = Instant::now();
    device::synchronize(emu(1)).unwrap();
    assert!(t.elapsed() >= Duration::from_millis(60));
    assert!(s.query().unwrap());
    assert!(device::synchronize(emu(0)).is_ok());
}

#[test]
fn work_on_other_threads_streams_stays_correct() {
    let _s = serial();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let s = device::new_stream(emu(i % 2)).unwrap();
                let _g = StreamGuard::new(s).unwrap();
                let x = floats(&[i as f32; 3], &[3]).to(emu(i % 2)).unwrap();
                let mut y = x.clone();
                for _ in 0..20 {
                    y = ops::add_tensor(&y, &x).unwrap();
                }
                y.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap()
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), vec![21.0 * i as f32; 3]);
    }
}

#[test]
fn the_cpu_fallback_sees_queued_results() {
    let _s = serial();
    let s = device::new_stream(emu(0)).unwrap();
    let _g = StreamGuard::new(s).unwrap();
    let x = floats(&[0.0, 1.0], &[2]).to(emu(0)).unwrap();
    hold(s, 50);
    let y = ops::mul_tensor(&x, &x).unwrap(); // native, queued behind the hold
    let e = ops::exp(&y).unwrap(); // CPU fallback: copies y back first
    let v = e.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(v, [1.0, 1.0f32.exp()]);
}

// ---- events ----

#[test]
fn events_query_and_synchronize() {
    let _s = serial();
    let e = Event::new(false);
    assert!(e.query().unwrap(), "never recorded: complete");
    assert!(e.synchronize().is_ok());
    assert_eq!(e.device(), None);
    let s = device::new_stream(emu(0)).unwrap();
    hold(s, 250);
    e.record(s).unwrap();
    assert_eq!(e.device(), Some(emu(0)));
    assert!(!e.query().unwrap());
    e.synchronize().unwrap();
    assert!(e.query().unwrap());
    let e2 = s.record_event(false).unwrap();
    e2.synchronize().unwrap();
    assert!(e2.query().unwrap());
}

#[test]
fn elapsed_time_measures_the_work_between_two_events() {
    let _s = serial();
    let s = device::new_stream(emu(1)).unwrap();
    let (start, end) = (Event::new(true), Event::new(true));
    start.record(s).unwrap();
    hold(s, 60);
    end.record(s).unwrap();
    let m = msg(start.elapsed_time(&end));
    assert!(m.contains("not completed"), "{m}");
    end.synchronize().unwrap();
    let ms = start.elapsed_time(&end).unwrap();
    assert!((50.0..5000.0).contains(&ms), "{ms} ms");
    assert!(end.elapsed_time(&start).unwrap() <= 0.0);
    let untimed = s.record_event(false).unwrap();
    let m = msg(start.elapsed_time(&untimed));
    assert!(m.contains("timing enabled"), "{m}");
    let m = msg(Event::new(true).elapsed_time(&end));
    assert!(m.contains("never recorded"), "{m}");
}

#[test]
fn events_stay_on_their_device() {
    setup();
    let e = device::default_stream(emu(0))
        .unwrap()
        .record_event(false)
        .unwrap();
    let m = msg(e.record(device::default_stream(emu(1)).unwrap()));
    assert!(m.contains("'emu:0'") && m.contains("'emu:1'"), "{m}");
    let m = msg(device::default_stream(emu(1)).unwrap().wait_event(&e));
    assert!(m.contains("cannot wait"), "{m}");
    // An unrecorded event: nothing to wait for.
    assert!(device::default_stream(emu(1))
        .unwrap()
        .wait_event(&Event::new(false))
        .is_ok());
}

// ---- autocast ----

#[test]
fn autocast_on_emu_runs_matmuls_in_float16() {
    let _s = serial();
    let a = floats(&[1.0, 2.0, 3.0, 4.0], &[2, 2]).to(emu(0)).unwrap();
    let _g = AutocastGuard::new(DeviceType::PrivateUse1).unwrap();
    let c = ops::mm(&a, &a).unwrap();
    assert_eq!((c.dtype(), c.device()), (DType::F16, emu(0)));
    let v = c.to_device_dtype(Device::cpu(), DType::F32).unwrap();
    assert_eq!(v.to_vec::<f32>().unwrap(), [7.0, 10.0, 15.0, 22.0]);
    // fp32 ops come back to float32.
    assert_eq!(ops::sum(&c).unwrap().dtype(), DType::F32);
}

#[test]
fn autocast_is_per_device_type() {
    let _s = serial();
    let c = floats(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let e = c.to(emu(0)).unwrap();
    {
        let _g = AutocastGuard::new(DeviceType::PrivateUse1).unwrap();
        assert_eq!(
            ops::mm(&c, &c).unwrap().dtype(),
            DType::F32,
            "cpu untouched"
        );
        assert_eq!(ops::mm(&e, &e).unwrap().dtype(), DType::F16);
    }
    let _g = AutocastGuard::new(DeviceType::Cpu).unwrap();
    assert!(!autocast::is_autocast_enabled(DeviceType::PrivateUse1));
    assert_eq!(
        ops::mm(&e, &e).unwrap().dtype(),
        DType::F32,
        "emu untouched"
    );
    assert_eq!(ops::mm(&c, &c).unwrap().dtype(), DType::F16);
}

#[test]
fn emu_autocast_dtypes_come_from_its_hooks() {
    setup();
    assert_eq!(
        autocast::supported_dtypes(DeviceType::PrivateUse1).unwrap(),
        [DType::F16]
    );
    let m = msg(AutocastGuard::with_dtype(
        DeviceType::PrivateUse1,
        DType::BF16,
    ));
    assert!(
        m.contains("device 'emu'") && m.contains("bfloat16") && m.contains("supports float16"),
        "{m}"
    );
    assert!(!autocast::is_autocast_enabled(DeviceType::PrivateUse1));
    let _g = AutocastGuard::with_dtype(DeviceType::PrivateUse1, DType::F16).unwrap();
    assert_eq!(
        autocast::autocast_dtype(DeviceType::PrivateUse1),
        DType::F16
    );
}
