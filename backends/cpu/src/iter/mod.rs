//! The strided, broadcasting N-operand loop that every element-wise CPU kernel
//! (and the strided copy) runs on; Opal's counterpart of a TensorIterator.
//!
//! Owns: iteration geometry (broadcast shapes, byte strides, collapsing of
//! contiguous dimensions), splitting work across threads (through
//! `parallel::fork_chunks`), and the typed
//! `map*` helpers built on it. Must not: know any op's math, or allocate tensors
//! (output preparation lives in [`crate::out`]).
//!
//! # For kernel authors
//!
//! * [`opal::rules::broadcast_shapes`]`("op", &[a.sizes(), b.sizes()])` — the
//!   broadcast shape or an error naming the op (one rule for every backend).
//! * [`map1`], [`map2`], [`map3`] — `out[i] = f(a[i], ...)` over tensors whose
//!   shapes broadcast to `out`'s shape, with any strides (including 0 and
//!   overlapping-with-`out` for in-place). Element types are checked against the
//!   tensors' dtypes. Contiguous, same-shape operands take a single flat loop over
//!   raw slices that LLVM vectorizes; more than [`GRAIN`] elements run in parallel.
//! * [`for_each_raw`] — the untyped primitive: calls `f(ptrs, byte_strides, len)`
//!   for each innermost run of the iteration space.
//! * [`collapse`] — merge dimensions that are contiguous in every operand.
//!
//! Zero-size shapes iterate nothing; zero-dim tensors iterate once.

mod map;

pub use map::{map1, map2, map3, map_in_place, visit1};

use opal::{OpalError, Result};

/// Element count from which loops are split across threads. Below it the cost of
/// handing chunks to helper threads exceeds the gain.
pub const GRAIN: usize = 32 * 1024;

/// [`GRAIN`] for loops whose per-element math costs about as much as ten adds or
/// more (GELU's erf and exp: some 15 instructions an element): a 16K-element
/// activation of a small model is then worth two threads.
pub const COSTLY_GRAIN: usize = 4 * 1024;

/// Whether two shapes are equal. Shapes are short: an element loop beats the
/// `memcmp` call that slice equality makes.
#[inline]
pub fn same_sizes(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Byte strides of a tensor with `sizes`/`strides` (elements) viewed as `shape`
/// under broadcasting: new leading dims and size-1 dims get stride 0.
pub fn broadcast_byte_strides(
    sizes: &[i64],
    strides: &[i64],
    elem_size: usize,
    shape: &[i64],
    op: &str,
) -> Result<Vec<isize>> {
    if sizes.len() > shape.len() {
        return Err(OpalError::shape(format!(
            "{op}: tensor of shape {sizes:?} cannot be broadcast to {shape:?}"
        )));
    }
    let off = shape.len() - sizes.len();
    let mut out = vec![0isize; shape.len()];
    for i in 0..sizes.len() {
        if sizes[i] == shape[off + i] {
            out[off + i] = if sizes[i] == 1 {
                0
            } else {
                strides[i] as isize * elem_size as isize
            };
        } else if sizes[i] != 1 {
            return Err(OpalError::shape(format!(
                "{op}: tensor of shape {sizes:?} cannot be broadcast to {shape:?}"
            )));
        }
    }
    Ok(out)
}

/// Iteration geometry after collapsing: dims are innermost-first.
#[derive(Debug, Clone, PartialEq)]
pub struct Geometry<const N: usize> {
    /// Sizes, innermost first, no size-1 dims.
    pub shape: Vec<usize>,
    /// Byte strides of each operand per dim, innermost first.
    pub strides: Vec<[isize; N]>,
}

/// Drops size-1 dims and merges neighbouring dims that are contiguous with each
/// other in every operand, so that e.g. a contiguous 3-d add is one flat loop.
/// `shape` and `strides` are outermost-first (tensor order).
pub fn collapse<const N: usize>(shape: &[i64], strides: [&[isize]; N]) -> Geometry<N> {
    let mut g = Geometry {
        shape: Vec::with_capacity(shape.len()),
        strides: Vec::with_capacity(shape.len()),
    };
    for d in (0..shape.len()).rev() {
        let size = shape[d] as usize;
        if size == 1 {
            continue;
        }
        let st: [isize; N] = std::array::from_fn(|k| strides[k][d]);
        if let (Some(&inner), Some(inner_st)) = (g.shape.last(), g.strides.last()) {
            let mergeable = (0..N).all(|k| st[k] == inner_st[k] * inner as isize);
            if mergeable {
                *g.shape.last_mut().expect("non-empty") *= size;
                continue;
            }
        }
        g.shape.push(size);
        g.strides.push(st);
    }
    g
}

/// A block of the iteration space: `rows` runs of `len` elements each. Run `r` of
/// operand `k` starts at `ptrs[k] + r * outer[k]` bytes, and its elements are
/// `inner[k]` bytes apart. Kernels whose runs are short (a transposed copy's rows
/// of 8) loop over `rows` themselves instead of being called once per run.
#[derive(Debug, Clone, Copy)]
pub struct Block<const N: usize> {
    pub ptrs: [*mut u8; N],
    pub inner: [isize; N],
    pub len: usize,
    pub outer: [isize; N],
    pub rows: usize,
}

impl<const N: usize> Block<N> {
    /// Calls `f(ptrs, inner, len)` for each run of the block.
    ///
    /// # Safety
    /// The block must come from [`for_each_block`] (or the loops built on it), whose
    /// contract makes every run's addresses valid.
    #[inline(always)]
    pub unsafe fn each_run(&self, f: &impl Fn([*mut u8; N], [isize; N], usize)) {
        for r in 0..self.rows as isize {
            // SAFETY: run `r` of the block lies inside every operand (caller contract).
            let p: [*mut u8; N] =
                std::array::from_fn(|k| unsafe { self.ptrs[k].offset(r * self.outer[k]) });
            f(p, self.inner, self.len);
        }
    }
}

/// Calls `f(ptrs, byte_strides, len)` for every innermost run of the iteration
/// space `shape` (outermost-first), where `ptrs[k]` points at operand `k`'s first
/// element of the run. Splits across threads above [`GRAIN`] elements.
///
/// # Safety
/// `ptrs[k]` with `strides[k]` (bytes, broadcast to `shape`) must address valid
/// elements of operand `k` for every index of `shape`, and written operands must
/// not map two indices to one element (reads may overlap writes only at the same
/// index, as in-place ops do).
pub unsafe fn for_each_raw<const N: usize, F>(
    shape: &[i64],
    ptrs: [*mut u8; N],
    strides: [&[isize]; N],
    f: F,
) where
    F: Fn([*mut u8; N], [isize; N], usize) + Sync,
{
    // SAFETY: forwarded caller contract; each block's runs are visited once.
    unsafe { for_each_block(shape, ptrs, strides, |b: Block<N>| b.each_run(&f)) }
}

/// [`for_each_raw`] in blocks of whole rows: `f` is called once per [`Block`]
/// (all the rows of the two innermost collapsed dims that a thread's range
/// covers), so that kernels with short rows pay the call once per block.
///
/// # Safety
/// As [`for_each_raw`].
pub unsafe fn for_each_block<const N: usize, F>(
    shape: &[i64],
    ptrs: [*mut u8; N],
    strides: [&[isize]; N],
    f: F,
) where
    F: Fn(Block<N>) + Sync,
{
    let numel: i64 = shape.iter().product();
    if numel <= 0 {
        return;
    }
    let g = collapse(shape, strides);
    // SAFETY: forwarded caller contract.
    unsafe { run_geometry_blocks(&g, ptrs, numel as usize, &f) }
}

/// Runs `f` over a collapsed geometry, in parallel when large.
///
/// # Safety
/// As [`for_each_raw`].
pub unsafe fn run_geometry<const N: usize, F>(
    g: &Geometry<N>,
    ptrs: [*mut u8; N],
    numel: usize,
    f: &F,
) where
    F: Fn([*mut u8; N], [isize; N], usize) + Sync,
{
    // SAFETY: forwarded caller contract.
    unsafe { run_geometry_blocks(g, ptrs, numel, &|b: Block<N>| b.each_run(f)) }
}

/// [`run_geometry`] in blocks.
///
/// # Safety
/// As [`for_each_raw`].
pub(crate) unsafe fn run_geometry_blocks<const N: usize, F>(
    g: &Geometry<N>,
    ptrs: [*mut u8; N],
    numel: usize,
    f: &F,
) where
    F: Fn(Block<N>) + Sync,
{
    if g.shape.is_empty() {
        // Zero-dim (or all size-1): one element.
        f(Block {
            ptrs,
            inner: [0; N],
            len: 1,
            outer: [0; N],
            rows: 1,
        });
        return;
    }
    let threads = rayon::current_num_threads();
    if numel < GRAIN || threads <= 1 {
        // SAFETY: forwarded caller contract; the range is the whole space.
        unsafe { run_blocks(g, ptrs, 0, numel, f) };
        return;
    }
    let chunks = (numel / GRAIN).clamp(1, threads * 4);
    let per = numel.div_ceil(chunks);
    let shared = ptrs.map(crate::parallel::SharedPtr);
    crate::parallel::fork_chunks(chunks, |c| {
        let start = c * per;
        let end = ((c + 1) * per).min(numel);
        if start < end {
            // SAFETY: disjoint ranges; forwarded caller contract.
            unsafe { run_blocks(g, shared.map(|p| p.0), start, end, f) }
        }
    });
}

/// Visits the whole space of `g` on the calling thread, in index order.
///
/// # Safety
/// As [`for_each_raw`].
pub(crate) unsafe fn run_range_serial<const N: usize, F>(
    g: &Geometry<N>,
    ptrs: [*mut u8; N],
    numel: usize,
    f: &F,
) where
    F: Fn([*mut u8; N], [isize; N], usize),
{
    if g.shape.is_empty() {
        f(ptrs, [0; N], 1);
    } else {
        // SAFETY: forwarded; blocks are visited in index order, rows in order.
        unsafe { run_blocks(g, ptrs, 0, numel, &|b: Block<N>| b.each_run(f)) }
    }
}

/// Dims kept on the stack while walking a range; more take a heap buffer.
const STACK_DIMS: usize = 8;

/// Visits linear indices `start..end` (innermost dim fastest) of a non-empty `g`,
/// as blocks: whole rows of dim 0 are grouped along dim 1, a partial row (at the
/// range's ends) is a block of one row.
///
/// # Safety
/// As [`for_each_raw`].
#[allow(clippy::needless_range_loop)] // parallel arrays indexed by dim and operand
unsafe fn run_blocks<const N: usize, F>(
    g: &Geometry<N>,
    base: [*mut u8; N],
    start: usize,
    end: usize,
    f: &F,
) where
    F: Fn(Block<N>),
{
    let nd = g.shape.len();
    let mut on_stack = [0usize; STACK_DIMS];
    let mut on_heap = Vec::new();
    let idx: &mut [usize] = if nd <= STACK_DIMS {
        &mut on_stack[..nd]
    } else {
        on_heap.resize(nd, 0);
        &mut on_heap
    };
    let mut rem = start;
    let mut off = [0isize; N];
    for d in 0..nd {
        idx[d] = rem % g.shape[d];
        rem /= g.shape[d];
        for k in 0..N {
            off[k] += idx[d] as isize * g.strides[d][k];
        }
    }
    let (n0, inner) = (g.shape[0], g.strides[0]);
    let (n1, outer) = if nd > 1 {
        (g.shape[1], g.strides[1])
    } else {
        (1, [0; N])
    };
    let mut pos = start;
    while pos < end {
        // SAFETY: `off` is the byte offset of index `idx` within each operand, valid
        // by the caller contract.
        let ptrs: [*mut u8; N] = std::array::from_fn(|k| unsafe { base[k].offset(off[k]) });
        let rest = end - pos;
        // The dim at which the carry starts.
        let mut d;
        if nd > 1 && idx[0] == 0 && rest >= n0 {
            let rows = (rest / n0).min(n1 - idx[1]);
            f(Block {
                ptrs,
                inner,
                len: n0,
                outer,
                rows,
            });
            pos += rows * n0;
            idx[1] += rows;
            for k in 0..N {
                off[k] += rows as isize * outer[k];
            }
            d = 1;
        } else {
            let len = (n0 - idx[0]).min(rest);
            f(Block {
                ptrs,
                inner,
                len,
                outer,
                rows: 1,
            });
            pos += len;
            idx[0] += len;
            for k in 0..N {
                off[k] += len as isize * inner[k];
            }
            d = 0;
        }
        // Carry outward from dim `d`.
        while d < nd && idx[d] == g.shape[d] {
            for k in 0..N {
                off[k] -= g.shape[d] as isize * g.strides[d][k];
            }
            idx[d] = 0;
            d += 1;
            if d < nd {
                idx[d] += 1;
                for k in 0..N {
                    off[k] += g.strides[d][k];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapse_merges_contiguous_dims() {
        let g = collapse::<2>(&[2, 3, 4], [&[48, 16, 4], &[0, 0, 0]]);
        assert_eq!(g.shape, vec![24]);
        assert_eq!(g.strides, vec![[4, 0]]);
        // transposed operand blocks merging
        let g = collapse::<2>(&[2, 3], [&[12, 4], &[4, 8]]);
        assert_eq!(g.shape, vec![3, 2]);
        // size-1 dims vanish
        let g = collapse::<1>(&[1, 5, 1], [&[0, 4, 0]]);
        assert_eq!(g.shape, vec![5]);
    }

    fn visit(shape: &[i64], strides: &[isize]) -> Vec<isize> {
        let seen = std::sync::Mutex::new(Vec::new());
        // SAFETY: the pointer is never dereferenced; offsets are only recorded.
        unsafe {
            for_each_raw::<1, _>(shape, [std::ptr::null_mut()], [strides], |p, s, n| {
                let mut v = seen.lock().unwrap();
                for i in 0..n as isize {
                    v.push(p[0] as isize + i * s[0]);
                }
            });
        }
        let mut v = seen.into_inner().unwrap();
        v.sort();
        v
    }

    #[test]
    fn blocks_group_whole_rows_and_cover_every_index_once() {
        // A transposed copy's layout: rows of 8 contiguous elements, 6 of them per
        // outer step; large enough (with the last shape) to split across threads
        // mid-row.
        // Dims 0 and 1 swapped (as `transpose(0, 1)` leaves them), so that they
        // cannot be collapsed into one.
        for shape in [vec![5i64, 6, 8], vec![3, 4001, 13]] {
            let strides: Vec<isize> = vec![shape[2] as isize, (shape[0] * shape[2]) as isize, 1];
            let seen = std::sync::Mutex::new((Vec::new(), 0usize));
            // SAFETY: the pointer is never dereferenced; offsets are only recorded.
            unsafe {
                for_each_block::<1, _>(&shape, [std::ptr::null_mut()], [&strides], |b| {
                    let mut v = seen.lock().unwrap();
                    v.1 = v.1.max(b.rows);
                    for r in 0..b.rows as isize {
                        for i in 0..b.len as isize {
                            v.0.push(b.ptrs[0] as isize + r * b.outer[0] + i * b.inner[0]);
                        }
                    }
                });
            }
            let (mut v, most_rows) = seen.into_inner().unwrap();
            v.sort();
            let n: i64 = shape.iter().product();
            assert_eq!(v, (0..n as isize).collect::<Vec<_>>(), "{shape:?}");
            assert!(most_rows > 1, "{shape:?}: rows were not grouped");
        }
    }

    #[test]
    fn visits_every_index_once() {
        // a transposed 3x4 view: offsets 0..12 each once
        let v = visit(&[3, 4], &[1, 3]);
        assert_eq!(v, (0..12).collect::<Vec<_>>());
        assert!(visit(&[3, 0], &[1, 1]).is_empty());
        assert_eq!(visit(&[], &[]), vec![0]);
        // large enough to go parallel, with a carry across several dims
        let v = visit(&[7, 5, 3001], &[15005, 3001, 1]);
        assert_eq!(v.len(), 7 * 5 * 3001);
        assert!(v.windows(2).all(|w| w[1] == w[0] + 1));
        let v = visit(&[300, 301], &[1, 300]);
        assert_eq!(v, (0..300 * 301).collect::<Vec<_>>());
    }
}
