//! `_softmax`, `_log_softmax` and their `_backward_data` ops (functional and out=).
//!
//! Owns: argument checks and the dtype policy (f32/f64 native, f16/bf16 computed in
//! f32 and rounded once). Must not: hold numerics (those are in `softmax_core`).

use super::io::{compute_dtype, err, make_output, with_slice, wrap_dim, write_out, Compute};
use super::softmax_core::{softmax_backward, softmax_forward};
use opal::{DType, Result, Tensor};

/// `(size of dim, product of the sizes after it)` for a wrapped `dim`.
fn split(sizes: &[i64], dim: usize) -> (usize, usize) {
    if sizes.is_empty() {
        return (1, 1);
    }
    let inner = sizes[dim + 1..].iter().product::<i64>() as usize;
    (sizes[dim] as usize, inner)
}

fn forward(x: &Tensor, dim: i64, half_to_float: bool, log: bool, op: &str) -> Result<Tensor> {
    if half_to_float {
        return Err(err(
            op,
            "softmax with half to float conversion is not supported on CPU",
        ));
    }
    let cd = compute_dtype(x.dtype(), op)?;
    let d = wrap_dim(dim, x.dim(), op)?;
    let (dsz, inner) = split(x.sizes(), d);
    fn run<C: Compute>(x: &Tensor, dsz: usize, inner: usize, log: bool) -> Result<Tensor> {
        with_slice::<C, _>(x, |xs| {
            make_output::<C>(x.sizes(), x.dtype(), |ys| {
                softmax_forward(xs, ys, dsz, inner, log);
                Ok(())
            })
        })
    }
    match cd {
        DType::F64 => run::<f64>(x, dsz, inner, log),
        _ => run::<f32>(x, dsz, inner, log),
    }
}

fn backward(
    g: &Tensor,
    y: &Tensor,
    dim: i64,
    input_dtype: DType,
    log: bool,
    op: &str,
) -> Result<Tensor> {
    if g.dtype() != input_dtype {
        return Err(err(
            op,
            "softmax backward with half to float conversion is not supported on CPU",
        ));
    }
    if g.dtype() != y.dtype() {
        return Err(err(
            op,
            format!(
                "expected grad_output and output to have the same dtype, got {} and {}",
                g.dtype(),
                y.dtype()
            ),
        ));
    }
    if g.sizes() != y.sizes() {
        return Err(err(
            op,
            format!(
                "grad_output of shape {:?} does not match output of shape {:?}",
                g.sizes(),
                y.sizes()
            ),
        ));
    }
    let cd = compute_dtype(g.dtype(), op)?;
    let d = wrap_dim(dim, g.dim(), op)?;
    let (dsz, inner) = split(g.sizes(), d);
    fn run<C: Compute>(
        g: &Tensor,
        y: &Tensor,
        dsz: usize,
        inner: usize,
        log: bool,
    ) -> Result<Tensor> {
        with_slice::<C, _>(g, |gs| {
            with_slice::<C, _>(y, |ys| {
                make_output::<C>(g.sizes(), g.dtype(), |out| {
                    softmax_backward(gs, ys, out, dsz, inner, log);
                    Ok(())
                })
            })
        })
    }
    match cd {
        DType::F64 => run::<f64>(g, y, dsz, inner, log),
        _ => run::<f32>(g, y, dsz, inner, log),
    }
}

/// Softmax along `dim`. `half_to_float` is rejected on CPU, as in PyTorch.
pub fn _softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Result<Tensor> {
    forward(self_, dim, half_to_float, false, "_softmax")
}

/// `_softmax` into `out`.
pub fn _softmax_out(self_: &Tensor, dim: i64, half_to_float: bool, out: &Tensor) -> Result<Tensor> {
    write_out(&_softmax(self_, dim, half_to_float)?, out, "_softmax.out")
}

/// Log-softmax along `dim`.
pub fn _log_softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Result<Tensor> {
    forward(self_, dim, half_to_float, true, "_log_softmax")
}

/// `_log_softmax` into `out`.
pub fn _log_softmax_out(
    self_: &Tensor,
    dim: i64,
    half_to_float: bool,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &_log_softmax(self_, dim, half_to_float)?,
        out,
        "_log_softmax.out",
    )
}

/// Gradient of softmax given its output.
pub fn _softmax_backward_data(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: DType,
) -> Result<Tensor> {
    backward(
        grad_output,
        output,
        dim,
        input_dtype,
        false,
        "_softmax_backward_data",
    )
}

/// `_softmax_backward_data` into `grad_input`.
pub fn _softmax_backward_data_out(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: DType,
    grad_input: &Tensor,
) -> Result<Tensor> {
    let r = _softmax_backward_data(grad_output, output, dim, input_dtype)?;
    write_out(&r, grad_input, "_softmax_backward_data.out")
}

/// Gradient of log-softmax given its output.
pub fn _log_softmax_backward_data(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: DType,
) -> Result<Tensor> {
    backward(
        grad_output,
        output,
        dim,
        input_dtype,
        true,
        "_log_softmax_backward_data",
    )
}

/// `_log_softmax_backward_data` into `out`.
pub fn _log_softmax_backward_data_out(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: DType,
    out: &Tensor,
) -> Result<Tensor> {
    let r = _log_softmax_backward_data(grad_output, output, dim, input_dtype)?;
    write_out(&r, out, "_log_softmax_backward_data.out")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_over_middle_dim_and_errors() {
        let x = Tensor::from_slice(&[0.0f64, 1.0, 2.0, 3.0], &[1, 2, 2]).unwrap();
        let y = _softmax(&x, 1, false).unwrap().to_vec::<f64>().unwrap();
        let e2 = (2.0f64).exp();
        assert!((y[0] - 1.0 / (1.0 + e2)).abs() < 1e-15);
        assert!((y[2] - e2 / (1.0 + e2)).abs() < 1e-15);
        assert!(_softmax(&x, 3, false)
            .unwrap_err()
            .to_string()
            .contains("_softmax"));
        assert!(_softmax(&x, 0, true).is_err());
        let i = Tensor::from_slice(&[1i64, 2], &[2]).unwrap();
        assert!(_log_softmax(&i, 0, false)
            .unwrap_err()
            .to_string()
            .contains("_log_softmax"));
    }

    #[test]
    fn bf16_softmax_keeps_dtype_and_scalar_input_works() {
        let x: Vec<half::bf16> = [1.0f32, 2.0, 3.0]
            .iter()
            .map(|&v| half::bf16::from_f32(v))
            .collect();
        let t = Tensor::from_slice(&x, &[3]).unwrap();
        let y = _softmax(&t, -1, false).unwrap();
        assert_eq!(y.dtype(), DType::BF16);
        let s: f32 = y
            .to_vec::<half::bf16>()
            .unwrap()
            .iter()
            .map(|v| v.to_f32())
            .sum();
        assert!((s - 1.0).abs() < 1e-2);
        let z = Tensor::from_slice(&[5.0f32], &[]).unwrap();
        assert_eq!(
            _log_softmax(&z, 0, false).unwrap().to_vec::<f32>().unwrap(),
            vec![0.0]
        );
    }
}
