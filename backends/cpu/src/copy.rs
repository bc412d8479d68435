//! Strided copies between any layouts and dtypes, complex included: the one
//! routine every "materialise this view" or "cast this tensor" need goes through.
//!
//! Owns: [`copy_into`] (broadcasting, casting copy), [`contiguous`], [`to_dtype`].
//! Must not: decide output shapes for ops (callers do).

use crate::dtype_dispatch::{Cplx, Elem};
use crate::iter::{broadcast_byte_strides, collapse, map1, run_geometry_blocks, Block};
use crate::out::empty_uninit as empty;
use crate::{dispatch_all, dispatch_complex};
use opal::tensor::KernelAccess;
use opal::OpalError;
use opal::{DType, Result, Tensor};

/// Copies `src` into `dst`, broadcasting `src` to `dst`'s shape and converting the
/// dtype with PyTorch's cast semantics (floats to ints truncate, anything to bool
/// tests for non-zero). Any strides on either side.
pub fn copy_into(dst: &Tensor, src: &Tensor, op: &str) -> Result<()> {
    if dst.dtype() == src.dtype() {
        let plain = dst.is_contiguous() && src.is_contiguous() && dst.sizes() == src.sizes();
        if !plain {
            match dst.dtype().size() {
                1 => return copy_bytes_strided::<1>(dst, src, op),
                2 => return copy_bytes_strided::<2>(dst, src, op),
                4 => return copy_bytes_strided::<4>(dst, src, op),
                8 => return copy_bytes_strided::<8>(dst, src, op),
                16 => return copy_bytes_strided::<16>(dst, src, op),
                _ => {}
            }
        }
        if dst.dtype().is_complex() {
            return dispatch_complex!(dst.dtype(), op, |T, R| map1::<T, T>(dst, src, op, |x| x));
        }
        return dispatch_all!(dst.dtype(), op, |T| map1::<T, T>(dst, src, op, |x| x));
    }
    match (dst.dtype().is_complex(), src.dtype().is_complex()) {
        (true, true) => dispatch_complex!(dst.dtype(), op, |D, DR| {
            dispatch_complex!(src.dtype(), op, |S, SR| map1::<D, S>(dst, src, op, |x| {
                D::new(x.re().cast(), x.im().cast())
            }))
        }),
        (true, false) => dispatch_complex!(dst.dtype(), op, |D, DR| {
            dispatch_all!(src.dtype(), op, |S| map1::<D, S>(dst, src, op, |x| {
                D::from_re(x.cast())
            }))
        }),
        // To a real dtype: the imaginary part is dropped (PyTorch warns, once, and
        // does the same), except that a bool is true when either part is non-zero.
        (false, true) => dispatch_complex!(src.dtype(), op, |S, SR| {
            if dst.dtype() == DType::Bool {
                return map1::<bool, S>(dst, src, op, |x| x.re() != 0.0 || x.im() != 0.0);
            }
            dispatch_all!(dst.dtype(), op, |D| map1::<D, S>(dst, src, op, |x| x
                .re()
                .cast::<D>()))
        }),
        (false, false) => dispatch_all!(dst.dtype(), op, |D| {
            dispatch_all!(src.dtype(), op, |S| map1::<D, S>(dst, src, op, |x| x
                .cast::<D>()))
        }),
    }
}

/// A same-dtype copy between any layouts (`src` broadcast to `dst`), moving
/// elements of `S` bytes as bytes: whole rows of contiguous elements go as
/// fixed-size blocks. Why: a transposed view's copy (an attention head's
/// `[B, T, H, d]` from `[B, H, T, d]`) is hundreds of rows of 8 floats, which the
/// typed element loop ran one element at a time (its vector loop needs longer
/// rows): about 6 instructions per element instead of about 1.
fn copy_bytes_strided<const S: usize>(dst: &Tensor, src: &Tensor, op: &str) -> Result<()> {
    KernelAccess::scoped([src], [dst], |[ps], [pd]| {
        let shape = dst.sizes();
        let numel: i64 = shape.iter().product();
        if numel <= 0 {
            return Ok(());
        }
        let sd = broadcast_byte_strides(dst.sizes(), dst.strides(), S, shape, op)?;
        let ss = broadcast_byte_strides(src.sizes(), src.strides(), S, shape, op)?;
        // A copy may visit its indices in any order: order the dims by the
        // destination's strides, so that a permuted layout (a clone of `x.t()`
        // keeps its strides) collapses into contiguous runs instead of striding.
        let mut order: Vec<usize> = (0..shape.len()).collect();
        order.sort_by_key(|&d| std::cmp::Reverse((sd[d].unsigned_abs(), ss[d].unsigned_abs())));
        let pick = |v: &[isize]| order.iter().map(|&d| v[d]).collect::<Vec<_>>();
        let (sd, ss) = (pick(&sd), pick(&ss));
        let shape: Vec<i64> = order.iter().map(|&d| shape[d]).collect();
        let mut g = collapse::<2>(&shape, [&sd, &ss]);
        if let Some(plan) = TransposePlan::new(&g, S) {
            // SAFETY: as below: the plan only reorders the same geometry's indices.
            unsafe { plan.run::<S>(pd, ps) };
            return Ok(());
        }
        // A copy may visit its indices in any order: make the longest of the outer
        // dims the rows of each block, so the per-block cost is paid as rarely as
        // possible (16 rows of 8 floats per block instead of 4 for an attention
        // head's transposed copy).
        if g.shape.len() >= 3 {
            let longest = (1..g.shape.len())
                .max_by_key(|&d| g.shape[d])
                .expect("at least three dims");
            g.shape.swap(1, longest);
            g.strides.swap(1, longest);
        }
        let elem = S as isize;
        // SAFETY: strides are the tensors' own, broadcast to `shape` (collapsing and
        // reordering keep the offsets), so each is in its storage; each `dst` index is
        // written once; a read meets a write only in a self-copy, at the same index.
        unsafe {
            run_geometry_blocks(&g, [pd, ps.cast_mut()], numel as usize, &|b: Block<2>| {
                if b.inner != [elem, elem] {
                    b.each_run(&|p, st, n| {
                        for i in 0..n as isize {
                            copy_block::<S>(p[0].offset(i * st[0]), p[1].offset(i * st[1]));
                        }
                    });
                    return;
                }
                match b.len * S {
                    16 => copy_rows::<16>(&b),
                    32 => copy_rows::<32>(&b),
                    64 => copy_rows::<64>(&b),
                    bytes => {
                        for r in 0..b.rows as isize {
                            copy_run(
                                b.ptrs[0].offset(r * b.outer[0]),
                                b.ptrs[1].offset(r * b.outer[1]),
                                bytes,
                            );
                        }
                    }
                }
            });
        }
        Ok(())
    })
}

/// A copy whose destination runs along one dim while its source runs along
/// another (`x.t().contiguous()`, an NCHW -> NHWC permute): done in square tiles so
/// that both the rows read and the rows written stay in L1. Visiting the
/// destination in order instead reads the source one cache line per element.
struct TransposePlan {
    /// Sizes of the destination's unit-stride dim (`a`) and the source's (`b`).
    a: usize,
    b: usize,
    /// Byte strides: the source's along `a`, the destination's along `b`.
    src_a: isize,
    dst_b: isize,
    /// The other dims: sizes and `[dst, src]` byte strides.
    outer: Vec<(usize, [isize; 2])>,
}

/// The largest tile in bytes: 64 x 64 one-byte elements.
const TILE_BYTES: usize = 4096;

/// Tile side in elements: one 64-byte cache line of the contiguous side (at least
/// 8). Larger tiles lose to set conflicts: rows a power of two apart share L1 sets.
const fn tile(elem: usize) -> usize {
    // `TILE_BYTES` holds a tile of any element size.
    if elem >= 8 {
        8
    } else {
        64 / elem
    }
}

impl TransposePlan {
    fn new(g: &crate::iter::Geometry<2>, elem: usize) -> Option<TransposePlan> {
        let elem = elem as isize;
        if g.shape.len() < 2 || g.strides[0][0] != elem || g.strides[0][1] == elem {
            return None;
        }
        let d = (1..g.shape.len()).find(|&d| g.strides[d][1] == elem)?;
        let (a, b) = (g.shape[0], g.shape[d]);
        if a < 8 || b < 8 {
            return None;
        }
        let outer = (1..g.shape.len())
            .filter(|&k| k != d)
            .map(|k| (g.shape[k], g.strides[k]))
            .collect();
        Some(TransposePlan {
            a,
            b,
            src_a: g.strides[0][1],
            dst_b: g.strides[d][0],
            outer,
        })
    }

    /// # Safety
    /// `dst` and `src` are the base pointers of the geometry the plan came from,
    /// every index of which is in bounds of its operand; `dst` and `src` do not
    /// overlap (a same-storage transpose is not a self-copy at equal indices).
    unsafe fn run<const S: usize>(&self, dst: *mut u8, src: *const u8) {
        const { assert!(S > 0) };
        let t_side = tile(S);
        let tiles_a = self.a.div_ceil(t_side);
        let tiles_b = self.b.div_ceil(t_side);
        let per_plane = tiles_a * tiles_b;
        let planes: usize = self.outer.iter().map(|o| o.0).product();
        let total = per_plane * planes;
        let (dst, src) = (dst as usize, src as usize);
        let work = |t: usize| {
            let (mut plane, tile) = (t / per_plane, t % per_plane);
            let (ta, tb) = (tile % tiles_a, tile / tiles_a);
            let (mut od, mut os) = (0isize, 0isize);
            for &(n, [sd, ss]) in &self.outer {
                let i = (plane % n) as isize;
                plane /= n;
                od += i * sd;
                os += i * ss;
            }
            let (a0, b0) = (ta * t_side, tb * t_side);
            let (a1, b1) = ((a0 + t_side).min(self.a), (b0 + t_side).min(self.b));
            // Through a buffer: each source row's run is read whole, then each
            // destination row's run is written whole. Moving element by element
            // instead touches a tile's rows one element at a time, and rows a power
            // of two apart share L1 sets, so every access missed.
            let (na, nb) = (a1 - a0, b1 - b0);
            let mut buf = [0u8; TILE_BYTES];
            for i in 0..na {
                // SAFETY: (a0 + i, b0 .. b1, plane) are indices of the geometry and
                // the source is contiguous along b, so the run is in bounds; the
                // buffer holds t_side * t_side elements of S bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (src as *const u8)
                            .offset(os + (a0 + i) as isize * self.src_a + (b0 * S) as isize),
                        buf.as_mut_ptr().add(i * t_side * S),
                        nb * S,
                    );
                }
            }
            for j in 0..nb {
                let row = (dst as *mut u8)
                    .wrapping_offset(od + (b0 + j) as isize * self.dst_b + (a0 * S) as isize);
                for i in 0..na {
                    // SAFETY: (a0 + i, b0 + j, plane) is an index of the geometry and
                    // the destination is contiguous along a; `i * t_side + j` is in
                    // the buffer.
                    unsafe {
                        copy_block::<S>(row.add(i * S), buf.as_ptr().add((i * t_side + j) * S));
                    }
                }
            }
        };
        // Tiles are disjoint in the destination, so any split among threads is safe.
        // A thread claims 16 KiB of tiles at a time: claiming each 1 KiB tile on
        // its own made the shared counter's cache line bounce between threads
        // about as often as a tile was copied.
        if total * t_side * t_side * S < 1 << 16 {
            (0..total).for_each(work);
        } else {
            let group = (16_384 / (t_side * t_side * S)).max(1);
            crate::parallel::fork_chunks(total.div_ceil(group), |c| {
                (c * group..total.min((c + 1) * group)).for_each(work)
            });
        }
    }
}

/// The rows of a block whose runs are `N` contiguous bytes in both operands.
///
/// # Safety
/// As for [`copy_block`], for every row of the block (`[dst, src]` pointers).
#[inline(always)]
unsafe fn copy_rows<const N: usize>(b: &Block<2>) {
    for r in 0..b.rows as isize {
        // SAFETY: caller's contract.
        unsafe {
            copy_block::<N>(
                b.ptrs[0].offset(r * b.outer[0]),
                b.ptrs[1].offset(r * b.outer[1]),
            )
        }
    }
}

/// Copies `N` bytes, all read before any is written.
///
/// # Safety
/// Both ranges are valid; they are disjoint or identical.
#[inline(always)]
unsafe fn copy_block<const N: usize>(dst: *mut u8, src: *const u8) {
    // SAFETY: caller's contract; unaligned accesses of a byte array.
    unsafe {
        let v = src.cast::<[u8; N]>().read_unaligned();
        dst.cast::<[u8; N]>().write_unaligned(v);
    }
}

/// Copies a run of `n` bytes: 32-byte blocks, then `memmove` for the tail (and
/// for long runs, where it is faster).
///
/// # Safety
/// Both ranges are valid; they are disjoint or identical.
#[inline(always)]
unsafe fn copy_run(mut dst: *mut u8, mut src: *const u8, mut n: usize) {
    // SAFETY: caller's contract; every step stays inside the two ranges.
    unsafe {
        if n > 256 {
            std::ptr::copy(src, dst, n);
            return;
        }
        while n >= 32 {
            copy_block::<32>(dst, src);
            (dst, src, n) = (dst.add(32), src.add(32), n - 32);
        }
        if n > 0 {
            std::ptr::copy(src, dst, n);
        }
    }
}

/// `t` itself when contiguous, else a contiguous copy.
pub fn contiguous(t: &Tensor) -> Result<Tensor> {
    if t.is_contiguous() {
        return Ok(t.clone());
    }
    let out = empty(t.sizes(), t.dtype())?;
    copy_into(&out, t, "contiguous")?;
    Ok(out)
}

/// `t` itself when it already has `dtype`, else a contiguous converted copy.
pub fn to_dtype(t: &Tensor, dtype: DType) -> Result<Tensor> {
    if t.dtype() == dtype {
        return Ok(t.clone());
    }
    let out = empty(t.sizes(), dtype)?;
    copy_into(&out, t, "to_dtype")?;
    Ok(out)
}

/// Reads a tensor's elements in logical (row-major) order as `T`, converting.
pub fn to_vec_as<T: opal::Element>(t: &Tensor) -> Result<Vec<T>> {
    let c = contiguous(&to_dtype(t, T::DTYPE)?)?;
    // `c` may be `t` itself: read it under a shared borrow, like any input.
    let acc = opal::tensor::KernelAccess::new(&[&c], &[])?;
    let p = acc.read_ptr::<T>(&c)?;
    let n = c.numel() as usize;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        OpalError::msg(format!(
            "to_vec_as: cannot allocate {} bytes for {n} elements",
            n.saturating_mul(std::mem::size_of::<T>())
        ))
    })?;
    // SAFETY: `c` is contiguous with `n` elements of type T starting at `p`, and
    // `acc` holds a shared borrow of its storage while we read.
    v.extend_from_slice(unsafe { std::slice::from_raw_parts(p, n) });
    Ok(v)
}

/// The real and imaginary parts of complex `t` as two contiguous real tensors of
/// `t`'s shape (F32 for C64, F64 for C128): how reductions run complex inputs
/// through their real kernels.
pub fn complex_parts(t: &Tensor, op: &str) -> Result<(Tensor, Tensor)> {
    let rt = t.dtype().to_real();
    let (re, im) = (empty(t.sizes(), rt)?, empty(t.sizes(), rt)?);
    dispatch_complex!(t.dtype(), op, |T, R| {
        map1::<R, T>(&re, t, op, |z| z.re())?;
        map1::<R, T>(&im, t, op, |z| z.im())
    })?;
    Ok((re, im))
}

/// Writes `re + im i` into complex `out` (`re`, `im` of `out`'s component dtype,
/// broadcast to its shape).
pub fn join_parts(out: &Tensor, re: &Tensor, im: &Tensor, op: &str) -> Result<()> {
    dispatch_complex!(out.dtype(), op, |T, R| {
        let (re, im) = (
            to_dtype(re, out.dtype().to_real())?,
            to_dtype(im, out.dtype().to_real())?,
        );
        crate::iter::map2::<T, R, R>(out, &re, &im, op, T::new)
    })
}
