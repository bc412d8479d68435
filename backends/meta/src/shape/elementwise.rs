//! Output geometry of elementwise (TensorIterator-style) ops: the broadcast shape
//! and the strides PyTorch gives a freshly allocated output, which follow the memory
//! order of the inputs so that `x.t() + 1` stays transposed.
//!
//! Owns: [`elementwise_geometry`] and the dim-order inference behind it. Must not:
//! decide dtypes (see `promote`) or allocate anything.

use super::geometry::{
    channels_last_strides, contiguous_strides, is_channels_last, is_contiguous,
    is_non_overlapping_and_dense,
};
use opal::Result;

/// Sizes and strides of a new elementwise result over `inputs` (`(sizes, strides)`
/// of each tensor input; scalars are not inputs).
///
/// Inputs of one shape that agree on a layout (all contiguous, all channels-last,
/// or all dense with the same strides) give that layout; otherwise dims are ordered
/// by the inputs' strides, broadcast dims not voting.
pub fn elementwise_geometry(op: &str, inputs: &[(&[i64], &[i64])]) -> Result<(Vec<i64>, Vec<i64>)> {
    let shapes: Vec<&[i64]> = inputs.iter().map(|(s, _)| *s).collect();
    let shape = opal::rules::broadcast_shapes(op, &shapes)?;
    if let Some(strides) = same_shape_fast_layout(&shape, inputs) {
        return Ok((shape, strides));
    }
    let expanded: Vec<Vec<i64>> = inputs
        .iter()
        .map(|(s, st)| expanded_strides(s, st, &shape))
        .collect();
    let refs: Vec<&[i64]> = expanded.iter().map(|v| v.as_slice()).collect();
    let strides = dense_strides_like(&shape, &refs);
    Ok((shape, strides))
}

/// The layout all inputs share when they all have the output's shape, if any.
fn same_shape_fast_layout(shape: &[i64], inputs: &[(&[i64], &[i64])]) -> Option<Vec<i64>> {
    if inputs.is_empty() || inputs.iter().any(|(s, _)| *s != shape) {
        return None;
    }
    if inputs.iter().all(|(s, st)| is_contiguous(s, st)) {
        return Some(contiguous_strides(shape));
    }
    if inputs.iter().all(|(s, st)| is_channels_last(s, st)) {
        return channels_last_strides(shape);
    }
    let first = inputs[0].1;
    if inputs
        .iter()
        .all(|(s, st)| *st == first && is_non_overlapping_and_dense(s, st))
    {
        return Some(first.to_vec());
    }
    None
}

/// Strides of a tensor seen through broadcasting to `shape`: missing leading dims and
/// broadcast size-1 dims read with stride 0.
pub fn expanded_strides(sizes: &[i64], strides: &[i64], shape: &[i64]) -> Vec<i64> {
    let lead = shape.len() - sizes.len().min(shape.len());
    let mut out = vec![0; shape.len()];
    for (i, o) in out.iter_mut().enumerate().skip(lead) {
        let (s, st) = (sizes[i - lead], strides[i - lead]);
        *o = if s == 1 && shape[i] != 1 { 0 } else { st };
    }
    out
}

/// Dense strides for `sizes` whose dim order follows the given operands' strides
/// (each already expanded to `sizes.len()` dims). With one operand this is
/// PyTorch's `infer_dense_strides`.
pub fn dense_strides_like(sizes: &[i64], operands: &[&[i64]]) -> Vec<i64> {
    let n = sizes.len();
    if n <= 1 {
        return contiguous_strides(sizes);
    }
    // perm[0] is the fastest-varying dim; start from row-major order.
    let mut perm: Vec<usize> = (0..n).rev().collect();
    // Decides whether dim `a` should sit after (outside) dim `b`: 1 yes, -1 no, 0 unsure.
    let after = |a: usize, b: usize| -> i32 {
        for st in operands {
            let (sa, sb) = (st[a], st[b]);
            if sa == 0 || sb == 0 {
                continue; // broadcast dims carry no layout information
            }
            if sa != sb {
                return if sa < sb { -1 } else { 1 };
            }
            // Equal strides: the larger dim goes outside.
            if sizes[a] > sizes[b] {
                return 1;
            }
        }
        0
    };
    // Insertion sort that only moves a dim past ones it is definitely after.
    for i in 1..n {
        let mut cur = i;
        for prev in (0..i).rev() {
            match after(perm[prev], perm[cur]) {
                c if c > 0 => {
                    perm.swap(prev, cur);
                    cur = prev;
                }
                c if c < 0 => break,
                _ => {}
            }
        }
    }
    // Strides accumulate the raw sizes in perm order, as TensorIterator allocates.
    let mut strides = vec![0; n];
    let mut acc = 1i64;
    for &d in &perm {
        strides[d] = acc;
        acc *= sizes[d];
    }
    strides
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_inputs_give_contiguous_output() {
        let (s, st) = elementwise_geometry("add", &[(&[2, 3], &[3, 1]), (&[3], &[1])]).unwrap();
        assert_eq!((s, st), (vec![2, 3], vec![3, 1]));
    }

    #[test]
    fn transposed_input_keeps_its_layout() {
        // x.t() for x of shape [2, 3]: sizes [3, 2], strides [1, 3].
        let (s, st) = elementwise_geometry("neg", &[(&[3, 2], &[1, 3])]).unwrap();
        assert_eq!((s, st), (vec![3, 2], vec![1, 3]));
        // Broadcasting against a row vector still follows the transposed operand.
        let (s, st) = elementwise_geometry("add", &[(&[3, 2], &[1, 3]), (&[2], &[1])]).unwrap();
        assert_eq!((s, st), (vec![3, 2], vec![1, 3]));
    }

    #[test]
    fn sliced_input_gets_dense_strides_in_its_order() {
        // x[:, ::2] of a [4, 6] tensor: sizes [4, 3], strides [6, 2].
        let (_, st) = elementwise_geometry("exp", &[(&[4, 3], &[6, 2])]).unwrap();
        assert_eq!(st, vec![3, 1]);
        // A sliced transposed tensor: sizes [3, 4], strides [2, 6].
        let (_, st) = elementwise_geometry("exp", &[(&[3, 4], &[2, 6])]).unwrap();
        assert_eq!(st, vec![1, 3]);
    }

    #[test]
    fn channels_last_inputs_stay_channels_last() {
        let sizes = [2, 3, 4, 5];
        let cl = [60, 1, 15, 3];
        let (_, st) = elementwise_geometry("relu", &[(&sizes, &cl)]).unwrap();
        assert_eq!(st, cl.to_vec());
    }
}
