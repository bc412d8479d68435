//! `randperm`: a random permutation of `0..n`, drawn from the given generator (the
//! CPU default one when none is given) by a Fisher-Yates shuffle under one lock,
//! so a seed reproduces it.
//!
//! Owns: the shuffle and the dtype conversion. Must not: implement a generator or
//! restate `randperm`'s argument rules (`opal::rules::random`).

use super::check_options;
use super::random::generator;
use crate::dispatch_numeric;
use crate::dtype_dispatch::Elem;
use crate::nn::io::{check_nbytes, in_op, make_output, write_out};
use opal::rules::random::check_randperm;
use opal::{DType, Device, Generator, Layout, Result, Tensor};

fn permutation(n: i64, g: Option<&Generator>, dt: DType, op: &str) -> Result<Tensor> {
    check_randperm(op, n, dt)?;
    check_nbytes(&[n], dt, op)?;
    let g = generator(g);
    dispatch_numeric!(dt, op, |T| make_output::<T>(&[n], dt, |v| {
        let mut p: Vec<i64> = (0..n).collect();
        g.with_state(|st| {
            for i in (1..p.len()).rev() {
                let j = (st.next_u64() % (i as u64 + 1)) as usize;
                p.swap(i, j);
            }
        });
        for (o, &x) in v.iter_mut().zip(&p) {
            *o = T::from_i64(x);
        }
        Ok(())
    }))
    .map_err(in_op(op))
}

/// `randperm.generator`.
#[allow(clippy::too_many_arguments)]
pub fn randperm_generator(
    n: i64,
    generator_: Option<&Generator>,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    const OP: &str = "randperm";
    let _ = pin_memory;
    check_options(layout, device, OP)?;
    permutation(n, generator_, dtype.unwrap_or(DType::I64), OP)
}

/// `randperm`: [`randperm_generator`] with the default generator.
pub fn randperm(
    n: i64,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    randperm_generator(n, None, dtype, layout, device, pin_memory)
}

/// `randperm.generator_out`: the permutation in `out`'s dtype.
pub fn randperm_generator_out(
    n: i64,
    generator_: Option<&Generator>,
    out: &Tensor,
) -> Result<Tensor> {
    const OP: &str = "randperm.generator_out";
    write_out(&permutation(n, generator_, out.dtype(), OP)?, out, OP)
}

/// `randperm.out`.
pub fn randperm_out(n: i64, out: &Tensor) -> Result<Tensor> {
    randperm_generator_out(n, None, out)
}
