//! The emu plugin's ABI 1.4 extensions: it differentiates `sigmoid` itself (its
//! backward node `EmuSigmoidBackward`, as the linked emu's `autograd:` entry) and
//! declares its own operator `emu::fused_add_relu(Tensor self, Tensor other) ->
//! Tensor` (`relu(self + other)`).
//!
//! Owns: those kernels. Must not: register anything itself (`init` does).

use crate::{binary, relu_k, Binary};
use opal_plugin_sdk::{call_op, DType, Error, Result, Scalar, Tensor, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// Backward and custom-op calls the plugin computed itself (read by tests).
pub static BACKWARD_CALLS: AtomicU64 = AtomicU64::new(0);
/// `emu::fused_add_relu` calls computed natively.
pub static FUSED_CALLS: AtomicU64 = AtomicU64::new(0);

/// The schema of the plugin's own operator.
pub const FUSED_ADD_RELU: &str = "emu::fused_add_relu(Tensor self, Tensor other) -> Tensor";

/// `EmuSigmoidBackward`: `(grad, self, result) -> grad_self`, `grad * r * (1 -
/// r)` with `r` the saved result: computed here for float32 operands of one
/// size, through the host's `sigmoid_backward` otherwise.
pub fn sigmoid_backward(args: &[Value]) -> Result<Vec<Value>> {
    let [grad, _self, result] = args else {
        return Err(Error::msg(format!(
            "EmuSigmoidBackward: {} arguments, expected grad, self, result",
            args.len()
        )));
    };
    let Value::Tensor(g) = grad else {
        return Ok(vec![Value::None]);
    };
    let r = result.tensor()?;
    if g.dtype()? != DType::F32 || r.dtype()? != DType::F32 || g.sizes() != r.sizes() {
        return call_op(
            "aten::sigmoid_backward",
            &[Value::Tensor(g.clone()), Value::Tensor(r.clone())],
        );
    }
    let out = Tensor::empty(r.sizes(), DType::F32, r.device()?)?;
    let (pg, pr, po) = (
        g.data_ptr() as *const f32,
        r.data_ptr() as *const f32,
        out.data_ptr() as *mut f32,
    );
    opal_plugin_sdk::strided::for_each_offset(
        r.sizes(),
        [g.strides(), r.strides(), out.strides()],
        |[x, y, z]| {
            // SAFETY: offsets inside each tensor of these sizes and strides; the
            // host holds `grad` and the saved result for the call, `out` is new
            // and ours; elements are aligned f32.
            unsafe {
                let s = *pr.offset(y);
                *po.offset(z) = *pg.offset(x) * s * (1.0 - s);
            }
        },
    );
    BACKWARD_CALLS.fetch_add(1, Ordering::Relaxed);
    Ok(vec![Value::Tensor(out)])
}

/// `emu::fused_add_relu`: native for operands of one dtype (float32, float64,
/// int64, int32) on one device, through the host's `add.Tensor` and `relu`
/// otherwise (an operator of the plugin's own has no fallback to decline to).
pub fn fused_add_relu(args: &[Value]) -> Result<Vec<Value>> {
    let (a, b) = (args[0].tensor()?, args[1].tensor()?);
    match binary(Binary::Add, a, b, Scalar::Int(1)).and_then(|s| relu_k(&s)) {
        Ok(t) => {
            FUSED_CALLS.fetch_add(1, Ordering::Relaxed);
            Ok(vec![Value::Tensor(t)])
        }
        Err(e) if e.code == opal_plugin_sdk::abi::code::DECLINED => {
            let sum = call_op(
                "aten::add.Tensor",
                &[
                    Value::Tensor(a.clone()),
                    Value::Tensor(b.clone()),
                    Value::Scalar(Scalar::Int(1)),
                ],
            )?;
            call_op("aten::relu", &sum)
        }
        Err(e) => Err(e),
    }
}
