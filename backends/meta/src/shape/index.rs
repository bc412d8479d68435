//! Output sizes of joining, indexing and rearranging ops: `cat`, `stack`,
//! `index_select`, `gather`, `scatter`, advanced `index`, `repeat`,
//! `constant_pad_nd`, `roll`, `flip`, `topk`, `tril`/`triu` and `one_hot`.
//!
//! Owns: these size rules and their argument checks. Must not: decide dtypes
//! beyond an op's fixed index dtypes, or allocate.

use super::fail;
use super::geometry::{dim_mask, wrap_dim, wrap_insert_dim};
use opal::{DType, Result};

/// `cat`: the joined sizes. 1-d empty tensors are skipped (legacy PyTorch rule);
/// every other tensor must match the first in all dims but `dim`.
pub fn cat_sizes(op: &str, shapes: &[&[i64]], dim: i64) -> Result<Vec<i64>> {
    if shapes.is_empty() {
        return Err(fail(op, "expected a non-empty list of Tensors"));
    }
    if let Some(i) = shapes.iter().position(|s| s.is_empty()) {
        return Err(fail(
            op,
            format!("zero-dimensional tensor (at position {i}) cannot be concatenated"),
        ));
    }
    let skip = |s: &[i64]| s == [0];
    let Some(first) = shapes.iter().find(|s| !skip(s)) else {
        // Everything is a legacy empty tensor: the result is one too.
        wrap_dim(op, dim, 1)?;
        return Ok(vec![0]);
    };
    let d = wrap_dim(op, dim, first.len())?;
    let mut out = first.to_vec();
    out[d] = 0;
    for (i, s) in shapes.iter().enumerate().filter(|(_, s)| !skip(s)) {
        if s.len() != first.len() {
            return Err(fail(
                op,
                format!(
                    "tensors must have same number of dimensions: got {} and {}",
                    first.len(),
                    s.len()
                ),
            ));
        }
        for (j, (&a, &b)) in first.iter().zip(s.iter()).enumerate() {
            if j != d && a != b {
                return Err(fail(
                    op,
                    format!("sizes of tensors must match except in dimension {d}. Expected size {a} but got size {b} for tensor number {i} in the list"),
                ));
            }
        }
        out[d] += s[d];
    }
    Ok(out)
}

/// `stack`: all shapes equal; a new dim of size `shapes.len()` at `dim`.
pub fn stack_sizes(op: &str, shapes: &[&[i64]], dim: i64) -> Result<Vec<i64>> {
    let first = shapes
        .first()
        .ok_or_else(|| fail(op, "expects a non-empty TensorList"))?;
    for (i, s) in shapes.iter().enumerate() {
        if s != first {
            return Err(fail(
                op,
                format!("stack expects each tensor to be equal size, but got {first:?} at entry 0 and {s:?} at entry {i}"),
            ));
        }
    }
    let d = wrap_insert_dim(op, dim, first.len())?;
    let mut out = first.to_vec();
    out.insert(d, shapes.len() as i64);
    Ok(out)
}

/// Index tensors must hold integers of a kind the op reads.
pub fn check_index_dtype(op: &str, what: &str, d: DType, allowed: &[DType]) -> Result<()> {
    if allowed.contains(&d) {
        Ok(())
    } else {
        let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
        Err(fail(
            op,
            format!(
                "expected {what} to have dtype {}, but got {}",
                names.join(" or "),
                d.name()
            ),
        ))
    }
}

/// `index_select(dim, index)`: `dim` takes the index's length.
pub fn index_select_sizes(op: &str, input: &[i64], dim: i64, index: &[i64]) -> Result<Vec<i64>> {
    if index.len() > 1 {
        return Err(fail(op, "index_select(): Index is supposed to be a vector"));
    }
    let d = wrap_dim(op, dim, input.len())?;
    let mut out = input.to_vec();
    if !out.is_empty() {
        out[d] = index.iter().product();
    }
    Ok(out)
}

/// `gather(dim, index)`: the index's sizes, which must fit inside `self` off `dim`.
pub fn gather_sizes(op: &str, input: &[i64], dim: i64, index: &[i64]) -> Result<Vec<i64>> {
    let d = wrap_dim(op, dim, input.len())?;
    if index.len() != input.len() && !(index.len() <= 1 && input.len() <= 1) {
        return Err(fail(
            op,
            "index tensor must have the same number of dimensions as input tensor",
        ));
    }
    for (i, (&a, &b)) in index.iter().zip(input).enumerate() {
        if i != d && a > b {
            return Err(fail(
                op,
                format!("size does not match at dimension {i}: expected index {index:?} to be no larger than self {input:?} apart from dimension {d}"),
            ));
        }
    }
    Ok(index.to_vec())
}

/// `scatter`/`scatter_add`: the index must fit in `src` and, off `dim`, in `self`.
pub fn check_scatter(op: &str, input: &[i64], dim: i64, index: &[i64], src: &[i64]) -> Result<()> {
    let d = wrap_dim(op, dim, input.len())?;
    if index.len() != input.len()
        || (src.len() != index.len() && index.iter().product::<i64>() != 0)
    {
        return Err(fail(
            op,
            "index tensor must have the same number of dimensions as self and src tensors",
        ));
    }
    for i in 0..index.len() {
        if index[i] > src.get(i).copied().unwrap_or(1) || (i != d && index[i] > input[i]) {
            return Err(fail(
                op,
                format!("expected index {index:?} to be no larger than self {input:?} apart from dimension {d} and to be no larger than src {src:?}"),
            ));
        }
    }
    Ok(())
}

/// One entry of an advanced-indexing list, reduced to what decides the output shape.
#[derive(Copy, Clone, Debug)]
pub enum IndexEntry<'a> {
    /// `None`: the dim is kept whole.
    Full,
    /// An integer index tensor of these sizes.
    Int(&'a [i64]),
    /// A boolean mask: the result length depends on the data.
    Mask,
}

/// `index.Tensor`: integer index tensors broadcast together; their shape replaces
/// the indexed dims in place when those are adjacent, else it goes first.
pub fn index_sizes(op: &str, input: &[i64], indices: &[IndexEntry<'_>]) -> Result<Vec<i64>> {
    if indices.len() > input.len() {
        return Err(fail(
            op,
            format!(
                "too many indices for tensor of dimension {} (got {})",
                input.len(),
                indices.len()
            ),
        ));
    }
    if indices.iter().any(|e| matches!(e, IndexEntry::Mask)) {
        return Err(fail(
            op,
            "boolean mask indices give a data-dependent output shape, which meta tensors cannot compute",
        ));
    }
    let positions: Vec<usize> = (0..indices.len())
        .filter(|&i| matches!(indices[i], IndexEntry::Int(_)))
        .collect();
    let Some((&first, &last)) = positions.first().zip(positions.last()) else {
        return Ok(input.to_vec());
    };
    let shapes: Vec<&[i64]> = indices
        .iter()
        .filter_map(|e| match e {
            IndexEntry::Int(s) => Some(*s),
            _ => None,
        })
        .collect();
    let bshape = opal::rules::broadcast_shapes(op, &shapes)?;
    for &p in &positions {
        if input[p] == 0 && bshape.iter().product::<i64>() != 0 {
            return Err(fail(
                op,
                format!("index is out of bounds for dimension {p} with size 0"),
            ));
        }
    }
    let adjacent = last - first + 1 == positions.len();
    let rest = |range: std::ops::Range<usize>| -> Vec<i64> {
        range
            .filter(|i| !positions.contains(i))
            .map(|i| input[i])
            .collect()
    };
    let mut out = Vec::new();
    if adjacent {
        out.extend(rest(0..first));
        out.extend(&bshape);
        out.extend(rest(last + 1..input.len()));
    } else {
        out.extend(&bshape);
        out.extend(rest(0..input.len()));
    }
    Ok(out)
}

/// `repeat(repeats)`: the input, padded with leading 1s, times `repeats`.
pub fn repeat_sizes(op: &str, input: &[i64], repeats: &[i64]) -> Result<Vec<i64>> {
    if repeats.len() < input.len() {
        return Err(fail(op, "number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"));
    }
    if let Some(r) = repeats.iter().find(|&&r| r < 0) {
        return Err(fail(op, format!("repeats cannot be negative, got {r}")));
    }
    let lead = repeats.len() - input.len();
    repeats
        .iter()
        .enumerate()
        .map(|(i, &r)| {
            let s = if i < lead { 1 } else { input[i - lead] };
            r.checked_mul(s)
                .ok_or_else(|| fail(op, format!("size {s} repeated {r} times overflows int64")))
        })
        .collect()
}

/// `constant_pad_nd(pad)`: pairs `(before, after)` from the last dim backwards;
/// negative padding crops.
pub fn pad_sizes(op: &str, input: &[i64], pad: &[i64]) -> Result<Vec<i64>> {
    if !pad.len().is_multiple_of(2) {
        return Err(fail(
            op,
            "length of pad must be even but instead it equals an odd number",
        ));
    }
    if pad.len() / 2 > input.len() {
        return Err(fail(
            op,
            format!("length of pad should be no more than twice the number of dimensions of the input. Pad length is {} while the input has {} dimensions", pad.len(), input.len()),
        ));
    }
    let mut out = input.to_vec();
    for (i, pair) in pad.chunks(2).enumerate() {
        let d = input.len() - 1 - i;
        let n = input[d] + pair[0] + pair[1];
        if n < 0 {
            return Err(fail(
                op,
                format!("the input size {}, plus negative padding {} and {} resulted in a negative output size, which is invalid. Check dimension {d} of your input", input[d], pair[0], pair[1]),
            ));
        }
        out[d] = n;
    }
    Ok(out)
}

/// `roll(shifts, dims)`: one shift per dim, or one shift and no dims (flattened).
pub fn check_roll(op: &str, ndim: usize, shifts: &[i64], dims: &[i64]) -> Result<()> {
    if shifts.is_empty() {
        return Err(fail(op, "`shifts` required"));
    }
    if dims.is_empty() && shifts.len() == 1 {
        return Ok(());
    }
    if shifts.len() != dims.len() {
        return Err(fail(
            op,
            format!(
                "shifts and dimensions must align. shifts: {}, dims: {}",
                shifts.len(),
                dims.len()
            ),
        ));
    }
    for &d in dims {
        wrap_dim(op, d, ndim)?;
    }
    Ok(())
}

/// `flip(dims)`: every dim valid and named once.
pub fn check_flip(op: &str, ndim: usize, dims: &[i64]) -> Result<()> {
    dim_mask(op, dims, ndim).map(|_| ())
}

/// `topk(k, dim)`: `dim` shrinks to `k`, which must not exceed it.
pub fn topk_sizes(op: &str, input: &[i64], k: i64, dim: i64) -> Result<Vec<i64>> {
    let d = wrap_dim(op, dim, input.len())?;
    let size = input.get(d).copied().unwrap_or(1);
    if k < 0 || k > size {
        return Err(fail(
            op,
            format!("selected index k out of range (k = {k}, size of dim {d} = {size})"),
        ));
    }
    let mut out = input.to_vec();
    if !out.is_empty() {
        out[d] = k;
    }
    Ok(out)
}

/// `tril`/`triu` need at least a matrix.
pub fn check_triangle(op: &str, ndim: usize) -> Result<()> {
    if ndim < 2 {
        return Err(fail(op, "input tensor must have at least 2 dimensions"));
    }
    Ok(())
}

/// `one_hot(num_classes)`: a trailing class dim; `-1` (infer from the data) cannot
/// be answered without data.
pub fn one_hot_sizes(op: &str, input: &[i64], num_classes: i64) -> Result<Vec<i64>> {
    if num_classes == -1 {
        return Err(fail(
            op,
            "cannot infer the total number of classes without data (pass num_classes)",
        ));
    }
    if num_classes < -1 {
        return Err(fail(op, "num_classes should be positive"));
    }
    let mut out = input.to_vec();
    out.push(num_classes);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use IndexEntry::*;

    #[test]
    fn cat_and_stack() {
        assert_eq!(
            cat_sizes("cat", &[&[2, 3], &[4, 3]], 0).unwrap(),
            vec![6, 3]
        );
        assert_eq!(
            cat_sizes("cat", &[&[2, 3], &[0], &[2, 1]], -1).unwrap(),
            vec![2, 4]
        );
        assert!(cat_sizes("cat", &[&[2, 3], &[2, 4]], 0).is_err());
        assert!(cat_sizes("cat", &[], 0).is_err());
        assert_eq!(
            stack_sizes("stack", &[&[2, 3], &[2, 3]], 2).unwrap(),
            vec![2, 3, 2]
        );
        assert!(stack_sizes("stack", &[&[2, 3], &[3, 2]], 0).is_err());
    }

    #[test]
    fn advanced_indexing_shapes() {
        assert_eq!(
            index_sizes("index", &[4, 5], &[Int(&[5])]).unwrap(),
            vec![5, 5]
        );
        assert_eq!(
            index_sizes("index", &[2, 3, 4], &[Full, Int(&[2, 3])]).unwrap(),
            vec![2, 2, 3, 4]
        );
        assert_eq!(
            index_sizes("index", &[2, 3, 4], &[Int(&[4, 1]), Int(&[3])]).unwrap(),
            vec![4, 3, 4]
        );
        // Separated index dims move the broadcast shape to the front.
        assert_eq!(
            index_sizes("index", &[2, 3, 4], &[Int(&[5]), Full, Int(&[5])]).unwrap(),
            vec![5, 3]
        );
        assert!(index_sizes("index", &[4, 5], &[Mask]).is_err());
    }

    #[test]
    fn rearranging_shapes() {
        assert_eq!(
            repeat_sizes("repeat", &[2, 3], &[2, 1, 2]).unwrap(),
            vec![2, 2, 6]
        );
        assert!(repeat_sizes("repeat", &[2, 3], &[2]).is_err());
        assert_eq!(
            pad_sizes("pad", &[2, 3, 4], &[1, 2, -1, 0]).unwrap(),
            vec![2, 2, 7]
        );
        assert!(pad_sizes("pad", &[2, 3], &[1]).is_err());
        assert_eq!(topk_sizes("topk", &[4, 5], 2, -1).unwrap(), vec![4, 2]);
        assert!(topk_sizes("topk", &[4, 5], 6, -1).is_err());
        assert_eq!(
            gather_sizes("gather", &[4, 5], 1, &[4, 2]).unwrap(),
            vec![4, 2]
        );
        assert!(gather_sizes("gather", &[4, 5], 1, &[5, 2]).is_err());
        assert_eq!(
            index_select_sizes("index_select", &[4, 5], 0, &[3]).unwrap(),
            vec![3, 5]
        );
        assert!(one_hot_sizes("one_hot", &[3], -1).is_err());
    }
}
