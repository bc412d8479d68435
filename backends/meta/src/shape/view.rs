//! Geometry of view ops: the sizes, strides and storage offset of `view`,
//! `reshape` (view when possible), `permute`, `transpose`, `t`, `expand`,
//! `squeeze`, `unsqueeze`, `slice`, `select`, `narrow`, `flatten`, `split` and
//! `chunk`. Views share storage, so getting the strides right is the whole job.
//!
//! Owns: [`Strided`] and one function per view op. Must not: allocate or copy;
//! `reshape` only reports that a copy is needed.

use super::fail;
use super::geometry::{contiguous_strides, numel, view_strides, wrap_dim, wrap_insert_dim};
use opal::Result;

/// Sizes, strides and storage offset of a strided view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Strided {
    /// Sizes per dim.
    pub sizes: Vec<i64>,
    /// Strides per dim, in elements.
    pub strides: Vec<i64>,
    /// Offset of the first element in the storage, in elements.
    pub offset: i64,
}

impl Strided {
    /// Copies a tensor's geometry.
    pub fn of(sizes: &[i64], strides: &[i64], offset: i64) -> Self {
        Strided {
            sizes: sizes.to_vec(),
            strides: strides.to_vec(),
            offset,
        }
    }

    /// A fresh contiguous layout at offset 0.
    pub fn contiguous(sizes: &[i64]) -> Self {
        Strided {
            sizes: sizes.to_vec(),
            strides: contiguous_strides(sizes),
            offset: 0,
        }
    }

    fn ndim(&self) -> usize {
        self.sizes.len()
    }
}

/// `view(size)`: fails when the layout cannot express the new shape.
pub fn view(op: &str, t: &Strided, size: &[i64]) -> Result<Strided> {
    let sizes = opal::rules::infer_size(op, size, numel(&t.sizes))?;
    match view_strides(&t.sizes, &t.strides, &sizes) {
        Some(strides) => Ok(Strided { sizes, strides, offset: t.offset }),
        None => Err(fail(
            op,
            "view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces); use reshape instead",
        )),
    }
}

/// Result of `reshape`: a view when strides allow, else a contiguous copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reshape {
    /// Shares storage with the input.
    View(Strided),
    /// Needs a new contiguous tensor of these sizes.
    Copy(Vec<i64>),
}

/// `reshape(shape)`.
pub fn reshape(op: &str, t: &Strided, shape: &[i64]) -> Result<Reshape> {
    let sizes = opal::rules::infer_size(op, shape, numel(&t.sizes))?;
    Ok(match view_strides(&t.sizes, &t.strides, &sizes) {
        Some(strides) => Reshape::View(Strided {
            sizes,
            strides,
            offset: t.offset,
        }),
        None => Reshape::Copy(sizes),
    })
}

/// `permute(dims)`: `dims` must name every dim exactly once.
pub fn permute(op: &str, t: &Strided, dims: &[i64]) -> Result<Strided> {
    if dims.len() != t.ndim() {
        return Err(fail(
            op,
            format!(
                "number of dims don't match in permute: input has {} dims, but dims has {}",
                t.ndim(),
                dims.len()
            ),
        ));
    }
    let mut seen = vec![false; t.ndim()];
    let mut out = Strided {
        sizes: Vec::new(),
        strides: Vec::new(),
        offset: t.offset,
    };
    for &d in dims {
        let w = wrap_dim(op, d, t.ndim())?;
        if std::mem::replace(&mut seen[w], true) {
            return Err(fail(op, format!("repeated dim {w} in permute")));
        }
        out.sizes.push(t.sizes[w]);
        out.strides.push(t.strides[w]);
    }
    Ok(out)
}

/// `transpose(dim0, dim1)`.
pub fn transpose(op: &str, t: &Strided, dim0: i64, dim1: i64) -> Result<Strided> {
    let mut out = t.clone();
    if t.ndim() == 0 {
        wrap_dim(op, dim0, 0)?;
        wrap_dim(op, dim1, 0)?;
        return Ok(out);
    }
    let (a, b) = (wrap_dim(op, dim0, t.ndim())?, wrap_dim(op, dim1, t.ndim())?);
    out.sizes.swap(a, b);
    out.strides.swap(a, b);
    Ok(out)
}

/// `t()`: transposes a matrix; 0-d and 1-d tensors are returned as they are.
pub fn t(op: &str, t: &Strided) -> Result<Strided> {
    if t.ndim() > 2 {
        return Err(fail(
            op,
            format!(
                "t() expects a tensor with <= 2 dimensions, but self is {}D",
                t.ndim()
            ),
        ));
    }
    if t.ndim() < 2 {
        return Ok(t.clone());
    }
    transpose(op, t, 0, 1)
}

/// `expand(size)`: new leading dims and broadcast size-1 dims read with stride 0;
/// `-1` keeps an existing size.
pub fn expand(op: &str, t: &Strided, size: &[i64]) -> Result<Strided> {
    if size.len() < t.ndim() {
        return Err(fail(
            op,
            format!("the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({})", size.len(), t.ndim()),
        ));
    }
    let lead = size.len() - t.ndim();
    let mut out = Strided {
        sizes: vec![0; size.len()],
        strides: vec![0; size.len()],
        offset: t.offset,
    };
    for (i, &want) in size.iter().enumerate() {
        if i < lead {
            if want < 0 {
                return Err(fail(op, format!("the expanded size of the tensor ({want}) isn't allowed in a leading, non-existing dimension {i}")));
            }
            out.sizes[i] = want;
            continue;
        }
        let (have, st) = (t.sizes[i - lead], t.strides[i - lead]);
        if want == -1 || want == have {
            out.sizes[i] = have;
            out.strides[i] = st;
        } else if have == 1 && want >= 0 {
            out.sizes[i] = want;
        } else {
            return Err(fail(
                op,
                format!("the expanded size of the tensor ({want}) must match the existing size ({have}) at non-singleton dimension {i}. Target sizes: {size:?}. Tensor sizes: {:?}", t.sizes),
            ));
        }
    }
    Ok(out)
}

/// `squeeze(dim)`: drops the dim only when its size is 1.
pub fn squeeze_dim(op: &str, t: &Strided, dim: i64) -> Result<Strided> {
    let d = wrap_dim(op, dim, t.ndim())?;
    let mut out = t.clone();
    if t.ndim() > 0 && t.sizes[d] == 1 {
        out.sizes.remove(d);
        out.strides.remove(d);
    }
    Ok(out)
}

/// `unsqueeze(dim)`: the new size-1 dim gets the stride that keeps the tensor
/// contiguous where it was.
pub fn unsqueeze(op: &str, t: &Strided, dim: i64) -> Result<Strided> {
    let d = wrap_insert_dim(op, dim, t.ndim())?;
    let stride = if d >= t.ndim() {
        1
    } else {
        t.sizes[d] * t.strides[d]
    };
    let mut out = t.clone();
    out.sizes.insert(d, 1);
    out.strides.insert(d, stride);
    Ok(out)
}

/// `flatten(start_dim, end_dim)`: the merged sizes, then `reshape`.
pub fn flatten(op: &str, t: &Strided, start_dim: i64, end_dim: i64) -> Result<Reshape> {
    if t.ndim() == 0 {
        return reshape(op, t, &[1]);
    }
    let (s, e) = (
        wrap_dim(op, start_dim, t.ndim())?,
        wrap_dim(op, end_dim, t.ndim())?,
    );
    if s > e {
        return Err(fail(
            op,
            "flatten() has invalid args: start_dim cannot come after end_dim",
        ));
    }
    if s == e {
        return Ok(Reshape::View(t.clone()));
    }
    let mut shape = t.sizes[..s].to_vec();
    shape.push(t.sizes[s..=e].iter().product());
    shape.extend_from_slice(&t.sizes[e + 1..]);
    reshape(op, t, &shape)
}

/// `split(split_size, dim)`: equal pieces, the last one possibly shorter.
pub fn split(op: &str, t: &Strided, split_size: i64, dim: i64) -> Result<Vec<Strided>> {
    if t.ndim() == 0 {
        return Err(fail(op, "split expects at least a 1-dimensional tensor"));
    }
    if split_size < 0 {
        return Err(fail(
            op,
            format!("split expects split_size be non-negative, but got split_size={split_size}"),
        ));
    }
    let d = wrap_dim(op, dim, t.ndim())?;
    let size = t.sizes[d];
    if split_size == 0 && size != 0 {
        return Err(fail(
            op,
            format!(
                "split_size can only be 0 if dimension size is 0, but got dimension size of {size}"
            ),
        ));
    }
    let pieces = if split_size == 0 {
        1
    } else {
        ((size + split_size - 1) / split_size).max(1)
    };
    (0..pieces)
        .map(|i| {
            let start = i * split_size;
            Ok(part(t, d, start, split_size.min(size - start)))
        })
        .collect()
}

/// Elements `start..start + len` of dim `d` (in range: the callers split the dim).
fn part(t: &Strided, d: usize, start: i64, len: i64) -> Strided {
    let mut out = t.clone();
    out.offset += start * t.strides[d];
    out.sizes[d] = len;
    out
}

/// `chunk(chunks, dim)`: at most `chunks` pieces of `ceil(size / chunks)`.
pub fn chunk(op: &str, t: &Strided, chunks: i64, dim: i64) -> Result<Vec<Strided>> {
    if t.ndim() == 0 {
        return Err(fail(op, "chunk expects at least a 1-dimensional tensor"));
    }
    if chunks <= 0 {
        return Err(fail(
            op,
            format!("chunk expects `chunks` to be greater than 0, got: {chunks}"),
        ));
    }
    let d = wrap_dim(op, dim, t.ndim())?;
    let size = t.sizes[d];
    if size == 0 {
        // Every chunk of an empty dim is empty, and there are exactly `chunks` of them.
        return Ok((0..chunks).map(|_| part(t, d, 0, 0)).collect());
    }
    split(op, t, (size + chunks - 1) / chunks, dim)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(sizes: &[i64]) -> Strided {
        Strided::contiguous(sizes)
    }

    #[test]
    fn transposes_and_permutes_swap_strides() {
        let x = c(&[2, 3, 4]);
        assert_eq!(transpose("t", &x, 0, 2).unwrap().strides, vec![1, 4, 12]);
        assert_eq!(permute("p", &x, &[2, 0, 1]).unwrap().sizes, vec![4, 2, 3]);
        assert!(permute("p", &x, &[0, 0, 1]).is_err());
        assert!(t("t", &x).is_err());
    }

    #[test]
    fn view_and_reshape() {
        let x = c(&[2, 3, 4]);
        assert_eq!(view("view", &x, &[6, -1]).unwrap().strides, vec![4, 1]);
        let xt = transpose("t", &c(&[2, 3]), 0, 1).unwrap();
        assert!(view("view", &xt, &[6]).is_err());
        assert_eq!(
            reshape("reshape", &xt, &[6]).unwrap(),
            Reshape::Copy(vec![6])
        );
        assert!(
            matches!(flatten("flatten", &x, 1, -1).unwrap(), Reshape::View(v) if v.sizes == vec![2, 12])
        );
    }

    #[test]
    fn expand_squeeze_unsqueeze() {
        let x = c(&[3, 1]);
        let e = expand("expand", &x, &[2, 3, 4]).unwrap();
        assert_eq!((e.sizes, e.strides), (vec![2, 3, 4], vec![0, 1, 0]));
        assert!(expand("expand", &x, &[2, 4]).is_err());
        assert_eq!(squeeze_dim("squeeze", &x, 1).unwrap().sizes, vec![3]);
        assert_eq!(squeeze_dim("squeeze", &x, 0).unwrap().sizes, vec![3, 1]);
        assert_eq!(
            unsqueeze("unsqueeze", &c(&[2, 3]), 1).unwrap().strides,
            vec![3, 3, 1]
        );
        assert_eq!(
            unsqueeze("unsqueeze", &c(&[2, 3]), -1).unwrap().strides,
            vec![3, 1, 1]
        );
    }

    #[test]
    fn split_and_chunk() {
        let x = c(&[7, 2]);
        let parts = split("split", &x, 3, 0).unwrap();
        assert_eq!(
            parts.iter().map(|p| p.sizes[0]).collect::<Vec<_>>(),
            vec![3, 3, 1]
        );
        assert_eq!(parts[2].offset, 12);
        let parts = chunk("chunk", &x, 3, 0).unwrap();
        assert_eq!(
            parts.iter().map(|p| p.sizes[0]).collect::<Vec<_>>(),
            vec![3, 3, 1]
        );
        assert_eq!(chunk("chunk", &c(&[0]), 2, 0).unwrap().len(), 2);
    }
}
