//! A test plugin for Opal's loader, configured by its manifest's `"config"` (words
//! separated by commas): `panic` (its init panics), `fail` (its init returns an
//! error), `no-fallback` (no CPU fallback). Otherwise it registers host-memory
//! allocation, the CPU fallback, and f32 kernels for `aten::add.Tensor`,
//! `aten::relu` and `aten::sum` (the latter written against the old schema
//! `sum(Tensor self) -> Tensor`). The tests in `plugins/tests` copy the library and
//! write manifests around it (other names, devices, keys, ABI versions, schemas).
//!
//! Owns: nothing but this test fixture. Must not: depend on `opal`.

use opal_plugin_sdk::{
    export_plugin, DType, Error, HostMemory, Registrar, Result, Scalar, Tensor, Transfer, Value,
};

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

fn map(a: &Tensor, f: impl Fn(usize, f32) -> f32) -> Result<Vec<Value>> {
    // SAFETY: an input argument, held by the op call.
    let x = unsafe { f32s(a) }?;
    let out = Tensor::empty(a.sizes(), DType::F32, a.device()?)?;
    let po = out.data_ptr() as *mut f32;
    for (i, v) in x.iter().enumerate() {
        // SAFETY: `out` is new, contiguous, with as many elements as `x`.
        unsafe { *po.add(i) = f(i, *v) };
    }
    Ok(vec![Value::Tensor(out)])
}

fn add(args: &[Value]) -> Result<Vec<Value>> {
    let (a, b) = (args[0].tensor()?, args[1].tensor()?);
    let alpha = args[2].scalar()?;
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
    map(args[0].tensor()?, |_, x| if x > 0.0 { x } else { 0.0 })
}

/// `sum(Tensor self) -> Tensor` (the schema before `dtype=` existed).
fn sum(args: &[Value]) -> Result<Vec<Value>> {
    let a = args[0].tensor()?;
    // SAFETY: an input argument, held by the op call.
    let s: f32 = unsafe { f32s(a) }?.iter().sum();
    let out = Tensor::empty(&[], DType::F32, a.device()?)?;
    // SAFETY: a new one-element f32 tensor in host memory.
    unsafe { *(out.data_ptr() as *mut f32) = s };
    Ok(vec![Value::Tensor(out)])
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
    reg.kernel("aten::add.Tensor", add)?
        .kernel("aten::relu", relu)?
        .kernel("aten::sum", sum)?;
    Ok(())
}

export_plugin!(init);
