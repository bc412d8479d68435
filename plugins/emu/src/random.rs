//! The emu plugin's native random factories, `rand` and `randn` (ABI 1.4
//! generators): each draws from the default generator of the target device index
//! through the host, exactly the numbers the host's CPU kernels draw, so a seed
//! gives the same tensor here as through the CPU fallback of the linked emu.
//! Calls this does not cover (no dtype given, a dtype other than float32 or
//! float64, another layout, pinned memory, a negative size) are declined: the CPU
//! fallback answers them, with its own errors.
//!
//! Owns: those kernels. Must not: implement a generator.

use opal_plugin_sdk::{device, DType, Device, Error, Generator, Result, Tensor, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// Native random kernel calls (read by tests through the probe).
pub static CALLS: AtomicU64 = AtomicU64::new(0);

/// `rand(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device?
/// device=None, bool? pin_memory=None) -> Tensor`
pub fn rand(args: &[Value]) -> Result<Vec<Value>> {
    sample(args, false)
}

/// `randn`, the same arguments.
pub fn randn(args: &[Value]) -> Result<Vec<Value>> {
    sample(args, true)
}

fn sample(args: &[Value], normal: bool) -> Result<Vec<Value>> {
    let [size, dtype, layout, dev, pin] = args else {
        return Err(Error::msg(format!(
            "emu rand: {} arguments, the schema has 5",
            args.len()
        )));
    };
    let size: Vec<i64> = match size {
        Value::List(_, v) => v
            .iter()
            .map(|x| match x {
                Value::Int(i) if *i >= 0 => Ok(*i),
                _ => Err(Error::declined()),
            })
            .collect::<Result<_>>()?,
        _ => return Err(Error::declined()),
    };
    let dt = match dtype {
        Value::DType(d @ (DType::F32 | DType::F64)) => *d,
        _ => return Err(Error::declined()),
    };
    if !matches!(layout, Value::None | Value::Layout(0))
        || !matches!(pin, Value::None | Value::Bool(false))
    {
        return Err(Error::declined());
    }
    let Value::Device(d) = dev else {
        return Err(Error::declined());
    };
    let index = match d.index {
        Some(i) => i,
        None => device::current_device(d.kind)?,
    };
    let d = Device {
        kind: d.kind,
        index: Some(index),
    };
    let g = Generator::default_for(d)?;
    let n = usize::try_from(size.iter().product::<i64>())
        .map_err(|_| Error::msg(format!("emu rand: {size:?} has too many elements")))?;
    let out = Tensor::empty(&size, dt, d)?;
    match (dt, normal) {
        (DType::F64, false) => write(&out, n, |v: &mut [f64]| g.fill_uniform_f64(v))?,
        (DType::F64, true) => write(&out, n, |v: &mut [f64]| g.fill_normal_f64(v))?,
        (_, false) => write(&out, n, |v: &mut [f32]| g.fill_uniform_f32(v))?,
        (_, true) => write(&out, n, |v: &mut [f32]| {
            let mut w = vec![0f64; v.len()];
            g.fill_normal_f64(&mut w)?;
            v.iter_mut().zip(w).for_each(|(o, x)| *o = x as f32);
            Ok(())
        })?,
    }
    CALLS.fetch_add(1, Ordering::Relaxed);
    Ok(vec![Value::Tensor(out)])
}

/// Fills `n` values with `f` and writes them into `out`, a new contiguous tensor
/// of `n` elements of `T` (the kernel's own result).
fn write<T: Copy + Default>(
    out: &Tensor,
    n: usize,
    f: impl FnOnce(&mut [T]) -> Result<()>,
) -> Result<()> {
    let mut v = vec![T::default(); n];
    f(&mut v)?;
    if n > 0 {
        // SAFETY: `out` is new, contiguous and the kernel's alone, with `n`
        // elements of `T` at its (64-aligned) data pointer; `v` is separate.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), out.data_ptr() as *mut T, n) };
    }
    Ok(())
}
