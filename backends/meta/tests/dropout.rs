//! Dropout on meta tensors through the generated ops: `native_dropout` (and its
//! out= form) and `native_dropout_backward` reach the Meta kernels, the runtime's
//! `dropout` / `dropout_` composites run over them, and bad arguments are errors.

use opal::{ops, DType, Device, Result, Tensor};

fn meta(sizes: &[i64], dtype: DType) -> Tensor {
    Tensor::empty(sizes, dtype, Device::meta()).unwrap()
}

#[test]
fn native_dropout_shapes_and_dtypes() -> Result<()> {
    opal_meta::init()?;
    for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        // A transposed input: the outputs are contiguous, as the CPU kernel writes them.
        let x = ops::transpose_int(&meta(&[4, 6, 2], dt), 0, 2)?;
        let (y, m) = ops::native_dropout(&x, 0.3, Some(true))?;
        assert_eq!(
            (y.sizes(), y.strides(), y.dtype()),
            (&[2i64, 6, 4][..], &[24i64, 4, 1][..], dt)
        );
        assert_eq!((m.sizes(), m.dtype()), (&[2i64, 6, 4][..], DType::Bool));
        assert!(y.device().is_meta() && m.device().is_meta());
    }
    let x = meta(&[3, 5], DType::F32);
    let (o0, o1) = (meta(&[0], DType::F32), meta(&[0], DType::Bool));
    ops::native_dropout_out(&x, 0.5, None, &o0, &o1)?;
    assert_eq!((o0.sizes(), o1.sizes()), (&[3i64, 5][..], &[3i64, 5][..]));
    let g = ops::native_dropout_backward(&x, &meta(&[3, 5], DType::Bool), 2.0)?;
    assert_eq!((g.sizes(), g.dtype()), (&[3i64, 5][..], DType::F32));
    Ok(())
}

#[test]
fn composites_and_errors() -> Result<()> {
    opal_meta::init()?;
    let x = meta(&[8, 16], DType::BF16);
    let y = ops::dropout(&x, 0.5, true)?;
    assert_eq!((y.sizes(), y.dtype()), (&[8i64, 16][..], DType::BF16));
    assert!(ops::dropout(&x, 0.5, false)?.is_same(&x));
    assert!(ops::dropout_(&x, 0.25, true)?.is_same(&x));
    for p in [-1.0, 2.0, f64::NAN] {
        let e = ops::native_dropout(&x, p, Some(true))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("native_dropout") && e.contains("between 0 and 1"),
            "{e}"
        );
    }
    assert!(ops::native_dropout(&meta(&[2], DType::I32), 0.5, Some(true)).is_err());
    assert!(
        ops::native_dropout_backward(&meta(&[2], DType::I64), &meta(&[2], DType::Bool), 2.0)
            .is_err()
    );
    Ok(())
}
