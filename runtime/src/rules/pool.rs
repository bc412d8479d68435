//! Pooling, padding and resampling geometry that every backend applies the same
//! way: expanding a per-dim parameter given once, checking kernel / stride /
//! padding / dilation, the pooled output size (with ceil mode's last-window rule),
//! the padded size and the output size of the `.vec` upsampling overloads.
//!
//! Owns: these formulas and their argument errors. Must not: allocate tensors,
//! read tensor data, or know any backend.

use crate::{OpalError, Result};

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
}
