//! `copy` (a new tensor shaped like `self` holding `src`), `_local_scalar_dense`
//! (a one-element tensor's value), `_assert_async.msg` (a data check exported
//! graphs keep) and `slice_scatter` / `select_scatter` (a copy of `self` with a
//! part replaced).
//!
//! Owns: these kernels. Must not: cast or broadcast itself (`copy_into` does
//! both) or check the scatters' arguments (`opal::rules::view`).

use crate::copy::copy_into;
use crate::nn::io::err;
use crate::out::empty_uninit;
use opal::rules::view::PickScatter;
use opal::{Result, Scalar, Tensor};

/// `copy`: `self_`'s sizes, dtype and device, holding `src` broadcast to them and
/// cast to `self_`'s dtype.
pub fn copy(self_: &Tensor, src: &Tensor, non_blocking: bool) -> Result<Tensor> {
    let _ = non_blocking; // a host copy has nothing to overlap
    let out = empty_uninit(self_.sizes(), self_.dtype())?;
    copy_into(&out, src, "copy")?;
    Ok(out)
}

/// `_local_scalar_dense`: the value of a one-element tensor.
pub fn _local_scalar_dense(self_: &Tensor) -> Result<Scalar> {
    if self_.numel() != 1 {
        return Err(err(
            "_local_scalar_dense",
            format!(
                "argument 'self' must have one element, got {} (sizes {:?})",
                self_.numel(),
                self_.sizes()
            ),
        ));
    }
    self_.item()
}

/// `_assert_async.msg`: an error carrying `assert_msg` unless the one-element
/// `self_` is true / non-zero.
pub fn _assert_async_msg(self_: &Tensor, assert_msg: &str) -> Result<()> {
    const OP: &str = "_assert_async";
    if self_.numel() != 1 {
        return Err(err(
            OP,
            format!(
                "Boolean value of Tensor with {} values is ambiguous",
                self_.numel()
            ),
        ));
    }
    if self_.item()?.to_bool() {
        Ok(())
    } else {
        Err(err(
            OP,
            format!("Expected Tensor with single nonzero value, but got zero: {assert_msg}"),
        ))
    }
}

/// `slice_scatter`, `select_scatter`: a copy of `self` with the part
/// `opal::rules::view` picked replaced by `src`.
pub fn scatter_pick(s: PickScatter) -> Result<Tensor> {
    let out = crate::shape::clone(s.pick.input, None)?;
    let (sizes, strides, offset) = s.pick.geometry(&out);
    let view = out.as_strided(&sizes, &strides, offset)?;
    let op = if s.pick.keep_dim {
        "slice_scatter"
    } else {
        "select_scatter"
    };
    copy_into(&view, s.src, op)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_broadcasts_and_casts() {
        let a = Tensor::from_vec(vec![0f32; 6], &[2, 3]).unwrap();
        let s = Tensor::from_slice(&[1i64, 2, 3], &[3]).unwrap();
        let r = copy(&a, &s, false).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1., 2., 3., 1., 2., 3.]);
        assert!(copy(&a, &Tensor::from_slice(&[1f32, 2.], &[2]).unwrap(), false).is_err());
        let one = Tensor::from_slice(&[7i32], &[1]).unwrap();
        assert_eq!(_local_scalar_dense(&one).unwrap().to_i64(), 7);
        assert!(_local_scalar_dense(&s).is_err());
        assert!(_assert_async_msg(&one, "m").is_ok());
        use opal::rules::view as rule;
        let r = rule::slice_scatter(&a, &s, 1, Some(0), Some(2), 1).unwrap_err();
        assert!(r.to_string().contains("slice_scatter"));
        let row = Tensor::from_slice(&[5f32, 6., 7.], &[3]).unwrap();
        let r = scatter_pick(rule::select_scatter(&a, &row, 0, -1).unwrap()).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![0., 0., 0., 5., 6., 7.]);
        let zero = Tensor::from_slice(&[0i32], &[]).unwrap();
        assert!(_assert_async_msg(&zero, "boom")
            .unwrap_err()
            .to_string()
            .contains("boom"));
    }
}
