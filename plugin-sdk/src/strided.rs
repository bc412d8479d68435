//! Helpers for kernels over strided memory: broadcasting and row-major iteration
//! over element offsets.
//!
//! Owns: index arithmetic only. Must not: touch memory.

use crate::{Error, Result};

/// The broadcast of two shapes (PyTorch's rule), or an error naming both.
pub fn broadcast_shape(a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
    let n = a.len().max(b.len());
    let mut out = vec![1; n];
    for i in 0..n {
        let x = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let y = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(Error::msg(format!(
                    "shapes {a:?} and {b:?} cannot be broadcast together"
                )))
            }
        };
    }
    Ok(out)
}

/// Strides that read a tensor of `sizes`/`strides` broadcast to `to` (0 along
/// broadcast dimensions).
pub fn broadcast_strides(sizes: &[i64], strides: &[i64], to: &[i64]) -> Vec<i64> {
    let pad = to.len() - sizes.len().min(to.len());
    (0..to.len())
        .map(|i| {
            if i < pad || sizes[i - pad] == 1 {
                0
            } else {
                strides[i - pad]
            }
        })
        .collect()
}

/// Calls `f` with the element offset of each operand for every index of `sizes`,
/// in row-major order; `strides[k]` are operand `k`'s strides (rank of `sizes`).
pub fn for_each_offset<const K: usize>(
    sizes: &[i64],
    strides: [&[i64]; K],
    mut f: impl FnMut([isize; K]),
) {
    if sizes.contains(&0) {
        return;
    }
    let nd = sizes.len();
    let mut idx = vec![0i64; nd];
    let mut off = [0isize; K];
    loop {
        f(off);
        let mut d = nd;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            for k in 0..K {
                off[k] += strides[k][d] as isize;
            }
            if idx[d] < sizes[d] {
                break;
            }
            for k in 0..K {
                off[k] -= (strides[k][d] * sizes[d]) as isize;
            }
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasts_and_iterates_row_major() {
        assert_eq!(broadcast_shape(&[2, 1], &[3]).unwrap(), vec![2, 3]);
        assert!(broadcast_shape(&[2], &[3]).is_err());
        assert_eq!(broadcast_strides(&[3], &[1], &[2, 3]), vec![0, 1]);
        let mut seen = Vec::new();
        for_each_offset(&[2, 3], [&[3, 1], &[1, 2]], |[a, b]| seen.push((a, b)));
        assert_eq!(seen, [(0, 0), (1, 2), (2, 4), (3, 1), (4, 3), (5, 5)]);
        let mut n = 0;
        for_each_offset(&[], [&[]], |_| n += 1);
        assert_eq!(n, 1);
        for_each_offset(&[0, 3], [&[3, 1]], |_| n += 1);
        assert_eq!(n, 1);
    }
}
