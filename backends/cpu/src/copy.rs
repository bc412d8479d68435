//! Strided copies between any layouts and dtypes: the one routine every
//! "materialise this view" or "cast this tensor" need goes through.
//!
//! Owns: [`copy_into`] (broadcasting, casting copy), [`contiguous`], [`to_dtype`].
//! Must not: decide output shapes for ops (callers do).

use crate::dispatch_all;
use crate::dtype_dispatch::Elem;
use crate::iter::{broadcast_byte_strides, collapse, map1, run_geometry_blocks, Block};
use crate::out::empty_uninit as empty;
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
        return dispatch_all!(dst.dtype(), op, |T| map1::<T, T>(dst, src, op, |x| x));
    }
    dispatch_all!(dst.dtype(), op, |D| {
        dispatch_all!(src.dtype(), op, |S| map1::<D, S>(dst, src, op, |x| x
            .cast::<D>()))
    })
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
        let mut g = collapse::<2>(shape, [&sd, &ss]);
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
    if dtype.is_complex() || t.dtype().is_complex() {
        return Err(OpalError::not_implemented("to_dtype(complex)", "CPU"));
    }
    let out = empty(t.sizes(), dtype)?;
    copy_into(&out, t, "to_dtype")?;
    Ok(out)
}

/// Reads a tensor's elements in logical (row-major) order as `T`, converting.
pub fn to_vec_as<T: Elem>(t: &Tensor) -> Result<Vec<T>> {
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
