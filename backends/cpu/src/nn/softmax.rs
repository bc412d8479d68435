//! `_softmax`, `_log_softmax` and their `_backward_data` ops (their out= forms
//! are derived through `out_copy:`).
//!
//! Owns: the dtype policy (f32/f64 native, f16/bf16 computed in f32 and rounded
//! once) and what the CPU does not compute (`half_to_float`). Must not: check
//! shapes or `dim` (`opal::rules::softmax`, named as the rule in `backend.yaml`) or
//! hold numerics (those are in `softmax_core`).

use super::io::{compute_dtype, err, make_output, with_slice, Compute};
use super::softmax_core::{softmax_backward, softmax_forward};
use opal::rules::softmax::{Softmax, SoftmaxBackward};
use opal::{DType, Result, Tensor};

/// `(size of dim, product of the sizes after it)` for a wrapped `dim`.
fn split(sizes: &[i64], dim: usize) -> (usize, usize) {
    if sizes.is_empty() {
        return (1, 1);
    }
    let inner = sizes[dim + 1..].iter().product::<i64>() as usize;
    (sizes[dim] as usize, inner)
}

fn forward(s: Softmax, log: bool, op: &str) -> Result<Tensor> {
    if s.half_to_float {
        return Err(err(
            op,
            "softmax with half to float conversion is not supported on CPU",
        ));
    }
    let x = s.input;
    let cd = compute_dtype(x.dtype(), op)?;
    let (dsz, inner) = split(x.sizes(), s.dim);
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

fn backward(b: SoftmaxBackward, log: bool, op: &str) -> Result<Tensor> {
    let (g, y) = (b.grad_output, b.output);
    if g.dtype() != b.input_dtype {
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
    let cd = compute_dtype(g.dtype(), op)?;
    let (dsz, inner) = split(g.sizes(), b.dim);
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
pub fn _softmax(s: Softmax) -> Result<Tensor> {
    forward(s, false, "_softmax")
}

/// Log-softmax along `dim`.
pub fn _log_softmax(s: Softmax) -> Result<Tensor> {
    forward(s, true, "_log_softmax")
}

/// Gradient of softmax given its output.
pub fn _softmax_backward_data(b: SoftmaxBackward) -> Result<Tensor> {
    backward(b, false, "_softmax_backward_data")
}

/// Gradient of log-softmax given its output.
pub fn _log_softmax_backward_data(b: SoftmaxBackward) -> Result<Tensor> {
    backward(b, true, "_log_softmax_backward_data")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_over_middle_dim_and_errors() {
        let x = Tensor::from_slice(&[0.0f64, 1.0, 2.0, 3.0], &[1, 2, 2]).unwrap();
        let y = opal::rules::softmax::_softmax(&x, 1, false)
            .and_then(_softmax)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        let e2 = (2.0f64).exp();
        assert!((y[0] - 1.0 / (1.0 + e2)).abs() < 1e-15);
        assert!((y[2] - e2 / (1.0 + e2)).abs() < 1e-15);
        assert!(opal::rules::softmax::_softmax(&x, 3, false)
            .and_then(_softmax)
            .unwrap_err()
            .to_string()
            .contains("_softmax"));
        assert!(opal::rules::softmax::_softmax(&x, 0, true)
            .and_then(_softmax)
            .is_err());
        let i = Tensor::from_slice(&[1i64, 2], &[2]).unwrap();
        assert!(opal::rules::softmax::_log_softmax(&i, 0, false)
            .and_then(_log_softmax)
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
        let y = opal::rules::softmax::_softmax(&t, -1, false)
            .and_then(_softmax)
            .unwrap();
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
            opal::rules::softmax::_log_softmax(&z, 0, false)
                .and_then(_log_softmax)
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
            vec![0.0]
        );
    }
}
