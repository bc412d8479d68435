//! A test plugin for Opal's loader, configured by its manifest's `"config"` (words
//! separated by commas): `panic` (its init panics), `fail` (its init returns an
//! error), `no-fallback` (no CPU fallback), `boxed-only` (no typed entries: what a
//! plugin built for ABI 1.0 registers), `count` (count kernel calls, read with
//! the exported `opal_test_plugin_calls`), `typed-panic` (the typed and out entries
//! panic), `no-out` (no out entries: what a plugin built for ABI 1.1 registers).
//! Otherwise it registers host-memory allocation, the CPU fallback, and f32
//! kernels for `aten::add.Tensor`, `aten::relu` and `aten::sum` (the latter written
//! against the old schema `sum(Tensor self) -> Tensor`), each boxed and as a typed
//! entry (ABI 1.1), and out entries for `add.Tensor` and `relu` (ABI 1.2, rule
//! `ELEMENTWISE`). Built with the feature `abi-1-0`, it declares ABI 1.0 and
//! registers boxed kernels only (a plugin as built for 1.0); with `abi-1-1`, it
//! declares ABI 1.1 and registers no out entries (a plugin as built for 1.1);
//! with `abi-1-3`, it declares ABI 1.3 (a plugin as built before device
//! runtimes). Built for 1.4 it registers no device runtime: the host gives it
//! the default one. The tests in `plugins/tests` copy the library and write
//! manifests around it (other names, devices, keys, ABI versions, schemas).
//!
//! Owns: nothing but this test fixture. Must not: depend on `opal`.

use opal_plugin_sdk::{
    export_plugin, out_entry, typed_entry, DType, Error, HostMemory, Registrar, Result, Scalar,
    Tensor, Transfer, Value,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Set by the `count` config word: count calls in [`CALLS`].
static COUNT: AtomicBool = AtomicBool::new(false);
/// Set by the `typed-panic` config word.
static TYPED_PANIC: AtomicBool = AtomicBool::new(false);
/// Calls of the boxed kernels (0), of the typed entries, out entries included (1),
/// and of the out entries (2), with `count`.
static CALLS: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

fn counted(which: usize) {
    if COUNT.load(Ordering::Relaxed) {
        CALLS[which].fetch_add(1, Ordering::Relaxed);
    }
}

/// The number of kernel calls this copy of the library served (with the `count`
/// config word): `which` 0 for boxed kernels, 1 for typed entries (out entries
/// included), 2 for out entries; `u64::MAX` for another `which`. For the tests, which look it up with `dlsym`.
#[no_mangle]
pub extern "C" fn opal_test_plugin_calls(which: u32) -> u64 {
    // Nothing here can panic; catch_unwind keeps the rule of every export anyway.
    std::panic::catch_unwind(|| {
        CALLS
            .get(which as usize)
            .map_or(u64::MAX, |c| c.load(Ordering::Relaxed))
    })
    .unwrap_or(u64::MAX)
}

/// Copies of contiguous tensors (the tests use nothing else).
struct Copy32;

impl Transfer for Copy32 {
    fn to_cpu(&self, src: &Tensor, dst: &Tensor) -> Result<()> {
        copy(src, dst)
    }
    fn from_cpu(&self, src: &Tensor, dst: &Tensor) -> Result<()> {
        copy(src, dst)
    }
}

/// Contiguous tensors of one dtype and size only (all the tests need).
fn copy(src: &Tensor, dst: &Tensor) -> Result<()> {
    if src.dtype()? != dst.dtype()?
        || src.sizes() != dst.sizes()
        || !src.is_contiguous()
        || !dst.is_contiguous()
    {
        return Err(Error::msg(format!(
            "test plugin: cannot copy {src:?} into {dst:?}"
        )));
    }
    let n = src.numel() as usize * src.element_size();
    if n > 0 {
        // SAFETY: both contiguous with `n` bytes of host memory; the host holds
        // `src` for reading and `dst` for writing during the transfer.
        unsafe { std::ptr::copy_nonoverlapping(src.data_ptr(), dst.data_ptr(), n) };
    }
    Ok(())
}

/// The elements of a contiguous f32 tensor.
///
/// # Safety
/// Host-addressable memory not written meanwhile.
unsafe fn f32s(t: &Tensor) -> Result<&[f32]> {
    if t.dtype()? != DType::F32 {
        return Err(Error::declined());
    }
    // SAFETY: forwarded.
    unsafe { t.as_slice::<f32>() }
}

fn map(a: &Tensor, f: impl Fn(usize, f32) -> f32) -> Result<Tensor> {
    // SAFETY: an input argument, held by the op call.
    let x = unsafe { f32s(a) }?;
    let out = Tensor::empty(a.sizes(), DType::F32, a.device()?)?;
    let po = out.data_ptr() as *mut f32;
    for (i, v) in x.iter().enumerate() {
        // SAFETY: `out` is new, contiguous, with as many elements as `x`.
        unsafe { *po.add(i) = f(i, *v) };
    }
    Ok(out)
}

fn add(args: &[Value]) -> Result<Vec<Value>> {
    counted(0);
    add_t(args[0].tensor()?, args[1].tensor()?, args[2].scalar()?).map(|t| vec![Value::Tensor(t)])
}

/// `add.Tensor` for contiguous f32 tensors of one size; declined otherwise.
fn add_t(a: &Tensor, b: &Tensor, alpha: Scalar) -> Result<Tensor> {
    if a.sizes() != b.sizes()
        || !a.is_contiguous()
        || !matches!(alpha, Scalar::Int(_) | Scalar::Float(_))
    {
        return Err(Error::declined());
    }
    // SAFETY: an input argument, held by the op call.
    let y = unsafe { f32s(b) }?;
    let al = alpha.to_f64() as f32;
    map(a, |i, x| x + al * y[i])
}

fn relu(args: &[Value]) -> Result<Vec<Value>> {
    counted(0);
    relu_t(args[0].tensor()?).map(|t| vec![Value::Tensor(t)])
}

fn relu_t(a: &Tensor) -> Result<Tensor> {
    map(a, |_, x| if x > 0.0 { x } else { 0.0 })
}

/// `sum(Tensor self) -> Tensor` (the schema before `dtype=` existed).
fn sum(args: &[Value]) -> Result<Vec<Value>> {
    counted(0);
    sum_t(args[0].tensor()?).map(|t| vec![Value::Tensor(t)])
}

fn sum_t(a: &Tensor) -> Result<Tensor> {
    // SAFETY: an input argument, held by the op call.
    let s: f32 = unsafe { f32s(a) }?.iter().sum();
    let out = Tensor::empty(&[], DType::F32, a.device()?)?;
    // SAFETY: a new one-element f32 tensor in host memory.
    unsafe { *(out.data_ptr() as *mut f32) = s };
    Ok(out)
}

/// What the typed entries run: the same kernels, counted apart (and panicking
/// with `typed-panic`).
fn typed<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    counted(1);
    if TYPED_PANIC.load(Ordering::Relaxed) {
        panic!("test plugin: typed entry told to panic");
    }
    f()
}

fn add_typed(a: &Tensor, b: &Tensor, alpha: Scalar) -> Result<Tensor> {
    typed(|| add_t(a, b, alpha))
}
fn relu_typed(a: &Tensor) -> Result<Tensor> {
    typed(|| relu_t(a))
}
fn sum_typed(a: &Tensor) -> Result<Tensor> {
    typed(|| sum_t(a))
}

/// `add.Tensor` into the result the host made (ABI 1.2 out entry): contiguous f32
/// operands and an integer or float `alpha`; declined otherwise. The rule
/// (`ELEMENTWISE`) gives both operands and the result one size and dtype, and the
/// result is contiguous.
fn add_into(a: &Tensor, b: &Tensor, alpha: Scalar, out: &Tensor) -> Result<()> {
    typed(|| {
        counted(2);
        let al = match alpha {
            Scalar::Int(i) => i as f32,
            Scalar::Float(f) => f as f32,
            _ => return Err(Error::declined()),
        };
        // SAFETY: input arguments, held by the op call.
        let (x, y) = unsafe { (f32s(a)?, f32s(b)?) };
        let po = out.data_ptr() as *mut f32;
        for (i, (u, v)) in x.iter().zip(y).enumerate() {
            // SAFETY: `out` is the entry's result, ours during the call: by the
            // rule, contiguous f32 with `a`'s sizes, so as many elements as `x`.
            unsafe { *po.add(i) = u + al * v };
        }
        Ok(())
    })
}

/// `relu` into the result the host made (ABI 1.2 out entry): a contiguous f32
/// operand; declined otherwise.
fn relu_into(a: &Tensor, out: &Tensor) -> Result<()> {
    typed(|| {
        counted(2);
        // SAFETY: an input argument, held by the op call.
        let x = unsafe { f32s(a) }?;
        let po = out.data_ptr() as *mut f32;
        for (i, v) in x.iter().enumerate() {
            // SAFETY: as in `add_into`.
            unsafe { *po.add(i) = if *v > 0.0 { *v } else { 0.0 } };
        }
        Ok(())
    })
}

out_entry! {
    /// `add.Tensor` into a result made like `self` (`ELEMENTWISE`).
    fn add_out_entry(self_: Tensor, other: Tensor, alpha: Scalar) -> out(ELEMENTWISE) = add_into;
}
out_entry! {
    /// `relu` into a result made like `self` (`ELEMENTWISE`).
    fn relu_out_entry(self_: Tensor) -> out(ELEMENTWISE) = relu_into;
}

typed_entry! {
    /// `add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`
    fn add_entry(self_: Tensor, other: Tensor, alpha: Scalar) -> Tensor = add_typed;
}
typed_entry! {
    /// `relu(Tensor self) -> Tensor`
    fn relu_entry(self_: Tensor) -> Tensor = relu_typed;
}
typed_entry! {
    /// `sum(Tensor self) -> Tensor`: the pinned schema, which the host does not
    /// bind typed (its schema has `dtype=`); the boxed kernel serves it.
    fn sum_entry(self_: Tensor) -> Tensor = sum_typed;
}

fn init(reg: &mut Registrar, config: &str) -> Result<()> {
    let words: Vec<&str> = config.split(',').map(str::trim).collect();
    if words.contains(&"panic") {
        panic!("test plugin: init told to panic");
    }
    if words.contains(&"fail") {
        return Err(Error::msg("test plugin: init told to fail"));
    }
    static MEM: HostMemory = HostMemory {
        host_accessible: true,
    };
    static COPY: Copy32 = Copy32;
    reg.allocator(&MEM)?;
    if !words.contains(&"no-fallback") {
        reg.cpu_fallback(&COPY)?;
    }
    COUNT.store(words.contains(&"count"), Ordering::Relaxed);
    TYPED_PANIC.store(words.contains(&"typed-panic"), Ordering::Relaxed);
    reg.kernel("aten::add.Tensor", add)?
        .kernel("aten::relu", relu)?
        .kernel("aten::sum", sum)?;
    if !cfg!(feature = "abi-1-0") && !words.contains(&"boxed-only") {
        reg.typed_kernel("aten::add.Tensor", add_entry())?
            .typed_kernel("aten::relu", relu_entry())?
            .typed_kernel("aten::sum", sum_entry())?;
        if !cfg!(feature = "abi-1-1") && !words.contains(&"no-out") {
            reg.out_kernel("aten::add.Tensor", add_out_entry())?
                .out_kernel("aten::relu", relu_out_entry())?;
        }
    }
    Ok(())
}

#[cfg(not(any(feature = "abi-1-0", feature = "abi-1-1", feature = "abi-1-3")))]
export_plugin!(init);
#[cfg(all(
    feature = "abi-1-3",
    not(any(feature = "abi-1-0", feature = "abi-1-1"))
))]
export_plugin!(init, minor = 3);
#[cfg(feature = "abi-1-0")]
export_plugin!(init, minor = 0);
#[cfg(all(feature = "abi-1-1", not(feature = "abi-1-0")))]
export_plugin!(init, minor = 1);
