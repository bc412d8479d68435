//! The views that pick part of one dim (`slice.Tensor`, `narrow`, `select.int`)
//! and the copies that replace such a part (`slice_scatter`, `select_scatter`):
//! their argument checks and the picked part, the same for every backend. Each op's
//! rule takes the schema's arguments and returns them checked; both backends' YAML
//! entries read `rule | kernel`, and the kernels lay the part over their tensor
//! with [`DimPick::geometry`].
//!
//! Owns: these checks, their errors (PyTorch's wording) and the geometry. Must
//! not: allocate tensors or read their data.

use crate::{OpalError, Result, Tensor};

/// A part of one dim of `input`: elements `start, start + step, ...` (`len` of
/// them) of `dim`, which is kept (slice) or removed (select, `len` 1).
#[derive(Clone, Debug)]
pub struct DimPick<'a> {
    /// `self`.
    pub input: &'a Tensor,
    /// The dim, wrapped.
    pub dim: usize,
    /// The first element picked.
    pub start: i64,
    /// How many elements are picked.
    pub len: i64,
    /// The step between them.
    pub step: i64,
    /// Whether `dim` stays (slice) or goes (select).
    pub keep_dim: bool,
}

impl DimPick<'_> {
    /// Sizes, strides and storage offset of the picked part of a tensor `t` of
    /// `input`'s sizes (the input itself, or a copy of it).
    pub fn geometry(&self, t: &Tensor) -> (Vec<i64>, Vec<i64>, i64) {
        let (mut sizes, mut strides) = (t.sizes().to_vec(), t.strides().to_vec());
        let d = self.dim;
        let offset = t.storage_offset() + self.start * strides[d];
        if self.keep_dim {
            sizes[d] = self.len;
            strides[d] *= self.step;
        } else {
            sizes.remove(d);
            strides.remove(d);
        }
        (sizes, strides, offset)
    }

    /// The picked part's sizes.
    pub fn sizes(&self) -> Vec<i64> {
        let mut sizes = self.input.sizes().to_vec();
        if self.keep_dim {
            sizes[self.dim] = self.len;
        } else {
            sizes.remove(self.dim);
        }
        sizes
    }
}

/// The rule of `slice.Tensor`: a positive step over a dim of a tensor with at
/// least one; `start` and `end` count from the end when negative and are clamped
/// to the dim, as Python's slicing does.
pub fn slice_tensor(
    self_: &Tensor,
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> Result<DimPick<'_>> {
    slice("slice", self_, dim, start, end, step)
}

fn slice<'a>(
    op: &str,
    input: &'a Tensor,
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> Result<DimPick<'a>> {
    super::check_defined(op, &[input])?;
    if input.dim() == 0 {
        return Err(OpalError::msg(format!(
            "{op}: slice() cannot be applied to a 0-dim tensor."
        )));
    }
    if step <= 0 {
        return Err(OpalError::msg(format!("{op}: slice step must be positive")));
    }
    let d = crate::tensor::wrap_dim(op, dim, input.dim())?;
    let size = input.sizes()[d];
    let clamp = |v: i64| if v < 0 { v + size } else { v }.clamp(0, size);
    let s = clamp(start.unwrap_or(0));
    let e = clamp(end.unwrap_or(size)).max(s);
    Ok(DimPick {
        input,
        dim: d,
        start: s,
        len: (e - s + step - 1) / step,
        step,
        keep_dim: true,
    })
}

/// The rule of `narrow`: `length` elements of `dim` from `start` (counting from
/// the end when negative), inside the dim of a tensor with at least one.
pub fn narrow(self_: &Tensor, dim: i64, start: i64, length: i64) -> Result<DimPick<'_>> {
    const OP: &str = "narrow";
    super::check_defined(OP, &[self_])?;
    let fail = |why: String| Err(OpalError::msg(format!("{OP}: {why}")));
    if self_.dim() == 0 {
        return fail("narrow() cannot be applied to a 0-dim tensor.".into());
    }
    if length < 0 {
        return fail("narrow(): length must be non-negative.".into());
    }
    let d = crate::tensor::wrap_dim(OP, dim, self_.dim())?;
    let size = self_.sizes()[d];
    if start < -size || start > size {
        return fail(format!(
            "start out of range (expected to be in range of [{}, {size}], but got {start})",
            -size
        ));
    }
    let s = if start < 0 { start + size } else { start };
    if s + length > size {
        return fail(format!(
            "start ({s}) + length ({length}) exceeds dimension size ({size})."
        ));
    }
    slice(OP, self_, d as i64, Some(s), Some(s + length), 1)
}

/// The rule of `select.int`: an index inside the dim (counting from the end when
/// negative) of a tensor with at least one.
pub fn select_int(self_: &Tensor, dim: i64, index: i64) -> Result<DimPick<'_>> {
    select("select", self_, dim, index)
}

fn select<'a>(op: &str, input: &'a Tensor, dim: i64, index: i64) -> Result<DimPick<'a>> {
    super::check_defined(op, &[input])?;
    if input.dim() == 0 {
        return Err(OpalError::msg(format!(
            "{op}: select() cannot be applied to a 0-dim tensor."
        )));
    }
    let d = crate::tensor::wrap_dim(op, dim, input.dim())?;
    let size = input.sizes()[d];
    if index < -size || index >= size {
        return Err(OpalError::msg(format!(
            "{op}: select(): index {index} out of range for tensor of size {:?} at dimension {d}",
            input.sizes()
        )));
    }
    Ok(DimPick {
        input,
        dim: d,
        start: if index < 0 { index + size } else { index },
        len: 1,
        step: 1,
        keep_dim: false,
    })
}

/// `slice_scatter`'s or `select_scatter`'s arguments, checked: the part of `self`
/// to replace and `src`, of that part's sizes.
#[derive(Clone, Debug)]
pub struct PickScatter<'a> {
    /// The part of `self` (`pick.input`) that `src` replaces.
    pub pick: DimPick<'a>,
    /// The replacement.
    pub src: &'a Tensor,
}

fn scatter<'a>(op: &str, pick: DimPick<'a>, src: &'a Tensor) -> Result<PickScatter<'a>> {
    super::check_defined(op, &[src])?;
    let sizes = pick.sizes();
    if src.sizes() != sizes.as_slice() {
        return Err(OpalError::shape(format!(
            "{op}: expected argument 'src' to have the sizes of the part of self it replaces, {sizes:?}, got {:?}",
            src.sizes()
        )));
    }
    Ok(PickScatter { pick, src })
}

/// The rule of `slice_scatter` (and of its `out=` form): [`slice_tensor`]'s, and
/// a `src` of the slice's sizes.
pub fn slice_scatter<'a>(
    self_: &'a Tensor,
    src: &'a Tensor,
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> Result<PickScatter<'a>> {
    const OP: &str = "slice_scatter";
    scatter(OP, slice(OP, self_, dim, start, end, step)?, src)
}

/// The rule of `select_scatter` (and of its `out=` form): [`select_int`]'s, and a
/// `src` of the selected part's sizes.
pub fn select_scatter<'a>(
    self_: &'a Tensor,
    src: &'a Tensor,
    dim: i64,
    index: i64,
) -> Result<PickScatter<'a>> {
    const OP: &str = "select_scatter";
    scatter(OP, select(OP, self_, dim, index)?, src)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_move_the_offset_and_scale_the_stride() {
        let x = Tensor::empty(&[4, 6], crate::DType::F32, crate::Device::cpu()).unwrap();
        let s = slice_tensor(&x, 1, Some(1), Some(100), 2).unwrap();
        assert_eq!(s.geometry(&x), (vec![4, 3], vec![6, 2], 1));
        let s = slice_tensor(&x, 0, Some(-3), None, 1).unwrap();
        assert_eq!(s.geometry(&x).0[0], 3);
        assert_eq!(s.geometry(&x).2, 6);
        let s = select_int(&x, 0, -1).unwrap();
        assert_eq!(s.geometry(&x), (vec![6], vec![1], 18));
        assert!(select_int(&x, 0, 4).is_err());
        assert!(narrow(&x, 1, 4, 3).is_err());
        assert_eq!(narrow(&x, 1, -2, 2).unwrap().sizes(), vec![4, 2]);
        assert!(slice_tensor(&x, 0, None, None, 0).is_err());
        let src = Tensor::empty(&[4], crate::DType::F32, crate::Device::cpu()).unwrap();
        assert!(select_scatter(&x, &src, 1, 0).is_ok());
        assert!(select_scatter(&x, &src, 0, 0).is_err());
    }
}
