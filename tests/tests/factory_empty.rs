//! `empty.memory_format` through the generated op: BackendSelect routes it by the
//! `device` option to the CPU or Meta kernel; memory formats pick the strides; bad
//! requests are errors naming the op.

use opal::{ops, DType, Device, MemoryFormat, Tensor};

fn init() {
    opal_cpu::init().expect("CPU backend registers");
    opal_meta::init().expect("Meta backend registers");
}

fn empty(size: &[i64], opts: ops::empty_memory_format::Options) -> opal::Result<Tensor> {
    ops::empty_memory_format::with(size, opts)
}

#[test]
fn defaults_give_a_contiguous_cpu_tensor_of_the_default_dtype() {
    init();
    let t = ops::empty_memory_format(&[2, 3]).unwrap();
    assert_eq!(t.sizes(), &[2, 3]);
    assert_eq!(t.strides(), &[3, 1]);
    assert_eq!(t.dtype(), DType::F32);
    assert_eq!(t.device(), Device::cpu());
    // Usable right away: the CPU allocator hands out zeroed memory.
    let o = ops::add_tensor(&t, &t).unwrap();
    assert_eq!(o.to_vec::<f32>().unwrap(), vec![0.0; 6]);
    let z = ops::empty_memory_format(&[0, 4]).unwrap();
    assert_eq!(z.numel(), 0);
}

#[test]
fn dtype_and_channels_last_strides() {
    init();
    let opts = ops::empty_memory_format::Options::default()
        .dtype(DType::F64)
        .memory_format(MemoryFormat::ChannelsLast);
    let t = empty(&[2, 3, 4, 5], opts).unwrap();
    assert_eq!(t.dtype(), DType::F64);
    assert_eq!(t.sizes(), &[2, 3, 4, 5]);
    assert_eq!(t.strides(), &[60, 1, 15, 3]);
    let opts =
        ops::empty_memory_format::Options::default().memory_format(MemoryFormat::ChannelsLast3d);
    let t = empty(&[2, 3, 4, 5, 6], opts).unwrap();
    assert_eq!(t.strides(), &[360, 1, 90, 18, 3]);
}

#[test]
fn meta_device_is_routed_to_the_meta_kernel() {
    init();
    let opts = ops::empty_memory_format::Options::default()
        .device(Device::meta())
        .dtype(DType::BF16)
        .memory_format(MemoryFormat::ChannelsLast);
    let t = empty(&[2, 3, 4, 5], opts).unwrap();
    assert_eq!(t.device(), Device::meta());
    assert_eq!(t.dtype(), DType::BF16);
    assert_eq!(t.strides(), &[60, 1, 15, 3]);
}

#[test]
fn bad_requests_are_errors_naming_the_op() {
    init();
    let e = ops::empty_memory_format(&[2, -1]).unwrap_err().to_string();
    assert!(e.contains("empty") && e.contains("-1"), "{e}");
    for device in [Device::cpu(), Device::meta()] {
        let preserve = ops::empty_memory_format::Options::default()
            .device(device)
            .memory_format(MemoryFormat::Preserve);
        let e = empty(&[2], preserve).unwrap_err().to_string();
        assert!(
            e.contains("empty") && e.contains("Preserve"),
            "{device}: {e}"
        );
        let wrong_rank = ops::empty_memory_format::Options::default()
            .device(device)
            .memory_format(MemoryFormat::ChannelsLast);
        let e = empty(&[2, 3], wrong_rank).unwrap_err().to_string();
        assert!(e.contains("ChannelsLast"), "{device}: {e}");
    }
}
