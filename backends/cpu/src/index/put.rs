//! `index_put` and `index_put_`: `self[indices] = values` (or `+=` with
//! `accumulate`) for advanced indices (integer and boolean-mask tensors, `None`
//! keeping a dim), the inverse of `index.Tensor`.
//!
//! Owns: the write plan (which element of `self` each element of the indexing
//! result is) and the write loop. The plan resolves every index once into offsets
//! of the indexed block; the loop then walks the result's rows with plain slices,
//! split across threads over independent destinations past the element grain
//! (whole leading blocks, or columns of the trailing dims). Elements an index
//! names twice take the last value (or sum every value with `accumulate`), in
//! row-major order. Must not: re-implement index parsing (`expand_indices`).

use super::{add, expand_indices, lin};
use crate::dispatch_every;
use crate::dtype_dispatch::AddElem;
use crate::nn::io::{err, with_slice};
use crate::shape::remap::{contiguous_strides, for_each_index};
use opal::{MemoryFormat, OpalError, Result, Tensor};

/// Where the indexing result's elements live in `self` (contiguous offsets): the
/// result is `[pre dims.., broadcast index dims.., post dims..]`, element
/// `(p, b, q)` at `pre[p] + block[b] + post[q]`.
struct Plan {
    pre: Vec<usize>,
    block: Vec<usize>,
    post: Vec<usize>,
    /// The shape of the indexing result (what `values` broadcasts to).
    shape: Vec<i64>,
    /// Elements of `self` per leading `pre` position (`pre[p] = p * span` when the
    /// pre dims lead `self`, which they do whenever there are any).
    span: usize,
}

/// Offsets of every position of the `dims` of a tensor of contiguous `strides`.
fn offsets(sizes: &[i64], strides: &[i64], dims: &[usize]) -> Result<Vec<usize>> {
    let sub: Vec<i64> = dims.iter().map(|&d| sizes[d]).collect();
    let st: Vec<i64> = dims.iter().map(|&d| strides[d]).collect();
    let mut v = Vec::with_capacity(sub.iter().product::<i64>().max(0) as usize);
    for_each_index(&sub, |idx| {
        v.push(lin(idx, &st));
        Ok(())
    })?;
    Ok(v)
}

fn plan(self_: &Tensor, indices: &[Option<Tensor>], op: &str) -> Result<Plan> {
    let per_dim = expand_indices(self_, indices, op)?;
    let ss = self_.sizes();
    let sst = contiguous_strides(ss);
    let used: Vec<usize> = (0..per_dim.len())
        .filter(|&d| per_dim[d].is_some())
        .collect();
    if used.is_empty() {
        return Err(err(op, "expected at least one index tensor, got none"));
    }
    let idx: Vec<&super::DimIndex> = used.iter().filter_map(|&d| per_dim[d].as_ref()).collect();
    let shapes: Vec<&[i64]> = idx.iter().map(|x| &x.shape[..]).collect();
    let bshape = opal::rules::broadcast_shapes(op, &shapes)?;
    let adjacent = used.windows(2).all(|w| w[1] == w[0] + 1);
    let (pre_dims, post_dims): (Vec<usize>, Vec<usize>) = match (used.first(), used.last()) {
        (Some(&first), Some(&last)) if adjacent => {
            ((0..first).collect(), (last + 1..ss.len()).collect())
        }
        _ => (
            Vec::new(),
            (0..ss.len()).filter(|d| !used.contains(d)).collect(),
        ),
    };
    // Each index's strides over the broadcast block (0 where it broadcasts).
    let bstrides: Vec<Vec<i64>> = idx
        .iter()
        .map(|x| {
            let cs = contiguous_strides(&x.shape);
            let off = bshape.len() - x.shape.len();
            (0..bshape.len())
                .map(|k| {
                    if k < off || x.shape[k - off] == 1 {
                        0
                    } else {
                        cs[k - off]
                    }
                })
                .collect()
        })
        .collect();
    let mut block = Vec::with_capacity(bshape.iter().product::<i64>().max(0) as usize);
    let oob = |v: i64, d: usize| {
        OpalError::msg(format!(
            "{op}: index {v} is out of bounds for dimension {d} with size {}",
            ss[d]
        ))
    };
    if let ([d], [x]) = (&used[..], &idx[..]) {
        // One index tensor (the common `x[i] = v`): its values, in order, are the
        // block.
        let (size, stride) = (ss[*d], sst[*d] as usize);
        for &v in &x.values {
            if v < -size || v >= size {
                return Err(oob(v, *d));
            }
            block.push((if v < 0 { v + size } else { v }) as usize * stride);
        }
    } else {
        for_each_index(&bshape, |bidx| {
            let mut at = 0usize;
            for (u, (&d, x)) in used.iter().zip(&idx).enumerate() {
                let v = x.values[lin(bidx, &bstrides[u])];
                if v < -ss[d] || v >= ss[d] {
                    return Err(oob(v, d));
                }
                let w = if v < 0 { v + ss[d] } else { v };
                at += w as usize * sst[d] as usize;
            }
            block.push(at);
            Ok(())
        })?;
    }
    let mut shape: Vec<i64> = pre_dims.iter().map(|&d| ss[d]).collect();
    shape.extend_from_slice(&bshape);
    shape.extend(post_dims.iter().map(|&d| ss[d]));
    let span = pre_dims.last().map_or(0, |&d| sst[d] as usize);
    Ok(Plan {
        pre: offsets(ss, &sst, &pre_dims)?,
        block,
        post: offsets(ss, &sst, &post_dims)?,
        shape,
        span,
    })
}

/// Writes `v` (the indexing result's values, row-major; one value when `scalar`)
/// into `out` (all of `self`, contiguous) by the plan.
fn write<T: AddElem>(out: &mut [T], p: &Plan, v: &[T], scalar: bool, accumulate: bool) {
    let (nb, nq) = (p.block.len(), p.post.len());
    let put = |d: &mut T, x: T| *d = if accumulate { add(*d, x) } else { x };
    let value = |i: usize| if scalar { v[0] } else { v[i] };
    // Rows of leading positions `p0..`: each owns `span` elements of `out`.
    let rows = |p0: usize, o: &mut [T], base: usize| {
        for (j, &pre) in p
            .pre
            .iter()
            .enumerate()
            .skip(p0)
            .take(o.len() / p.span.max(1))
        {
            for (b, &blk) in p.block.iter().enumerate() {
                let at = pre + blk - base;
                let row = (j * nb + b) * nq;
                for (q, &post) in p.post.iter().enumerate() {
                    put(&mut o[at + post], value(row + q));
                }
            }
        }
    };
    let total = p.pre.len() * nb * nq;
    if total >= crate::iter::GRAIN && p.pre.len() > 1 && p.span > 0 {
        // Different leading positions write disjoint blocks of `out`.
        let per = p
            .pre
            .len()
            .div_ceil(4 * rayon::current_num_threads())
            .max(1);
        crate::parallel::fork_chunks_mut(out, per * p.span, |c, o| {
            rows(c * per, o, c * per * p.span)
        });
    } else if total >= crate::iter::GRAIN && nq > 1 {
        // Different trailing positions `q` are different elements of `out` whatever
        // the block: columns of the result split across threads.
        let per = nq.div_ceil(4 * rayon::current_num_threads()).max(1);
        let base = crate::parallel::SharedPtr(out.as_mut_ptr());
        let len = out.len();
        crate::parallel::fork_chunks(nq.div_ceil(per), |c| {
            let qs = c * per..((c + 1) * per).min(nq);
            for (j, &pre) in p.pre.iter().enumerate() {
                for (b, &blk) in p.block.iter().enumerate() {
                    let row = (j * nb + b) * nq;
                    for q in qs.clone() {
                        let at = pre + blk + p.post[q];
                        debug_assert!(at < len);
                        // SAFETY: `at` is an offset of `self`'s contiguous elements
                        // (checked indices, in-range dims), so inside `out`, which
                        // the caller's `&mut` keeps alive until the fork ends; the
                        // column sets `qs` of the chunks are disjoint and distinct
                        // `q` name distinct elements, so no two chunks touch one
                        // element.
                        unsafe { put(&mut *base.at(at), value(row + q)) };
                    }
                }
            }
        });
    } else {
        rows(0, out, 0);
    }
}

fn put_into<T: AddElem>(
    out: &mut [T],
    p: &Plan,
    values: &Tensor,
    accumulate: bool,
    op: &str,
) -> Result<()> {
    if values.numel() == 1 && p.shape.len() >= values.dim() {
        return with_slice::<T, _>(values, |v| {
            write(out, p, v, true, accumulate);
            Ok(())
        });
    }
    let v = crate::shape::expand(values, &p.shape, false).map_err(|_| {
        opal::rules::indexing::index_put_shape_mismatch(op, values.sizes(), &p.shape)
    })?;
    with_slice::<T, _>(&v, |v| {
        write(out, p, v, false, accumulate);
        Ok(())
    })
}

fn check_values(self_: &Tensor, values: &Tensor, op: &str) -> Result<()> {
    opal::rules::indexing::check_index_put_dtypes(op, self_.dtype(), values.dtype())
}

/// Writes by the plan into `t` (contiguous, of `T`'s dtype) under its exclusive
/// borrow. `values` must not share `t`'s storage.
fn write_into(
    t: &Tensor,
    indices: &[Option<Tensor>],
    values: &Tensor,
    accumulate: bool,
    op: &str,
) -> Result<()> {
    let p = plan(t, indices, op)?;
    dispatch_every!(t.dtype(), op, |T| {
        let guard = t.write::<T>()?;
        let n = guard.numel();
        let ptr = t.data_ptr::<T>()?;
        // SAFETY: `t` is contiguous with `n` elements of `T` from `ptr`, and `guard`
        // holds the exclusive borrow of its storage while the slice lives (`values`
        // has storage of its own, so nothing else reads or writes it meanwhile).
        let out = unsafe { std::slice::from_raw_parts_mut(ptr, n) };
        let r = put_into(out, &p, values, accumulate, op);
        drop(guard);
        r
    })
}

/// `index_put`: a copy of `self` with `values` (broadcast to the indexing result)
/// written at `self[indices]`, or added there with `accumulate`.
pub fn index_put(
    self_: &Tensor,
    indices: &[Option<Tensor>],
    values: &Tensor,
    accumulate: bool,
) -> Result<Tensor> {
    const OP: &str = "index_put";
    check_values(self_, values, OP)?;
    let r = crate::shape::clone(self_, Some(MemoryFormat::Contiguous))?;
    write_into(&r, indices, values, accumulate, OP)?;
    Ok(r)
}

/// `index_put_`: [`index_put`] in place (written into `self` directly when it is
/// contiguous).
pub fn index_put_(
    self_: &Tensor,
    indices: &[Option<Tensor>],
    values: &Tensor,
    accumulate: bool,
) -> Result<Tensor> {
    const OP: &str = "index_put_";
    check_values(self_, values, OP)?;
    if !self_.is_contiguous() {
        let r = index_put(self_, indices, values, accumulate)?;
        crate::copy::copy_into(self_, &r, OP)?;
        return Ok(self_.clone());
    }
    // The values may share `self`'s storage: read them out first.
    let values = crate::shape::clone(values, None)?;
    write_into(self_, indices, &values, accumulate, OP)?;
    Ok(self_.clone())
}
