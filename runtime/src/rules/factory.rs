//! The factories' argument rules that every backend applies the same way: the
//! layout (strided only), the sizes and dtype of `zeros`, `ones` and `full`,
//! `empty_strided`'s geometry and `arange`'s dtype and length. Each op's rule takes the schema's arguments and returns them checked;
//! both backends' YAML entries read `rule | kernel`. The `device` a factory names
//! is left to the kernel (each backend allocates only on its own devices).
//!
//! Owns: these checks and their errors. Must not: allocate tensors or know any
//! backend.

use crate::{DType, Device, Layout, OpalError, Result, Scalar};

/// Refuses every layout but strided (Opal has no sparse or mkldnn tensors).
pub fn check_layout(op: &str, layout: Option<Layout>) -> Result<()> {
    match layout {
        None | Some(Layout::Strided) => Ok(()),
        Some(l) => Err(OpalError::msg(format!(
            "{op}: only the strided layout is supported, got {l:?}"
        ))),
    }
}

/// Refuses a negative size.
pub fn check_size(op: &str, size: &[i64]) -> Result<()> {
    match size.iter().find(|&&s| s < 0) {
        Some(s) => Err(OpalError::msg(format!(
            "{op}: Trying to create tensor with negative dimension {s}: {size:?}"
        ))),
        None => Ok(()),
    }
}

/// `zeros`', `ones`' or `full`'s arguments, checked.
#[derive(Clone, Debug)]
pub struct Filled<'a> {
    /// The op (`zeros`, `ones`, `full`), for errors.
    pub op: &'static str,
    /// `size`, every entry non-negative.
    pub size: &'a [i64],
    /// The value of every element.
    pub value: Scalar,
    /// The requested dtype, else the op's default.
    pub dtype: DType,
    /// `device`.
    pub device: Option<Device>,
    /// `pin_memory`.
    pub pin_memory: Option<bool>,
}

/// The dtype PyTorch infers for `full` from its fill value.
pub fn dtype_of_fill(v: &Scalar) -> DType {
    match v {
        Scalar::Bool(_) => DType::Bool,
        Scalar::Int(_) => DType::I64,
        Scalar::Float(_) => crate::dtype::default_dtype(),
        Scalar::Complex(..) => crate::dtype::default_complex_dtype(),
    }
}

fn filled<'a>(
    op: &'static str,
    size: &'a [i64],
    value: Scalar,
    dtype: DType,
    layout: Option<Layout>,
    (device, pin_memory): (Option<Device>, Option<bool>),
) -> Result<Filled<'a>> {
    check_layout(op, layout)?;
    check_size(op, size)?;
    Ok(Filled {
        op,
        size,
        value,
        dtype,
        device,
        pin_memory,
    })
}

/// The rule of `zeros` (and of its `out=` form): non-negative sizes, the default
/// dtype unless requested.
pub fn zeros(
    size: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Filled<'_>> {
    constant("zeros", 0, size, dtype, layout, (device, pin_memory))
}

/// The rule of `ones` (and of its `out=` form): as [`zeros`]'.
pub fn ones(
    size: &[i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Filled<'_>> {
    constant("ones", 1, size, dtype, layout, (device, pin_memory))
}

/// `zeros` / `ones`: `value` in the requested dtype, else the default dtype.
fn constant<'a>(
    op: &'static str,
    value: i64,
    size: &'a [i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    placement: (Option<Device>, Option<bool>),
) -> Result<Filled<'a>> {
    let dtype = dtype.unwrap_or_else(crate::dtype::default_dtype);
    filled(op, size, Scalar::Int(value), dtype, layout, placement)
}

/// The rule of `full` (and of its `out=` form): non-negative sizes, the fill
/// value's dtype ([`dtype_of_fill`]) unless one is requested.
pub fn full<'a>(
    size: &'a [i64],
    fill_value: &Scalar,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Filled<'a>> {
    let dtype = dtype.unwrap_or_else(|| dtype_of_fill(fill_value));
    filled(
        "full",
        size,
        *fill_value,
        dtype,
        layout,
        (device, pin_memory),
    )
}

/// `empty_strided`'s arguments, checked.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct EmptyStrided<'a> {
    pub size: &'a [i64],
    pub stride: &'a [i64],
    /// The requested dtype, else the default one.
    pub dtype: DType,
    pub device: Option<Device>,
    pub pin_memory: Option<bool>,
}

/// The rule of `empty_strided`: a strided layout and one non-negative stride per
/// non-negative size ([`super::geometry::check_strided_args`]).
pub fn empty_strided<'a>(
    size: &'a [i64],
    stride: &'a [i64],
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<EmptyStrided<'a>> {
    const OP: &str = "empty_strided";
    check_layout(OP, layout)?;
    super::geometry::check_strided_args(OP, size, stride)?;
    Ok(EmptyStrided {
        size,
        stride,
        dtype: dtype.unwrap_or_else(crate::dtype::default_dtype),
        device,
        pin_memory,
    })
}

/// `arange.start_step`'s arguments, checked, with the result's dtype and length.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct Arange<'a> {
    pub start: &'a Scalar,
    pub end: &'a Scalar,
    pub step: &'a Scalar,
    /// The requested dtype, else int64 for integer bounds and the default float
    /// dtype otherwise.
    pub dtype: DType,
    pub device: Option<Device>,
    pub pin_memory: Option<bool>,
    /// Whether `start`, `end` and `step` all are integers (then an integer result
    /// is computed exactly, not in floating point).
    pub all_int: bool,
    /// The number of elements.
    pub len: i64,
}

/// The rule of `arange.start_step`: a non-zero step pointing from a finite
/// `start` towards a finite `end`, and a length a tensor can hold.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn arange_start_step<'a>(
    start: &'a Scalar,
    end: &'a Scalar,
    step: &'a Scalar,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Arange<'a>> {
    const OP: &str = "arange";
    check_layout(OP, layout)?;
    let int = |s: &Scalar| matches!(s, Scalar::Int(_) | Scalar::Bool(_));
    let all_int = int(start) && int(end) && int(step);
    let dtype = dtype.unwrap_or(if all_int {
        DType::I64
    } else {
        crate::dtype::default_dtype()
    });
    let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
    let fail = |why: String| Err(OpalError::msg(format!("{OP}: {why}")));
    if st == 0.0 {
        return fail("step must be nonzero".into());
    }
    if !s.is_finite() || !e.is_finite() {
        return fail(format!("unsupported range: {s} -> {e}"));
    }
    if (st > 0.0 && e < s) || (st < 0.0 && e > s) {
        return fail("upper bound and larger bound inconsistent with step sign".into());
    }
    let int_dtype = matches!(
        dtype,
        DType::I64 | DType::I32 | DType::I16 | DType::I8 | DType::U8
    );
    let n = if all_int && int_dtype {
        // Exact in i128: ceil((end - start) / step) cannot overflow there, and every
        // element start + i * step lies between start and end, so fits i64.
        let (s, e, st) = (
            start.to_i64() as i128,
            end.to_i64() as i128,
            step.to_i64() as i128,
        );
        let span = e - s;
        (span / st + i128::from(span % st != 0)).max(0)
    } else {
        let n = ((e - s) / st).ceil();
        if !(n >= 0.0 && n <= i64::MAX as f64) {
            return fail(format!(
                "invalid size, possible overflow? ({s} -> {e} by {st})"
            ));
        }
        n as i128
    };
    let Ok(len) = i64::try_from(n) else {
        return fail(format!(
            "{n} elements is more than a tensor can hold (invalid size, possible overflow?)"
        ));
    };
    Ok(Arange {
        start,
        end,
        step,
        dtype,
        device,
        pin_memory,
        all_int,
        len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arange_lengths_and_dtypes() {
        let a = |s: Scalar, e: Scalar, st: Scalar| {
            arange_start_step(&s, &e, &st, None, None, None, None).map(|a| (a.len, a.dtype))
        };
        assert_eq!(
            a(Scalar::Int(0), Scalar::Int(10), Scalar::Int(3)).unwrap(),
            (4, DType::I64)
        );
        assert_eq!(
            a(Scalar::Int(0), Scalar::Float(1.0), Scalar::Float(0.25))
                .unwrap()
                .0,
            4
        );
        assert_eq!(
            a(Scalar::Int(10), Scalar::Int(0), Scalar::Int(-3))
                .unwrap()
                .0,
            4
        );
        assert_eq!(
            a(Scalar::Float(0.0), Scalar::Float(1.0), Scalar::Float(0.1))
                .unwrap()
                .0,
            10
        );
        assert!(a(Scalar::Int(0), Scalar::Int(10), Scalar::Int(0)).is_err());
        assert!(a(Scalar::Int(10), Scalar::Int(0), Scalar::Int(1)).is_err());
        assert!(a(
            Scalar::Float(0.0),
            Scalar::Float(f64::INFINITY),
            Scalar::Int(1)
        )
        .is_err());
        let s = Scalar::Int(0);
        assert!(arange_start_step(
            &s,
            &s,
            &Scalar::Int(1),
            None,
            Some(Layout::Sparse),
            None,
            None
        )
        .is_err());
        assert!(empty_strided(&[2, 3], &[3], None, None, None, None).is_err());
        let f = full(&[2], &Scalar::Bool(true), None, None, None, None).unwrap();
        assert_eq!((f.dtype, f.op), (DType::Bool, "full"));
        assert!(zeros(&[2, -1], None, None, None, None).is_err());
        assert_eq!(
            ones(&[2], Some(DType::I32), None, None, None)
                .unwrap()
                .dtype,
            DType::I32
        );
        assert_eq!(
            empty_strided(&[2, 3], &[1, 2], Some(DType::F64), None, None, None)
                .unwrap()
                .dtype,
            DType::F64
        );
    }
}
