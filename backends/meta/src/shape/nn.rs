//! Output sizes of neural-network ops: convolution (plain and transposed, grouped,
//! dilated), max / average / adaptive pooling, nearest upsampling, layer and batch
//! norm statistics, and the losses.
//!
//! Owns: the size formulas and argument checks of these ops. Must not: allocate,
//! pick dtypes beyond what the op fixes, or know about devices.

use super::fail;
use opal::Result;

/// Expands a per-spatial-dim parameter given once (`[2]`) to `n` dims (`[2, 2]`).
pub fn expand_param(op: &str, name: &str, v: &[i64], n: usize) -> Result<Vec<i64>> {
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v.to_vec()),
        l => Err(fail(
            op,
            format!("expected {name} to be a single integer value or a list of {n} values to match the convolution dimensions, but got {name}={v:?} ({l} values)"),
        )),
    }
}

/// Arguments of `convolution` beyond the two tensors.
#[derive(Clone, Debug)]
pub struct ConvParams<'a> {
    /// Step per spatial dim.
    pub stride: &'a [i64],
    /// Implicit zero padding per spatial dim.
    pub padding: &'a [i64],
    /// Kernel element spacing per spatial dim.
    pub dilation: &'a [i64],
    /// Transposed (fractionally strided) convolution.
    pub transposed: bool,
    /// Extra size added to one side of a transposed convolution's output.
    pub output_padding: &'a [i64],
    /// Number of channel groups.
    pub groups: i64,
}

/// Output sizes of `convolution` for `input [N, C, *spatial]` and `weight`
/// (`[C_out, C/groups, *k]`, transposed: `[C, C_out/groups, *k]`).
pub fn conv_output_sizes(
    op: &str,
    input: &[i64],
    weight: &[i64],
    p: &ConvParams<'_>,
) -> Result<Vec<i64>> {
    if weight.len() < 3 {
        return Err(fail(
            op,
            format!(
                "weight should have at least three dimensions, got {}",
                weight.len()
            ),
        ));
    }
    let k = weight.len() - 2;
    if input.len() != k + 2 {
        return Err(fail(
            op,
            format!("expected {}-dimensional input for {}-dimensional weight {weight:?}, but got {}-dimensional input of size {input:?}", k + 2, k + 2, input.len()),
        ));
    }
    let stride = expand_param(op, "stride", p.stride, k)?;
    let padding = expand_param(op, "padding", p.padding, k)?;
    let dilation = expand_param(op, "dilation", p.dilation, k)?;
    let out_pad = expand_param(op, "output_padding", p.output_padding, k)?;
    if p.groups <= 0 {
        return Err(fail(op, "non-positive groups is not supported"));
    }
    if stride.iter().any(|&s| s <= 0) {
        return Err(fail(op, "non-positive stride is not supported"));
    }
    if dilation.iter().any(|&d| d <= 0) {
        return Err(fail(op, "dilation should be greater than zero"));
    }
    if padding.iter().any(|&x| x < 0) {
        return Err(fail(op, "negative padding is not supported"));
    }
    if out_pad.iter().any(|&x| x < 0) {
        return Err(fail(op, "negative output_padding is not supported"));
    }
    let mut out = vec![input[0]];
    if p.transposed {
        if input[1] != weight[0] {
            return Err(fail(
                op,
                format!("given transposed=1, weight of size {weight:?}, expected input{input:?} to have {} channels, but got {} channels instead", weight[0], input[1]),
            ));
        }
        for i in 0..k {
            if out_pad[i] >= stride[i].max(dilation[i]) {
                return Err(fail(
                    op,
                    "output padding must be smaller than either stride or dilation",
                ));
            }
        }
        out.push(weight[1] * p.groups);
        for i in 0..k {
            out.push(
                (input[i + 2] - 1) * stride[i] - 2 * padding[i]
                    + dilation[i] * (weight[i + 2] - 1)
                    + out_pad[i]
                    + 1,
            );
        }
    } else {
        if weight[0] % p.groups != 0 {
            return Err(fail(
                op,
                format!("given groups={}, expected weight to be divisible by {} at dimension 0, but got weight of size {weight:?} instead", p.groups, p.groups),
            ));
        }
        if input[1] != weight[1] * p.groups {
            return Err(fail(
                op,
                format!("given groups={}, weight of size {weight:?}, expected input{input:?} to have {} channels, but got {} channels instead", p.groups, weight[1] * p.groups, input[1]),
            ));
        }
        out.push(weight[0]);
        for i in 0..k {
            let padded = input[i + 2] + 2 * padding[i];
            let extent = dilation[i] * (weight[i + 2] - 1) + 1;
            if padded < extent {
                return Err(fail(
                    op,
                    format!("calculated padded input size per channel: {padded}. Kernel size: {extent}. Kernel size can't be greater than actual input size"),
                ));
            }
            out.push((padded - extent) / stride[i] + 1);
        }
    }
    if out[2..].iter().any(|&s| s <= 0) {
        return Err(fail(
            op,
            format!("calculated output size {out:?} is too small"),
        ));
    }
    Ok(out)
}

/// Output sizes of 2-d max / average pooling over a 3-d `[C, H, W]` or 4-d
/// `[N, C, H, W]` input (the window rule is `opal::rules::pool`'s).
#[allow(clippy::too_many_arguments)]
pub fn pool2d_output_sizes(
    op: &str,
    input: &[i64],
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<Vec<i64>> {
    if !(input.len() == 3 || input.len() == 4) || input[input.len() - 3..].contains(&0) {
        return Err(fail(
            op,
            format!("expected 3D or 4D (batch mode) tensor with non-zero sizes for channels and spatial dims, got {input:?}"),
        ));
    }
    let n = input.len();
    let w = opal::rules::pool::pool_window::<2>(
        op,
        [input[n - 2], input[n - 1]],
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    )?;
    let mut out = input[..n - 2].to_vec();
    out.extend(w.out);
    Ok(out)
}

/// Output sizes of a 2-d op that replaces the last two dims by `output_size`
/// (`_adaptive_avg_pool2d`, `upsample_nearest2d`); `min_rank` is 3 or 4.
pub fn resize2d_sizes(
    op: &str,
    input: &[i64],
    output_size: &[i64],
    min_rank: usize,
) -> Result<Vec<i64>> {
    if output_size.len() != 2 {
        return Err(fail(
            op,
            format!("output_size must be 2, got {output_size:?}"),
        ));
    }
    if input.len() < min_rank || input.len() > 4 || input[1..].contains(&0) {
        return Err(fail(
            op,
            format!("expected {min_rank}D or 4D input with non-zero sizes for non-batch dims, got {input:?}"),
        ));
    }
    if output_size.iter().any(|&s| s <= 0) {
        return Err(fail(
            op,
            format!("output sizes must be greater than 0, got {output_size:?}"),
        ));
    }
    let mut out = input[..input.len() - 2].to_vec();
    out.extend_from_slice(output_size);
    Ok(out)
}

/// `native_layer_norm`: `(output, mean/rstd)` sizes; the statistics keep the
/// leading dims and have 1 for each normalized dim.
pub fn layer_norm_sizes(
    op: &str,
    input: &[i64],
    normalized: &[i64],
    weight: Option<&[i64]>,
    bias: Option<&[i64]>,
) -> Result<(Vec<i64>, Vec<i64>)> {
    if normalized.is_empty() {
        return Err(fail(
            op,
            "expected normalized_shape to be at least 1-dimensional",
        ));
    }
    for (name, t) in [("weight", weight), ("bias", bias)] {
        if let Some(s) = t {
            if s != normalized {
                return Err(fail(
                    op,
                    format!("expected {name} to be of same shape as normalized_shape, but got {name} of shape {s:?} and normalized_shape = {normalized:?}"),
                ));
            }
        }
    }
    if input.len() < normalized.len() || &input[input.len() - normalized.len()..] != normalized {
        return Err(fail(
            op,
            format!("given normalized_shape={normalized:?}, expected input with shape [*, {}], but got input of size {input:?}", normalized.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")),
        ));
    }
    let axis = input.len() - normalized.len();
    let mut stats = input[..axis].to_vec();
    stats.extend(std::iter::repeat_n(1, normalized.len()));
    Ok((input.to_vec(), stats))
}

/// `native_batch_norm`: the channel count (dim 1), checking every per-channel
/// tensor has that many elements.
pub fn batch_norm_channels(
    op: &str,
    input: &[i64],
    per_channel: &[(&str, Option<i64>)],
) -> Result<i64> {
    if input.len() < 2 {
        return Err(fail(
            op,
            format!("expected input with at least 2 dims, got {input:?}"),
        ));
    }
    let c = input[1];
    for (name, numel) in per_channel {
        if let Some(n) = numel {
            if *n != c {
                return Err(fail(
                    op,
                    format!("{name} should contain {c} elements not {n}"),
                ));
            }
        }
    }
    Ok(c)
}

/// `nll_loss_forward`: `(output, total_weight)` sizes for `self [N, C]` or `[C]`.
pub fn nll_loss_sizes(
    op: &str,
    input: &[i64],
    target: &[i64],
    weight_numel: Option<i64>,
    reduction: i64,
) -> Result<(Vec<i64>, Vec<i64>)> {
    if input.is_empty() || input.len() > 2 {
        return Err(fail(
            op,
            format!("input tensor should be 1D or 2D, got {input:?}"),
        ));
    }
    if target.len() > 1 {
        return Err(fail(
            op,
            format!("0D or 1D target tensor expected, multi-target not supported (got {target:?})"),
        ));
    }
    let batched = input.len() == 2;
    if batched != (target.len() == 1) || (batched && input[0] != target[0]) {
        return Err(fail(
            op,
            format!(
                "expected input batch_size ({}) to match target batch_size ({})",
                if batched { input[0] } else { 1 },
                target.first().copied().unwrap_or(1)
            ),
        ));
    }
    let classes = input[input.len() - 1];
    if let Some(w) = weight_numel {
        if w != classes {
            return Err(fail(op, format!("weight tensor should be defined either for all {classes} classes or no classes but got weight tensor of shape: [{w}]")));
        }
    }
    check_reduction(op, reduction)?;
    let out = if reduction == 0 && batched {
        vec![input[0]]
    } else {
        Vec::new()
    };
    Ok((out, Vec::new()))
}

/// Loss reductions: 0 none, 1 mean, 2 sum.
pub fn check_reduction(op: &str, reduction: i64) -> Result<()> {
    if (0..=2).contains(&reduction) {
        Ok(())
    } else {
        Err(fail(
            op,
            format!("{reduction} is not a valid value for reduction"),
        ))
    }
}

/// Sizes of an elementwise loss: the broadcast shape without reduction, else a scalar.
pub fn pointwise_loss_sizes(
    op: &str,
    input: &[i64],
    target: &[i64],
    reduction: i64,
) -> Result<Vec<i64>> {
    check_reduction(op, reduction)?;
    let shape = opal::rules::broadcast_shapes(op, &[input, target])?;
    Ok(if reduction == 0 { shape } else { Vec::new() })
}

/// `embedding`: `indices.shape + [embedding_dim]` for a 2-d weight.
pub fn embedding_sizes(op: &str, weight: &[i64], indices: &[i64]) -> Result<Vec<i64>> {
    if weight.len() != 2 {
        return Err(fail(op, format!("'weight' must be 2-D, got {weight:?}")));
    }
    let mut out = indices.to_vec();
    out.push(weight[1]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(
        stride: &[i64],
        padding: &[i64],
        dilation: &[i64],
        transposed: bool,
        groups: i64,
    ) -> ConvParams<'static> {
        ConvParams {
            stride: Box::leak(stride.to_vec().into_boxed_slice()),
            padding: Box::leak(padding.to_vec().into_boxed_slice()),
            dilation: Box::leak(dilation.to_vec().into_boxed_slice()),
            transposed,
            output_padding: &[0],
            groups,
        }
    }

    #[test]
    fn convolution_sizes() {
        let p = conv(&[1, 1], &[0, 0], &[1, 1], false, 1);
        assert_eq!(
            conv_output_sizes("c", &[2, 3, 8, 8], &[4, 3, 3, 3], &p).unwrap(),
            vec![2, 4, 6, 6]
        );
        let p = conv(&[2, 2], &[1, 1], &[1, 1], false, 1);
        assert_eq!(
            conv_output_sizes("c", &[2, 3, 8, 8], &[4, 3, 3, 3], &p).unwrap(),
            vec![2, 4, 4, 4]
        );
        let p = conv(&[1, 2], &[1, 0], &[1, 1], false, 2);
        assert_eq!(
            conv_output_sizes("c", &[1, 4, 6, 6], &[6, 2, 3, 3], &p).unwrap(),
            vec![1, 6, 6, 2]
        );
        let p = conv(&[1, 1], &[1, 2], &[2, 1], false, 1);
        assert_eq!(
            conv_output_sizes("c", &[2, 3, 8, 8], &[4, 3, 2, 2], &p).unwrap(),
            vec![2, 4, 8, 11]
        );
        let p = conv(&[2], &[1], &[1], true, 1);
        assert_eq!(
            conv_output_sizes("c", &[1, 4, 5, 5], &[4, 2, 3, 3], &p).unwrap(),
            vec![1, 2, 9, 9]
        );
        let p = conv(&[1], &[0], &[1], false, 1);
        assert!(conv_output_sizes("convolution", &[1, 3, 2, 2], &[4, 3, 3, 3], &p).is_err());
        assert!(conv_output_sizes("convolution", &[1, 2, 5, 5], &[4, 3, 3, 3], &p).is_err());
    }

    #[test]
    fn pooling_sizes() {
        assert_eq!(
            pool2d_output_sizes("p", &[2, 3, 8, 8], &[2], &[], &[0], &[1], false).unwrap(),
            vec![2, 3, 4, 4]
        );
        assert_eq!(
            pool2d_output_sizes("p", &[3, 7, 7], &[3, 3], &[2, 2], &[1, 1], &[1, 1], true).unwrap(),
            vec![3, 4, 4]
        );
        assert!(
            pool2d_output_sizes("max_pool2d", &[1, 4, 4], &[2], &[], &[2], &[1], false).is_err()
        );
        assert!(pool2d_output_sizes("max_pool2d", &[4, 4], &[2], &[], &[], &[1], false).is_err());
    }

    #[test]
    fn norm_and_loss_sizes() {
        let (o, s) = layer_norm_sizes("ln", &[2, 3, 4], &[3, 4], None, None).unwrap();
        assert_eq!((o, s), (vec![2, 3, 4], vec![2, 1, 1]));
        assert!(layer_norm_sizes("ln", &[2, 3, 4], &[3], None, None).is_err());
        assert_eq!(
            nll_loss_sizes("nll", &[6, 5], &[6], None, 0).unwrap().0,
            vec![6]
        );
        assert_eq!(
            nll_loss_sizes("nll", &[6, 5], &[6], Some(5), 1).unwrap().0,
            Vec::<i64>::new()
        );
        assert!(nll_loss_sizes("nll", &[6, 5], &[5], None, 1).is_err());
        assert_eq!(
            batch_norm_channels("bn", &[2, 3, 8], &[("weight", Some(3))]).unwrap(),
            3
        );
        assert!(batch_norm_channels("bn", &[2, 3, 8], &[("weight", Some(4))]).is_err());
    }
}
