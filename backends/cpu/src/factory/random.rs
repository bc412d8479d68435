//! Random factories: `rand`, `randn`, `randint` (and `randint.low`), each with a
//! `_generator` form taking an explicit `Generator`. Numbers come from the runtime's
//! Philox generator (the CPU default one when none is given), drawn under a single
//! lock so a seed reproduces a tensor exactly.
//!
//! Owns: mapping generator output to each dtype. Must not: implement a generator.

use super::check_options;
use crate::dispatch_all;
use crate::dtype_dispatch::Elem;
use crate::nn::io::{check_nbytes, err, in_op, make_output};
use opal::generator::PhiloxState;
use opal::{DType, Device, DeviceType, Generator, Layout, Result, Tensor};

pub(super) fn generator(g: Option<&Generator>) -> Generator {
    g.cloned()
        .unwrap_or_else(|| Generator::default_for(DeviceType::Cpu))
}

fn check_size(size: &[i64], op: &str) -> Result<()> {
    if let Some(s) = size.iter().find(|&&s| s < 0) {
        return Err(err(
            op,
            format!("Trying to create tensor with negative dimension {s}: {size:?}"),
        ));
    }
    Ok(())
}

/// PyTorch refuses integer bounds the dtype cannot hold rather than wrap them:
/// `low` and `high - 1` must be values of `dt`.
fn check_int_range(low: i64, high: i64, dt: DType, op: &str) -> Result<()> {
    let range = match dt {
        DType::Bool => 0..=1,
        DType::U8 => 0..=u8::MAX as i64,
        DType::I8 => i8::MIN as i64..=i8::MAX as i64,
        DType::I16 => i16::MIN as i64..=i16::MAX as i64,
        DType::I32 => i32::MIN as i64..=i32::MAX as i64,
        _ => return Ok(()),
    };
    if !range.contains(&low) {
        return Err(err(op, format!("from={low} is out of bounds for {dt}")));
    }
    if !range.contains(&(high - 1)) {
        return Err(err(
            op,
            format!("to - 1={} is out of bounds for {dt}", high - 1),
        ));
    }
    Ok(())
}

/// A tensor of `size` and dtype `dt` (the dtype of `T`) whose elements `draw` takes
/// from `g`'s stream in order, all under one lock. The tensor is allocated first, so
/// a size that cannot be had fails before any number is drawn.
fn sample<T: Elem>(
    size: &[i64],
    dt: DType,
    g: &Generator,
    op: &str,
    draw: impl Fn(&mut PhiloxState) -> T,
) -> Result<Tensor> {
    check_nbytes(size, dt, op)?;
    make_output::<T>(size, dt, |v| {
        g.with_state(|st| v.iter_mut().for_each(|x| *x = draw(st)));
        Ok(())
    })
    .map_err(in_op(op))
}

fn float_dtype(dtype: Option<DType>, op: &str) -> Result<DType> {
    let dt = dtype.unwrap_or_else(opal::dtype::default_dtype);
    if !dt.is_floating_point() {
        return Err(err(op, format!("\"{op}\" not implemented for '{dt}'")));
    }
    Ok(dt)
}

/// The checks and inputs shared by the floating-point samplers: options, dtype,
/// size and the generator to draw from.
fn float_sampling(
    size: &[i64],
    generator_: Option<&Generator>,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    op: &str,
) -> Result<(DType, Generator)> {
    check_options(layout, device, op)?;
    let dt = float_dtype(dtype, op)?;
    check_size(size, op)?;
    Ok((dt, generator(generator_)))
}

/// Uniform samples in `[0, 1)` from `generator` (or the default CPU generator).
#[allow(clippy::too_many_arguments)]
pub fn rand_generator(
    size: &[i64],
    generator_: Option<&Generator>,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    const OP: &str = "rand";
    let _ = pin_memory;
    let (dt, g) = float_sampling(size, generator_, dtype, layout, device, OP)?;
    dispatch_all!(dt, OP, |T| {
        sample::<T>(size, dt, &g, OP, |st| {
            if dt == DType::F64 {
                T::from_f64(st.next_f64())
            } else {
                // f32 samples, then rounded: a value that rounds up to 1.0 in
                // f16/bf16 is clamped below it to stay in [0, 1).
                let x = T::from_f64(st.next_f32() as f64);
                if x.to_f64() >= 1.0 {
                    T::from_f64(1.0 - f64::EPSILON)
                } else {
                    x
                }
            }
        })
    })
}

/// [`rand_generator`] with the default generator.
pub fn rand(
    size: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    rand_generator(size, None, dtype, layout, device, pin_memory)
}

/// Standard normal samples.
#[allow(clippy::too_many_arguments)]
pub fn randn_generator(
    size: &[i64],
    generator_: Option<&Generator>,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    const OP: &str = "randn";
    let _ = pin_memory;
    let (dt, g) = float_sampling(size, generator_, dtype, layout, device, OP)?;
    dispatch_all!(dt, OP, |T| {
        sample::<T>(size, dt, &g, OP, |st| T::from_f64(st.next_normal()))
    })
}

/// [`randn_generator`] with the default generator.
pub fn randn(
    size: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    randn_generator(size, None, dtype, layout, device, pin_memory)
}

/// Integers uniform in `[low, high)` (int64 unless `dtype` says otherwise).
#[allow(clippy::too_many_arguments)]
pub fn randint_low_generator(
    low: i64,
    high: i64,
    size: &[i64],
    generator_: Option<&Generator>,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    const OP: &str = "randint";
    let _ = pin_memory;
    check_options(layout, device, OP)?;
    if low >= high {
        return Err(err(
            OP,
            format!("random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"),
        ));
    }
    let dt = dtype.unwrap_or(DType::I64);
    check_size(size, OP)?;
    check_int_range(low, high, dt, OP)?;
    let g = generator(generator_);
    let range = (high as i128 - low as i128) as u128;
    dispatch_all!(dt, OP, |T| {
        sample::<T>(size, dt, &g, OP, |st| {
            T::from_i64((low as i128 + (st.next_u64() as u128 % range) as i128) as i64)
        })
    })
}

/// `randint.low` with the default generator.
#[allow(clippy::too_many_arguments)]
pub fn randint_low(
    low: i64,
    high: i64,
    size: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    randint_low_generator(low, high, size, None, dtype, layout, device, pin_memory)
}

/// Integers uniform in `[0, high)`.
pub fn randint(
    high: i64,
    size: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    randint_low_generator(0, high, size, None, dtype, layout, device, pin_memory)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_generators_reproduce_and_ranges_hold() {
        let g = Generator::new(Device::cpu());
        g.manual_seed(42);
        let a = rand_generator(&[100], Some(&g), None, None, None, None)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        g.manual_seed(42);
        let b = rand_generator(&[100], Some(&g), None, None, None, None)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(a, b);
        assert!(a.iter().all(|&x| (0.0..1.0).contains(&x)));
        let c = rand_generator(&[100], Some(&g), None, None, None, None)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_ne!(a, c);
        let n = randn_generator(&[4000], Some(&g), Some(DType::F64), None, None, None)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        let mean = n.iter().sum::<f64>() / 4000.0;
        assert!(mean.abs() < 0.1, "{mean}");
        let r = randint_low_generator(-3, 4, &[200], Some(&g), None, None, None, None)
            .unwrap()
            .to_vec::<i64>()
            .unwrap();
        assert!(r.iter().all(|&x| (-3..4).contains(&x)));
        assert!(r.contains(&-3) && r.contains(&3));
        assert!(randint(0, &[1], None, None, None, None).is_err());
        assert!(rand(&[2], Some(DType::I64), None, None, None).is_err());
        let e = randint(300, &[1], Some(DType::U8), None, None, None).unwrap_err();
        assert!(e.to_string().contains("299"), "{e}");
        assert!(randint_low(-1, 2, &[1], Some(DType::U8), None, None, None).is_err());
        let ok = randint(256, &[8], Some(DType::U8), None, None, None).unwrap();
        assert_eq!(ok.dtype(), DType::U8);
    }
}
