//! `opal-emu-plugin`: the example `emu` accelerator built as a backend plugin
//! against `opal-plugin-sdk` (no `opal` dependency). A program that links only
//! `opal` and `opal-cpu` gets the device `emu` from it by autoload (README,
//! "Plugins"); `emu.opal-plugin.json` is its manifest.
//!
//! What it covers, computing exactly as the linked `opal-emu` does (same formulas,
//! same element order, same dtype rules): `add.Tensor`, `sub.Tensor`, `mul.Tensor`
//! (f32/f64/i64/i32 operands of one dtype on one device, broadcasting), `relu` (same dtypes),
//! `mm` (2-d, same dtypes, the linked emu's loop order), and `sum` pinned to the old schema `sum(Tensor self) -> Tensor` (f32/f64/i64),
//! like the linked emu. Its memory is emulated device memory the host does not
//! address directly (the allocator says so); data moves only through its transfer.
//! Every other op, and every case a kernel declines (mixed dtypes, other dtypes),
//! runs on the CPU through the host's CPU fallback, as with the linked emu. Its
//! device runtime (ABI 1.4, [`runtime`]): two devices with a memory pool each and
//! their statistics, a pinned host allocator, streams and events on timelines
//! ([`timeline`]), backend metadata and the autocast dtype; the linked emu's
//! device-runtime suite runs on it. Not covered: the linked emu's worker threads
//! (kernels here compute when called), `view` and the native factories, which
//! here run through the CPU fallback with the same results.
//!
//! Owns: the plugin's kernels, transfer and registration. Must not: depend on
//! `opal`.

use opal_plugin_sdk::strided::{broadcast_shape, broadcast_strides, for_each_offset};
use opal_plugin_sdk::{
    export_plugin, out_entry, typed_entry, DType, Error, Registrar, Result, Scalar, Tensor,
    Transfer, Value,
};

pub mod comm;
pub mod extend;
pub mod random;
pub mod runtime;
pub mod timeline;

/// Copies element by element between two tensors of one dtype and shape.
fn copy_strided(src: &Tensor, dst: &Tensor) -> Result<()> {
    if src.sizes() != dst.sizes() || src.dtype()? != dst.dtype()? {
        return Err(Error::msg(format!("emu copy: {src:?} into {dst:?}")));
    }
    let es = src.element_size();
    let (ps, pd) = (src.data_ptr(), dst.data_ptr());
    if src.numel() == 0 {
        return Ok(());
    }
    for_each_offset(src.sizes(), [src.strides(), dst.strides()], |[x, y]| {
        // SAFETY: offsets from sizes/strides stay inside both tensors, which the host
        // holds for the transfer (one read, one written); `es` bytes per element.
        unsafe {
            std::ptr::copy_nonoverlapping(
                ps.offset(x * es as isize),
                pd.offset(y * es as isize),
                es,
            )
        }
    });
    Ok(())
}

/// Moves data between the host and emulated emu memory.
struct EmuTransfer;

impl Transfer for EmuTransfer {
    /// Waits for the device's streams first, as a copy to the host does.
    fn to_cpu(&self, src: &Tensor, dst: &Tensor) -> Result<()> {
        timeline::synchronize_device(src.device()?.index.unwrap_or(0))?;
        copy_strided(src, dst)
    }
    fn from_cpu(&self, src: &Tensor, dst: &Tensor) -> Result<()> {
        copy_strided(src, dst)
    }
}

static TRANSFER: EmuTransfer = EmuTransfer;

/// Element types the kernels compute in, as the linked emu's `Num`.
trait Num:
    Copy
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + PartialOrd
{
    const ZERO: Self;
    fn from_scalar(s: Scalar) -> Self;
}
impl Num for f32 {
    const ZERO: Self = 0.0;
    fn from_scalar(s: Scalar) -> Self {
        s.to_f64() as f32
    }
}
impl Num for f64 {
    const ZERO: Self = 0.0;
    fn from_scalar(s: Scalar) -> Self {
        s.to_f64()
    }
}
impl Num for i64 {
    const ZERO: Self = 0;
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Int(i) => i,
            Scalar::Bool(b) => i64::from(b),
            Scalar::Float(f) | Scalar::Complex(f, _) => f as i64,
        }
    }
}

impl Num for i32 {
    const ZERO: Self = 0;
    fn from_scalar(s: Scalar) -> Self {
        i64::from_scalar(s) as i32
    }
}

#[derive(Copy, Clone)]
pub(crate) enum Binary {
    Add,
    Sub,
    Mul,
}

fn binary_t<T: Num>(op: Binary, a: &Tensor, b: &Tensor, alpha: Scalar, out: &Tensor) {
    let sizes = out.sizes().to_vec();
    let (sa, sb) = (
        broadcast_strides(a.sizes(), a.strides(), &sizes),
        broadcast_strides(b.sizes(), b.strides(), &sizes),
    );
    let al = T::from_scalar(alpha);
    let (pa, pb, po) = (
        a.data_ptr() as *const T,
        b.data_ptr() as *const T,
        out.data_ptr() as *mut T,
    );
    for_each_offset(&sizes, [&sa, &sb, out.strides()], |[x, y, z]| {
        // SAFETY: offsets inside each tensor (broadcast strides are 0 where a size is
        // 1); the inputs are held by the op call, `out` is new and ours; elements are
        // aligned T.
        unsafe {
            let (u, v) = (*pa.offset(x), *pb.offset(y));
            *po.offset(z) = match op {
                Binary::Add => u + al * v,
                Binary::Sub => u - al * v,
                Binary::Mul => u * v,
            };
        }
    });
}

/// The boxed form of [`binary`] (`alpha` 1 when the schema has none).
fn binary_boxed(op: Binary, args: &[Value]) -> Result<Vec<Value>> {
    let (a, b) = (args[0].tensor()?, args[1].tensor()?);
    let alpha = match args.get(2) {
        Some(v) => v.scalar()?,
        None => Scalar::Int(1),
    };
    binary(op, a, b, alpha).map(|t| vec![Value::Tensor(t)])
}

/// `self (op) other` when both are one dtype on one device; declined otherwise.
pub(crate) fn binary(op: Binary, a: &Tensor, b: &Tensor, alpha: Scalar) -> Result<Tensor> {
    let dt = a.dtype()?;
    if b.dtype()? != dt
        || a.device()? != b.device()?
        || !matches!(dt, DType::F32 | DType::F64 | DType::I64 | DType::I32)
    {
        return Err(Error::declined());
    }
    let sizes = broadcast_shape(a.sizes(), b.sizes())?;
    let out = Tensor::empty(&sizes, dt, a.device()?)?;
    match dt {
        DType::F32 => binary_t::<f32>(op, a, b, alpha, &out),
        DType::F64 => binary_t::<f64>(op, a, b, alpha, &out),
        DType::I64 => binary_t::<i64>(op, a, b, alpha, &out),
        _ => binary_t::<i32>(op, a, b, alpha, &out),
    }
    Ok(out)
}

fn add(args: &[Value]) -> Result<Vec<Value>> {
    binary_boxed(Binary::Add, args)
}
fn sub(args: &[Value]) -> Result<Vec<Value>> {
    binary_boxed(Binary::Sub, args)
}
fn mul(args: &[Value]) -> Result<Vec<Value>> {
    binary_boxed(Binary::Mul, args)
}
fn add_t(a: &Tensor, b: &Tensor, alpha: Scalar) -> Result<Tensor> {
    binary(Binary::Add, a, b, alpha)
}
fn sub_t(a: &Tensor, b: &Tensor, alpha: Scalar) -> Result<Tensor> {
    binary(Binary::Sub, a, b, alpha)
}
fn mul_t(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    binary(Binary::Mul, a, b, Scalar::Int(1))
}

fn relu_t<T: Num>(a: &Tensor, out: &Tensor) {
    let (pa, po) = (a.data_ptr() as *const T, out.data_ptr() as *mut T);
    for_each_offset(out.sizes(), [a.strides(), out.strides()], |[x, z]| {
        // SAFETY: offsets inside both tensors; `a` held by the call, `out` ours.
        unsafe {
            let u = *pa.offset(x);
            *po.offset(z) = if u > T::ZERO { u } else { T::ZERO };
        }
    });
}

fn relu(args: &[Value]) -> Result<Vec<Value>> {
    relu_k(args[0].tensor()?).map(|t| vec![Value::Tensor(t)])
}

/// `relu` into the result the host made (ABI 1.2 out entry).
fn relu_into(a: &Tensor, out: &Tensor) -> Result<()> {
    if a.sizes() != out.sizes() || a.dtype()? != out.dtype()? {
        return Err(Error::declined());
    }
    match a.dtype()? {
        DType::F32 => relu_t::<f32>(a, out),
        DType::F64 => relu_t::<f64>(a, out),
        DType::I64 => relu_t::<i64>(a, out),
        DType::I32 => relu_t::<i32>(a, out),
        _ => return Err(Error::declined()),
    }
    Ok(())
}

pub(crate) fn relu_k(a: &Tensor) -> Result<Tensor> {
    let out = Tensor::empty(a.sizes(), a.dtype()?, a.device()?)?;
    match a.dtype()? {
        DType::F32 => relu_t::<f32>(a, &out),
        DType::F64 => relu_t::<f64>(a, &out),
        DType::I64 => relu_t::<i64>(a, &out),
        DType::I32 => relu_t::<i32>(a, &out),
        _ => return Err(Error::declined()),
    }
    Ok(out)
}

fn sum_t<T: Num>(a: &Tensor, out: &Tensor) {
    let pa = a.data_ptr() as *const T;
    let mut s = T::ZERO;
    // SAFETY: offsets inside `a`, held by the call.
    for_each_offset(a.sizes(), [a.strides()], |[x]| {
        s = s + unsafe { *pa.offset(x) }
    });
    // SAFETY: `out` is a new one-element tensor of T, ours.
    unsafe { *(out.data_ptr() as *mut T) = s };
}

/// `sum(Tensor self) -> Tensor`, written before `sum` took a dtype (the host's
/// adapter sends `dtype=` calls to the CPU).
/// [`binary`] into the result the host made (ABI 1.2 out entry, rule
/// `ELEMENTWISE`: both operands have its sizes, dtype and device).
fn binary_into(op: Binary, a: &Tensor, b: &Tensor, alpha: Scalar, out: &Tensor) -> Result<()> {
    let dt = a.dtype()?;
    if b.dtype()? != dt || out.dtype()? != dt || a.sizes() != out.sizes() {
        return Err(Error::declined());
    }
    match dt {
        DType::F32 => binary_t::<f32>(op, a, b, alpha, out),
        DType::F64 => binary_t::<f64>(op, a, b, alpha, out),
        DType::I64 => binary_t::<i64>(op, a, b, alpha, out),
        DType::I32 => binary_t::<i32>(op, a, b, alpha, out),
        _ => return Err(Error::declined()),
    }
    Ok(())
}
fn add_into(a: &Tensor, b: &Tensor, alpha: Scalar, out: &Tensor) -> Result<()> {
    binary_into(Binary::Add, a, b, alpha, out)
}
fn sub_into(a: &Tensor, b: &Tensor, alpha: Scalar, out: &Tensor) -> Result<()> {
    binary_into(Binary::Sub, a, b, alpha, out)
}
fn mul_into(a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
    binary_into(Binary::Mul, a, b, Scalar::Int(1), out)
}

fn sum(args: &[Value]) -> Result<Vec<Value>> {
    let a = args[0].tensor()?;
    let dt = a.dtype()?;
    let out = Tensor::empty(&[], dt, a.device()?)?;
    match dt {
        DType::F32 => sum_t::<f32>(a, &out),
        DType::F64 => sum_t::<f64>(a, &out),
        DType::I64 => sum_t::<i64>(a, &out),
        _ => return Err(Error::declined()),
    }
    Ok(vec![Value::Tensor(out)])
}

fn mm_t<T: Num>(a: &Tensor, b: &Tensor, out: &Tensor) {
    let (n, k, m) = (a.sizes()[0], a.sizes()[1], b.sizes()[1]);
    let (sa, sb, so) = (a.strides(), b.strides(), out.strides());
    let (pa, pb, po) = (
        a.data_ptr() as *const T,
        b.data_ptr() as *const T,
        out.data_ptr() as *mut T,
    );
    for i in 0..n {
        for j in 0..m {
            let mut acc = T::ZERO;
            for p in 0..k {
                // SAFETY: i < n, j < m, p < k index inside both 2-d inputs (held by the call).
                acc = acc
                    + unsafe {
                        *pa.offset((i * sa[0] + p * sa[1]) as isize)
                            * *pb.offset((p * sb[0] + j * sb[1]) as isize)
                    };
            }
            // SAFETY: inside `out`, new and ours.
            unsafe { *po.offset((i * so[0] + j * so[1]) as isize) = acc };
        }
    }
}

fn mm(args: &[Value]) -> Result<Vec<Value>> {
    mm_k(args[0].tensor()?, args[1].tensor()?).map(|t| vec![Value::Tensor(t)])
}

/// `mm` of two 2-d tensors of one dtype, in the linked emu's loop order.
fn mm_k(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let dt = a.dtype()?;
    if b.dtype()? != dt
        || a.sizes().len() != 2
        || b.sizes().len() != 2
        || a.device()? != b.device()?
    {
        return Err(Error::declined());
    }
    if a.sizes()[1] != b.sizes()[0] {
        return Err(Error::msg(format!(
            "emu mm: {:?} @ {:?}",
            a.sizes(),
            b.sizes()
        )));
    }
    let out = Tensor::empty(&[a.sizes()[0], b.sizes()[1]], dt, a.device()?)?;
    match dt {
        DType::F32 => mm_t::<f32>(a, b, &out),
        DType::F64 => mm_t::<f64>(a, b, &out),
        DType::I64 => mm_t::<i64>(a, b, &out),
        DType::I32 => mm_t::<i32>(a, b, &out),
        _ => return Err(Error::declined()),
    }
    Ok(out)
}

typed_entry! {
    /// `add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`
    fn add_entry(self_: Tensor, other: Tensor, alpha: Scalar) -> Tensor = add_t;
}
typed_entry! {
    /// `sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`
    fn sub_entry(self_: Tensor, other: Tensor, alpha: Scalar) -> Tensor = sub_t;
}
typed_entry! {
    /// `mul.Tensor(Tensor self, Tensor other) -> Tensor`
    fn mul_entry(self_: Tensor, other: Tensor) -> Tensor = mul_t;
}
typed_entry! {
    /// `mm(Tensor self, Tensor mat2) -> Tensor`
    fn mm_entry(self_: Tensor, mat2: Tensor) -> Tensor = mm_k;
}
typed_entry! {
    /// `relu(Tensor self) -> Tensor`
    fn relu_entry(self_: Tensor) -> Tensor = relu_k;
}

out_entry! {
    /// `add.Tensor` into a result made like `self` (`ELEMENTWISE`).
    fn add_out_entry(self_: Tensor, other: Tensor, alpha: Scalar) -> out(ELEMENTWISE) = add_into;
}
out_entry! {
    /// `sub.Tensor` into a result made like `self` (`ELEMENTWISE`).
    fn sub_out_entry(self_: Tensor, other: Tensor, alpha: Scalar) -> out(ELEMENTWISE) = sub_into;
}
out_entry! {
    /// `mul.Tensor` into a result made like `self` (`ELEMENTWISE`).
    fn mul_out_entry(self_: Tensor, other: Tensor) -> out(ELEMENTWISE) = mul_into;
}
out_entry! {
    /// `relu` into a result made like `self` (`ELEMENTWISE`).
    fn relu_out_entry(self_: Tensor) -> out(ELEMENTWISE) = relu_into;
}

/// Registers the allocator (emu's pools), the CPU fallback with the transfer, the
/// device runtime, and the kernels:
/// boxed, plus typed entries (ABI 1.1) for every op but the pinned `sum`, whose
/// schema differs from the host's (adapted calls go through the boxed kernel),
/// and out entries (ABI 1.2) for the elementwise ops, which the host calls with
/// a result it made when both operands have one size, dtype and device.
pub fn init(reg: &mut Registrar, config: &str) -> Result<()> {
    runtime::RUNTIME.configure(config)?;
    reg.allocator(&runtime::POOLS)?
        .cpu_fallback(&TRANSFER)?
        .device_runtime(&runtime::RUNTIME)?;
    // Config `no-communicator`: a copy whose collectives the host stages.
    if !config.split(',').any(|w| w.trim() == "no-communicator") {
        reg.communicator(&comm::COMMUNICATOR)?;
    }
    reg.kernel("aten::add.Tensor", add)?
        .kernel("aten::sub.Tensor", sub)?
        .kernel("aten::mul.Tensor", mul)?
        .kernel("aten::mm", mm)?
        .kernel("aten::relu", relu)?
        .kernel("aten::sum", sum)?
        .kernel("aten::rand", random::rand)?
        .kernel("aten::randn", random::randn)?;
    reg.autograd_kernel(
        "aten::sigmoid",
        "EmuSigmoidBackward",
        extend::sigmoid_backward,
    )?;
    // A copy installed under another device name (config `no-custom-op`) cannot
    // declare operators of the `emu` namespace.
    if !config.split(',').any(|w| w.trim() == "no-custom-op") {
        reg.custom_op(extend::FUSED_ADD_RELU, extend::fused_add_relu)?;
    }
    reg.typed_kernel("aten::add.Tensor", add_entry())?
        .typed_kernel("aten::sub.Tensor", sub_entry())?
        .typed_kernel("aten::mul.Tensor", mul_entry())?
        .typed_kernel("aten::mm", mm_entry())?
        .typed_kernel("aten::relu", relu_entry())?;
    reg.out_kernel("aten::add.Tensor", add_out_entry())?
        .out_kernel("aten::sub.Tensor", sub_out_entry())?
        .out_kernel("aten::mul.Tensor", mul_out_entry())?
        .out_kernel("aten::relu", relu_out_entry())?;
    Ok(())
}

export_plugin!(init);

/// What tests ask the plugin directly (found with `dlsym` in the loaded copy):
/// `what` 0 queues `arg` milliseconds of work on stream `stream` of device
/// `index` ([`timeline::hold`]; returns 0, or `u64::MAX` for an unknown stream),
/// 1 returns the pinned bytes in use, 2 device `index`'s pool bytes in use, 3 the
/// native random kernel calls so far, 4 the native `EmuSigmoidBackward` calls, 5
/// the native `emu::fused_add_relu` calls, 6 the native `all_reduce` calls;
/// other values return `u64::MAX`.
#[no_mangle]
pub extern "C" fn opal_emu_plugin_probe(what: u32, index: i32, stream: i64, arg: u64) -> u64 {
    std::panic::catch_unwind(|| match what {
        0 => timeline::hold(index, stream, arg).map_or(u64::MAX, |()| 0),
        1 => runtime::PINNED.bytes_in_use(),
        2 => runtime::POOLS.bytes_in_use(index),
        3 => random::CALLS.load(std::sync::atomic::Ordering::Relaxed),
        4 => extend::BACKWARD_CALLS.load(std::sync::atomic::Ordering::Relaxed),
        5 => extend::FUSED_CALLS.load(std::sync::atomic::Ordering::Relaxed),
        6 => comm::CALLS.load(std::sync::atomic::Ordering::Relaxed),
        _ => u64::MAX,
    })
    .unwrap_or(u64::MAX)
}
