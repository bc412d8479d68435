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
use crate::nn::io::{check_nbytes, in_op, make_output};
use opal::rules::random::Randperm;
use opal::{Result, Tensor};

/// `randperm` and `randperm.generator` (their `out=` forms are derived from these in
/// `backend.yaml`), from the arguments [`opal::rules::random::randperm_generator`]
/// checked.
pub fn randperm(p: Randperm) -> Result<Tensor> {
    const OP: &str = "randperm";
    let _ = p.pin_memory;
    check_options(p.layout, p.device, OP)?;
    let (n, dt) = (p.n, p.dtype);
    check_nbytes(&[n], dt, OP)?;
    let g = generator(p.generator);
    dispatch_numeric!(dt, OP, |T| make_output::<T>(&[n], dt, |v| {
        let mut perm: Vec<i64> = (0..n).collect();
        g.with_state(|st| {
            for i in (1..perm.len()).rev() {
                let j = (st.next_u64() % (i as u64 + 1)) as usize;
                perm.swap(i, j);
            }
        });
        for (o, &x) in v.iter_mut().zip(&perm) {
            *o = T::from_i64(x);
        }
        Ok(())
    }))
    .map_err(in_op(OP))
}
