//! The text of a tensor (`Tensor::render`, which `Display` in the `transfer`
//! module calls) and `Debug` for [`Tensor`], printing like PyTorch's `repr`: aligned
//! elements, 4-digit fixed or scientific floats, integer-valued floats as `1.`, lines
//! wrapped at 80 columns, tensors over 1000 elements summarized with `...` (3 edge
//! items per dimension), and `dtype=`/`device=`/`size=` suffixes where PyTorch shows
//! them. Tensors in device memory print the values of a copy on the host (`Display`
//! makes it through `_to_copy`). An undefined tensor prints as `tensor(undefined)` (PyTorch's C++ prints
//! `[ Tensor (undefined) ]`; Python never sees one, it gets `None`).
//!
//! Owns: text rendering only. Must not: change tensors.

use super::storage::StorageBorrow;
use super::Tensor;
use crate::device::Device;
use crate::dtype::{default_complex_dtype, default_dtype, scalar_from_bytes, DType};
use crate::scalar::Scalar;
use std::fmt;

const THRESHOLD: i64 = 1000;
const EDGE: i64 = 3;
const LINEWIDTH: usize = 80;

/// Indices of dimension `d` to show.
fn shown(size: i64, summarize: bool) -> Vec<Option<i64>> {
    if summarize && size > 2 * EDGE {
        (0..EDGE)
            .map(Some)
            .chain([None])
            .chain((size - EDGE..size).map(Some))
            .collect()
    } else {
        (0..size).map(Some).collect()
    }
}

/// How floats are printed, chosen from all shown values (like PyTorch's formatter).
#[derive(Clone, Copy)]
enum FloatMode {
    Int,
    IntSci,
    Fixed,
    Sci,
}

fn float_mode(vals: &[f64]) -> FloatMode {
    let finite: Vec<f64> = vals.iter().copied().filter(|v| v.is_finite()).collect();
    let nonzero: Vec<f64> = finite
        .iter()
        .map(|v| v.abs())
        .filter(|v| *v != 0.0)
        .collect();
    let int_mode = finite.iter().all(|v| v.fract() == 0.0);
    let (mn, mx) = nonzero
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(*v), b.max(*v)));
    if int_mode {
        if !nonzero.is_empty() && mx > 1e8 {
            FloatMode::IntSci
        } else {
            FloatMode::Int
        }
    } else if !nonzero.is_empty() && (mx / mn > 1000.0 || mx > 1e8 || mn < 1e-4) {
        FloatMode::Sci
    } else {
        FloatMode::Fixed
    }
}

/// Python-style `{:.4e}`: exponent with a sign and at least two digits.
fn sci(v: f64) -> String {
    let s = format!("{v:.4e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', e),
            };
            format!("{m}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

fn fmt_float(v: f64, mode: FloatMode) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    match mode {
        FloatMode::Int => format!("{v:.0}."),
        FloatMode::Fixed => format!("{v:.4}"),
        FloatMode::IntSci | FloatMode::Sci => sci(v),
    }
}

struct Printer {
    dtype: DType,
    real_mode: FloatMode,
    imag_mode: FloatMode,
    width: usize,
}

impl Printer {
    fn format(&self, s: &Scalar) -> String {
        match (*s, self.dtype) {
            (Scalar::Bool(b), _) => (if b { "True" } else { "False" }).into(),
            (Scalar::Int(i), _) => i.to_string(),
            (Scalar::Float(f), _) => fmt_float(f, self.real_mode),
            (Scalar::Complex(r, i), _) => {
                let re = fmt_float(r, self.real_mode);
                let im = fmt_float(i, self.imag_mode);
                let sign = if i < 0.0 || (i == 0.0 && i.is_sign_negative()) {
                    '-'
                } else {
                    '+'
                };
                format!("{re}{sign}{}j", im.trim_start_matches('-'))
            }
        }
    }

    fn padded(&self, s: &Scalar) -> String {
        format!("{:>w$}", self.format(s), w = self.width)
    }
}

struct View<'a> {
    sizes: &'a [i64],
    strides: &'a [i64],
    base: *const u8,
    es: usize,
    dtype: DType,
    summarize: bool,
}

impl View<'_> {
    fn elem(&self, off: i64) -> Scalar {
        // SAFETY: callers pass offsets of elements inside this view (indices below
        // `sizes`), and `fmt` holds a shared borrow of the storage while rendering.
        let b = unsafe {
            std::slice::from_raw_parts(self.base.offset(off as isize * self.es as isize), self.es)
        };
        scalar_from_bytes(self.dtype, b).unwrap_or(Scalar::Int(0))
    }

    fn collect(&self, d: usize, off: i64, out: &mut Vec<Scalar>) {
        if d == self.sizes.len() {
            out.push(self.elem(off));
            return;
        }
        for i in shown(self.sizes[d], self.summarize).into_iter().flatten() {
            self.collect(d + 1, off + i * self.strides[d], out);
        }
    }

    fn render(&self, p: &Printer, d: usize, off: i64, indent: usize) -> String {
        let nd = self.sizes.len();
        if d == nd {
            return p.format(&self.elem(off));
        }
        if d + 1 == nd {
            let items: Vec<String> = shown(self.sizes[d], self.summarize)
                .into_iter()
                .map(|i| match i {
                    Some(i) => p.padded(&self.elem(off + i * self.strides[d])),
                    None => " ...".into(),
                })
                .collect();
            let per_line = ((LINEWIDTH.saturating_sub(indent)) / (p.width + 2)).max(1);
            let lines: Vec<String> = items.chunks(per_line).map(|c| c.join(", ")).collect();
            return format!(
                "[{}]",
                lines.join(&format!(",\n{}", " ".repeat(indent + 1)))
            );
        }
        let slices: Vec<String> = shown(self.sizes[d], self.summarize)
            .into_iter()
            .map(|i| match i {
                Some(i) => self.render(p, d + 1, off + i * self.strides[d], indent + 1),
                None => "...".into(),
            })
            .collect();
        let sep = format!(",{}{}", "\n".repeat(nd - d - 1), " ".repeat(indent + 1));
        format!("[{}]", slices.join(&sep))
    }
}

impl Tensor {
    /// Prints this (defined) tensor as living on `device` (a host copy of a device
    /// tensor prints with the device's suffix).
    pub(crate) fn render(&self, device: Device, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dtype = self.dtype();
        let mut suffixes = Vec::new();
        if !device.is_cpu() {
            suffixes.push(format!("device='{device}'"));
        }
        // Borrow first, then load the data pointer (a resize may replace it until then).
        let borrow = StorageBorrow::acquire(self.storage(), false);
        let body = match (self.raw_data_ptr(), borrow) {
            _ if self.numel() == 0 => {
                if self.sizes() != [0] {
                    suffixes.push(format!("size={}", size_tuple(self.sizes())));
                }
                "[]".to_string()
            }
            (Ok(base), Ok(_borrow)) => {
                let view = View {
                    sizes: self.sizes(),
                    strides: self.strides(),
                    base,
                    es: self.element_size(),
                    dtype,
                    summarize: self.numel() > THRESHOLD,
                };
                let mut vals = Vec::new();
                view.collect(0, 0, &mut vals);
                let re: Vec<f64> = vals.iter().map(|v| v.to_complex().0).collect();
                let im: Vec<f64> = vals.iter().map(|v| v.to_complex().1).collect();
                let mut p = Printer {
                    dtype,
                    real_mode: float_mode(&re),
                    imag_mode: float_mode(&im),
                    width: 0,
                };
                p.width = vals.iter().map(|v| p.format(v).len()).max().unwrap_or(0);
                view.render(&p, 0, 0, 7)
            }
            (Err(_), _) => {
                // No host data (meta or device memory): PyTorch prints `...` and the size.
                suffixes.push(format!("size={}", size_tuple(self.sizes())));
                "...".to_string()
            }
            (Ok(_), Err(_)) => "<being written by another thread>".to_string(),
        };
        let default = dtype == default_dtype()
            || dtype == default_complex_dtype()
            || dtype == DType::I64
            || dtype == DType::Bool;
        if !default {
            suffixes.push(format!("dtype={dtype}"));
        }
        write!(f, "tensor({body}")?;
        for s in suffixes {
            write!(f, ", {s}")?;
        }
        write!(f, ")")
    }
}

fn size_tuple(s: &[i64]) -> String {
    match s {
        [x] => format!("({x},)"),
        _ => format!(
            "({})",
            s.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}

impl fmt::Debug for Tensor {
    /// Same as `Display` (PyTorch's `repr`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
