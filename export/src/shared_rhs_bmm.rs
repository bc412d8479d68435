//! A batched product whose right operand is one matrix expanded over the
//! batch, as one product on the CPU: `bmm(a, view(expand(w, [b, k, n])))` with
//! `a` of `[b, m, k]` is `mm(a as [b * m, k], w)` seen as `[b, m, n]`. The
//! trace of `nn.MultiheadAttention` over sequence-first inputs (ViT's input
//! projection) writes it so: 17 products of 2 rows each, where one product of
//! 34 rows reads the weight once.
//!
//! Owns: recognising the chain and running the product. Must not: take a
//! right operand that differs across the batch, or change the result beyond
//! the rounding of the product's own summation order; at run time anything
//! else takes `matmul`, the same product broadcast over the batch.

use crate::error::Result;
use crate::graph::{arg, f32_contiguous, f32_static, is, out, tensor_arg};
use crate::schema::{Arg, Program};
use opal::ops::TensorOps;
use opal::{DType, Tensor};
use std::collections::HashMap;

/// One recognised node.
pub(crate) struct Product {
    pub input: String,
    /// The `[k, n]` matrix before its expansion.
    pub matrix: String,
}

/// The node index that defines each value.
pub(crate) fn producers(p: &Program) -> HashMap<&str, usize> {
    let mut m = HashMap::new();
    for (i, n) in p.nodes.iter().enumerate() {
        if let Some(o) = out(n) {
            m.insert(o, i);
        }
    }
    m
}

/// The node as a product with a shared right operand, when it is one.
pub(crate) fn lower(
    p: &Program,
    node: &crate::schema::Node,
    made_by: &HashMap<&str, usize>,
) -> Option<Product> {
    if !is(node, "bmm.default") {
        return None;
    }
    let (a, v) = (tensor_arg(node, "self")?, tensor_arg(node, "mat2")?);
    let view = &p.nodes[*made_by.get(v)?];
    if !is(view, "view.default") {
        return None;
    }
    let e = tensor_arg(view, "self")?;
    let expand = &p.nodes[*made_by.get(e)?];
    if !is(expand, "expand.default") {
        return None;
    }
    let w = tensor_arg(expand, "self")?;
    let (ws, _) = f32_static(p, w)?;
    let (es, _) = f32_static(p, e)?;
    let (vs, _) = f32_static(p, v)?;
    let (as_, _) = f32_static(p, a)?;
    let ys = f32_contiguous(p, out(node)?)?;
    let [k, n] = ws[..] else { return None };
    let [b, m, ka] = as_[..] else { return None };
    let ok = es == [b, k, n]
        && vs == es
        && ka == k
        && ys == [b, m, n]
        && matches!(arg(expand, "implicit"), None | Some(Arg::Bool(false)));
    ok.then(|| Product {
        input: a.to_string(),
        matrix: w.to_string(),
    })
}

/// `a @ w` for `a` of `[b, m, k]` and `w` of `[k, n]`: one product of `b * m`
/// rows for CPU f32 operands, `matmul` otherwise.
pub(crate) fn run(a: &Tensor, w: &Tensor) -> Result<Tensor> {
    let s = a.sizes();
    let fast = a.dim() == 3
        && w.dim() == 2
        && s[2] == w.sizes()[0]
        && [a, w]
            .iter()
            .all(|t| t.dtype() == DType::F32 && t.device().is_cpu());
    if !fast {
        return Ok(opal::ops::matmul(a, w)?);
    }
    let rows = a.reshape(&[s[0] * s[1], s[2]])?;
    let y = opal::ops::mm(&rows, w)?;
    Ok(y.reshape(&[s[0], s[1], w.sizes()[1]])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_batched_product_of_the_expanded_matrix() {
        crate::program::init_backends().unwrap();
        let seq = crate::test_values::seq;
        let (b, m, k, n) = (17, 2, 32, 96);
        // Stored [m, b, k] and seen as [b, m, k], as the trace's permuted input.
        let a = Tensor::from_vec(seq(b * m * k, 7, 0.25), &[m, b, k])
            .unwrap()
            .permute(&[1, 0, 2])
            .unwrap();
        // A transposed weight, as a linear layer's.
        let w = Tensor::from_vec(seq(k * n, 5, 0.125), &[n, k])
            .unwrap()
            .t()
            .unwrap();
        let want = opal::ops::bmm(&a, &w.expand(&[b, k, n]).unwrap()).unwrap();
        crate::graph::assert_close(&run(&a, &w).unwrap(), &want, 1e-5);
        // A batched right operand takes matmul.
        let w3 = w.expand(&[b, k, n]).unwrap().contiguous().unwrap();
        crate::graph::assert_close(&run(&a, &w3).unwrap(), &want, 1e-5);
    }
}
