//! Factory ops: `empty`, `zeros`, `ones`, `full`, `eye`, `arange.start_step`,
//! `linspace`, `zeros_like`, `ones_like`, `full_like`, and the random `rand`,
//! `randn`, `randint` (in `random`), `empty_strided` (in `strided`), `randperm` (in `permutation`).
//!
//! Owns: default-dtype inference (PyTorch's rules for fill values and ranges),
//! size checks and element generation. Must not: touch the runtime's internals.

mod permutation;
mod random;
mod strided;

pub use permutation::*;
pub use random::*;
pub use strided::empty_strided;

use crate::dispatch_all;
use crate::dtype_dispatch::Elem;
use crate::nn::io::{check_nbytes, err, in_op, make_output};
use opal::rules::factory::{Arange, Filled};
use opal::{DType, Device, DeviceType, Layout, MemoryFormat, Result, Scalar, Tensor};

/// Checks the tensor-options arguments a CPU factory accepts.
pub(crate) fn check_options(
    layout: Option<Layout>,
    device: Option<Device>,
    op: &str,
) -> Result<()> {
    if let Some(l) = layout {
        if l != Layout::Strided {
            return Err(err(
                op,
                format!("layout {l:?} is not supported by the CPU backend"),
            ));
        }
    }
    if let Some(d) = device {
        if d.device_type() != DeviceType::Cpu {
            return Err(err(
                op,
                format!("the CPU kernel cannot allocate on device '{d}'"),
            ));
        }
    }
    Ok(())
}

/// The factory's result in pinned host memory when `pin_memory` asks for it
/// (through the accelerator's host allocator: `Tensor::pin_memory`).
fn pinned_if(t: Tensor, pin_memory: Option<bool>, op: &str) -> Result<Tensor> {
    if pin_memory == Some(true) {
        t.pin_memory().map_err(in_op(op))
    } else {
        Ok(t)
    }
}

fn check_size(size: &[i64], op: &str) -> Result<()> {
    opal::rules::factory::check_size(op, size)
}

/// A tensor of `size` with every element `value` (cast to `dtype`).
fn filled(size: &[i64], value: &Scalar, dtype: DType, op: &str) -> Result<Tensor> {
    check_size(size, op)?;
    value.check_fits(dtype, op)?;
    check_nbytes(size, dtype, op)?;
    let t = crate::out::empty(size, dtype).map_err(in_op(op))?;
    let one = Tensor::scalar_tensor(value, dtype, Device::cpu())?;
    if t.numel() > 0 {
        crate::copy::copy_into(&t, &one, op)?;
    }
    Ok(t)
}

/// Uninitialised (here: zero-filled) tensor of `size`.
pub fn empty(
    size: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    check_options(layout, device, "empty")?;
    check_size(size, "empty")?;
    let dtype = dtype.unwrap_or_else(opal::dtype::default_dtype);
    check_nbytes(size, dtype, "empty")?;
    let t = match memory_format {
        None | Some(MemoryFormat::Contiguous) => {
            crate::out::empty(size, dtype).map_err(in_op("empty"))
        }
        Some(MemoryFormat::Preserve) => Err(err(
            "empty",
            "memory format Preserve needs an input tensor; empty has none",
        )),
        Some(format) => channels_last_empty(size, dtype, format),
    }?;
    pinned_if(t, pin_memory, "empty")
}

/// Channels-last storage: allocate the physical `N, spatial.., C` order
/// contiguously and view it with the logical `N, C, spatial..` dims.
fn channels_last_empty(size: &[i64], dtype: DType, format: MemoryFormat) -> Result<Tensor> {
    let rank = if format == MemoryFormat::ChannelsLast {
        4
    } else {
        5
    };
    if size.len() != rank {
        return Err(err(
            "empty",
            format!(
                "{format:?} memory format needs a {rank}-d size, got {}-d",
                size.len()
            ),
        ));
    }
    let mut physical = vec![size[0]];
    physical.extend_from_slice(&size[2..]);
    physical.push(size[1]);
    let t = crate::out::empty(&physical, dtype)?;
    let ps = t.strides();
    let mut strides = vec![ps[0], ps[rank - 1]];
    strides.extend_from_slice(&ps[1..rank - 1]);
    t.as_strided(size, &strides, 0)
}

/// `zeros`, `ones`, `full`: `size` filled with the value `opal::rules::factory`
/// chose, in its dtype.
pub fn fill(f: Filled) -> Result<Tensor> {
    check_options(None, f.device, f.op)?;
    let t = filled(f.size, &f.value, f.dtype, f.op)?;
    pinned_if(t, f.pin_memory, f.op)
}

/// `like`-ops use the input's dtype unless one is given.
fn like_dtype(self_: &Tensor, dtype: Option<DType>) -> DType {
    dtype.unwrap_or(self_.dtype())
}

/// Zeros shaped like `self_`.
pub fn zeros_like(
    self_: &Tensor,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    let _ = memory_format;
    check_options(layout, device, "zeros_like")?;
    let t = filled(
        self_.sizes(),
        &Scalar::Int(0),
        like_dtype(self_, dtype),
        "zeros_like",
    )?;
    pinned_if(t, pin_memory, "zeros_like")
}

/// Ones shaped like `self_`.
pub fn ones_like(
    self_: &Tensor,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    let _ = memory_format;
    check_options(layout, device, "ones_like")?;
    let t = filled(
        self_.sizes(),
        &Scalar::Int(1),
        like_dtype(self_, dtype),
        "ones_like",
    )?;
    pinned_if(t, pin_memory, "ones_like")
}

/// `fill_value` shaped like `self_` (in `self_`'s dtype unless `dtype` is given).
#[allow(clippy::too_many_arguments)]
pub fn full_like(
    self_: &Tensor,
    fill_value: &Scalar,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    let _ = memory_format;
    check_options(layout, device, "full_like")?;
    let t = filled(
        self_.sizes(),
        fill_value,
        like_dtype(self_, dtype),
        "full_like",
    )?;
    pinned_if(t, pin_memory, "full_like")
}

/// The `n x n` identity matrix.
pub fn eye(
    n: i64,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    const OP: &str = "eye";
    let _ = pin_memory;
    check_options(layout, device, OP)?;
    if n < 0 {
        return Err(err(OP, format!("n must be greater or equal to 0, got {n}")));
    }
    let dt = dtype.unwrap_or_else(opal::dtype::default_dtype);
    check_nbytes(&[n, n], dt, OP)?;
    dispatch_all!(dt, OP, |T| {
        // Allocated before anything is written: an n too large fails here, cleanly.
        make_output::<T>(&[n, n], dt, |m| {
            m.fill(T::zero());
            // n * n fit in memory, so n + 1 cannot overflow.
            m.iter_mut()
                .step_by(n as usize + 1)
                .for_each(|x| *x = T::from_i64(1));
            Ok(())
        })
        .map_err(in_op(OP))
    })
}

/// `start, start + step, ...` up to (excluding) `end`, with the dtype and length
/// `opal::rules::factory` chose.
pub fn arange_start_step(a: Arange) -> Result<Tensor> {
    const OP: &str = "arange";
    check_options(None, a.device, OP)?;
    let (start, step, dt, len, all_int) = (a.start, a.step, a.dtype, a.len, a.all_int);
    let (s, st) = (start.to_f64(), step.to_f64());
    check_nbytes(&[len], dt, OP)?;
    let (si, sti) = (start.to_i64() as i128, step.to_i64() as i128);
    dispatch_all!(dt, OP, |T| {
        make_output::<T>(&[len], dt, |v| {
            for (i, x) in v.iter_mut().enumerate() {
                *x = if T::IS_FLOAT || !all_int {
                    T::from_f64(s + i as f64 * st)
                } else {
                    // In range by the count above (see there).
                    T::from_i64((si + i as i128 * sti) as i64)
                };
            }
            Ok(())
        })
        .map_err(in_op(OP))
    })
}

/// `steps` evenly spaced values from `start` to `end` inclusive (default float dtype).
#[allow(clippy::too_many_arguments)]
pub fn linspace(
    start: &Scalar,
    end: &Scalar,
    steps: i64,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    const OP: &str = "linspace";
    let _ = pin_memory;
    check_options(layout, device, OP)?;
    if steps < 0 {
        return Err(err(OP, "number of steps must be non-negative"));
    }
    let dt = dtype.unwrap_or_else(opal::dtype::default_dtype);
    let (s, e) = (start.to_f64(), end.to_f64());
    let n = steps as usize;
    let step = if n > 1 { (e - s) / (n - 1) as f64 } else { 0.0 };
    // Fill from both ends toward the middle so the last value is exactly `end`.
    let half = n / 2;
    let val = |i: usize| {
        if i < half {
            s + step * i as f64
        } else {
            e - step * (n - 1 - i) as f64
        }
    };
    check_nbytes(&[steps], dt, OP)?;
    dispatch_all!(dt, OP, |T| {
        make_output::<T>(&[steps], dt, |v| {
            for (i, x) in v.iter_mut().enumerate() {
                *x = T::from_f64(val(i));
            }
            Ok(())
        })
        .map_err(in_op(OP))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_and_dtypes() {
        assert_eq!(
            opal::rules::factory::zeros(&[2], None, None, None, None)
                .and_then(fill)
                .unwrap()
                .dtype(),
            DType::F32
        );
        assert_eq!(
            opal::rules::factory::full(&[2], &Scalar::Int(7), None, None, None, None)
                .and_then(fill)
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            vec![7, 7]
        );
        assert_eq!(
            opal::rules::factory::full(&[1], &Scalar::Bool(true), None, None, None, None)
                .and_then(fill)
                .unwrap()
                .dtype(),
            DType::Bool
        );
        let f = opal::rules::factory::full(
            &[1],
            &Scalar::Float(-2.25),
            Some(DType::BF16),
            None,
            None,
            None,
        )
        .and_then(fill)
        .unwrap();
        assert_eq!(f.to_vec::<half::bf16>().unwrap()[0].to_f32(), -2.25);
        assert!(opal::rules::factory::zeros(&[-1], None, None, None, None)
            .and_then(fill)
            .is_err());
        assert_eq!(
            eye(3, Some(DType::I64), None, None, None)
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            vec![1, 0, 0, 0, 1, 0, 0, 0, 1]
        );
        let src = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
        assert_eq!(
            ones_like(&src, Some(DType::F16), None, None, None, None)
                .unwrap()
                .dtype(),
            DType::F16
        );
    }

    #[test]
    fn ranges() {
        let a = opal::rules::factory::arange_start_step(
            &Scalar::Int(10),
            &Scalar::Int(0),
            &Scalar::Int(-3),
            None,
            None,
            None,
            None,
        )
        .and_then(arange_start_step)
        .unwrap();
        assert_eq!(a.to_vec::<i64>().unwrap(), vec![10, 7, 4, 1]);
        let b = opal::rules::factory::arange_start_step(
            &Scalar::Float(0.0),
            &Scalar::Float(1.0),
            &Scalar::Float(0.1),
            None,
            None,
            None,
            None,
        )
        .and_then(arange_start_step)
        .unwrap();
        assert_eq!(b.numel(), 10);
        assert!(opal::rules::factory::arange_start_step(
            &Scalar::Int(0),
            &Scalar::Int(5),
            &Scalar::Int(-1),
            None,
            None,
            None,
            None
        )
        .and_then(arange_start_step)
        .is_err());
        let l = linspace(
            &Scalar::Int(0),
            &Scalar::Int(10),
            4,
            Some(DType::I64),
            None,
            None,
            None,
        )
        .unwrap();
        assert_eq!(l.to_vec::<i64>().unwrap(), vec![0, 3, 6, 10]);
        let l1 = linspace(&Scalar::Int(3), &Scalar::Int(3), 1, None, None, None, None).unwrap();
        assert_eq!(l1.to_vec::<f32>().unwrap(), vec![3.0]);
    }
}
