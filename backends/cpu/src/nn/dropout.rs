//! `native_dropout` (with its autogen out= form) and `native_dropout_backward`.
//!
//! In training each element is kept with probability `1 - p`, scaled by `1 / (1 - p)`,
//! and zeroed otherwise; the boolean mask says which elements were kept. The mask is
//! drawn from the default generator of the input's device, as `rand` draws: element
//! `i` (row-major) keeps iff the 24-bit uniform `rand` would produce from the `i`-th
//! Philox word is below `1 - p`. The kernel reserves its range of the Philox stream
//! up front and generates it in parallel, so a seed gives the same mask whatever the
//! thread count. `p = 0`, `p = 1` and `train = false` draw nothing: their masks are
//! all true, all false and all true. Dropped elements are exactly zero (also where
//! the input is inf or NaN).
//!
//! Owns: the mask drawing and the scaling. Must not: implement a generator (the
//! runtime's Philox does) or know about devices other than the CPU.

use super::io::{compute_dtype, err, make_output, with_slice, Compute};
use opal::generator::philox4x32_10;
use opal::{DType, Generator, Result, Scalar, Tensor};

/// Elements per parallel task (a multiple of 4: one Philox block gives 4 words).
const CHUNK: usize = 1 << 14;

/// Which elements survive.
#[derive(Clone, Copy)]
enum Keep {
    All,
    None,
    /// Keep element `i` iff `word_i >> 8 < threshold` (`threshold` = `(1-p) * 2^24`
    /// rounded up, so the test equals `rand < 1 - p`), words from the Philox stream
    /// of `seed` starting at block `offset`.
    Draw {
        seed: u64,
        offset: u64,
        threshold: u32,
    },
}

/// The range check PyTorch applies to `p` (NaN fails it too).
fn check_p(p: f64, op: &str) -> Result<()> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(err(
            op,
            format!("dropout probability has to be between 0 and 1, but got {p}"),
        ))
    }
}

/// Fills `mask[j]` for the elements `start..start + mask.len()` (`start` a multiple of 4).
fn draw(mask: &mut [bool], start: usize, seed: u64, offset: u64, threshold: u32) {
    let key = [seed as u32, (seed >> 32) as u32];
    for (b, m) in mask.chunks_mut(4).enumerate() {
        let block = offset.wrapping_add((start / 4 + b) as u64);
        let words = philox4x32_10([block as u32, (block >> 32) as u32, 0, 0], key);
        for (k, w) in m.iter_mut().zip(words) {
            *k = (w >> 8) < threshold;
        }
    }
}

/// Writes the mask and `y = keep ? x * scale : 0` for one chunk of elements.
fn fill<C: Compute>(x: &[C], y: &mut [C], mask: &mut [bool], start: usize, keep: Keep, scale: C) {
    match keep {
        Keep::All => mask.fill(true),
        Keep::None => mask.fill(false),
        Keep::Draw {
            seed,
            offset,
            threshold,
        } => draw(mask, start, seed, offset, threshold),
    }
    for ((o, &v), &k) in y.iter_mut().zip(x).zip(mask.iter()) {
        *o = if k { v * scale } else { C::default() };
    }
}

/// Runs [`fill`] over the whole tensor, in parallel chunks when it is large.
fn fill_all<C: Compute>(x: &[C], y: &mut [C], mask: &mut [bool], keep: Keep, scale: C) {
    if x.len() <= CHUNK {
        fill(x, y, mask, 0, keep, scale);
        return;
    }
    let mut tasks: Vec<_> = y
        .chunks_mut(CHUNK)
        .zip(mask.chunks_mut(CHUNK))
        .zip(x.chunks(CHUNK))
        .enumerate()
        .collect();
    crate::parallel::fork_each_mut(&mut tasks, |(c, ((yc, mc), xc))| {
        fill(xc, yc, mc, *c * CHUNK, keep, scale)
    });
}

/// Dropout: `(output, mask)`. `train = None` counts as training, as in PyTorch.
pub fn native_dropout(input: &Tensor, p: f64, train: Option<bool>) -> Result<(Tensor, Tensor)> {
    const OP: &str = "native_dropout";
    check_p(p, OP)?;
    let cd = compute_dtype(input.dtype(), OP)?;
    let n = input.numel();
    let train = train.unwrap_or(true);
    let keep = if !train || p == 0.0 {
        Keep::All
    } else if p == 1.0 {
        Keep::None
    } else {
        let gen = Generator::default_for(input.device().device_type());
        let (seed, offset) = gen.reserve((n.max(0) as u64).div_ceil(4));
        Keep::Draw {
            seed,
            offset,
            threshold: ((1.0 - p) * (1u64 << 24) as f64).ceil() as u32,
        }
    };
    // A kept element is scaled by 1 / (1 - p); at p = 1 nothing is kept.
    let scale = if train && p < 1.0 {
        1.0 / (1.0 - p)
    } else {
        1.0
    };
    fn run<C: Compute>(x: &Tensor, keep: Keep, scale: f64) -> Result<(Tensor, Tensor)> {
        let mut output = None;
        let mask = with_slice::<C, _>(x, |xs| {
            make_output::<bool>(x.sizes(), DType::Bool, |ms| {
                output = Some(make_output::<C>(x.sizes(), x.dtype(), |ys| {
                    fill_all(xs, ys, ms, keep, C::from_f64(scale));
                    Ok(())
                })?);
                Ok(())
            })
        })?;
        let output = output.ok_or_else(|| err(OP, "output was not produced"))?;
        Ok((output, mask))
    }
    match cd {
        DType::F64 => run::<f64>(input, keep, scale),
        _ => run::<f32>(input, keep, scale),
    }
}

/// Gradient of dropout: `grad_output * mask * scale` (broadcasting, in
/// `grad_output`'s float dtype).
pub fn native_dropout_backward(grad_output: &Tensor, mask: &Tensor, scale: f64) -> Result<Tensor> {
    const OP: &str = "native_dropout_backward";
    compute_dtype(grad_output.dtype(), OP)?;
    let masked = crate::elementwise::binary::mul_tensor(grad_output, mask)?;
    crate::elementwise::binary::mul_scalar_(&masked, &Scalar::Float(scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draw_matches_rand_threshold_and_chunking() {
        // Chunked drawing equals one sequential draw (the parallel split is invisible).
        let mut whole = vec![false; 3 * CHUNK + 6];
        draw(&mut whole, 0, 7, 11, 1 << 23);
        let mut parts = vec![false; whole.len()];
        for (c, m) in parts.chunks_mut(CHUNK).enumerate() {
            draw(m, c * CHUNK, 7, 11, 1 << 23);
        }
        assert_eq!(whole, parts);
        // threshold 2^24 keeps everything, 0 nothing.
        let mut m = vec![false; 10];
        draw(&mut m, 0, 1, 0, 1 << 24);
        assert!(m.iter().all(|&k| k));
        draw(&mut m, 0, 1, 0, 0);
        assert!(m.iter().all(|&k| !k));
    }

    #[test]
    fn bad_p_and_integer_input_are_errors() {
        let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
        for p in [-0.1, 1.5, f64::NAN] {
            let e = native_dropout(&x, p, Some(true)).unwrap_err().to_string();
            assert!(e.contains("between 0 and 1"), "{e}");
        }
        let i = Tensor::from_slice(&[1i64, 2], &[2]).unwrap();
        assert!(native_dropout(&i, 0.5, None).is_err());
    }
}
