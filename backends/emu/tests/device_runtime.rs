//! The device runtime on the example `emu` device: device counts and availability,
//! the per-thread current device and its guard, index validation wherever a device
//! makes tensors, per-index generators, memory statistics through `opal::device`,
//! pinned host memory, moving tensors between cpu and emu, printing emu tensors,
//! and safetensors round trips onto emu devices.
//!
//! Memory counters and default generators are process-wide, and the harness runs
//! tests on several threads, so every test that allocates emu memory or draws
//! random numbers holds [`serial`].

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use opal::device::{self, DeviceGuard};
use opal::serialize;
use opal::{ops, DType, Device, DeviceType, Generator, Scalar, Tensor};

fn setup() {
    opal_cpu::init().expect("cpu backend");
    opal_emu::init().expect("emu backend");
    opal_emu::init_emu2().expect("emu2 backend");
}

/// `emu:i`.
fn emu(i: i16) -> Device {
    setup();
    Device::new(DeviceType::PrivateUse1, Some(i))
}

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    setup();
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn msg<T: std::fmt::Debug>(r: opal::Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

fn floats(v: &[f32], shape: &[i64]) -> Tensor {
    Tensor::from_slice(v, shape).expect("cpu tensor")
}

fn allocated(d: Device) -> u64 {
    device::memory_allocated(d).expect("memory_allocated")
}

// ---- device count and availability ----

#[test]
fn emu_has_two_devices_and_emu2_one() {
    setup();
    let expected = opal_emu::device::emu_device_count();
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
    assert_eq!(opal_emu::stats(emu(1)).unwrap().bytes_in_use, a1 + 128);
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
    let before = opal_emu::hooks::PINNED_ALLOCATOR.bytes_in_use();
    let p = t.pin_memory().unwrap();
    assert!(p.is_pinned());
    assert!(p.device().is_cpu());
    assert_eq!(p.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
    assert_eq!(
        opal_emu::hooks::PINNED_ALLOCATOR.bytes_in_use(),
        before + 16
    );
    assert!(p.pin_memory().unwrap().is_same(&p), "already pinned");
    drop(p);
    assert_eq!(opal_emu::hooks::PINNED_ALLOCATOR.bytes_in_use(), before);
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

// ---- serialization ----

/// A tensor of 16-bit floats from their bit patterns.
fn halves(bits: &[u16], dtype: DType) -> Tensor {
    let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_ne_bytes()).collect();
    Tensor::from_bytes(&bytes, &[bits.len() as i64], dtype).unwrap()
}

fn one_of_each_dtype() -> Vec<(&'static str, Tensor)> {
    vec![
        ("b", Tensor::from_slice(&[true, false, true], &[3]).unwrap()),
        ("u8", Tensor::from_slice(&[0u8, 7, 255], &[3]).unwrap()),
        ("i8", Tensor::from_slice(&[-128i8, 0, 127], &[3]).unwrap()),
        ("i16", Tensor::from_slice(&[-300i16, 1, 300], &[3]).unwrap()),
        (
            "i32",
            Tensor::from_slice(&[i32::MIN, 5, i32::MAX], &[3]).unwrap(),
        ),
        (
            "i64",
            Tensor::from_slice(&[i64::MIN, 6, i64::MAX], &[3]).unwrap(),
        ),
        // 0.5, -2.0, the largest f16; 1.5, -8.0, the lowest bf16.
        ("f16", halves(&[0x3800, 0xC000, 0x7BFF], DType::F16)),
        ("bf16", halves(&[0x3FC0, 0xC100, 0xFF7F], DType::BF16)),
        ("f32", floats(&[0.1, -0.2, 1e30], &[3])),
        (
            "f64",
            Tensor::from_slice(&[0.1f64, -0.2, 1e300], &[1, 3]).unwrap(),
        ),
    ]
}

#[test]
fn every_dtype_round_trips_from_emu_through_safetensors() {
    let _s = serial();
    let host = one_of_each_dtype();
    let on_emu: Vec<(&str, Tensor)> = host
        .iter()
        .map(|(n, t)| (*n, t.to(emu(1)).unwrap()))
        .collect();
    let refs: Vec<(&str, &Tensor)> = on_emu.iter().map(|(n, t)| (*n, t)).collect();
    let bytes = serialize::save_to_bytes(&refs, &BTreeMap::new()).unwrap();
    let loaded = serialize::load_from_bytes(&bytes, None).unwrap();
    assert_eq!(loaded.tensors.len(), host.len());
    for (name, t) in &host {
        let l = &loaded.tensors[*name];
        assert_eq!(
            (l.dtype(), l.sizes(), l.device()),
            (t.dtype(), t.sizes(), Device::cpu())
        );
        assert_eq!(l.to_bytes().unwrap(), t.to_bytes().unwrap(), "{name}");
    }
}

#[test]
fn map_location_loads_onto_an_emu_device() {
    let _s = serial();
    let dir = std::env::temp_dir().join(format!("opal-devrt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("map_location.safetensors");
    let w = floats(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let mut meta = BTreeMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    serialize::save_file(&[("w", &w)], &meta, &path).unwrap();
    let loaded = serialize::load_file(&path, Some(emu(1))).unwrap();
    let l = &loaded.tensors["w"];
    assert_eq!(l.device(), emu(1));
    assert_eq!(
        l.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0]
    );
    assert_eq!(loaded.metadata, meta);
    let m = msg(serialize::load_file(&path, Some(emu(6))));
    assert!(m.contains("'emu:6'"), "{m}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn complex_tensors_cannot_be_saved() {
    let _s = serial();
    let z = Tensor::empty(&[2], DType::C64, Device::cpu()).unwrap();
    let m = msg(serialize::save_to_bytes(&[("z", &z)], &BTreeMap::new()));
    assert!(
        m.contains("'z'") && m.contains(&DType::C64.to_string()),
        "{m}"
    );
}

#[test]
fn non_contiguous_emu_tensors_save_their_logical_elements() {
    let _s = serial();
    let c = floats(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
        .to(emu(0))
        .unwrap();
    let t = c.as_strided(&[3, 2], &[1, 3], 0).unwrap();
    let bytes = serialize::save_to_bytes(&[("t", &t)], &BTreeMap::new()).unwrap();
    let l = serialize::load_from_bytes(&bytes, Some(emu(0))).unwrap();
    let back = l.tensors["t"].to(Device::cpu()).unwrap();
    assert_eq!(back.sizes(), &[3, 2]);
    assert_eq!(
        back.to_vec::<f32>().unwrap(),
        vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
}

// ---- backend metadata ----

#[test]
fn backend_meta_is_shared_by_views_and_not_by_copies() {
    let _s = serial();
    let e = floats(&[1.0, 2.0, 3.0, 4.0], &[4]).to(emu(0)).unwrap();
    assert!(e.backend_meta().is_empty());
    e.set_backend_meta("layout", "tiled").unwrap();
    let view = e.as_strided(&[2], &[2], 0).unwrap();
    assert_eq!(view.backend_meta()["layout"], "tiled");
    assert_eq!(e.clone().backend_meta(), e.backend_meta());
    view.set_backend_meta("tile", "8").unwrap();
    assert_eq!(
        e.backend_meta().len(),
        2,
        "set through a view, seen by the base"
    );
    assert!(
        e.to(emu(1)).unwrap().backend_meta().is_empty(),
        "a copy starts empty"
    );
    e.clear_backend_meta();
    assert!(view.backend_meta().is_empty());
}

#[test]
fn backend_meta_keys_are_checked() {
    let _s = serial();
    let e = floats(&[1.0], &[1]).to(emu(1)).unwrap();
    let m = msg(e.set_backend_meta("a/b", "x"));
    assert!(m.contains("'a/b'") && m.contains("'emu:1'"), "{m}");
    assert!(e.set_backend_meta("", "x").is_err());
    let m = msg(Tensor::undefined().set_backend_meta("k", "v"));
    assert!(m.contains("undefined"), "{m}");
}

#[test]
fn backend_meta_round_trips_through_the_hooks_into_a_file() {
    let _s = serial();
    let e = floats(&[5.0, 6.0], &[2]).to(emu(0)).unwrap();
    e.set_backend_meta("layout", "tiled").unwrap();
    e.set_backend_meta("transient.cache", "42").unwrap();
    let bytes = serialize::save_to_bytes(&[("w.0", &e)], &BTreeMap::new()).unwrap();
    // The header holds emu's encoding, made by its hooks; transient keys are left out.
    let header = String::from_utf8_lossy(&bytes[8..]);
    assert!(
        header.contains(r#""opal.backend_meta/w.0/layout":"emu:emu-v1;tiled""#),
        "{header}"
    );
    assert!(!header.contains("transient"), "{header}");
    let on_emu = serialize::load_from_bytes(&bytes, Some(emu(1))).unwrap();
    let w = &on_emu.tensors["w.0"];
    assert_eq!(
        w.backend_meta().into_iter().collect::<Vec<_>>(),
        vec![("layout".to_string(), "tiled".to_string())]
    );
    assert!(
        on_emu.metadata.is_empty(),
        "backend entries are not user metadata"
    );
    let on_cpu = serialize::load_from_bytes(&bytes, None).unwrap();
    assert!(
        on_cpu.tensors["w.0"].backend_meta().is_empty(),
        "meaningless on the cpu"
    );
}

#[test]
fn unreadable_backend_meta_fails_the_load_and_reserved_keys_the_save() {
    let _s = serial();
    let e = floats(&[1.0], &[1]).to(emu(0)).unwrap();
    let mut meta = BTreeMap::new();
    meta.insert(
        "opal.backend_meta/e/k".to_string(),
        "emu:garbage".to_string(),
    );
    let m = msg(serialize::save_to_bytes(&[("e", &e)], &meta));
    assert!(m.contains("reserved"), "{m}");
    // A file whose entry lacks emu's encoding tag, written by hand.
    let mut header = String::from(
        r#"{"__metadata__":{"opal.backend_meta/e/k":"emu:garbage"},"e":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
    );
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&1.0f32.to_le_bytes());
    let m = msg(serialize::load_from_bytes(&file, Some(emu(0))));
    assert!(m.contains("emu-v1;") && m.contains("'k'"), "{m}");
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
