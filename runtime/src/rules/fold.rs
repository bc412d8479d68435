//! Sliding-block geometry of `im2col` / `col2im` (PyTorch's `unfold` / `fold`):
//! the four per-dim parameters, the count of blocks along each spatial dim and the
//! shapes both ops produce, with their argument errors.
//!
//! [`col2im`] and [`im2col`] are the ops' rules: they take the schema's arguments
//! and return a [`Fold`], from which the CPU kernel computes and the Meta kernel
//! shapes its result (`rule | kernel` in both backend YAMLs).
//!
//! Owns: these formulas and errors. Must not: allocate tensors, read tensor data,
//! or know any backend.

use crate::{OpalError, Result, Tensor};

/// A checked `col2im` (`fold`) or `im2col`: the input, the output shape and the
/// blocks.
pub struct Fold<'a> {
    /// The op's name, for errors.
    pub op: &'static str,
    /// The op's input (`self`), of a floating dtype.
    pub input: &'a Tensor,
    /// The result's shape.
    pub shape: Vec<i64>,
    /// The sliding blocks.
    pub blocks: Blocks,
    /// `col2im` (blocks summed into images) rather than `im2col`.
    pub fold: bool,
}

/// Resolved parameters of a 2-d sliding-block op and the blocks they give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocks {
    /// Block size (height, width).
    pub kernel: [i64; 2],
    /// Spacing of a block's taps.
    pub dilation: [i64; 2],
    /// Implicit zero padding on both sides.
    pub padding: [i64; 2],
    /// Step between blocks.
    pub stride: [i64; 2],
    /// The image's (padded away) spatial size.
    pub image: [i64; 2],
    /// Blocks along height and width.
    pub blocks: [i64; 2],
}

impl Blocks {
    /// Block count `L` (blocks along height times along width).
    pub fn count(&self) -> i64 {
        self.blocks[0] * self.blocks[1]
    }
    /// Taps per block (`kernel_h * kernel_w`).
    pub fn taps(&self) -> i64 {
        self.kernel[0] * self.kernel[1]
    }
}

fn pair(op: &str, name: &str, v: &[i64]) -> Result<[i64; 2]> {
    match v {
        [a, b] => Ok([*a, *b]),
        _ => Err(OpalError::msg(format!(
            "{op}: It is expected {name} equals to 2, but got size {}",
            v.len()
        ))),
    }
}

/// Blocks along one dim: `floor((size + 2 pad - dil (k - 1) - 1) / stride) + 1`.
fn blocks_along(size: i64, k: i64, d: i64, p: i64, s: i64) -> i64 {
    (size + 2 * p - d * (k - 1) - 1).div_euclid(s) + 1
}

fn params(
    op: &str,
    kernel_size: &[i64],
    dilation: &[i64],
    padding: &[i64],
    stride: &[i64],
) -> Result<[[i64; 2]; 4]> {
    let k = pair(op, "kernel_size", kernel_size)?;
    let d = pair(op, "dilation", dilation)?;
    let p = pair(op, "padding", padding)?;
    let s = pair(op, "stride", stride)?;
    let check = |ok: bool, name: &str, what: &str, v: [i64; 2]| {
        if ok {
            Ok(())
        } else {
            Err(OpalError::msg(format!(
                "{op}: {what}, but got {name}_height: {} {name}_width: {}",
                v[0], v[1]
            )))
        }
    };
    let positive = |v: [i64; 2]| v[0] > 0 && v[1] > 0;
    check(
        positive(k),
        "kernel",
        "kernel size should be greater than zero",
        k,
    )?;
    check(
        positive(s),
        "stride",
        "stride should be greater than zero",
        s,
    )?;
    check(
        positive(d),
        "dilation",
        "dilation should be greater than zero",
        d,
    )?;
    check(
        p[0] >= 0 && p[1] >= 0,
        "pad",
        "padding should be non-negative",
        p,
    )?;
    Ok([k, d, p, s])
}

fn geometry(image: [i64; 2], [k, d, p, s]: [[i64; 2]; 4]) -> Blocks {
    Blocks {
        kernel: k,
        dilation: d,
        padding: p,
        stride: s,
        image,
        blocks: [
            blocks_along(image[0], k[0], d[0], p[0], s[0]),
            blocks_along(image[1], k[1], d[1], p[1], s[1]),
        ],
    }
}

/// The [`Fold`] of a floating input.
fn checked<'a>(
    op: &'static str,
    input: &'a Tensor,
    shape: Vec<i64>,
    blocks: Blocks,
    fold: bool,
) -> Result<Fold<'a>> {
    super::check_floating(op, input.dtype())?;
    Ok(Fold {
        op,
        input,
        shape,
        blocks,
        fold,
    })
}

/// `col2im`: input `[N, C * kh * kw, L]` or `[C * kh * kw, L]` (floating) summed
/// into images of `output_size`, `[N, C, H, W]` or `[C, H, W]`.
pub fn col2im<'a>(
    self_: &'a Tensor,
    output_size: &[i64],
    kernel_size: &[i64],
    dilation: &[i64],
    padding: &[i64],
    stride: &[i64],
) -> Result<Fold<'a>> {
    let op = "col2im";
    let input = self_.sizes();
    let out = pair(op, "output_size", output_size)?;
    let prm = params(op, kernel_size, dilation, padding, stride)?;
    let batched = input.len() == 3;
    if !(input.len() == 2 || batched) || input[input.len() - 2..].contains(&0) {
        return Err(OpalError::shape(format!(
            "{op}: Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for input, but got: {input:?}"
        )));
    }
    let g = geometry(out, prm);
    let [k, d, p, s] = prm;
    let planes = input[input.len() - 2];
    if planes % g.taps() != 0 {
        return Err(OpalError::shape(format!(
            "{op}: Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)={planes} and kernel_size=({}, {})",
            k[0], k[1]
        )));
    }
    let desc = format!(
        "Given output_size=({}, {}), kernel_size=({}, {}), dilation=({}, {}), padding=({}, {}), stride=({}, {})",
        out[0], out[1], k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]
    );
    let length = input[input.len() - 1];
    if length != g.count() {
        return Err(OpalError::shape(format!(
            "{op}: {desc}, expected size of input's dimension 2 to match the calculated number of sliding blocks {} * {} = {}, but got input.size(2)={length}",
            g.blocks[0],
            g.blocks[1],
            g.count()
        )));
    }
    if g.blocks[0] < 1 || g.blocks[1] < 1 {
        return Err(OpalError::shape(format!(
            "{op}: {desc}, calculated shape of the array of sliding blocks as ({}, {}), which is too small (non-positive)",
            g.blocks[0], g.blocks[1]
        )));
    }
    let batch = input[..batched as usize].iter().copied();
    let shape = batch.chain([planes / g.taps(), out[0], out[1]]).collect();
    checked(op, self_, shape, g, true)
}

/// `im2col`: input `[N, C, H, W]` or `[C, H, W]` (floating) unfolded into
/// `[N, C * kh * kw, L]` or `[C * kh * kw, L]`.
pub fn im2col<'a>(
    self_: &'a Tensor,
    kernel_size: &[i64],
    dilation: &[i64],
    padding: &[i64],
    stride: &[i64],
) -> Result<Fold<'a>> {
    let op = "im2col";
    let input = self_.sizes();
    let prm = params(op, kernel_size, dilation, padding, stride)?;
    let batched = input.len() == 4;
    if !(input.len() == 3 || batched) || input[input.len() - 3..].contains(&0) {
        return Err(OpalError::shape(format!(
            "{op}: Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: {input:?}"
        )));
    }
    let n = input.len();
    let g = geometry([input[n - 2], input[n - 1]], prm);
    if g.blocks[0] < 1 || g.blocks[1] < 1 {
        let [k, d, p, _] = prm;
        return Err(OpalError::shape(format!(
            "{op}: Given input with spatial size ({}, {}), kernel_size=({}, {}), dilation=({}, {}), padding=({}, {}), calculated shape of the array of sliding blocks as ({}, {}), but its components must be at least one.",
            g.image[0], g.image[1], k[0], k[1], d[0], d[1], p[0], p[1], g.blocks[0], g.blocks[1]
        )));
    }
    let batch = input[..batched as usize].iter().copied();
    let shape = batch.chain([input[n - 3] * g.taps(), g.count()]).collect();
    checked(op, self_, shape, g, false)
}
