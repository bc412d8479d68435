//! Mask-driven ops whose work depends on the data: `nonzero` (the coordinates of
//! the non-zero elements; its output length is the number of them) and
//! `masked_scatter` (consecutive `source` elements written where the mask is true),
//! with their `out=` and in-place forms.
//!
//! Owns: these ops' checks (PyTorch's messages) and the chunked count of true
//! elements both use: large inputs are cut into about four chunks per thread,
//! counted in parallel, and each chunk then writes from its own offset, so the
//! results come out in row-major order as PyTorch's do. Must not: touch other
//! indexing ops.

use crate::copy::{contiguous, to_dtype};
use crate::dispatch_every;
use crate::nn::io::{err, make_output, with_slice, write_out};
use opal::{DType, Result, Tensor};
use std::ops::Range;

/// `mask` cut into row-major chunks (one below the parallel grain, about four per
/// thread above it), each with the number of true elements before it.
fn chunks_with_offsets(mask: &[bool]) -> (Vec<Range<usize>>, Vec<usize>, usize) {
    let n = mask.len();
    let parts = if n >= crate::iter::GRAIN {
        4 * rayon::current_num_threads()
    } else {
        1
    };
    let per = n.div_ceil(parts).max(1);
    let ranges: Vec<Range<usize>> = (0..n.div_ceil(per))
        .map(|c| c * per..((c + 1) * per).min(n))
        .collect();
    let mut counts = vec![0usize; ranges.len()];
    let count = |r: &Range<usize>| mask[r.clone()].iter().map(|&b| b as usize).sum::<usize>();
    if ranges.len() > 1 {
        crate::parallel::fork_chunks_mut(&mut counts, 1, |c, slot| slot[0] = count(&ranges[c]));
    } else if let Some(r) = ranges.first() {
        counts[0] = count(r);
    }
    let mut offsets = Vec::with_capacity(counts.len());
    let mut total = 0usize;
    for c in counts {
        offsets.push(total);
        total += c;
    }
    (ranges, offsets, total)
}

/// Splits `out` into one piece per chunk: chunk `c` owns `width` elements for each
/// of its true entries, from `offsets[c] * width` on.
fn pieces<'a, T>(
    mut out: &'a mut [T],
    offsets: &[usize],
    total: usize,
    width: usize,
) -> Vec<&'a mut [T]> {
    let mut v = Vec::with_capacity(offsets.len());
    for (c, &start) in offsets.iter().enumerate() {
        let end = offsets.get(c + 1).copied().unwrap_or(total);
        let (head, tail) = std::mem::take(&mut out).split_at_mut((end - start) * width);
        v.push(head);
        out = tail;
    }
    v
}

/// Whether each element of `t` is non-zero (NaN counts), row-major.
fn truth(t: &Tensor) -> Result<Tensor> {
    // Complex values count as true when either part is non-zero (the bool cast).
    contiguous(&to_dtype(t, DType::Bool)?)
}

fn nonzero_impl(self_: &Tensor, dest: Option<&Tensor>, op: &str) -> Result<Tensor> {
    if let Some(out) = dest.filter(|o| o.dtype() != DType::I64) {
        return Err(err(
            op,
            format!(
                "Expected out tensor to have scalar type Long but got scalar type {}",
                out.dtype()
            ),
        ));
    }
    let nd = self_.dim();
    let sizes: Vec<usize> = self_.sizes().iter().map(|&s| s as usize).collect();
    let mask = truth(self_)?;
    with_slice::<bool, _>(&mask, |m| {
        let (ranges, offsets, total) = chunks_with_offsets(m);
        let shape = [total as i64, nd as i64];
        let fill = |o: &mut [i64]| {
            let mut tasks: Vec<(usize, &mut [i64])> = pieces(o, &offsets, total, nd)
                .into_iter()
                .enumerate()
                .collect();
            let write = |(c, piece): &mut (usize, &mut [i64])| {
                if nd == 0 {
                    return;
                }
                let r = &ranges[*c];
                // The coordinates of the chunk's first element, then counted up.
                let mut idx = vec![0usize; nd];
                let mut rest = r.start;
                for d in (0..nd).rev() {
                    idx[d] = rest % sizes[d];
                    rest /= sizes[d];
                }
                let mut rows = piece.chunks_exact_mut(nd);
                for &b in &m[r.clone()] {
                    if b {
                        if let Some(row) = rows.next() {
                            for (o, &i) in row.iter_mut().zip(&idx) {
                                *o = i as i64;
                            }
                        }
                    }
                    for d in (0..nd).rev() {
                        idx[d] += 1;
                        if idx[d] < sizes[d] {
                            break;
                        }
                        idx[d] = 0;
                    }
                }
            };
            if tasks.len() > 1 {
                crate::parallel::fork_each_mut(&mut tasks, write);
            } else {
                tasks.iter_mut().for_each(write);
            }
        };
        let t = make_output::<i64>(&shape, DType::I64, |v| {
            fill(v);
            Ok(())
        })?;
        match dest {
            Some(out) => write_out(&t, out, op),
            None => Ok(t),
        }
    })
}

/// `nonzero`: the coordinates of the non-zero elements of `self`, one row each in
/// row-major order (`[count, self.dim()]`, int64).
pub fn nonzero(self_: &Tensor) -> Result<Tensor> {
    nonzero_impl(self_, None, "nonzero")
}

/// `nonzero.out`.
pub fn nonzero_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    nonzero_impl(self_, Some(out), "nonzero.out")
}

/// `self` (already of the result's shape) with `source`'s leading elements written,
/// in order, where `mask` (of the same shape) is true; a new contiguous tensor.
fn scatter_masked(self_: &Tensor, mask: &Tensor, source: &Tensor, op: &str) -> Result<Tensor> {
    opal::rules::indexing::check_masked_scatter(op, self_.dtype(), mask.dtype(), source.dtype())?;
    let dt = self_.dtype();
    let m = truth(mask)?;
    with_slice::<bool, _>(&m, |m| {
        let (ranges, offsets, total) = chunks_with_offsets(m);
        if total > source.numel() as usize {
            return Err(err(
                op,
                format!(
                    "Number of elements of source < number of ones in mask ({} < {total})",
                    source.numel()
                ),
            ));
        }
        dispatch_every!(dt, op, |T| {
            with_slice::<T, _>(self_, |xs| {
                with_slice::<T, _>(source, |src| {
                    make_output::<T>(self_.sizes(), dt, |o| {
                        o.copy_from_slice(xs);
                        let mut tasks: Vec<(usize, &mut [T])> = Vec::new();
                        let mut rest = &mut o[..];
                        let mut at = 0;
                        for (c, r) in ranges.iter().enumerate() {
                            let (_, tail) = std::mem::take(&mut rest).split_at_mut(r.start - at);
                            let (piece, tail) = tail.split_at_mut(r.len());
                            tasks.push((c, piece));
                            rest = tail;
                            at = r.end;
                        }
                        let write = |(c, piece): &mut (usize, &mut [T])| {
                            let mut k = offsets[*c];
                            for (o, &b) in piece.iter_mut().zip(&m[ranges[*c].clone()]) {
                                if b {
                                    *o = src[k];
                                    k += 1;
                                }
                            }
                        };
                        if tasks.len() > 1 {
                            crate::parallel::fork_each_mut(&mut tasks, write);
                        } else {
                            tasks.iter_mut().for_each(write);
                        }
                        Ok(())
                    })
                })
            })
        })
    })
}

/// `masked_scatter`: `self` and `mask` broadcast together; where the mask is true
/// the result takes the next element of `source` (row-major), elsewhere `self`.
pub fn masked_scatter(self_: &Tensor, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
    const OP: &str = "masked_scatter";
    let shape = opal::rules::broadcast_shapes(OP, &[self_.sizes(), mask.sizes()])?;
    let x = crate::shape::expand(self_, &shape, false)?;
    let m = crate::shape::expand(mask, &shape, false)?;
    scatter_masked(&x, &m, source, OP)
}

/// `masked_scatter_`: in place; the mask broadcasts to `self` (which keeps its shape).
pub fn masked_scatter_(self_: &Tensor, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
    const OP: &str = "masked_scatter_";
    let m = crate::shape::expand(mask, self_.sizes(), false).map_err(|_| {
        err(
            OP,
            format!(
                "mask of shape {:?} cannot be broadcast to self of shape {:?}",
                mask.sizes(),
                self_.sizes()
            ),
        )
    })?;
    let r = scatter_masked(self_, &m, source, OP)?;
    crate::copy::copy_into(self_, &r, OP)?;
    Ok(self_.clone())
}
