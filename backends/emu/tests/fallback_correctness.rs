//! What the CPU fallback gives back on the `emu` device: results on the device the
//! call asked for (a `device` argument wins, otherwise the inputs' device), the very
//! tensor passed to an out= or in-place op, and random numbers from the default
//! generator of the call's device (each device index has its own).

use std::any::TypeId;
use std::sync::{Arc, Mutex, MutexGuard};

use opal::dispatch::{
    ArgDef, DispatchKey, DispatchKeySet, Dispatcher, KernelFunction, Library, OpDef, OperatorHandle,
};
use opal::{ops, DType, Device, DeviceType, Generator, IValue, Result, Scalar, Stack, Tensor};

/// The tests below that seed or draw from default generators hold this, so that a
/// neighbour test's draws do not move a stream between a seed and its check.
static GENERATORS: Mutex<()> = Mutex::new(());

fn emu() -> Device {
    setup();
    Device::parse("emu:0").expect("emu is registered")
}

fn to_cpu(t: &Tensor) -> Tensor {
    ops::_to_copy::call(t, None, None, Some(Device::cpu()), None, false, None).expect("to cpu")
}

fn values(t: &Tensor) -> Vec<f32> {
    to_cpu(t).to_vec::<f32>().expect("f32 values")
}

fn filled(n: i64, v: f64, dtype: DType, device: Device) -> Tensor {
    ops::full::call(
        &[n],
        &Scalar::Float(v),
        Some(dtype),
        None,
        Some(device),
        None,
    )
    .expect("full")
}

/// `fbtest::fill_(Tensor(a!) self, *, Generator? generator=None) -> Tensor(a!)`: an
/// in-place random op with only a CPU kernel, so on `emu` it runs through the
/// fallback.
static FILL_ARGS: [ArgDef; 2] = [
    ArgDef {
        name: "self",
        ty: "Tensor(a!)",
        default: None,
        kwarg_only: false,
        out: false,
        mutable: true,
    },
    ArgDef {
        name: "generator",
        ty: "Generator?",
        default: Some(|| IValue::None),
        kwarg_only: true,
        out: false,
        mutable: false,
    },
];
type FillSig = fn(DispatchKeySet, &Tensor, Option<&Generator>) -> Result<Tensor>;
static FILL: OpDef = OpDef {
    name: "fbtest::fill_",
    schema: "fbtest::fill_(Tensor(a!) self, *, Generator? generator=None) -> Tensor(a!)",
    args: &FILL_ARGS,
    returns: &["Tensor(a!)"],
    signature: TypeId::of::<FillSig>,
};

/// The CPU kernel of `fbtest::fill_`: uniform numbers from the given generator, or
/// from the default CPU one when none is given (what PyTorch's CPU kernels do).
fn cpu_fill(_: &OperatorHandle, _: DispatchKeySet, s: &mut Stack) -> Result<()> {
    let gen = match s.pop() {
        Some(IValue::Generator(g)) => g,
        _ => Generator::default_for(DeviceType::Cpu),
    };
    let t = match s.pop() {
        Some(IValue::Tensor(t)) => t,
        _ => return Err(opal::OpalError::msg("fbtest::fill_: expected a tensor")),
    };
    let v: Vec<f32> = (0..t.numel()).map(|_| gen.next_f64() as f32).collect();
    t.write::<f32>()?.copy_from(&v)?;
    s.push(IValue::Tensor(t));
    Ok(())
}

fn setup() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        opal_cpu::init().expect("cpu backend");
        opal_emu::init().expect("emu backend");
        Dispatcher::global().def(&FILL).expect("def fbtest::fill_");
        let mut cpu = Library::new("fbtest", DispatchKey::CPU);
        cpu.impl_("fill_", KernelFunction::boxed(Arc::new(cpu_fill)))
            .expect("cpu fill_");
        cpu.leak();
    });
}

fn fill(t: &Tensor, gen: Option<&Generator>) -> Tensor {
    let mut s: Stack = vec![
        IValue::Tensor(t.clone()),
        gen.map_or(IValue::None, |g| IValue::Generator(g.clone())),
    ];
    Dispatcher::global()
        .call_boxed("fbtest::fill_", &mut s)
        .expect("fbtest::fill_");
    match s.pop() {
        Some(IValue::Tensor(r)) => r,
        _ => panic!("fbtest::fill_ returns a tensor"),
    }
}

/// Holds [`GENERATORS`]; returns emu and the default generators of the CPU and emu.
fn generators() -> (MutexGuard<'static, ()>, Device, Generator, Generator) {
    let serial = GENERATORS.lock().unwrap_or_else(|e| e.into_inner());
    let dev = emu();
    let dev_gen = Generator::default_for_device(dev);
    (
        serial,
        dev,
        Generator::default_for(DeviceType::Cpu),
        dev_gen,
    )
}

/// The numbers a fresh generator seeded with `seed` draws, as `cpu_fill` draws them.
fn stream(seed: u64, n: usize) -> Vec<f32> {
    let g = Generator::new(Device::cpu());
    g.manual_seed(seed);
    (0..n).map(|_| g.next_f64() as f32).collect()
}

#[test]
fn to_copy_through_the_fallback_returns_a_tensor_on_the_requested_device() {
    let dev = emu();
    let t = filled(4, 2.5, DType::F32, dev);
    // Called through the fallback itself: emu has a native `_to_copy`, a backend
    // without one gets exactly this.
    let stack: Stack = vec![
        IValue::Tensor(t.clone()),
        IValue::None,
        IValue::None,
        IValue::Device(Device::cpu()),
        IValue::None,
        IValue::Bool(false),
        IValue::None,
    ];
    let ks = DispatchKeySet::empty().with_tensor(&t);
    let r: Tensor = opal::fallback::call(&ops::_to_copy::DEF, ks, stack).expect("_to_copy");
    assert_eq!(r.device(), Device::cpu());
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![2.5; 4]);

    // From the CPU to emu: the device argument names the destination.
    let c = filled(3, 1.0, DType::F32, Device::cpu());
    let stack: Stack = vec![
        IValue::Tensor(c.clone()),
        IValue::DType(DType::F64),
        IValue::None,
        IValue::Device(dev),
        IValue::None,
        IValue::Bool(false),
        IValue::None,
    ];
    let ks = DispatchKeySet::empty().with_tensor(&c);
    let r: Tensor = opal::fallback::call(&ops::_to_copy::DEF, ks, stack).expect("_to_copy");
    assert_eq!(r.device(), dev);
    assert_eq!(r.dtype(), DType::F64);
    assert_eq!(to_cpu(&r).to_vec::<f64>().unwrap(), vec![1.0; 3]);
}

#[test]
fn results_without_a_device_argument_go_back_to_the_inputs_device() {
    let dev = emu();
    let t = filled(3, 2.0, DType::F32, dev);
    let before = opal::fallback::calls();
    let r = ops::neg(&t).expect("neg");
    assert!(
        opal::fallback::calls() > before,
        "neg runs through the fallback"
    );
    assert_eq!(r.device(), dev);
    assert_eq!(values(&r), vec![-2.0; 3]);
}

#[test]
fn out_through_the_fallback_returns_the_out_tensor() {
    let dev = emu();
    let a = filled(4, 6.0, DType::F32, dev);
    let b = filled(4, 3.0, DType::F32, dev);
    // div.out has no emu kernel: the whole op runs through the fallback.
    let out = filled(1, 0.0, DType::F32, dev);
    let r = ops::div_out(&a, &b, &out).expect("div.out");
    assert!(r.is_same(&out), "div.out returns its `out`");
    assert_eq!(out.sizes(), &[4]);
    assert_eq!(values(&out), vec![2.0; 4]);

    // add.out with mixed dtypes: emu's kernel hands it to the CPU.
    let i = filled(4, 1.0, DType::F64, dev);
    let out = filled(4, 0.0, DType::F64, dev);
    let r = ops::add_out::call(&a, &i, &Scalar::Int(2), &out).expect("add.out");
    assert!(r.is_same(&out), "add.out returns its `out`");
    assert_eq!(to_cpu(&out).to_vec::<f64>().unwrap(), vec![8.0; 4]);
}

#[test]
fn a_cpu_out_argument_through_the_fallback_comes_back_as_itself() {
    let dev = emu();
    let a = filled(3, 6.0, DType::F32, dev);
    let b = filled(3, 3.0, DType::F32, dev);
    let out = filled(3, 0.0, DType::F32, Device::cpu());
    let stack: Stack = vec![
        IValue::Tensor(a.clone()),
        IValue::Tensor(b.clone()),
        IValue::Tensor(out.clone()),
    ];
    let ks = DispatchKeySet::empty().with_tensor(&a);
    let r: Tensor = opal::fallback::call(&ops::div_out::DEF, ks, stack).expect("div.out");
    assert!(
        r.is_same(&out),
        "div.out returns its `out`, not a copy of it"
    );
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![2.0; 3]);
}

#[test]
fn in_place_through_the_fallback_returns_self() {
    let dev = emu();
    let a = filled(4, 6.0, DType::F32, dev);
    let b = filled(4, 2.0, DType::F32, dev);
    let r = ops::div_tensor_(&a, &b).expect("div_");
    assert!(r.is_same(&a), "div_ returns its `self`");
    assert_eq!(values(&a), vec![3.0; 4]);
}

#[test]
fn a_random_op_through_the_fallback_draws_from_its_devices_generator() {
    let (_serial, dev, cpu_gen, dev_gen) = generators();
    assert_eq!(dev_gen.device().device_type(), DeviceType::PrivateUse1);

    let t = filled(6, 0.0, DType::F32, dev);
    dev_gen.manual_seed(5);
    let cpu_state = cpu_gen.get_state();
    let r = fill(&t, None);
    assert!(r.is_same(&t), "fill_ returns its `self`");
    assert_eq!(
        values(&t),
        stream(5, 6),
        "drawn from emu's seeded generator"
    );
    assert_eq!(
        cpu_gen.get_state(),
        cpu_state,
        "the CPU generator is untouched"
    );

    // Seeding the CPU generator changes nothing on the device; reseeding the device
    // reproduces.
    cpu_gen.manual_seed(12345);
    dev_gen.manual_seed(5);
    fill(&t, None);
    assert_eq!(values(&t), stream(5, 6));

    // An explicit generator is used as given.
    let mine = Generator::new(dev);
    mine.manual_seed(77);
    fill(&t, Some(&mine));
    assert_eq!(values(&t), stream(77, 6));
}

#[test]
fn each_device_index_has_its_own_default_generator() {
    let _serial = GENERATORS.lock().unwrap_or_else(|e| e.into_inner());
    let dev = emu();
    let e0 = Device::parse("emu:0").unwrap();
    let e1 = Device::parse("emu:1").unwrap();
    let g0 = Generator::default_for_device(e0);
    let g1 = Generator::default_for_device(e1);
    assert!(!g0.ptr_eq(&g1), "emu:0 and emu:1 differ");
    assert!(
        g0.ptr_eq(&Generator::default_for_device(dev)),
        "emu is emu:0"
    );
    assert!(
        g1.ptr_eq(&Generator::default_for_device(e1)),
        "one per device"
    );
    assert_eq!(g1.device(), e1);
    let cpu = Generator::default_for(DeviceType::Cpu);
    assert!(cpu.ptr_eq(&Generator::default_for_device(Device::cpu())));
    assert!(!cpu.ptr_eq(&g0));

    // A tensor on emu:1 draws from emu:1's generator.
    let t = filled(5, 0.0, DType::F32, e1);
    g0.manual_seed(1);
    g1.manual_seed(2);
    fill(&t, None);
    assert_eq!(values(&t), stream(2, 5));
    assert_eq!(g0.initial_seed(), 1);
}

#[test]
fn rand_through_the_fallback_draws_from_its_devices_generator() {
    let (_serial, dev, cpu_gen, dev_gen) = generators();
    let rand = |device: Device| {
        ops::rand::call(&[16], Some(DType::F32), None, Some(device), None).expect("rand")
    };
    cpu_gen.manual_seed(3);
    let want = rand(Device::cpu()).to_vec::<f32>().unwrap();

    dev_gen.manual_seed(3);
    cpu_gen.manual_seed(999);
    let cpu_state = cpu_gen.get_state();
    let before = opal::fallback::calls();
    let r = rand(dev);
    assert!(
        opal::fallback::calls() > before,
        "rand runs through the fallback"
    );
    assert_eq!(r.device(), dev);
    assert_eq!(values(&r), want, "emu's seed decides");
    assert_eq!(
        cpu_gen.get_state(),
        cpu_state,
        "the CPU generator is untouched"
    );
    // Outside the fallback the default CPU generator is the CPU's again.
    assert!(Generator::default_for(DeviceType::Cpu).ptr_eq(&cpu_gen));
}
