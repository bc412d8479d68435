//! Tensor metadata: sizes, strides, storage offset and derived facts, stored inline
//! for up to [`INLINE_DIMS`] dimensions so creating a tensor allocates no metadata.
//!
//! Owns: shape arithmetic and validation. Must not: touch data or storage.

use crate::dtype::DType;
use crate::error::{OpalError, Result};

/// Dimensions stored without a heap allocation.
pub(crate) const INLINE_DIMS: usize = 5;

/// Sizes followed by strides.
enum Dims {
    Inline { n: u8, v: [i64; 2 * INLINE_DIMS] },
    Heap(Box<[i64]>),
}

pub(crate) struct Meta {
    dims: Dims,
    pub(crate) offset: i64,
    pub(crate) numel: i64,
    pub(crate) contiguous: bool,
    /// For blocks published by `Tensor::resize_` / `Tensor::set_geometry_`: the block
    /// it superseded (kept alive until the tensor drops, since readers may still use
    /// it). Null otherwise.
    pub(crate) prev: *mut Meta,
}

#[inline]
fn check_sizes(sizes: &[i64]) -> Result<i64> {
    let mut numel: i64 = 1;
    for &s in sizes {
        if s < 0 {
            return Err(bad_sizes(sizes));
        }
        numel = match numel.checked_mul(s) {
            Some(n) => n,
            None => return Err(bad_sizes(sizes)),
        };
    }
    Ok(numel)
}

/// The error for sizes [`check_sizes`] refuses (out of line: every new tensor checks
/// its sizes, almost never fails, and the message formatting is large).
#[cold]
#[inline(never)]
fn bad_sizes(sizes: &[i64]) -> OpalError {
    // The first problem in order, as the check meets it.
    let mut numel: i64 = 1;
    for &s in sizes {
        if s < 0 {
            return OpalError::shape(format!("negative dimension {s} in size {sizes:?}"));
        }
        match numel.checked_mul(s) {
            Some(n) => numel = n,
            None => break,
        }
    }
    OpalError::shape(format!("size {sizes:?} overflows"))
}

/// Row-major strides of `sizes` into `st` (size-0 and size-1 dims count as 1).
#[inline(always)]
pub(super) fn contiguous_strides_into(sizes: &[i64], st: &mut [i64]) {
    let mut acc = 1i64;
    for (i, s) in sizes.iter().enumerate().rev() {
        st[i] = acc;
        acc = acc.saturating_mul((*s).max(1));
    }
}

fn is_contiguous(sizes: &[i64], strides: &[i64], numel: i64) -> bool {
    if numel == 0 {
        return true;
    }
    let mut expected = 1;
    for (&s, &st) in sizes.iter().zip(strides).rev() {
        if s != 1 {
            if st != expected {
                return false;
            }
            expected *= s;
        }
    }
    true
}

impl Meta {
    #[inline]
    fn build(
        sizes: &[i64],
        strides: impl Fn(&mut [i64]),
        offset: i64,
        numel: i64,
        contiguous: Option<bool>,
    ) -> Meta {
        let n = sizes.len();
        // Filled in place (not built apart and moved in): tensor creation is hot.
        let mut m = Meta {
            dims: if n <= INLINE_DIMS {
                Dims::Inline {
                    n: n as u8,
                    v: [0; 2 * INLINE_DIMS],
                }
            } else {
                Dims::Heap(vec![0; 2 * n].into_boxed_slice())
            },
            offset,
            numel,
            contiguous: true,
            prev: std::ptr::null_mut(),
        };
        let buf: &mut [i64] = match &mut m.dims {
            Dims::Inline { v, .. } => &mut v[..2 * n],
            Dims::Heap(b) => b,
        };
        buf[..n].copy_from_slice(sizes);
        strides(&mut buf[n..]);
        m.contiguous = contiguous.unwrap_or_else(|| is_contiguous(m.sizes(), m.strides(), numel));
        m
    }

    /// Sizes `[0]`, stride 1: the undefined tensor's metadata. Unlike
    /// [`Meta::contiguous`] it cannot fail, so the sentinel is built without a
    /// `Result` to unwrap.
    pub(crate) fn empty_1d() -> Meta {
        Meta::build(&[0], |st| st[0] = 1, 0, 0, Some(true))
    }

    /// Row-major contiguous metadata.
    #[inline]
    pub(crate) fn contiguous(sizes: &[i64], offset: i64) -> Result<Meta> {
        let numel = check_sizes(sizes)?;
        if offset < 0 {
            return Err(OpalError::shape(format!(
                "negative storage offset {offset}"
            )));
        }
        Ok(Meta::build(
            sizes,
            |st| contiguous_strides_into(sizes, st),
            offset,
            numel,
            Some(true),
        ))
    }

    /// The element count of `sizes`, or an error for negative or overflowing sizes.
    #[inline]
    pub(crate) fn numel_of(sizes: &[i64]) -> Result<i64> {
        check_sizes(sizes)
    }

    /// Writes row-major contiguous metadata at offset 0 into `m`, for sizes already
    /// checked by [`Meta::numel_of`] (giving `numel`).
    ///
    /// # Safety
    /// `m` must be valid for writes and properly aligned; whatever it held is
    /// overwritten without being dropped.
    #[inline(always)]
    pub(crate) unsafe fn init_contiguous(m: *mut Meta, sizes: &[i64], numel: i64) {
        let n = sizes.len();
        // SAFETY: the caller's promise; each field is written before `dims` is
        // borrowed, and `dims` is initialised before it is borrowed.
        unsafe {
            let dims = std::ptr::addr_of_mut!((*m).dims);
            dims.write(if n <= INLINE_DIMS {
                Dims::Inline {
                    n: n as u8,
                    v: [0; 2 * INLINE_DIMS],
                }
            } else {
                Dims::Heap(vec![0; 2 * n].into_boxed_slice())
            });
            let buf: &mut [i64] = match &mut *dims {
                Dims::Inline { v, .. } => &mut v[..2 * n],
                Dims::Heap(b) => b,
            };
            // Sizes and strides in one pass: a plain copy of the sizes would become a
            // `memcpy` call, which costs more than the copy for a few dimensions.
            let (sz, st) = buf.split_at_mut(n);
            let mut acc = 1i64;
            for i in (0..n).rev() {
                sz[i] = sizes[i];
                st[i] = acc;
                acc = acc.saturating_mul(sizes[i].max(1));
            }
            std::ptr::addr_of_mut!((*m).offset).write(0);
            std::ptr::addr_of_mut!((*m).numel).write(numel);
            std::ptr::addr_of_mut!((*m).contiguous).write(true);
            std::ptr::addr_of_mut!((*m).prev).write(std::ptr::null_mut());
        }
    }

    /// Explicitly strided metadata (non-negative strides and offset).
    pub(crate) fn strided(sizes: &[i64], strides: &[i64], offset: i64) -> Result<Meta> {
        if sizes.len() != strides.len() {
            return Err(OpalError::shape(format!(
                "sizes {sizes:?} and strides {strides:?} have different lengths"
            )));
        }
        if let Some(s) = strides.iter().find(|s| **s < 0) {
            return Err(OpalError::shape(format!(
                "negative stride {s} in {strides:?}"
            )));
        }
        if offset < 0 {
            return Err(OpalError::shape(format!(
                "negative storage offset {offset}"
            )));
        }
        let numel = check_sizes(sizes)?;
        Ok(Meta::build(
            sizes,
            |st| st.copy_from_slice(strides),
            offset,
            numel,
            None,
        ))
    }

    #[inline]
    pub(crate) fn sizes(&self) -> &[i64] {
        match &self.dims {
            Dims::Inline { n, v } => &v[..*n as usize],
            Dims::Heap(b) => &b[..b.len() / 2],
        }
    }

    #[inline]
    pub(crate) fn strides(&self) -> &[i64] {
        match &self.dims {
            Dims::Inline { n, v } => &v[*n as usize..2 * *n as usize],
            Dims::Heap(b) => &b[b.len() / 2..],
        }
    }

    /// Elements of storage needed: offset + 1 + max linear index (0 when empty).
    pub(crate) fn required_elements(&self) -> Result<i64> {
        if self.numel == 0 {
            return Ok(0);
        }
        let overflow = || OpalError::shape("tensor extent overflows");
        let mut extent: i64 = 1;
        for (&s, &st) in self.sizes().iter().zip(self.strides()) {
            extent = (s - 1)
                .checked_mul(st)
                .and_then(|x| x.checked_add(extent))
                .ok_or_else(overflow)?;
        }
        self.offset.checked_add(extent).ok_or_else(overflow)
    }

    #[inline]
    pub(crate) fn required_bytes(&self, dtype: DType) -> Result<usize> {
        let el = self.required_elements()?;
        usize::try_from(el)
            .ok()
            .and_then(|e| e.checked_mul(dtype.size()))
            .ok_or_else(|| OpalError::shape("tensor byte size overflows"))
    }

    pub(crate) fn check_fits(&self, dtype: DType, nbytes: usize) -> Result<()> {
        let need = self.required_bytes(dtype)?;
        if need > nbytes {
            return Err(OpalError::shape(format!(
                "view of sizes {:?}, strides {:?}, offset {} needs {need} bytes but the storage has {nbytes}",
                self.sizes(),
                self.strides(),
                self.offset
            )));
        }
        Ok(())
    }
}

/// Element offsets (relative to the first element) of a strided tensor in row-major
/// logical order.
pub(crate) struct StridedOffsets<'a> {
    sizes: &'a [i64],
    strides: &'a [i64],
    index: Vec<i64>,
    offset: i64,
    remaining: i64,
}

impl<'a> StridedOffsets<'a> {
    pub(crate) fn new(sizes: &'a [i64], strides: &'a [i64], numel: i64) -> Self {
        StridedOffsets {
            sizes,
            strides,
            index: vec![0; sizes.len()],
            offset: 0,
            remaining: numel,
        }
    }
}

impl Iterator for StridedOffsets<'_> {
    type Item = i64;
    fn next(&mut self) -> Option<i64> {
        if self.remaining <= 0 {
            return None;
        }
        self.remaining -= 1;
        let cur = self.offset;
        for d in (0..self.sizes.len()).rev() {
            self.index[d] += 1;
            self.offset += self.strides[d];
            if self.index[d] < self.sizes[d] {
                break;
            }
            self.offset -= self.strides[d] * self.index[d];
            self.index[d] = 0;
        }
        Some(cur)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let r = self.remaining.max(0) as usize;
        (r, Some(r))
    }
}
