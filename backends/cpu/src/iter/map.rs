//! Typed element-wise maps over tensors: `out[i] = f(a[i], b[i], ...)`.
//!
//! Owns: the checked entry points that turn tensors into pointers and byte strides
//! for [`super::for_each_raw`], and the inner loops (contiguous, broadcast-scalar and
//! strided variants). Must not: decide output shapes or dtypes (callers do, via
//! [`crate::out`]).

use super::{broadcast_byte_strides, for_each_block, for_each_raw, GRAIN};
// Plain element types suffice: the maps only move values and check dtypes, so
// complex elements (which have no order and no real casts) map like any other.
use crate::parallel::SharedPtr;
use opal::tensor::KernelAccess;
use opal::Element as Elem;
use opal::{OpalError, Result, Tensor};
use std::mem::size_of;

#[inline(always)]
fn check_dtype<T: Elem>(t: &Tensor, op: &str, what: &str) -> Result<()> {
    if t.dtype() != T::DTYPE {
        return Err(dtype_mismatch(t, T::DTYPE, op, what));
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn dtype_mismatch(t: &Tensor, expected: opal::DType, op: &str, what: &str) -> OpalError {
    OpalError::msg(format!(
        "{op}: internal dtype mismatch for {what}: expected {expected}, got {}",
        t.dtype()
    ))
}

/// True when `t` is contiguous with exactly `out`'s sizes.
#[inline(always)]
fn same_contig(t: &Tensor, out: &Tensor) -> bool {
    t.is_contiguous() && super::same_sizes(t.sizes(), out.sizes())
}

/// Runs `f(start, end)` over `0..n`, split across threads above [`GRAIN`].
#[inline(always)]
pub(crate) fn par_ranges(n: usize, f: impl Fn(usize, usize) + Sync) {
    // Small loops first, inline in the caller: asking rayon for its thread count is
    // not free, and neither is a call for a one-element loop.
    if n < GRAIN {
        f(0, n);
        return;
    }
    par_ranges_split(n, &f);
}

#[inline(never)]
fn par_ranges_split(n: usize, f: &(impl Fn(usize, usize) + Sync)) {
    let threads = rayon::current_num_threads();
    if threads <= 1 {
        f(0, n);
        return;
    }
    let chunks = (n / GRAIN).clamp(1, threads * 4);
    let per = n.div_ceil(chunks);
    crate::parallel::fork_chunks(chunks, |c| {
        let (start, end) = (c * per, ((c + 1) * per).min(n));
        if start < end {
            f(start, end);
        }
    });
}

/// `out[i] = f(a[i])`; `a` broadcasts to `out`'s shape. `out` may be `a` (in-place).
pub fn map1<O: Elem, A: Elem>(
    out: &Tensor,
    a: &Tensor,
    op: &str,
    f: impl Fn(A) -> O + Sync,
) -> Result<()> {
    check_dtype::<O>(out, op, "output")?;
    check_dtype::<A>(a, op, "input")?;
    // Held until the loop ends: storages of inputs (shared) and output (exclusive).
    KernelAccess::scoped([a], [out], |[pa], [po]| {
        let pa = pa.cast_mut();
        if out.is_contiguous() && same_contig(a, out) {
            let (po, pa) = (SharedPtr(po as *mut O), SharedPtr(pa as *mut A));
            par_ranges(out.numel() as usize, |s, e| {
                // SAFETY: both tensors are contiguous with `numel` elements; `s..e` is in
                // range, and chunks write disjoint ranges of `out`.
                unsafe {
                    let (o, a) = (po.at(s), pa.at(s) as *const A);
                    for i in 0..e - s {
                        *o.add(i) = f(*a.add(i));
                    }
                }
            });
            return Ok(());
        }
        let shape = out.sizes();
        let so = broadcast_byte_strides(out.sizes(), out.strides(), size_of::<O>(), shape, op)?;
        let sa = broadcast_byte_strides(a.sizes(), a.strides(), size_of::<A>(), shape, op)?;
        // SAFETY: strides come from the tensors' own layouts broadcast to `shape`, so every
        // visited offset is inside its storage; `out` is written once per index.
        unsafe {
            for_each_block::<2, _>(shape, [po, pa], [&so, &sa], |b| {
                let (zo, za) = (size_of::<O>() as isize, size_of::<A>() as isize);
                if b.inner == [zo, za] {
                    // Rows of contiguous elements (a transposed copy's short rows
                    // among them): one tight loop per row, no call per row.
                    for r in 0..b.rows as isize {
                        let o = b.ptrs[0].offset(r * b.outer[0]) as *mut O;
                        let a = b.ptrs[1].offset(r * b.outer[1]) as *const A;
                        for i in 0..b.len {
                            *o.add(i) = f(*a.add(i));
                        }
                    }
                    return;
                }
                b.each_run(&|p, s, n| {
                    let (o, a) = (p[0] as *mut O, p[1] as *const A);
                    if s[1] == 0 {
                        let v = f(*a);
                        for i in 0..n {
                            *o.byte_offset(i as isize * s[0]) = v;
                        }
                    } else {
                        for i in 0..n as isize {
                            *o.byte_offset(i * s[0]) = f(*a.byte_offset(i * s[1]));
                        }
                    }
                });
            });
        }
        Ok(())
    })
}

/// `out[i] = f(a[i], b[i])`; `a` and `b` broadcast to `out`'s shape. `out` may be
/// `a` or `b` (in-place).
///
/// The same-shape contiguous case (most calls, and all of a small op's) is inlined
/// into the kernel; broadcasting and strided layouts run out of line.
#[inline]
pub fn map2<O: Elem, A: Elem, B: Elem>(
    out: &Tensor,
    a: &Tensor,
    b: &Tensor,
    op: &str,
    f: impl Fn(A, B) -> O + Sync,
) -> Result<()> {
    check_dtype::<O>(out, op, "output")?;
    check_dtype::<A>(a, op, "first input")?;
    check_dtype::<B>(b, op, "second input")?;
    KernelAccess::scoped([a, b], [out], |[pa, pb], [po]| {
        let (pa, pb) = (pa.cast_mut(), pb.cast_mut());
        if out.is_contiguous() && same_contig(a, out) && same_contig(b, out) {
            let (po, pa, pb) = (
                SharedPtr(po as *mut O),
                SharedPtr(pa as *mut A),
                SharedPtr(pb as *mut B),
            );
            par_ranges(out.numel() as usize, |s, e| {
                // SAFETY: all three are contiguous with `numel` elements; `s..e` is
                // in range, and chunks write disjoint ranges of `out`.
                unsafe {
                    let (o, a, b) = (po.at(s), pa.at(s) as *const A, pb.at(s) as *const B);
                    for i in 0..e - s {
                        *o.add(i) = f(*a.add(i), *b.add(i));
                    }
                }
            });
            return Ok(());
        }
        // SAFETY: the pointers address the tensors' first elements, and the scoped
        // access holds their storages while this closure runs.
        unsafe { map2_strided(out, a, b, [po, pa, pb], op, &f) }
    })
}

/// [`map2`] for broadcast or strided operands.
///
/// # Safety
/// `p` holds the addresses of `out`'s, `a`'s and `b`'s first elements, whose
/// storages the caller has borrowed (read for `a` and `b`, written for `out`).
#[inline(never)]
unsafe fn map2_strided<O: Elem, A: Elem, B: Elem>(
    out: &Tensor,
    a: &Tensor,
    b: &Tensor,
    p: [*mut u8; 3],
    op: &str,
    f: &(impl Fn(A, B) -> O + Sync),
) -> Result<()> {
    // A contiguous tensor with a one-element operand (a wrapped scalar: `x * 0.5`,
    // an SGD update's `lr * grad`) is one flat loop, with no stride vectors built.
    if out.is_contiguous() {
        let [po, pa, pb] = p;
        let n = out.numel() as usize;
        if same_contig(a, out) && b.numel() == 1 {
            // SAFETY: `b` has one element, at `pb`; `a` is contiguous like `out`.
            unsafe {
                let bv = *(pb as *const B);
                flat(po as *mut O, pa as *const A, n, &move |x| f(x, bv));
            }
            return Ok(());
        }
        if same_contig(b, out) && a.numel() == 1 {
            // SAFETY: as above, with the roles of `a` and `b` swapped.
            unsafe {
                let av = *(pa as *const A);
                flat(po as *mut O, pb as *const B, n, &move |x| f(av, x));
            }
            return Ok(());
        }
    }
    let shape = out.sizes();
    let so = broadcast_byte_strides(out.sizes(), out.strides(), size_of::<O>(), shape, op)?;
    let sa = broadcast_byte_strides(a.sizes(), a.strides(), size_of::<A>(), shape, op)?;
    let sb = broadcast_byte_strides(b.sizes(), b.strides(), size_of::<B>(), shape, op)?;
    let (zo, za, zb) = (
        size_of::<O>() as isize,
        size_of::<A>() as isize,
        size_of::<B>() as isize,
    );
    // SAFETY: as in `map1`; the storages are borrowed by the caller.
    unsafe {
        for_each_block::<3, _>(shape, p, [&so, &sa, &sb], |blk| {
            let s = blk.inner;
            // One stride pattern per block; rows run in tight loops.
            for r in 0..blk.rows as isize {
                let row = |k: usize| blk.ptrs[k].offset(r * blk.outer[k]);
                let (o, a, b) = (row(0) as *mut O, row(1) as *const A, row(2) as *const B);
                let n = blk.len;
                if s == [zo, za, zb] {
                    for i in 0..n {
                        *o.add(i) = f(*a.add(i), *b.add(i));
                    }
                } else if s == [zo, za, 0] {
                    let bv = *b;
                    for i in 0..n {
                        *o.add(i) = f(*a.add(i), bv);
                    }
                } else if s == [zo, 0, zb] {
                    let av = *a;
                    for i in 0..n {
                        *o.add(i) = f(av, *b.add(i));
                    }
                } else {
                    for i in 0..n as isize {
                        *o.byte_offset(i * s[0]) =
                            f(*a.byte_offset(i * s[1]), *b.byte_offset(i * s[2]));
                    }
                }
            }
        });
    }
    Ok(())
}

/// `o[i] = g(x[i])` for `i < n`, split across threads like the contiguous loops.
///
/// # Safety
/// `o` and `x` address `n` elements each (`o` writable, and only by this call;
/// `x` may be `o` itself).
#[inline(always)]
unsafe fn flat<O: Elem, X: Elem>(
    o: *mut O,
    x: *const X,
    n: usize,
    g: &(impl Fn(X) -> O + Sync + Copy),
) {
    let (po, px) = (SharedPtr(o), SharedPtr(x.cast_mut()));
    par_ranges(n, |s, e| {
        // A local copy: `g`'s captures (the scalar operand) then live in registers,
        // not behind a pointer that the stores to `o` might alias, so the scalar is
        // not reloaded per element and the loop vectorizes.
        let g = *g;
        // SAFETY: `s..e` is inside both ranges (caller's contract), and chunks write
        // disjoint ranges of `o`.
        unsafe {
            let (o, x) = (po.at(s), px.at(s) as *const X);
            for i in 0..e - s {
                *o.add(i) = g(*x.add(i));
            }
        }
    });
}

/// `out[i] = f(a[i], b[i], c[i])` with broadcasting; `out` may alias an input.
pub fn map3<O: Elem, A: Elem, B: Elem, C: Elem>(
    out: &Tensor,
    a: &Tensor,
    b: &Tensor,
    c: &Tensor,
    op: &str,
    f: impl Fn(A, B, C) -> O + Sync,
) -> Result<()> {
    check_dtype::<O>(out, op, "output")?;
    check_dtype::<A>(a, op, "first input")?;
    check_dtype::<B>(b, op, "second input")?;
    check_dtype::<C>(c, op, "third input")?;
    let (_acc, [pa, pb, pc], [po]) = KernelAccess::with_ptrs([a, b, c], [out])?;
    let ptrs = [po, pa.cast_mut(), pb.cast_mut(), pc.cast_mut()];
    let shape = out.sizes();
    let so = broadcast_byte_strides(out.sizes(), out.strides(), size_of::<O>(), shape, op)?;
    let sa = broadcast_byte_strides(a.sizes(), a.strides(), size_of::<A>(), shape, op)?;
    let sb = broadcast_byte_strides(b.sizes(), b.strides(), size_of::<B>(), shape, op)?;
    let sc = broadcast_byte_strides(c.sizes(), c.strides(), size_of::<C>(), shape, op)?;
    let z = [
        size_of::<O>() as isize,
        size_of::<A>() as isize,
        size_of::<B>() as isize,
        size_of::<C>() as isize,
    ];
    // SAFETY: as in `map1`.
    unsafe {
        for_each_raw::<4, _>(shape, ptrs, [&so, &sa, &sb, &sc], |p, s, n| {
            let (o, a, b, c) = (
                p[0] as *mut O,
                p[1] as *const A,
                p[2] as *const B,
                p[3] as *const C,
            );
            if s == z {
                for i in 0..n {
                    *o.add(i) = f(*a.add(i), *b.add(i), *c.add(i));
                }
            } else {
                for i in 0..n as isize {
                    *o.byte_offset(i * s[0]) = f(
                        *a.byte_offset(i * s[1]),
                        *b.byte_offset(i * s[2]),
                        *c.byte_offset(i * s[3]),
                    );
                }
            }
        });
    }
    Ok(())
}

/// `t[i] = f(t[i])` in place.
pub fn map_in_place<T: Elem>(t: &Tensor, op: &str, f: impl Fn(T) -> T + Sync) -> Result<()> {
    map1::<T, T>(t, t, op, f)
}

/// Calls `f` on every element of `a` (any strides), serially in index order.
pub fn visit1<A: Elem>(a: &Tensor, op: &str, mut f: impl FnMut(A)) -> Result<()> {
    check_dtype::<A>(a, op, "input")?;
    let (_acc, [p], []) = KernelAccess::with_ptrs([a], [])?;
    let p = p.cast_mut();
    let shape = a.sizes();
    let sa = broadcast_byte_strides(shape, a.strides(), size_of::<A>(), shape, op)?;
    let numel: i64 = shape.iter().product();
    if numel <= 0 {
        return Ok(());
    }
    let g = super::collapse::<1>(shape, [&sa]);
    let cell = std::cell::RefCell::new(&mut f);
    // Serial visit: run_range is called on this thread only because `numel` is
    // iterated with one range (run_geometry would parallelise, so use the range form).
    let visit = |p: [*mut u8; 1], s: [isize; 1], n: usize| {
        let mut f = cell.borrow_mut();
        for i in 0..n as isize {
            // SAFETY: `p[0]` and stride address elements of `a` (caller layout).
            unsafe { f(*(p[0].offset(i * s[0]) as *const A)) }
        }
    };
    // SAFETY: offsets derive from `a`'s own layout.
    unsafe { super::run_range_serial(&g, [p], numel as usize, &visit) };
    Ok(())
}
