//! Embedding bags: `_embedding_bag` reduces the weight rows named by each bag of
//! `indices` (bag `b` runs from `offsets[b]` to the next bag's offset, the last
//! to the end of `indices`) by sum, mean or max, and returns PyTorch's four
//! results; `_embedding_bag_backward` (dense) and
//! `_embedding_bag_per_sample_weights_backward` give the gradients. The forward
//! runs bags in parallel; the weight gradient scatters rows in order.
//!
//! Owns: the bag ranges and their value checks, the three reductions and their
//! gradients. Must not: restate the argument checks or result shapes
//! (`opal::rules::bag`).

use super::io::{by_f32_f64, err, make_output, try_vec_of, with_slice, Compute};
use crate::copy::to_vec_as;
use crate::dtype_dispatch::Elem;
use crate::parallel::fork_each_mut;
use opal::rules::bag::{BagMode, EmbeddingBag, EmbeddingBagBackward, PerSampleWeightsBackward};
use opal::{DType, Result, Tensor};

/// The checked bag ranges of `offsets` over `n` indices: `bags` ranges, bag `b`
/// from `offsets[b]` to `offsets[b + 1]`, the last to `n`.
fn bag_ranges(op: &str, offsets: &[i64], bags: usize, n: usize) -> Result<Vec<(usize, usize)>> {
    if let Some(&first) = offsets.first() {
        if first != 0 {
            return Err(err(op, format!(
                "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. However, got {first}"
            )));
        }
    }
    if let Some(&last) = offsets.last() {
        if last > n as i64 {
            return Err(err(op, format!(
                "offsets[-1] can not be greater than input's length {n} but got offsets[-1] of {last}"
            )));
        }
    }
    if let Some(i) = (1..offsets.len()).find(|&i| offsets[i] < offsets[i - 1]) {
        return Err(err(
            op,
            format!(
                "offsets must be non-decreasing, but offsets[{}] = {} > offsets[{i}] = {}",
                i - 1,
                offsets[i - 1],
                offsets[i]
            ),
        ));
    }
    Ok((0..bags)
        .map(|b| {
            let end = if b + 1 < bags {
                offsets[b + 1] as usize
            } else {
                n
            };
            (offsets[b] as usize, end.max(offsets[b] as usize))
        })
        .collect())
}

/// `indices` as i64, each checked to name a row of a `rows`-row weight.
fn checked_indices(op: &str, indices: &Tensor, rows: i64) -> Result<Vec<i64>> {
    let idx = to_vec_as::<i64>(indices)?;
    if let Some((i, v)) = idx.iter().enumerate().find(|(_, &v)| v < 0 || v >= rows) {
        return Err(err(
            op,
            format!(
                "Index {i} of input takes value {v} which is not in the valid range [0, {rows})"
            ),
        ));
    }
    Ok(idx)
}

/// A new tensor of `shape` and index dtype `dt` holding `v`.
fn index_tensor(v: &[i64], shape: &[i64], dt: DType) -> Result<Tensor> {
    make_output::<i64>(shape, dt, |s| {
        s.copy_from_slice(v);
        Ok(())
    })
}

/// The bags of one call: their index ranges, the indices, the padding index, the
/// row width and the reduction.
struct Bags<'a> {
    /// The index range each bag reduces.
    ranges: &'a [(usize, usize)],
    /// Non-padding indices per bag: mean's divisor.
    counts: &'a [i64],
    idx: &'a [i64],
    padding_idx: i64,
    d: usize,
    mode: BagMode,
}

/// The `[bags, d]` output of [`_embedding_bag`], bags in parallel; for max, the
/// winning rows go to `maxi` (`[bags, d]`). Per column, the first maximum wins
/// and NaN never does.
fn reduce<C: Compute>(
    g: &Bags,
    w: &Tensor,
    psw: Option<&Tensor>,
    shape: &[i64],
    maxi: &mut [i64],
) -> Result<Tensor> {
    let psw = psw.map(to_vec_as::<C>).transpose()?;
    let d = g.d;
    with_slice::<C, _>(w, |ws| {
        make_output::<C>(shape, w.dtype(), |ys| {
            if d == 0 {
                return Ok(());
            }
            let mut rows: Vec<_> = ys
                .chunks_mut(d)
                .zip(maxi.chunks_mut(d))
                .enumerate()
                .collect();
            fork_each_mut(&mut rows, |(b, (out, mi))| {
                let (s, e) = g.ranges[*b];
                out.fill(C::default());
                mi.fill(0);
                let mut n = 0usize;
                for i in s..e {
                    let r = g.idx[i];
                    if r == g.padding_idx {
                        continue;
                    }
                    let row = &ws[r as usize * d..][..d];
                    if g.mode == BagMode::Max {
                        for ((o, m), &v) in out.iter_mut().zip(mi.iter_mut()).zip(row) {
                            if n == 0 || v > *o {
                                *o = v;
                                *m = r;
                            }
                        }
                    } else {
                        let f = psw.as_ref().map_or(C::one(), |p| p[i]);
                        for (o, &v) in out.iter_mut().zip(row) {
                            *o = *o + v * f;
                        }
                    }
                    n += 1;
                }
                if g.mode == BagMode::Mean && g.counts[*b] > 0 {
                    let k = <C as Elem>::from_f64(g.counts[*b] as f64);
                    out.iter_mut().for_each(|o| *o = *o / k);
                }
            });
            Ok(())
        })
    })
}

/// Reduces bags of weight rows; returns `(output, offset2bag, bag_size,
/// max_indices)` shaped as PyTorch's CPU kernel returns them.
pub fn _embedding_bag(e: EmbeddingBag) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    const OP: &str = "_embedding_bag";
    let (weight, indices, offsets, sh) = (e.weight, e.indices, e.offsets, &e.shapes);
    let (padding_idx, include_last_offset) = (e.padding_idx, e.include_last_offset);
    let idx = checked_indices(OP, indices, weight.sizes()[0])?;
    let offs = to_vec_as::<i64>(offsets)?;
    let ranges = bag_ranges(OP, &offs, sh.bags as usize, idx.len())?;
    let live = |i: usize| idx[i] != padding_idx;
    let counts: Vec<i64> = ranges
        .iter()
        .map(|&(s, e)| (s..e).filter(|&i| live(i)).count() as i64)
        .collect();
    let bag_size = match sh.mode {
        BagMode::Sum => vec![0; ranges.len()],
        _ => counts.clone(),
    };
    let mut offset2bag = vec![0i64; sh.offset2bag[0] as usize];
    if !offset2bag.is_empty() {
        for (b, &(s, e)) in ranges.iter().enumerate() {
            offset2bag[s..e].fill(b as i64);
        }
    }
    // PyTorch's CPU fast path (sum or mean without a padding index over f32 / f16
    // / bf16 weights) ends the last bag's sum at the extra offset that
    // include_last_offset adds, while its size (mean's divisor) runs to the end
    // of the indices as everywhere else.
    let fast = sh.mode != BagMode::Max
        && padding_idx < 0
        && matches!(weight.dtype(), DType::F32 | DType::F16 | DType::BF16);
    let mut sum_ranges = ranges.clone();
    if let (true, true, Some(last)) = (fast, include_last_offset, sum_ranges.last_mut()) {
        last.1 = offs[ranges.len()] as usize;
    }
    let bags = Bags {
        ranges: &sum_ranges,
        counts: &counts,
        idx: &idx,
        padding_idx,
        d: weight.sizes()[1] as usize,
        mode: sh.mode,
    };
    let mut maxi = try_vec_of(ranges.len() * bags.d, 0i64, OP)?;
    let output = by_f32_f64!(
        weight.dtype(),
        reduce(&bags, weight, e.per_sample_weights, &sh.output, &mut maxi)
    )?;
    let max_indices = match sh.mode {
        BagMode::Max => maxi,
        BagMode::Mean => bag_size.clone(),
        BagMode::Sum => vec![0; ranges.len()],
    };
    let it = sh.index_dtype;
    Ok((
        output,
        index_tensor(&offset2bag, &sh.offset2bag, it)?,
        index_tensor(&bag_size, &sh.bag_size, it)?,
        index_tensor(&max_indices, &sh.max_indices, it)?,
    ))
}

/// Bag of each index (`-1` for none) from `offsets`, for a gradient of `bags` rows.
fn index_bags(op: &str, offsets: &Tensor, bags: usize, n: usize) -> Result<Vec<i64>> {
    let offs = to_vec_as::<i64>(offsets)?;
    if offs.len() < bags {
        return Err(err(
            op,
            format!(
                "offsets has {} entries, fewer than the gradient's {bags} bags",
                offs.len()
            ),
        ));
    }
    let mut of = vec![-1i64; n];
    for (b, (s, e)) in bag_ranges(op, &offs, bags, n)?.into_iter().enumerate() {
        of[s..e].fill(b as i64);
    }
    Ok(of)
}

/// Dense gradient of `_embedding_bag` with respect to the weight
/// (`[num_weights, D]`). `sparse` gradients are refused.
pub fn _embedding_bag_backward(e: EmbeddingBagBackward) -> Result<Tensor> {
    const OP: &str = "_embedding_bag_backward";
    let (grad, indices, offsets, bag_size, maximum_indices) =
        (e.grad, e.indices, e.offsets, e.bag_size, e.maximum_indices);
    let (num_weights, scale_grad_by_freq, mode, padding_idx) =
        (e.num_weights, e.scale_grad_by_freq, e.mode, e.padding_idx);
    let (bags, d) = e.grad_dims;
    let idx = checked_indices(OP, indices, num_weights)?;
    let of = index_bags(OP, offsets, bags, idx.len())?;
    let sizes = to_vec_as::<i64>(bag_size)?;
    let maxi = to_vec_as::<i64>(maximum_indices)?;
    if sizes.len() != bags || (mode == BagMode::Max && maxi.len() != bags * d) {
        return Err(err(
            OP,
            format!(
            "bag_size {:?} / maximum_indices {:?} do not match the gradient's {bags} bags of {d}",
            bag_size.sizes(),
            maximum_indices.sizes()
        ),
        ));
    }
    let mut freq = vec![
        0i64;
        if scale_grad_by_freq {
            num_weights as usize
        } else {
            0
        }
    ];
    for &r in idx.iter().filter(|_| scale_grad_by_freq) {
        freq[r as usize] += 1;
    }
    fn run<C: Compute>(
        grad: &Tensor,
        psw: Option<&Tensor>,
        rows: i64,
        tables: [&[i64]; 5],
        mode: BagMode,
        padding_idx: i64,
    ) -> Result<Tensor> {
        let [idx, of, sizes, maxi, freq] = tables;
        let psw = psw.map(to_vec_as::<C>).transpose()?;
        let d = grad.sizes()[1] as usize;
        let scale = |r: i64| {
            freq.get(r as usize)
                .map_or(C::one(), |&f| C::one() / <C as Elem>::from_f64(f as f64))
        };
        with_slice::<C, _>(grad, |gs| {
            make_output::<C>(&[rows, d as i64], grad.dtype(), |gw| {
                gw.fill(C::default());
                if mode == BagMode::Max {
                    // PyTorch does not scale max's gradient by frequency.
                    for (b, gm) in maxi.chunks_exact(d.max(1)).enumerate() {
                        if sizes[b] == 0 {
                            continue;
                        }
                        for (k, &r) in gm.iter().enumerate() {
                            let at = r as usize * d + k;
                            gw[at] = gw[at] + gs[b * d + k];
                        }
                    }
                    return Ok(());
                }
                for (i, (&r, &b)) in idx.iter().zip(of).enumerate() {
                    if r == padding_idx || b < 0 {
                        continue;
                    }
                    let b = b as usize;
                    let mut f = scale(r) * psw.as_ref().map_or(C::one(), |p| p[i]);
                    if mode == BagMode::Mean && sizes[b] > 0 {
                        f = f / <C as Elem>::from_f64(sizes[b] as f64);
                    }
                    let src = &gs[b * d..][..d];
                    for (o, &g) in gw[r as usize * d..][..d].iter_mut().zip(src) {
                        *o = *o + g * f;
                    }
                }
                Ok(())
            })
        })
    }
    let tables = [&idx[..], &of, &sizes, &maxi, &freq];
    by_f32_f64!(
        grad.dtype(),
        run(
            grad,
            e.per_sample_weights,
            num_weights,
            tables,
            mode,
            padding_idx
        )
    )
}

/// Gradient of `_embedding_bag` (mode sum) with respect to `per_sample_weights`:
/// per index, the dot product of its bag's gradient row and its weight row.
pub fn _embedding_bag_per_sample_weights_backward(e: PerSampleWeightsBackward) -> Result<Tensor> {
    const OP: &str = "_embedding_bag_per_sample_weights_backward";
    let (grad, weight, indices, offsets, padding_idx) =
        (e.grad, e.weight, e.indices, e.offsets, e.padding_idx);
    let (bags, _) = e.grad_dims;
    let idx = checked_indices(OP, indices, weight.sizes()[0])?;
    let of = index_bags(OP, offsets, bags, idx.len())?;
    fn run<C: Compute>(
        grad: &Tensor,
        weight: &Tensor,
        idx: &[i64],
        of: &[i64],
        padding_idx: i64,
    ) -> Result<Tensor> {
        let d = grad.sizes()[1] as usize;
        with_slice::<C, _>(grad, |gs| {
            with_slice::<C, _>(weight, |ws| {
                make_output::<C>(&[idx.len() as i64], grad.dtype(), |out| {
                    for (i, o) in out.iter_mut().enumerate() {
                        let (r, b) = (idx[i], of[i]);
                        *o = if r == padding_idx || b < 0 {
                            C::default()
                        } else {
                            let (g, w) = (&gs[b as usize * d..][..d], &ws[r as usize * d..][..d]);
                            g.iter().zip(w).map(|(&x, &y)| x * y).sum()
                        };
                    }
                    Ok(())
                })
            })
        })
    }
    by_f32_f64!(grad.dtype(), run(grad, weight, &idx, &of, padding_idx))
}
