//! `convolution`'s and `convolution_backward`'s argument rules, shared by the CPU
//! and Meta kernels: the per-dim parameters expanded to every spatial dim and
//! checked, channel counts against `groups`, one dtype for every tensor, the bias,
//! and the output sizes of a plain or transposed convolution. The two ops' rules
//! proper ([`convolution`], [`convolution_backward`]) take the schema's arguments
//! and return them checked; both backends' YAML entries read `rule | kernel`, so the
//! ops' signatures are written here only.
//!
//! Owns: these checks, their errors (PyTorch's wording) and the output-size
//! formula. Must not: allocate tensors, read their data, or refuse what only one
//! backend cannot compute (the CPU kernel's dtypes and ranks are its own).

use crate::{DType, OpalError, Result, Tensor};

/// `convolution`'s arguments, checked, with every per-dim parameter expanded to
/// one value per spatial dim.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct Convolution<'a> {
    pub input: &'a Tensor,
    pub weight: &'a Tensor,
    pub bias: Option<&'a Tensor>,
    pub stride: Vec<i64>,
    pub padding: Vec<i64>,
    pub dilation: Vec<i64>,
    pub transposed: bool,
    pub output_padding: Vec<i64>,
    pub groups: i64,
    /// The dtype every tensor has.
    pub dtype: DType,
    /// The result's sizes, `[N, C_out, *spatial]`.
    pub sizes: Vec<i64>,
}

/// Expands a per-spatial-dim parameter given once (`[2]`) to `n` dims (`[2, 2]`).
fn expand(op: &str, name: &str, v: &[i64], n: usize) -> Result<Vec<i64>> {
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v.to_vec()),
        l => Err(OpalError::msg(format!(
            "{op}: expected {name} to be a single integer value or a list of {n} values to match the convolution dimensions, but got {name}={v:?} ({l} values)"
        ))),
    }
}

/// Every tensor of `ts` has the first one's dtype (PyTorch's "Input type (float)
/// and weight type (double) should be the same").
fn same_dtype(op: &str, ts: &[(&str, Option<&Tensor>)]) -> Result<DType> {
    let first = ts[0].1.map_or(DType::F32, |t| t.dtype());
    for (name, t) in ts {
        if let Some(t) = t {
            if t.dtype() != first {
                return Err(OpalError::msg(format!(
                    "{op}: Input type ({first}) and {name} type ({}) should be the same",
                    t.dtype()
                )));
            }
        }
    }
    Ok(first)
}

/// The rule of `convolution` (and of its `out=` form).
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn convolution<'a>(
    input: &'a Tensor,
    weight: &'a Tensor,
    bias: Option<&'a Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
) -> Result<Convolution<'a>> {
    const OP: &str = "convolution";
    let mut ts = vec![input, weight];
    ts.extend(bias);
    super::check_defined(OP, &ts)?;
    let dtype = same_dtype(
        OP,
        &[
            ("input", Some(input)),
            ("weight", Some(weight)),
            ("bias", bias),
        ],
    )?;
    let conv = checked(
        OP,
        input,
        weight,
        [stride, padding, dilation, output_padding],
        transposed,
        groups,
        dtype,
    )?;
    if let Some(b) = bias {
        let cout = conv.sizes[1];
        if b.sizes() != [cout] {
            return Err(OpalError::shape(format!(
                "{OP}: Given weight of size {:?}, expected bias to be 1-dimensional with {cout} elements, but got bias of size {:?} instead",
                weight.sizes(),
                b.sizes()
            )));
        }
    }
    Ok(Convolution { bias, ..conv })
}

/// `convolution_backward`'s arguments, checked.
#[derive(Clone, Debug)]
pub struct ConvolutionBackward<'a> {
    /// The gradient of the forward result, of the forward result's sizes.
    pub grad_output: &'a Tensor,
    /// The forward's arguments (without a bias).
    pub conv: Convolution<'a>,
    /// `bias_sizes` as given (PyTorch's CPU kernel does not read it: the bias
    /// gradient has one entry per output channel).
    pub bias_sizes: Option<&'a [i64]>,
    /// Which of `(grad_input, grad_weight, grad_bias)` to compute.
    pub output_mask: [bool; 3],
}

/// The rule of `convolution_backward` (and of its `out=` form): the forward's, a
/// `grad_output` of the forward result's sizes and dtype, and three mask entries.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn convolution_backward<'a>(
    grad_output: &'a Tensor,
    input: &'a Tensor,
    weight: &'a Tensor,
    bias_sizes: Option<&'a [i64]>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
    output_mask: &[bool],
) -> Result<ConvolutionBackward<'a>> {
    const OP: &str = "convolution_backward";
    super::check_defined(OP, &[grad_output, input, weight])?;
    let output_mask: [bool; 3] = output_mask.try_into().map_err(|_| {
        OpalError::msg(format!(
            "{OP}: output_mask must have 3 entries, got {}",
            output_mask.len()
        ))
    })?;
    let dtype = same_dtype(
        OP,
        &[
            ("grad_output", Some(grad_output)),
            ("input", Some(input)),
            ("weight", Some(weight)),
        ],
    )?;
    let conv = checked(
        OP,
        input,
        weight,
        [stride, padding, dilation, output_padding],
        transposed,
        groups,
        dtype,
    )?;
    if grad_output.sizes() != conv.sizes.as_slice() {
        return Err(OpalError::shape(format!(
            "{OP}: grad_output of size {:?} does not match the convolution output size {:?}",
            grad_output.sizes(),
            conv.sizes
        )));
    }
    Ok(ConvolutionBackward {
        grad_output,
        conv,
        bias_sizes,
        output_mask,
    })
}

/// The checks both ops share and the output sizes; `params` are stride, padding,
/// dilation and output padding as given.
fn checked<'a>(
    op: &str,
    input: &'a Tensor,
    weight: &'a Tensor,
    [stride, padding, dilation, output_padding]: [&[i64]; 4],
    transposed: bool,
    groups: i64,
    dtype: DType,
) -> Result<Convolution<'a>> {
    let (is, ws) = (input.sizes(), weight.sizes());
    let nd = ws.len();
    if nd < 3 {
        return Err(OpalError::shape(format!(
            "{op}: weight should have at least three dimensions, got weight of size {ws:?}"
        )));
    }
    if is.len() != nd {
        return Err(OpalError::shape(format!(
            "{op}: Expected {nd}-dimensional input for {nd}-dimensional weight {ws:?}, but got {}-dimensional input of size {is:?} instead",
            is.len()
        )));
    }
    let k = nd - 2;
    let stride = expand(op, "stride", stride, k)?;
    let padding = expand(op, "padding", padding, k)?;
    let dilation = expand(op, "dilation", dilation, k)?;
    let output_padding = expand(op, "output_padding", output_padding, k)?;
    let refuse = |what: &str| Err(OpalError::msg(format!("{op}: {what}")));
    if groups <= 0 {
        return refuse("non-positive groups is not supported");
    }
    if stride.iter().any(|&s| s <= 0) {
        return refuse("non-positive stride is not supported");
    }
    if dilation.iter().any(|&d| d <= 0) {
        return refuse("dilation should be greater than zero");
    }
    if padding.iter().any(|&p| p < 0) {
        return refuse("negative padding is not supported");
    }
    if output_padding.iter().any(|&p| p < 0) {
        return refuse("negative output_padding is not supported");
    }
    // The extra rows of a transposed output must lie within one stride (or one
    // dilated kernel tap), else they would be rows no input reaches.
    let reachable = (0..k).all(|d| output_padding[d] < stride[d].max(dilation[d]));
    if transposed && !reachable {
        return refuse(&format!(
            "output padding must be smaller than either stride or dilation, but got output_padding={output_padding:?}, stride={stride:?}, dilation={dilation:?}"
        ));
    }
    let in_channels = if transposed { ws[0] } else { ws[1] * groups };
    if is[1] != in_channels || (transposed && ws[0] % groups != 0) {
        return Err(OpalError::shape(format!(
            "{op}: Given groups={groups}, weight of size {ws:?}, expected input{is:?} to have {in_channels} channels, but got {} channels instead",
            is[1]
        )));
    }
    if !transposed && ws[0] % groups != 0 {
        return Err(OpalError::shape(format!(
            "{op}: Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight of size {ws:?} instead"
        )));
    }
    let cout = if transposed { ws[1] * groups } else { ws[0] };
    let mut sizes = vec![is[0], cout];
    for d in 0..k {
        // In i128, where sizes, strides, padding and dilation from i64 cannot
        // overflow; results beyond i64 are refused below.
        let w = |x: i64| x as i128;
        let extent = w(dilation[d]) * (w(ws[d + 2].max(1)) - 1) + 1;
        let o = if transposed {
            (w(is[d + 2]) - 1) * w(stride[d]) - 2 * w(padding[d]) + extent + w(output_padding[d])
        } else {
            let padded = w(is[d + 2]) + 2 * w(padding[d]);
            if padded < extent {
                return Err(OpalError::shape(format!(
                    "{op}: Calculated padded input size per channel: ({padded}). Kernel size: ({extent}). Kernel size can't be greater than actual input size"
                )));
            }
            (padded - extent) / w(stride[d]) + 1
        };
        if o <= 0 {
            return Err(OpalError::shape(format!(
                "{op}: computed output size is non-positive for input {is:?}"
            )));
        }
        if o > i64::MAX as i128 || extent > i64::MAX as i128 {
            return Err(OpalError::shape(format!(
                "{op}: computed output size {o} (kernel extent {extent}) overflows for input {is:?}"
            )));
        }
        sizes.push(o as i64);
    }
    Ok(Convolution {
        input,
        weight,
        bias: None,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        dtype,
        sizes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(sizes: &[i64]) -> Tensor {
        Tensor::empty(sizes, DType::F32, crate::Device::cpu()).unwrap()
    }

    fn sizes(
        i: &[i64],
        w: &[i64],
        s: &[i64],
        p: &[i64],
        d: &[i64],
        tr: bool,
        g: i64,
    ) -> Result<Vec<i64>> {
        let (i, w) = (t(i), t(w));
        convolution(&i, &w, None, s, p, d, tr, &[0], g).map(|c| c.sizes)
    }

    #[test]
    fn output_sizes() {
        assert_eq!(
            sizes(&[2, 3, 8, 8], &[4, 3, 3, 3], &[1], &[0], &[1], false, 1).unwrap(),
            [2, 4, 6, 6]
        );
        assert_eq!(
            sizes(
                &[2, 3, 8, 8],
                &[4, 3, 3, 3],
                &[2, 2],
                &[1, 1],
                &[1],
                false,
                1
            )
            .unwrap(),
            [2, 4, 4, 4]
        );
        assert_eq!(
            sizes(
                &[1, 4, 6, 6],
                &[6, 2, 3, 3],
                &[1, 2],
                &[1, 0],
                &[1],
                false,
                2
            )
            .unwrap(),
            [1, 6, 6, 2]
        );
        assert_eq!(
            sizes(
                &[2, 3, 8, 8],
                &[4, 3, 2, 2],
                &[1],
                &[1, 2],
                &[2, 1],
                false,
                1
            )
            .unwrap(),
            [2, 4, 8, 11]
        );
        assert_eq!(
            sizes(&[1, 4, 5, 5], &[4, 2, 3, 3], &[2], &[1], &[1], true, 1).unwrap(),
            [1, 2, 9, 9]
        );
        assert_eq!(
            sizes(&[1, 2, 7], &[3, 2, 3], &[1], &[0], &[1], false, 1).unwrap(),
            [1, 3, 5]
        );
        assert!(sizes(&[1, 3, 2, 2], &[4, 3, 3, 3], &[1], &[0], &[1], false, 1).is_err());
        let e = sizes(&[1, 2, 5, 5], &[4, 3, 3, 3], &[1], &[0], &[1], false, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("to have 3 channels, but got 2 channels"), "{e}");
        assert!(sizes(&[1, 3, 5, 5], &[4, 3, 3], &[1], &[0], &[1], false, 1).is_err());
        assert!(sizes(
            &[1, 3, 5, 5],
            &[4, 3, 3, 3],
            &[1, 1, 1],
            &[0],
            &[1],
            false,
            1
        )
        .is_err());
        assert!(sizes(&[1, 3, 5, 5], &[4, 3, 3, 3], &[0], &[0], &[1], false, 1).is_err());
    }

    #[test]
    fn dtypes_bias_and_backward() {
        let (i, w) = (t(&[2, 3, 8, 8]), t(&[4, 3, 3, 3]));
        let wd = Tensor::empty(&[4, 3, 3, 3], DType::F64, crate::Device::cpu()).unwrap();
        let e = convolution(&i, &wd, None, &[1], &[0], &[1], false, &[0], 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Input type (torch.float32) and weight type (torch.float64)"),
            "{e}"
        );
        let b = t(&[5]);
        assert!(convolution(&i, &w, Some(&b), &[1], &[0], &[1], false, &[0], 1).is_err());
        let go = t(&[2, 4, 6, 6]);
        let r = convolution_backward(
            &go,
            &i,
            &w,
            None,
            &[1],
            &[0],
            &[1],
            false,
            &[0],
            1,
            &[true, false, true],
        )
        .unwrap();
        assert_eq!(r.output_mask, [true, false, true]);
        assert!(
            convolution_backward(&go, &i, &w, None, &[1], &[0], &[1], false, &[0], 1, &[true])
                .is_err()
        );
        let bad = t(&[2, 4, 5, 6]);
        assert!(convolution_backward(
            &bad,
            &i,
            &w,
            None,
            &[1],
            &[0],
            &[1],
            false,
            &[0],
            1,
            &[true; 3]
        )
        .is_err());
    }
}
