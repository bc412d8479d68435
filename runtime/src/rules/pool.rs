//! Pooling geometry that every backend applies the same way: expanding a per-dim
//! parameter given once, checking kernel / stride / padding / dilation, the pooled
//! output size (with ceil mode's last-window rule), average and adaptive pooling's
//! windows; and the rules of the pooling ops proper (`max_pool2d_with_indices` and
//! its backward, `max_pool3d_with_indices`, `avg_pool2d`, `_adaptive_avg_pool2d`,
//! and `upsample_nearest2d`, which resizes the same planes), which take the
//! schema's arguments and return them checked with the result's sizes. Both
//! backends' YAML entries read `rule | kernel`, so those signatures are written here
//! only.
//!
//! Owns: these formulas and their argument errors. Must not: allocate tensors,
//! read tensor data, or know any backend (dtypes a backend cannot compute are its
//! kernel's refusal, not a rule).

use crate::{OpalError, Result, Tensor};

/// Expands a pooling parameter given for all `N` spatial dims (`[k]` means `k` in
/// every dim); an empty list takes `default` when there is one (an empty stride
/// means the kernel size, an empty padding means 0).
pub fn pool_param<const N: usize>(
    op: &str,
    name: &str,
    v: &[i64],
    default: Option<[i64; N]>,
) -> Result<[i64; N]> {
    match (v.len(), default) {
        (0, Some(d)) => Ok(d),
        (1, _) => Ok([v[0]; N]),
        (l, _) if l == N => {
            let mut out = [0; N];
            out.copy_from_slice(v);
            Ok(out)
        }
        _ => Err(OpalError::msg(format!(
            "{op}: {name} must either be a single int, or a tuple of {N} ints, but got {name}={v:?}"
        ))),
    }
}

/// Output length of one pooled dim; in ceil mode a last, partial window must
/// still start inside the input or its left padding.
pub fn pooling_output_size(
    input: i64,
    kernel: i64,
    pad: i64,
    stride: i64,
    dilation: i64,
    ceil_mode: bool,
) -> i64 {
    let span =
        input + 2 * pad - dilation * (kernel - 1) - 1 + if ceil_mode { stride - 1 } else { 0 };
    let mut out = span.div_euclid(stride) + 1;
    if ceil_mode && (out - 1) * stride >= input + pad {
        out -= 1;
    }
    out
}

/// A resolved pooling window over `N` spatial dims, with the output sizes it gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolWindow<const N: usize> {
    /// Window size per dim.
    pub kernel: [i64; N],
    /// Step per dim.
    pub stride: [i64; N],
    /// Implicit padding on both sides, per dim.
    pub padding: [i64; N],
    /// Tap spacing per dim.
    pub dilation: [i64; N],
    /// Pooled size per dim.
    pub out: [i64; N],
}

/// Resolves and checks max / average pooling parameters for `input` (the `N`
/// spatial sizes): positive kernel, stride and dilation, padding at most half the
/// kernel, and an output of at least one element per dim. `dilation` is `&[1]`
/// for average pooling.
pub fn pool_window<const N: usize>(
    op: &str,
    input: [i64; N],
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<PoolWindow<N>> {
    let kernel = pool_param::<N>(op, "kernel_size", kernel_size, None)?;
    let stride = pool_param(op, "stride", stride, Some(kernel))?;
    let padding = pool_param(op, "padding", padding, Some([0; N]))?;
    let dilation = pool_param(op, "dilation", dilation, Some([1; N]))?;
    for (name, v) in [
        ("kernel_size", kernel),
        ("stride", stride),
        ("dilation", dilation),
    ] {
        if v.iter().any(|&x| x <= 0) {
            return Err(OpalError::msg(format!(
                "{op}: {name} should be greater than zero, but got {name}={v:?}"
            )));
        }
    }
    for i in 0..N {
        if padding[i] < 0 || padding[i] > kernel[i] / 2 {
            return Err(OpalError::msg(format!(
                "{op}: pad should be at most half of effective kernel size, but got pad={}, kernel_size={} and dilation={}",
                padding[i], kernel[i], dilation[i]
            )));
        }
    }
    let mut out = [0; N];
    for i in 0..N {
        out[i] = pooling_output_size(
            input[i],
            kernel[i],
            padding[i],
            stride[i],
            dilation[i],
            ceil_mode,
        );
    }
    if out.iter().any(|&o| o < 1) {
        return Err(OpalError::shape(format!(
            "{op}: given input size {input:?}, calculated output size {out:?} is too small"
        )));
    }
    Ok(PoolWindow {
        kernel,
        stride,
        padding,
        dilation,
        out,
    })
}

/// The windows of average pooling along one dim of size `n` pooled to `out`:
/// per output, the input range `start..end` it averages (clipped to the input)
/// and the divisor (the window clipped to the padded input when
/// `count_include_pad`, else the clipped range's length).
pub fn avg_pool_windows(
    n: i64,
    out: i64,
    kernel: i64,
    stride: i64,
    pad: i64,
    count_include_pad: bool,
) -> Vec<(i64, i64, i64)> {
    (0..out)
        .map(|o| {
            let start = o * stride - pad;
            let end = (start + kernel).min(n + pad);
            let size = end - start;
            let (s, e) = (start.max(0), end.min(n));
            (s, e, if count_include_pad { size } else { e - s })
        })
        .collect()
}

/// The input range `start..end` output `o` of adaptive pooling averages when a
/// dim of size `n` is pooled to `out`: `floor(o * n / out) .. ceil((o + 1) * n / out)`.
pub fn adaptive_window(o: i64, n: i64, out: i64) -> (i64, i64) {
    ((o * n) / out, ((o + 1) * n + out - 1) / out)
}

/// The `(planes, spatial sizes)` of a pooling input over `N` spatial dims: rank
/// `N + 1` (unbatched) or `N + 2`, every non-batch dim non-empty.
pub fn pool_input<const N: usize>(op: &str, input: &[i64]) -> Result<(usize, [i64; N])> {
    let nd = input.len();
    if !(nd == N + 1 || nd == N + 2) || input[nd - N - 1..].contains(&0) {
        return Err(OpalError::shape(format!(
            "{op}: non-empty {}D or {}D (batch mode) tensor expected for input, but got input of size {input:?}",
            N + 1,
            N + 2
        )));
    }
    let mut spatial = [0; N];
    spatial.copy_from_slice(&input[nd - N..]);
    let planes = input[..nd - N].iter().product::<i64>() as usize;
    Ok((planes, spatial))
}

/// The input's leading (batch and channel) dims followed by `out`.
fn pooled_sizes(input: &[i64], out: &[i64]) -> Vec<i64> {
    let mut sizes = input[..input.len() - out.len()].to_vec();
    sizes.extend_from_slice(out);
    sizes
}

/// A max / average pooling op's arguments, checked: the input, its window, and the
/// result's sizes.
#[derive(Clone, Debug)]
pub struct Pooling<'a, const N: usize> {
    /// `self`.
    pub input: &'a Tensor,
    /// The input's `N` spatial sizes.
    pub spatial: [i64; N],
    /// Planes (or volumes): the product of the leading dims.
    pub planes: usize,
    /// The resolved window and the pooled spatial sizes.
    pub window: PoolWindow<N>,
    /// The result's sizes: the input's leading dims, then `window.out`.
    pub sizes: Vec<i64>,
}

impl<'a, const N: usize> Pooling<'a, N> {
    /// Checks `input` and resolves its window.
    #[allow(clippy::too_many_arguments, reason = "the schemas' pooling arguments")]
    fn new(
        op: &str,
        input: &'a Tensor,
        kernel_size: &[i64],
        stride: &[i64],
        padding: &[i64],
        dilation: &[i64],
        ceil_mode: bool,
    ) -> Result<Self> {
        super::check_defined(op, &[input])?;
        let (planes, spatial) = pool_input::<N>(op, input.sizes())?;
        let window = pool_window::<N>(
            op,
            spatial,
            kernel_size,
            stride,
            padding,
            dilation,
            ceil_mode,
        )?;
        Ok(Pooling {
            input,
            spatial,
            planes,
            sizes: pooled_sizes(input.sizes(), &window.out),
            window,
        })
    }
}

/// The rule of `max_pool2d_with_indices` (and of its `out=` form).
pub fn max_pool2d_with_indices<'a>(
    self_: &'a Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<Pooling<'a, 2>> {
    Pooling::new(
        "max_pool2d_with_indices",
        self_,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    )
}

/// The rule of `max_pool3d_with_indices`.
pub fn max_pool3d_with_indices<'a>(
    self_: &'a Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<Pooling<'a, 3>> {
    Pooling::new(
        "max_pool3d_with_indices",
        self_,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    )
}

/// `max_pool2d_with_indices_backward`'s arguments, checked.
#[derive(Clone, Debug)]
pub struct MaxPoolBackward<'a, const N: usize> {
    /// The gradient of the pooled values, of the forward result's sizes.
    pub grad_output: &'a Tensor,
    /// The forward's int64 indices, of the forward result's sizes.
    pub indices: &'a Tensor,
    /// The forward's arguments (`input` is the forward's `self`).
    pub pool: Pooling<'a, N>,
}

/// The rule of `max_pool2d_with_indices_backward`: the forward's, with
/// `grad_output` and int64 `indices` of the forward result's sizes.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn max_pool2d_with_indices_backward<'a>(
    grad_output: &'a Tensor,
    self_: &'a Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    indices: &'a Tensor,
) -> Result<MaxPoolBackward<'a, 2>> {
    const OP: &str = "max_pool2d_with_indices_backward";
    super::check_defined(OP, &[grad_output, indices])?;
    let pool = Pooling::new(OP, self_, kernel_size, stride, padding, dilation, ceil_mode)?;
    for (what, t) in [("grad_output", grad_output), ("indices", indices)] {
        if t.sizes() != pool.sizes.as_slice() {
            return Err(OpalError::shape(format!(
                "{OP}: expected {what} of the pooled size {:?}, but got {:?}",
                pool.sizes,
                t.sizes()
            )));
        }
    }
    if indices.dtype() != crate::DType::I64 {
        return Err(OpalError::msg(format!(
            "{OP}: expected indices of dtype int64, but got {}",
            indices.dtype()
        )));
    }
    Ok(MaxPoolBackward {
        grad_output,
        indices,
        pool,
    })
}

/// `avg_pool2d`'s arguments, checked.
#[derive(Clone, Debug)]
pub struct AvgPool2d<'a> {
    /// The input and its window (dilation 1).
    pub pool: Pooling<'a, 2>,
    /// Whether the padding counts towards a window's divisor.
    pub count_include_pad: bool,
    /// The divisor of every window when given (never 0).
    pub divisor_override: Option<i64>,
}

/// The rule of `avg_pool2d` (and of its `out=` form): the pooling window, and a
/// non-zero `divisor_override`.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn avg_pool2d<'a>(
    self_: &'a Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<AvgPool2d<'a>> {
    const OP: &str = "avg_pool2d";
    if divisor_override == Some(0) {
        return Err(OpalError::msg(format!("{OP}: divisor must be not zero")));
    }
    let pool = Pooling::new(OP, self_, kernel_size, stride, padding, &[1], ceil_mode)?;
    Ok(AvgPool2d {
        pool,
        count_include_pad,
        divisor_override,
    })
}

/// The arguments of an op that resizes the last two dims of its input to
/// `output_size` (`_adaptive_avg_pool2d`, `upsample_nearest2d`), checked.
#[derive(Clone, Debug)]
pub struct Resize2d<'a> {
    /// `self`.
    pub input: &'a Tensor,
    /// Planes: the product of the leading dims.
    pub planes: usize,
    /// The input's `[H, W]`.
    pub spatial: [i64; 2],
    /// `output_size`, `[H_out, W_out]`.
    pub out: [i64; 2],
    /// The result's sizes: the input's leading dims, then `out`.
    pub sizes: Vec<i64>,
    /// `scales_h`, `scales_w` (`upsample_nearest2d`; `None` for adaptive pooling).
    pub scales: [Option<f64>; 2],
}

impl<'a> Resize2d<'a> {
    /// Checks `input`'s planes and sizes the result.
    fn new(op: &str, input: &'a Tensor, out: [i64; 2], scales: [Option<f64>; 2]) -> Result<Self> {
        super::check_defined(op, &[input])?;
        let (planes, spatial) = pool_input::<2>(op, input.sizes())?;
        Ok(Resize2d {
            input,
            planes,
            spatial,
            out,
            sizes: pooled_sizes(input.sizes(), &out),
            scales,
        })
    }
}

/// `output_size` of a 2-d resize: exactly two sizes, each at least `min`.
fn output_size_2d(op: &str, output_size: &[i64], min: i64) -> Result<[i64; 2]> {
    match *output_size {
        [h, w] if h >= min && w >= min => Ok([h, w]),
        [_, _] => Err(OpalError::msg(format!(
            "{op}: output sizes must be at least {min}, but got output_size {output_size:?}"
        ))),
        _ => Err(OpalError::msg(format!(
            "{op}: output_size must be 2, but got {} values",
            output_size.len()
        ))),
    }
}

/// The rule of `_adaptive_avg_pool2d` (and of its `out=` form): a 3-d or 4-d
/// input with non-empty planes and two non-negative output sizes.
pub fn _adaptive_avg_pool2d<'a>(self_: &'a Tensor, output_size: &[i64]) -> Result<Resize2d<'a>> {
    const OP: &str = "_adaptive_avg_pool2d";
    Resize2d::new(OP, self_, output_size_2d(OP, output_size, 0)?, [None, None])
}

/// The rule of `upsample_nearest2d` (and of its `out=` form): a 4-d input with
/// non-empty planes and two positive output sizes.
pub fn upsample_nearest2d<'a>(
    self_: &'a Tensor,
    output_size: &[i64],
    scales_h: Option<f64>,
    scales_w: Option<f64>,
) -> Result<Resize2d<'a>> {
    const OP: &str = "upsample_nearest2d";
    let out = output_size_2d(OP, output_size, 1)?;
    if self_.dim() != 4 {
        return Err(OpalError::shape(format!(
            "{OP}: It is expected input to be a 4-D tensor, but got {:?}",
            self_.sizes()
        )));
    }
    Resize2d::new(OP, self_, out, [scales_h, scales_w])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_sizes_and_checks() {
        assert_eq!(pooling_output_size(8, 3, 1, 2, 1, false), 4);
        assert_eq!(pooling_output_size(8, 3, 1, 2, 1, true), 5);
        assert_eq!(pooling_output_size(5, 2, 0, 2, 1, true), 3);
        assert_eq!(pooling_output_size(5, 2, 0, 2, 1, false), 2);
        let w = pool_window::<2>("p", [7, 7], &[3], &[2, 2], &[1], &[], true).unwrap();
        assert_eq!((w.stride, w.out), ([2, 2], [4, 4]));
        let w = pool_window::<3>("p", [4, 6, 8], &[2], &[], &[], &[1], false).unwrap();
        assert_eq!((w.stride, w.out), ([2, 2, 2], [2, 3, 4]));
        let e = pool_window::<2>("max_pool2d", [4, 4], &[2], &[], &[2], &[1], false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_pool2d") && e.contains("pad=2"), "{e}");
        let e = pool_window::<1>("avg_pool1d", [4], &[0], &[], &[], &[1], false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("kernel_size=[0]"), "{e}");
        assert!(pool_window::<2>("p", [1, 1], &[2], &[], &[], &[1], false).is_err());
        assert!(pool_param::<3>("p", "stride", &[1, 2], None).is_err());
        assert_eq!(
            avg_pool_windows(4, 3, 3, 2, 1, true),
            vec![(0, 2, 3), (1, 4, 3), (3, 4, 2)]
        );
        assert_eq!(avg_pool_windows(4, 2, 3, 2, 1, false)[0], (0, 2, 2));
        assert_eq!(adaptive_window(1, 5, 3), (1, 4));
    }

    #[test]
    fn pooling_inputs() {
        assert_eq!(pool_input::<2>("p", &[2, 3, 8, 8]).unwrap(), (6, [8, 8]));
        assert_eq!(pool_input::<2>("p", &[3, 7, 7]).unwrap(), (3, [7, 7]));
        assert_eq!(pool_input::<3>("p", &[2, 4, 6, 8]).unwrap(), (2, [4, 6, 8]));
        let e = pool_input::<2>("max_pool2d", &[4, 4])
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_pool2d") && e.contains("3D or 4D"), "{e}");
        assert!(pool_input::<2>("p", &[1, 0, 4, 4]).is_err());
        assert_eq!(pool_input::<2>("p", &[0, 2, 4, 4]).unwrap().0, 0);
        assert_eq!(pooled_sizes(&[2, 3, 8, 8], &[4, 4]), vec![2, 3, 4, 4]);
        assert!(output_size_2d("a", &[2], 0).is_err());
        assert!(output_size_2d("a", &[0, 2], 1).is_err());
        assert_eq!(output_size_2d("a", &[0, 2], 0).unwrap(), [0, 2]);
    }
}
