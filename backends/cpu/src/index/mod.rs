//! Indexing ops: `gather`, `scatter.src`, `scatter_add`, `index_select`,
//! `index.Tensor` (advanced indexing with integer and boolean-mask indices), with
//! their out= and in-place forms.
//!
//! Owns: index validation with PyTorch's messages and each op's index map. Moves
//! elements as raw bytes (every dtype), except `scatter_add`, which adds.
//! Must not: touch the runtime's internals or other parts' kernels.

pub mod copies;
pub mod masked;
pub mod put;
pub mod scatter_reduce;

use crate::copy::{copy_into, to_vec_as};
use crate::dispatch_every;
use crate::dtype_dispatch::AddElem;
use crate::nn::io::{err, in_op, shape_err, wrap_dim, write_out};
use crate::shape::remap::{contiguous_strides, for_each_index, remap};
use opal::{DType, OpalError, Result, Tensor};

fn lin(idx: &[usize], strides: &[i64]) -> usize {
    idx.iter().zip(strides).map(|(&i, &s)| i * s as usize).sum()
}

/// Reads an index tensor (int64, or int32 where `allow_int` is set) as i64 values.
pub(crate) fn read_index(index: &Tensor, allow_int: bool, op: &str) -> Result<Vec<i64>> {
    match index.dtype() {
        DType::I64 => index.to_vec::<i64>().map_err(in_op(op)),
        DType::I32 if allow_int => to_vec_as::<i64>(index).map_err(in_op(op)),
        other => Err(err(
            op,
            format!(
                "Expected dtype {} for index, got {other}",
                if allow_int { "int32/int64" } else { "int64" }
            ),
        )),
    }
}

/// The values of a gather or scatter index: int64 or int32, or any dtype when
/// it is empty (PyTorch checks the dtype only of an index with elements).
fn read_scatter_index(index: &Tensor, op: &str) -> Result<Vec<i64>> {
    if index.numel() == 0 {
        return Ok(Vec::new());
    }
    read_index(index, true, op)
}

/// `v` as a position along a dim of `size`. Unlike advanced indexing, gather and
/// scatter do not count negative indices from the end: PyTorch refuses them.
/// Inlined into the scatter loops, with the message built out of line: a call
/// per element cost as much as the scatter step itself.
#[inline(always)]
pub(crate) fn check_index(v: i64, size: i64, dim: usize, op: &str) -> Result<usize> {
    if v < 0 || v >= size {
        return Err(index_error(v, size, dim, op));
    }
    Ok(v as usize)
}

#[cold]
#[inline(never)]
fn index_error(v: i64, size: i64, dim: usize, op: &str) -> OpalError {
    OpalError::msg(format!(
        "{op}: index {v} is out of bounds for dimension {dim} with size {size}"
    ))
}

/// Checks shared by gather / scatter: same rank, index no larger than `other` (self
/// or src) outside `dim`.
fn check_index_shape(self_: &Tensor, index: &Tensor, dim: usize, op: &str) -> Result<()> {
    if index.dim() != self_.dim() && !(index.dim() <= 1 && self_.dim() <= 1) {
        return Err(shape_err(
            op,
            "Index tensor must have the same number of dimensions as input tensor",
        ));
    }
    for d in 0..index.dim() {
        if d != dim && index.sizes()[d] > self_.sizes().get(d).copied().unwrap_or(1) {
            return Err(shape_err(op, format!("Size does not match at dimension {d} expected index {:?} to be no larger than self {:?} apart from dimension {dim}", index.sizes(), self_.sizes())));
        }
    }
    Ok(())
}

/// `out[i][j] = self[i][index[i][j]]` (for `dim == 1`, and likewise for any dim).
pub fn gather(self_: &Tensor, dim: i64, index: &Tensor, sparse_grad: bool) -> Result<Tensor> {
    const OP: &str = "gather";
    let _ = sparse_grad; // only changes the backward's layout in PyTorch
    let d = wrap_dim(dim, self_.dim(), OP)?;
    check_index_shape(self_, index, d, OP)?;
    let iv = read_scatter_index(index, OP)?;
    let (ist, sst) = (
        contiguous_strides(index.sizes()),
        contiguous_strides(self_.sizes()),
    );
    let size = self_.sizes().get(d).copied().unwrap_or(1);
    let mut pos = Vec::new();
    remap(OP, self_, index.sizes(), None, |idx| {
        let k = check_index(iv[lin(idx, &ist)], size, d, OP)?;
        pos.clear();
        pos.extend_from_slice(idx);
        if !pos.is_empty() {
            pos[d] = k;
        }
        Ok(Some(lin(&pos, &sst)))
    })
}

/// `gather` into `out`.
pub fn gather_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    sparse_grad: bool,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(&gather(self_, dim, index, sparse_grad)?, out, "gather.out")
}

/// Visits every position of `index`, giving the flat position in `self_` it
/// targets and the flat position in `src` it reads.
pub(crate) fn scatter_positions(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    op: &str,
    f: impl FnMut(usize, usize),
) -> Result<()> {
    let d = check_scatter_shapes(self_, dim, index, src, op)?;
    if index.dtype() != DType::I64 {
        let iv = read_scatter_index(index, op)?;
        return scatter_positions_read(self_, d, index, src, &iv, op, f);
    }
    // The index is read in place: a copy of it cost as much as the scatter itself.
    crate::nn::io::with_slice::<i64, _>(index, |iv| {
        scatter_positions_read(self_, d, index, src, iv, op, f)
    })
}

/// The shape rules of a scatter from `src` through `index` into `self_`; the
/// wrapped `dim`.
pub(crate) fn check_scatter_shapes(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    op: &str,
) -> Result<usize> {
    let d = wrap_dim(dim, self_.dim(), op)?;
    check_index_shape(self_, index, d, op)?;
    for k in 0..index.dim() {
        if index.sizes()[k] > src.sizes().get(k).copied().unwrap_or(1) {
            return Err(shape_err(
                op,
                format!(
                    "Expected index {:?} to be no larger than src {:?}",
                    index.sizes(),
                    src.sizes()
                ),
            ));
        }
    }
    Ok(d)
}

/// [`scatter_positions`] once the index values are at hand (row-major).
fn scatter_positions_read(
    self_: &Tensor,
    d: usize,
    index: &Tensor,
    src: &Tensor,
    iv: &[i64],
    op: &str,
    mut f: impl FnMut(usize, usize),
) -> Result<()> {
    let (ist, sst, srcst) = (
        contiguous_strides(index.sizes()),
        contiguous_strides(self_.sizes()),
        contiguous_strides(src.sizes()),
    );
    let size = self_.sizes().get(d).copied().unwrap_or(1);
    let nd = index.dim();
    if nd >= 1 && self_.dim() == nd && src.dim() == nd {
        return scatter_positions_nd(iv, index.sizes(), d, size, [&sst, &srcst], op, f);
    }
    let mut pos = Vec::new();
    for_each_index(index.sizes(), |idx| {
        let k = check_index(iv[lin(idx, &ist)], size, d, op)?;
        pos.clear();
        pos.extend_from_slice(idx);
        if !pos.is_empty() {
            pos[d] = k;
        }
        f(lin(&pos, &sst), lin(idx, &srcst));
        Ok(())
    })
}

/// [`scatter_positions`] when index, self and src have the same rank: an
/// odometer over the outer dims keeps both offsets running, so the innermost loop
/// costs one index check and two multiply-adds per element (recomputing each
/// position from its multi-index cost several times that).
fn scatter_positions_nd(
    iv: &[i64],
    sizes: &[i64],
    d: usize,
    size: i64,
    [self_st, src_st]: [&[i64]; 2],
    op: &str,
    mut f: impl FnMut(usize, usize),
) -> Result<()> {
    let nd = sizes.len();
    let last = nd - 1;
    let inner = sizes[last] as usize;
    if inner == 0 || sizes.contains(&0) {
        return Ok(());
    }
    let (self_step, src_step) = (self_st[last] as usize, src_st[last] as usize);
    let self_dim_st = self_st[d] as usize;
    // Offsets of the current outer position; `self`'s leaves out `dim`, which the
    // index value supplies.
    let mut ctr = vec![0usize; last];
    let (mut base_self, mut base_src) = (0usize, 0usize);
    let mut i = 0usize;
    loop {
        for j in 0..inner {
            let k = check_index(iv[i + j], size, d, op)?;
            let o = if d == last {
                base_self + k * self_dim_st
            } else {
                base_self + j * self_step + k * self_dim_st
            };
            f(o, base_src + j * src_step);
        }
        i += inner;
        // Advance the odometer over dims `last-1 ..= 0`.
        let mut k = last;
        loop {
            if k == 0 {
                return Ok(());
            }
            k -= 1;
            ctr[k] += 1;
            let (ss, rs) = (self_st[k] as usize, src_st[k] as usize);
            let in_self = if k == d { 0 } else { ss };
            if ctr[k] < sizes[k] as usize {
                base_self += in_self;
                base_src += rs;
                break;
            }
            base_self -= in_self * (ctr[k] - 1);
            base_src -= rs * (ctr[k] - 1);
            ctr[k] = 0;
        }
    }
}

/// Scatters move `src` values into `self_` unconverted: the dtypes must match.
pub(crate) fn check_src_dtype(self_: &Tensor, src: &Tensor, op: &str) -> Result<()> {
    if src.dtype() != self_.dtype() {
        return Err(err(
            op,
            format!(
                "Expected self.dtype to be equal to src.dtype, got {} and {}",
                self_.dtype(),
                src.dtype()
            ),
        ));
    }
    Ok(())
}

/// A copy of `self_` with `src` values written where `index` points along `dim`.
pub fn scatter_src(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    const OP: &str = "scatter";
    check_src_dtype(self_, src, OP)?;
    let es = self_.dtype().size();
    let mut out = self_.to_bytes()?;
    let sb = src.to_bytes()?;
    scatter_positions(self_, dim, index, src, OP, |o, s| {
        out[o * es..(o + 1) * es].copy_from_slice(&sb[s * es..(s + 1) * es]);
    })?;
    Tensor::from_bytes(&out, self_.sizes(), self_.dtype())
}

/// In-place `scatter.src`.
pub fn scatter_src_(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    copy_into(self_, &scatter_src(self_, dim, index, src)?, "scatter_")?;
    Ok(self_.clone())
}

/// `scatter.src` into `out`.
pub fn scatter_src_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &scatter_src(self_, dim, index, src)?,
        out,
        "scatter.src_out",
    )
}

/// Element sum with PyTorch's semantics per type (see [`AddElem`]).
#[inline]
pub(crate) fn add<T: AddElem>(a: T, b: T) -> T {
    a.add_elem(b)
}

/// A copy of `self_` with `src` values added where `index` points along `dim`.
pub fn scatter_add(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    const OP: &str = "scatter_add";
    check_src_dtype(self_, src, OP)?;
    dispatch_every!(self_.dtype(), OP, |T| {
        let mut out = to_vec_as::<T>(self_)?;
        let sv = to_vec_as::<T>(src)?;
        scatter_positions(self_, dim, index, src, OP, |o, s| {
            out[o] = add(out[o], sv[s])
        })?;
        let tmp = Tensor::from_vec(out, self_.sizes())?;
        Ok(tmp)
    })
}

/// In-place `scatter_add`.
pub fn scatter_add_(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    copy_into(self_, &scatter_add(self_, dim, index, src)?, "scatter_add_")?;
    Ok(self_.clone())
}

/// `scatter_add` into `out`.
pub fn scatter_add_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &scatter_add(self_, dim, index, src)?,
        out,
        "scatter_add.out",
    )
}

/// The entries `index` (a vector) of `dim`.
pub fn index_select(self_: &Tensor, dim: i64, index: &Tensor) -> Result<Tensor> {
    const OP: &str = "index_select";
    if index.dim() > 1 {
        return Err(err(OP, "index_select(): Index is supposed to be a vector"));
    }
    let d = wrap_dim(dim, self_.dim(), OP)?;
    let iv = read_index(index, true, OP)?;
    let size = self_.sizes().get(d).copied().unwrap_or(1);
    let mut out = self_.sizes().to_vec();
    if out.is_empty() {
        if iv.len() != 1 {
            return Err(err(
                OP,
                "index_select(): Index to scalar can have only 1 value",
            ));
        }
    } else {
        out[d] = iv.len() as i64;
    }
    let sst = contiguous_strides(self_.sizes());
    let mut pos = Vec::new();
    remap(OP, self_, &out, None, |idx| {
        pos.clear();
        pos.extend_from_slice(idx);
        let k = if pos.is_empty() { iv[0] } else { iv[idx[d]] };
        let w = if k < 0 || k >= size {
            return Err(err(
                OP,
                format!("index out of range in self (index {k}, size {size} of dimension {d})"),
            ));
        } else {
            k as usize
        };
        if !pos.is_empty() {
            pos[d] = w;
        }
        Ok(Some(lin(&pos, &sst)))
    })
}

/// `index_select` into `out`.
pub fn index_select_out(self_: &Tensor, dim: i64, index: &Tensor, out: &Tensor) -> Result<Tensor> {
    write_out(&index_select(self_, dim, index)?, out, "index_select.out")
}

/// One integer index per indexed dim: values and their shape.
pub(crate) struct DimIndex {
    pub(crate) values: Vec<i64>,
    pub(crate) shape: Vec<i64>,
}

/// Turns the user's indices into one optional integer index per self dim; a k-dim
/// boolean mask becomes k integer indices (the coordinates of its true entries).
pub(crate) fn expand_indices(
    self_: &Tensor,
    indices: &[Option<Tensor>],
    op: &str,
) -> Result<Vec<Option<DimIndex>>> {
    let mut per_dim: Vec<Option<DimIndex>> = Vec::new();
    for ix in indices {
        let pos = per_dim.len();
        match ix {
            None => per_dim.push(None),
            Some(t) if matches!(t.dtype(), DType::Bool | DType::U8) => {
                let k = t.dim();
                let ss = self_.sizes();
                if pos + k > ss.len() {
                    return Err(err(
                        op,
                        format!("too many indices for tensor of dimension {}", ss.len()),
                    ));
                }
                for j in 0..k {
                    if t.sizes()[j] != ss[pos + j] {
                        return Err(err(op, format!("The shape of the mask {:?} at index {j} does not match the shape of the indexed tensor {ss:?} at index {}", t.sizes(), pos + j)));
                    }
                }
                let mask = to_vec_as::<bool>(t)?;
                let mst = contiguous_strides(t.sizes());
                let mut coords: Vec<Vec<i64>> = vec![Vec::new(); k];
                for_each_index(t.sizes(), |idx| {
                    if mask[lin(idx, &mst)] {
                        for (c, &i) in coords.iter_mut().zip(idx) {
                            c.push(i as i64);
                        }
                    }
                    Ok(())
                })?;
                if k == 0 {
                    // A 0-dim mask adds a dim of size 1 (true) or 0 (false); model it
                    // as indexing a new unit dim, which PyTorch does via unsqueeze.
                    return Err(err(op, "0-dim boolean mask indices are not supported"));
                }
                for c in coords {
                    let n = c.len() as i64;
                    per_dim.push(Some(DimIndex {
                        values: c,
                        shape: vec![n],
                    }));
                }
            }
            Some(t) => {
                let values = match t.dtype() {
                    DType::I64 | DType::I32 | DType::I16 | DType::I8 => to_vec_as::<i64>(t)?,
                    other => return Err(err(op, format!("tensors used as indices must be long, int, byte or bool tensors, got {other}"))),
                };
                per_dim.push(Some(DimIndex {
                    values,
                    shape: t.sizes().to_vec(),
                }));
            }
        }
    }
    if per_dim.len() > self_.dim() {
        return Err(err(
            op,
            format!(
                "too many indices for tensor of dimension {} (got {})",
                self_.dim(),
                per_dim.len()
            ),
        ));
    }
    while per_dim.len() < self_.dim() {
        per_dim.push(None);
    }
    Ok(per_dim)
}

/// Advanced indexing `self[indices]`: integer / boolean tensors select, `None`
/// keeps a dim. Index tensors broadcast together; when they are adjacent their
/// broadcast dims replace them in place, otherwise they go first.
pub fn index_tensor(self_: &Tensor, indices: &[Option<Tensor>]) -> Result<Tensor> {
    const OP: &str = "index";
    let per_dim = expand_indices(self_, indices, OP)?;
    let used: Vec<usize> = (0..per_dim.len())
        .filter(|&d| per_dim[d].is_some())
        .collect();
    if used.is_empty() {
        return crate::shape::clone(self_, None);
    }
    let shapes: Vec<&[i64]> = used
        .iter()
        .map(|&d| per_dim[d].as_ref().map_or(&[][..], |x| &x.shape[..]))
        .collect();
    let bshape = opal::rules::broadcast_shapes(OP, &shapes)?;
    let adjacent = used.windows(2).all(|w| w[1] == w[0] + 1);
    let ss = self_.sizes();
    let (first, last) = (used[0], used[used.len() - 1]);
    // Output layout: which output dims are the broadcast block, which map to a
    // self dim.
    let mut out_shape = Vec::new();
    let mut slot: Vec<Option<usize>> = Vec::new(); // Some(self dim) or None for a broadcast dim
    let push_b = |out_shape: &mut Vec<i64>, slot: &mut Vec<Option<usize>>| {
        for &b in &bshape {
            out_shape.push(b);
            slot.push(None);
        }
    };
    if adjacent {
        for (d, &sz) in ss.iter().enumerate() {
            if d == first {
                push_b(&mut out_shape, &mut slot);
            }
            if d < first || d > last {
                out_shape.push(sz);
                slot.push(Some(d));
            }
        }
    } else {
        push_b(&mut out_shape, &mut slot);
        for (d, pd) in per_dim.iter().enumerate() {
            if pd.is_none() {
                out_shape.push(ss[d]);
                slot.push(Some(d));
            }
        }
    }
    // Broadcast strides of each index into the broadcast block.
    let bstrides: Vec<Vec<i64>> = used
        .iter()
        .map(|&d| {
            let sh = &per_dim[d].as_ref().map_or(&[][..], |x| &x.shape[..]);
            let cs = contiguous_strides(sh);
            let off = bshape.len() - sh.len();
            (0..bshape.len())
                .map(|k| {
                    if k < off || sh[k - off] == 1 {
                        0
                    } else {
                        cs[k - off]
                    }
                })
                .collect()
        })
        .collect();
    let sst = contiguous_strides(ss);
    let mut bidx = vec![0usize; bshape.len()];
    remap(OP, self_, &out_shape, None, |idx| {
        let mut src = 0usize;
        let mut bi = 0;
        for (o, s) in slot.iter().enumerate() {
            match s {
                Some(d) => src += idx[o] * sst[*d] as usize,
                None => {
                    bidx[bi] = idx[o];
                    bi += 1;
                }
            }
        }
        for (u, &d) in used.iter().enumerate() {
            let di = per_dim[d]
                .as_ref()
                .ok_or_else(|| err(OP, "internal: missing index"))?;
            let v = di.values[lin(&bidx, &bstrides[u])];
            let w = if v < -ss[d] || v >= ss[d] {
                return Err(OpalError::msg(format!(
                    "{OP}: index {v} is out of bounds for dimension {d} with size {}",
                    ss[d]
                )));
            } else if v < 0 {
                (v + ss[d]) as usize
            } else {
                v as usize
            };
            src += w * sst[d] as usize;
        }
        Ok(Some(src))
    })
}

/// `index.Tensor` into `out`.
pub fn index_tensor_out(
    self_: &Tensor,
    indices: &[Option<Tensor>],
    out: &Tensor,
) -> Result<Tensor> {
    write_out(&index_tensor(self_, indices)?, out, "index.Tensor_out")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ar(n: usize, shape: &[i64]) -> Tensor {
        Tensor::from_vec((0..n as i64).collect::<Vec<_>>(), shape).unwrap()
    }
    fn ix(v: &[i64], shape: &[i64]) -> Tensor {
        Tensor::from_slice(v, shape).unwrap()
    }

    #[test]
    fn gather_scatter_roundtrip() {
        let a = ar(6, &[2, 3]);
        let g = gather(&a, 1, &ix(&[2, 0, 1, 1], &[2, 2]), false).unwrap();
        assert_eq!(g.to_vec::<i64>().unwrap(), vec![2, 0, 4, 4]);
        assert!(gather(&a, 1, &ix(&[3], &[1, 1]), false)
            .unwrap_err()
            .to_string()
            .contains("out of bounds"));
        let z = Tensor::from_vec(vec![0i64; 6], &[2, 3]).unwrap();
        let s = scatter_src(&z, 1, &ix(&[2, 0], &[2, 1]), &ar(6, &[2, 3])).unwrap();
        assert_eq!(s.to_vec::<i64>().unwrap(), vec![0, 0, 0, 3, 0, 0]);
        let sa = scatter_add(&z, 0, &ix(&[1, 1, 1], &[1, 3]), &ar(3, &[1, 3])).unwrap();
        assert_eq!(sa.to_vec::<i64>().unwrap(), vec![0, 0, 0, 0, 1, 2]);
        let f = Tensor::from_slice(&[0.5f32, 0.25], &[2]).unwrap();
        let fa = scatter_add(&f, 0, &ix(&[0, 0], &[2]), &f).unwrap();
        assert_eq!(fa.to_vec::<f32>().unwrap(), vec![1.25, 0.25]);
    }

    #[test]
    fn index_select_and_advanced_indexing() {
        let a = ar(12, &[3, 4]);
        let s = index_select(&a, 1, &ix(&[3, 0], &[2])).unwrap();
        assert_eq!(s.to_vec::<i64>().unwrap(), vec![3, 0, 7, 4, 11, 8]);
        assert!(index_select(&a, 0, &ix(&[3], &[1])).is_err());
        // a[None, [[1, 2]]] -> shape [3, 1, 2]
        let r = index_tensor(&a, &[None, Some(ix(&[1, 2], &[1, 2]))]).unwrap();
        assert_eq!(r.sizes(), &[3, 1, 2]);
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![1, 2, 5, 6, 9, 10]);
        // broadcasting pair [[0],[2]] x [1, 3] -> [2, 2]
        let r = index_tensor(&a, &[Some(ix(&[0, 2], &[2, 1])), Some(ix(&[1, -1], &[2]))]).unwrap();
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![1, 3, 9, 11]);
        let m = Tensor::from_slice(&[true, false, true], &[3]).unwrap();
        let r = index_tensor(&a, &[Some(m)]).unwrap();
        assert_eq!(r.sizes(), &[2, 4]);
        assert_eq!(r.to_vec::<i64>().unwrap()[4], 8);
    }
}
