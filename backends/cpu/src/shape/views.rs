//! View ops: `view`, `reshape`, `permute`, `transpose`, `t`, `expand`, `squeeze.dim`,
//! `unsqueeze`, `slice.Tensor`, `select.int`, `narrow` (+ in-place metadata forms
//! where the YAML has them). All views share storage through the runtime's
//! `as_strided`; none copies data (except `reshape` of a non-viewable layout).
//!
//! Owns: size/stride arithmetic and PyTorch's error messages for these ops, but
//! for the parts of one dim that `opal::rules::view` picks (`slice.Tensor`,
//! `select.int`, `narrow`). Must not: copy data for a view.

use crate::nn::io::{err, shape_err, wrap_dim};
use opal::rules::view::DimPick;
use opal::{Result, Tensor};

/// A view of `self_` with shape `size` (one `-1` inferred); errors when the layout
/// cannot be viewed that way.
pub fn view(self_: &Tensor, size: &[i64]) -> Result<Tensor> {
    let shape = opal::rules::infer_size("view", size, self_.numel())?;
    match opal::rules::view_strides(self_.sizes(), self_.strides(), &shape) {
        Some(st) => self_.as_strided(&shape, &st, self_.storage_offset()),
        None => Err(err(
            "view",
            "view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.",
        )),
    }
}

/// `view` when possible, else a contiguous copy with the new shape.
pub fn reshape(self_: &Tensor, shape: &[i64]) -> Result<Tensor> {
    let shape = opal::rules::infer_size("reshape", shape, self_.numel())?;
    match opal::rules::view_strides(self_.sizes(), self_.strides(), &shape) {
        Some(st) => self_.as_strided(&shape, &st, self_.storage_offset()),
        None => {
            let c = crate::copy::contiguous(self_)?;
            let st = crate::shape::remap::contiguous_strides(&shape);
            c.as_strided(&shape, &st, c.storage_offset())
        }
    }
}

/// Reorders dims: result dim `i` is `self_`'s dim `dims[i]`.
pub fn permute(self_: &Tensor, dims: &[i64]) -> Result<Tensor> {
    const OP: &str = "permute";
    let nd = self_.dim();
    if dims.len() != nd {
        return Err(err(OP, format!("number of dimensions in the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = {nd} is not equal to len(dims) = {}", dims.len())));
    }
    let mut seen = vec![false; nd];
    let (mut sz, mut st) = (Vec::with_capacity(nd), Vec::with_capacity(nd));
    for &d in dims {
        let w = wrap_dim(d, nd, OP)?;
        if nd == 0 {
            break;
        }
        if std::mem::replace(&mut seen[w], true) {
            return Err(err(OP, "duplicate dims are not allowed."));
        }
        sz.push(self_.sizes()[w]);
        st.push(self_.strides()[w]);
    }
    self_.as_strided(&sz, &st, self_.storage_offset())
}

/// Swaps two dims.
pub fn transpose_int(self_: &Tensor, dim0: i64, dim1: i64) -> Result<Tensor> {
    let nd = self_.dim();
    let (a, b) = (
        wrap_dim(dim0, nd, "transpose")?,
        wrap_dim(dim1, nd, "transpose")?,
    );
    if nd == 0 {
        return self_.as_strided(&[], &[], self_.storage_offset());
    }
    let (mut sz, mut st) = (self_.sizes().to_vec(), self_.strides().to_vec());
    sz.swap(a, b);
    st.swap(a, b);
    self_.as_strided(&sz, &st, self_.storage_offset())
}

/// Transpose of a tensor with at most 2 dims (0-d and 1-d come back as views).
pub fn t(self_: &Tensor) -> Result<Tensor> {
    if self_.dim() > 2 {
        return Err(err(
            "t",
            format!(
                "t() expects a tensor with <= 2 dimensions, but self is {}D",
                self_.dim()
            ),
        ));
    }
    if self_.dim() < 2 {
        return self_.as_strided(self_.sizes(), self_.strides(), self_.storage_offset());
    }
    transpose_int(self_, 0, 1)
}

/// Broadcasts size-1 dims (stride 0) and prepends new leading dims; `-1` keeps a size.
pub fn expand(self_: &Tensor, size: &[i64], implicit: bool) -> Result<Tensor> {
    const OP: &str = "expand";
    let _ = implicit; // only affects autograd tracing in PyTorch
    let nd = self_.dim();
    if size.len() < nd {
        return Err(err(OP, format!("the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({nd})", size.len())));
    }
    let lead = size.len() - nd;
    let (mut sz, mut st) = (vec![0i64; size.len()], vec![0i64; size.len()]);
    for (i, &want) in size.iter().enumerate() {
        if i < lead {
            if want < 0 {
                return Err(err(OP, format!("The expanded size of the tensor ({want}) isn't allowed in a leading, non-existing dimension {i}")));
            }
            sz[i] = want;
            continue;
        }
        let (have, stride) = (self_.sizes()[i - lead], self_.strides()[i - lead]);
        if want == -1 || want == have {
            sz[i] = have;
            st[i] = stride;
        } else if have == 1 && want >= 0 {
            sz[i] = want;
        } else {
            return Err(shape_err(OP, format!(
                "The expanded size of the tensor ({want}) must match the existing size ({have}) at non-singleton dimension {i}.  Target sizes: {size:?}.  Tensor sizes: {:?}",
                self_.sizes()
            )));
        }
    }
    self_.as_strided(&sz, &st, self_.storage_offset())
}

/// Removes `dim` when its size is 1 (otherwise a same-shaped view).
pub fn squeeze_dim(self_: &Tensor, dim: i64) -> Result<Tensor> {
    let d = wrap_dim(dim, self_.dim(), "squeeze")?;
    let (mut sz, mut st) = (self_.sizes().to_vec(), self_.strides().to_vec());
    if self_.dim() > 0 && sz[d] == 1 {
        sz.remove(d);
        st.remove(d);
    }
    self_.as_strided(&sz, &st, self_.storage_offset())
}

/// Inserts a size-1 dim at `dim` (in `0..=dim()`).
pub fn unsqueeze(self_: &Tensor, dim: i64) -> Result<Tensor> {
    let nd = self_.dim();
    let d = wrap_dim(dim, nd + 1, "unsqueeze")?;
    let (mut sz, mut st) = (self_.sizes().to_vec(), self_.strides().to_vec());
    let stride = if d < nd { sz[d] * st[d] } else { 1 };
    sz.insert(d, 1);
    st.insert(d, stride);
    self_.as_strided(&sz, &st, self_.storage_offset())
}

/// `slice.Tensor`, `select.int` (and `narrow`): the part of one dim that
/// `opal::rules::view` picked, as a view.
pub fn pick(p: DimPick) -> Result<Tensor> {
    let (sizes, strides, offset) = p.geometry(p.input);
    p.input.as_strided(&sizes, &strides, offset)
}

/// `slice.Tensor` called directly (export's view replay): the rule, then [`pick`].
pub fn slice_tensor(
    self_: &Tensor,
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> Result<Tensor> {
    pick(opal::rules::view::slice_tensor(
        self_, dim, start, end, step,
    )?)
}

/// `select.int` called directly (export's view replay): the rule, then [`pick`].
pub fn select_int(self_: &Tensor, dim: i64, index: i64) -> Result<Tensor> {
    pick(opal::rules::view::select_int(self_, dim, index)?)
}

/// `self_` when already contiguous, else a contiguous copy.
pub fn contiguous(self_: &Tensor, memory_format: opal::MemoryFormat) -> Result<Tensor> {
    match memory_format {
        opal::MemoryFormat::Contiguous | opal::MemoryFormat::Preserve => {
            crate::copy::contiguous(self_)
        }
        other => Err(err(
            "contiguous",
            format!("memory format {other:?} is not supported on CPU"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ar(n: usize, shape: &[i64]) -> Tensor {
        Tensor::from_vec((0..n as i64).collect::<Vec<_>>(), shape).unwrap()
    }

    #[test]
    fn views_share_storage_and_have_right_values() {
        let a = ar(24, &[2, 3, 4]);
        let p = permute(&a, &[2, 0, 1]).unwrap();
        assert!(p.shares_storage(&a));
        assert_eq!(p.sizes(), &[4, 2, 3]);
        assert_eq!(p.to_vec::<i64>().unwrap()[..3], [0, 4, 8]);
        let v = view(&a, &[6, -1]).unwrap();
        assert_eq!(v.sizes(), &[6, 4]);
        assert!(view(&p, &[24]).unwrap_err().to_string().contains("reshape"));
        assert_eq!(
            reshape(&p, &[-1]).unwrap().to_vec::<i64>().unwrap()[..3],
            [0, 4, 8]
        );
        assert!(view(&a, &[5, -1])
            .unwrap_err()
            .to_string()
            .contains("invalid for input of size 24"));
        use opal::rules::view as rule;
        let s = pick(rule::slice_tensor(&a, -1, Some(-3), Some(100), 2).unwrap()).unwrap();
        assert_eq!(s.sizes(), &[2, 3, 2]);
        assert_eq!(s.to_vec::<i64>().unwrap()[..2], [1, 3]);
        let sel = pick(rule::select_int(&a, 1, -1).unwrap()).unwrap();
        assert_eq!(
            sel.to_vec::<i64>().unwrap(),
            vec![8, 9, 10, 11, 20, 21, 22, 23]
        );
        assert!(rule::select_int(&a, 0, 2).is_err());
        let n = pick(rule::narrow(&a, -1, 2, 2).unwrap()).unwrap();
        assert_eq!(n.to_vec::<i64>().unwrap()[..2], [2, 3]);
        assert!(rule::narrow(&a, 0, 1, 2).is_err());
    }

    #[test]
    fn expand_squeeze_unsqueeze_t() {
        let a = ar(3, &[3, 1]);
        let e = expand(&a, &[2, -1, 4], false).unwrap();
        assert_eq!(e.sizes(), &[2, 3, 4]);
        assert_eq!(e.strides(), &[0, 1, 0]);
        assert!(expand(&a, &[2, 4], false)
            .unwrap_err()
            .to_string()
            .contains("must match the existing size"));
        assert_eq!(squeeze_dim(&a, -1).unwrap().sizes(), &[3]);
        assert_eq!(squeeze_dim(&a, 0).unwrap().sizes(), &[3, 1]);
        assert_eq!(unsqueeze(&a, 0).unwrap().sizes(), &[1, 3, 1]);
        assert_eq!(unsqueeze(&a, -1).unwrap().sizes(), &[3, 1, 1]);
        assert_eq!(t(&a).unwrap().sizes(), &[1, 3]);
        assert!(t(&ar(8, &[2, 2, 2])).is_err());
        assert!(transpose_int(&a, 0, 2).is_err());
    }
}
