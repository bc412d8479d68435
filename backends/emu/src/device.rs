//! The emulated device: its allocators (one pool per instance: `emu` under
//! PrivateUse1, `emu2` under PrivateUse2), the explicit copies between host and
//! device memory (the only way data crosses), and the "device kernels" the native
//! ops launch: strided loops that run on pool memory, never on host tensors.
//!
//! Every access borrows the storages it touches through `opal::tensor::KernelAccess`
//! (so concurrent misuse is an error, not a race) and computes addresses from the
//! storage base, sizes and strides of each tensor.
//!
//! Owns: device memory access. Must not: register kernels (that is `crate::register`
//! through the generated code) or know operators.

use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use opal::tensor::{Allocator, KernelAccess};
use opal::{DType, Device, DeviceType, OpalError, Result, Scalar, Tensor};

use crate::pool::{Pool, DEFAULT_CAPACITY};

/// Most `emu` devices a process can have (`OPAL_EMU_DEVICES` is clamped to it).
pub const MAX_DEVICES: usize = 4;
/// How many `emu` devices there are unless `OPAL_EMU_DEVICES` says otherwise.
pub const DEFAULT_DEVICES: usize = 2;

/// Memory of the `emu` devices (PrivateUse1), one pool per index.
pub static EMU_POOLS: [Pool; MAX_DEVICES] = [
    Pool::new("emu:0", DEFAULT_CAPACITY),
    Pool::new("emu:1", DEFAULT_CAPACITY),
    Pool::new("emu:2", DEFAULT_CAPACITY),
    Pool::new("emu:3", DEFAULT_CAPACITY),
];
/// Memory of the single `emu2` device (PrivateUse2).
pub static EMU2_POOLS: [Pool; 1] = [Pool::new("emu2:0", DEFAULT_CAPACITY)];

/// The number of `emu` devices: `OPAL_EMU_DEVICES` (1 to [`MAX_DEVICES`]) or
/// [`DEFAULT_DEVICES`]. Read when `init` registers the device runtime.
pub fn emu_device_count() -> usize {
    std::env::var("OPAL_EMU_DEVICES")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .map_or(DEFAULT_DEVICES, |n| n.clamp(1, MAX_DEVICES))
}

/// The allocator of one emu device type: blocks of the pool of the device's index
/// (the thread's current device when it has none), not host-accessible.
pub struct EmuAllocator(pub &'static [Pool]);

/// The `emu` allocator.
pub static EMU_ALLOCATOR: EmuAllocator = EmuAllocator(&EMU_POOLS);
/// The `emu2` allocator.
pub static EMU2_ALLOCATOR: EmuAllocator = EmuAllocator(&EMU2_POOLS);

impl EmuAllocator {
    fn pool(&self, device: Device) -> Result<&'static Pool> {
        let d = opal::device::resolve(device);
        let i = d.index().unwrap_or(0) as usize;
        self.0.get(i).ok_or_else(|| {
            OpalError::device(format!(
                "'{device}' has no memory pool: {} has {} pools ({}:0 to {}:{})",
                device.device_type(),
                self.0.len(),
                device.device_type(),
                device.device_type(),
                self.0.len() - 1
            ))
        })
    }
}

// SAFETY: blocks come from a pool's arena at 64-byte-aligned offsets of a 64-aligned
// base, at least `nbytes` long, and stay reserved (in use or cached) until
// `deallocate` hands them back to the pool whose arena contains them; zero-byte
// requests get a dangling 64-aligned pointer that is never dereferenced.
// `host_accessible` is false, so the runtime never reads the (zeroed or stale) bytes
// through safe host access.
unsafe impl Allocator for EmuAllocator {
    fn allocate(&self, device: Device, nbytes: usize) -> Result<NonNull<u8>> {
        self.pool(device)?.alloc(nbytes).map_err(OpalError::device)
    }

    unsafe fn deallocate(&self, _device: Device, ptr: NonNull<u8>, nbytes: usize) {
        // By address, not by device: the current device may have changed since.
        if let Some(pool) = self.0.iter().find(|p| p.contains(ptr)) {
            pool.free(ptr, nbytes)
        }
    }

    fn host_accessible(&self) -> bool {
        false
    }
}

/// The pool behind a device, if it is an emu device (no index: the thread's
/// current device of its type).
pub fn pool_of(device: Device) -> Result<&'static Pool> {
    match device.device_type() {
        DeviceType::PrivateUse1 => EMU_ALLOCATOR.pool(device),
        DeviceType::PrivateUse2 => EMU2_ALLOCATOR.pool(device),
        _ => Err(OpalError::device(format!(
            "'{device}' is not an emu device"
        ))),
    }
}

/// Address of the first element of `t` in its storage (host or pool memory).
fn base_ptr(t: &Tensor) -> *mut u8 {
    let off = t.storage_offset() as usize * t.element_size();
    t.storage().data_ptr().wrapping_add(off)
}

/// Calls `f` with the element offsets of each operand, for every index of `sizes`
/// in row-major order. `strides[k]` are operand `k`'s strides (same rank as `sizes`).
fn for_each_offset<const N: usize>(
    sizes: &[i64],
    strides: [&[i64]; N],
    mut f: impl FnMut([isize; N]),
) {
    let n: i64 = sizes.iter().product();
    if n == 0 {
        return;
    }
    let rank = sizes.len();
    let mut idx = vec![0i64; rank];
    let mut offs = [0isize; N];
    for _ in 0..n {
        f(offs);
        // Advance the row-major counter, updating offsets incrementally.
        for d in (0..rank).rev() {
            idx[d] += 1;
            for k in 0..N {
                offs[k] += strides[k][d] as isize;
            }
            if idx[d] < sizes[d] {
                break;
            }
            for k in 0..N {
                offs[k] -= (strides[k][d] * sizes[d]) as isize;
            }
            idx[d] = 0;
        }
    }
}

/// Strides of `t` broadcast to `sizes` (0 where `t` has size 1 or no dimension).
fn broadcast_strides(t: &Tensor, sizes: &[i64]) -> Result<Vec<i64>> {
    let (ts, st) = (t.sizes(), t.strides());
    if ts.len() > sizes.len() {
        return Err(OpalError::shape(format!(
            "emu: cannot broadcast {ts:?} to {sizes:?}"
        )));
    }
    let lead = sizes.len() - ts.len();
    let mut out = vec![0; sizes.len()];
    for (i, (&s, &stride)) in ts.iter().zip(st).enumerate() {
        let target = sizes[lead + i];
        out[lead + i] = if s == target {
            stride
        } else if s == 1 {
            0
        } else {
            return Err(OpalError::shape(format!(
                "emu: cannot broadcast {ts:?} to {sizes:?}"
            )));
        };
    }
    Ok(out)
}

/// Copies `src` (an emu tensor, any strides) into a new contiguous CPU tensor.
pub fn copy_to_host(src: &Tensor) -> Result<Tensor> {
    let pool = pool_of(src.device())?;
    let dst = Tensor::empty(src.sizes(), src.dtype(), Device::cpu())?;
    let acc = KernelAccess::new(&[src], &[&dst])?;
    let es = src.element_size();
    let (s, d) = (base_ptr(src), dst.raw_data_ptr()?);
    let mut i = 0usize;
    for_each_offset(src.sizes(), [src.strides()], |[o]| {
        // SAFETY: `o` is an element offset inside `src`'s view of its (borrowed) pool
        // block; `i < numel` indexes the new contiguous CPU tensor; both are `es` bytes.
        unsafe { std::ptr::copy_nonoverlapping(s.offset(o * es as isize), d.add(i * es), es) };
        i += 1;
    });
    drop(acc);
    pool.stats
        .d2h_bytes
        .fetch_add((i * es) as u64, Ordering::Relaxed);
    Ok(dst)
}

/// Copies `src` (a CPU tensor) into `dst` (an emu tensor of the same sizes and dtype;
/// either may be strided).
pub fn copy_from_host(src: &Tensor, dst: &Tensor) -> Result<()> {
    let pool = pool_of(dst.device())?;
    check_same(src, dst, "copy_from_host")?;
    let acc = KernelAccess::new(&[src], &[dst])?;
    let es = src.element_size();
    let (s, d) = (src.raw_data_ptr()?, base_ptr(dst));
    let mut n = 0usize;
    for_each_offset(dst.sizes(), [src.strides(), dst.strides()], |[a, b]| {
        // SAFETY: offsets stay inside each tensor's borrowed storage; `es` bytes each.
        unsafe {
            std::ptr::copy_nonoverlapping(s.offset(a * es as isize), d.offset(b * es as isize), es)
        };
        n += 1;
    });
    drop(acc);
    pool.stats
        .h2d_bytes
        .fetch_add((n * es) as u64, Ordering::Relaxed);
    Ok(())
}

fn check_same(src: &Tensor, dst: &Tensor, what: &str) -> Result<()> {
    if src.sizes() != dst.sizes() || src.dtype() != dst.dtype() {
        return Err(OpalError::shape(format!(
            "emu {what}: source {:?} {:?} and destination {:?} {:?} differ",
            src.sizes(),
            src.dtype(),
            dst.sizes(),
            dst.dtype()
        )));
    }
    Ok(())
}

/// Copies between two emu tensors (same or different emu devices) of equal sizes,
/// converting the dtype element by element when they differ.
pub fn copy_device(src: &Tensor, dst: &Tensor) -> Result<()> {
    let pool = pool_of(dst.device())?;
    pool_of(src.device())?;
    if src.sizes() != dst.sizes() {
        return check_same(src, dst, "copy");
    }
    let acc = KernelAccess::new(&[src], &[dst])?;
    let (ses, des) = (src.element_size(), dst.element_size());
    let (s, d) = (base_ptr(src), base_ptr(dst));
    let (sd, dd) = (src.dtype(), dst.dtype());
    let mut err = None;
    let mut n = 0usize;
    for_each_offset(dst.sizes(), [src.strides(), dst.strides()], |[a, b]| {
        if sd == dd {
            // SAFETY: offsets inside the borrowed storages; `ses == des` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    s.offset(a * ses as isize),
                    d.offset(b * des as isize),
                    ses,
                )
            };
        } else {
            // SAFETY: as above, element-sized slices of the borrowed storages.
            let (from, to) = unsafe {
                (
                    std::slice::from_raw_parts(s.offset(a * ses as isize), ses),
                    std::slice::from_raw_parts_mut(d.offset(b * des as isize), des),
                )
            };
            if let Err(e) = opal::dtype::scalar_from_bytes(sd, from)
                .and_then(|v| opal::dtype::scalar_to_bytes(&v, dd, to))
            {
                err.get_or_insert(e);
            }
        }
        n += 1;
    });
    drop(acc);
    pool.stats
        .d2d_bytes
        .fetch_add((n * des) as u64, Ordering::Relaxed);
    pool.stats.launches.fetch_add(1, Ordering::Relaxed);
    err.map_or(Ok(()), Err)
}

/// Writes `value` (converted to `t`'s dtype) into every element of the emu tensor `t`.
pub fn fill(t: &Tensor, value: &Scalar) -> Result<()> {
    let pool = pool_of(t.device())?;
    let es = t.element_size();
    let mut bytes = [0u8; 16];
    opal::dtype::scalar_to_bytes(value, t.dtype(), &mut bytes[..es])?;
    let acc = KernelAccess::new(&[], &[t])?;
    let d = base_ptr(t);
    for_each_offset(t.sizes(), [t.strides()], |[o]| {
        // SAFETY: offset inside the borrowed storage; `es <= 16` bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), d.offset(o * es as isize), es) };
    });
    drop(acc);
    pool.stats.launches.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Writes `start + i * step` into element `i` of the contiguous 1-d emu tensor `t`.
pub fn iota(t: &Tensor, start: &Scalar, step: &Scalar) -> Result<()> {
    let pool = pool_of(t.device())?;
    let es = t.element_size();
    let acc = KernelAccess::new(&[], &[t])?;
    let d = base_ptr(t);
    let float = matches!(start, Scalar::Float(_)) || matches!(step, Scalar::Float(_));
    let mut bytes = [0u8; 16];
    let mut i = 0i64;
    let mut err = None;
    for_each_offset(t.sizes(), [t.strides()], |[o]| {
        let v = if float {
            Scalar::Float(start.to_f64() + i as f64 * step.to_f64())
        } else {
            Scalar::Int(start.to_i64() + i * step.to_i64())
        };
        match opal::dtype::scalar_to_bytes(&v, t.dtype(), &mut bytes[..es]) {
            // SAFETY: offset inside the borrowed storage; `es <= 16` bytes.
            Ok(()) => unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), d.offset(o * es as isize), es)
            },
            Err(e) => {
                err.get_or_insert(e);
            }
        }
        i += 1;
    });
    drop(acc);
    pool.stats.launches.fetch_add(1, Ordering::Relaxed);
    err.map_or(Ok(()), Err)
}

/// Element types the native emu kernels compute in.
pub trait Num:
    opal::Element
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::AddAssign
    + PartialOrd
{
    const ZERO: Self;
    fn from_scalar(s: &Scalar) -> Self;
}

impl Num for f32 {
    const ZERO: Self = 0.0;
    fn from_scalar(s: &Scalar) -> Self {
        s.to_f64() as f32
    }
}
impl Num for f64 {
    const ZERO: Self = 0.0;
    fn from_scalar(s: &Scalar) -> Self {
        s.to_f64()
    }
}
impl Num for i64 {
    const ZERO: Self = 0;
    fn from_scalar(s: &Scalar) -> Self {
        s.to_i64()
    }
}
impl Num for i32 {
    const ZERO: Self = 0;
    fn from_scalar(s: &Scalar) -> Self {
        s.to_i64() as i32
    }
}

/// Runs `body` with the dtype's Rust type, or returns `Ok(false)` for dtypes the
/// native kernels do not compute in (the caller hands those to the fallback).
macro_rules! with_num {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::I64 => {
                type $T = i64;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            _ => Ok(false),
        }
    };
}

/// A pointwise binary operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    /// `a + alpha * b`
    Add,
    /// `a - alpha * b`
    Sub,
    /// `a * b`
    Mul,
}

/// `out = a (op) b` with broadcasting to `out`'s sizes, all of one dtype on one emu
/// device. Returns `Ok(false)` (nothing written) when the dtypes or devices are not
/// ones the native kernel handles.
pub fn binary(op: Binary, a: &Tensor, b: &Tensor, alpha: &Scalar, out: &Tensor) -> Result<bool> {
    let dt = out.dtype();
    if a.dtype() != dt
        || b.dtype() != dt
        || a.device() != out.device()
        || b.device() != out.device()
    {
        return Ok(false);
    }
    let pool = pool_of(out.device())?;
    let sizes = out.sizes().to_vec();
    let (sa, sb) = (broadcast_strides(a, &sizes)?, broadcast_strides(b, &sizes)?);
    let acc = KernelAccess::new(&[a, b], &[out])?;
    let (pa, pb, po) = (base_ptr(a), base_ptr(b), base_ptr(out));
    let r = with_num!(dt, T => {
        let al = T::from_scalar(alpha);
        let (pa, pb, po) = (pa as *const T, pb as *const T, po as *mut T);
        for_each_offset(&sizes, [&sa, &sb, out.strides()], |[x, y, z]| {
            // SAFETY: offsets from sizes/strides stay inside each borrowed storage;
            // elements of T are aligned (pool blocks and offsets are element-aligned).
            unsafe {
                let (u, v) = (*pa.offset(x), *pb.offset(y));
                *po.offset(z) = match op {
                    Binary::Add => u + al * v,
                    Binary::Sub => u - al * v,
                    Binary::Mul => u * v,
                };
            }
        });
        Ok(true)
    });
    drop(acc);
    pool.stats.launches.fetch_add(1, Ordering::Relaxed);
    r
}

/// `out = max(a, 0)`, elementwise, same sizes and dtype.
pub fn relu(a: &Tensor, out: &Tensor) -> Result<bool> {
    if a.dtype() != out.dtype() || a.sizes() != out.sizes() {
        return Ok(false);
    }
    let pool = pool_of(out.device())?;
    let acc = KernelAccess::new(&[a], &[out])?;
    let (pa, po) = (base_ptr(a), base_ptr(out));
    let r = with_num!(a.dtype(), T => {
        let (pa, po) = (pa as *const T, po as *mut T);
        for_each_offset(out.sizes(), [a.strides(), out.strides()], |[x, z]| {
            // SAFETY: offsets inside the borrowed storages, aligned elements of T.
            unsafe {
                let u = *pa.offset(x);
                *po.offset(z) = if u > T::ZERO { u } else { T::ZERO };
            }
        });
        Ok(true)
    });
    drop(acc);
    pool.stats.launches.fetch_add(1, Ordering::Relaxed);
    r
}

/// The sum of all elements of `a` into the 0-d tensor `out` (same dtype).
pub fn sum_all(a: &Tensor, out: &Tensor) -> Result<bool> {
    if a.dtype() != out.dtype() || out.numel() != 1 {
        return Ok(false);
    }
    let pool = pool_of(out.device())?;
    let acc = KernelAccess::new(&[a], &[out])?;
    let (pa, po) = (base_ptr(a), base_ptr(out));
    let r = with_num!(a.dtype(), T => {
        let pa = pa as *const T;
        let mut s = T::ZERO;
        // SAFETY: offsets inside the borrowed storage, aligned elements of T.
        for_each_offset(a.sizes(), [a.strides()], |[x]| s += unsafe { *pa.offset(x) });
        // SAFETY: `out` has one element, exclusively borrowed.
        unsafe { *(po as *mut T) = s };
        Ok(true)
    });
    drop(acc);
    pool.stats.launches.fetch_add(1, Ordering::Relaxed);
    r
}

/// `out = a @ b` for 2-d tensors of one dtype (`out` sized `[n, m]`).
pub fn mm(a: &Tensor, b: &Tensor, out: &Tensor) -> Result<bool> {
    let dt = out.dtype();
    if a.dtype() != dt || b.dtype() != dt || a.dim() != 2 || b.dim() != 2 || out.dim() != 2 {
        return Ok(false);
    }
    let (n, k, m) = (a.sizes()[0], a.sizes()[1], b.sizes()[1]);
    if b.sizes()[0] != k || out.sizes() != [n, m] {
        return Err(OpalError::shape(format!(
            "emu mm: {:?} @ {:?} into {:?}",
            a.sizes(),
            b.sizes(),
            out.sizes()
        )));
    }
    let pool = pool_of(out.device())?;
    let acc = KernelAccess::new(&[a, b], &[out])?;
    let (pa, pb, po) = (base_ptr(a), base_ptr(b), base_ptr(out));
    let (sa, sb, so) = (
        a.strides().to_vec(),
        b.strides().to_vec(),
        out.strides().to_vec(),
    );
    let r = with_num!(dt, T => {
        let (pa, pb, po) = (pa as *const T, pb as *const T, po as *mut T);
        for i in 0..n {
            for j in 0..m {
                let mut acc_v = T::ZERO;
                for p in 0..k {
                    // SAFETY: i < n, j < m, p < k index inside each borrowed 2-d view.
                    acc_v += unsafe { *pa.offset((i * sa[0] + p * sa[1]) as isize) * *pb.offset((p * sb[0] + j * sb[1]) as isize) };
                }
                // SAFETY: as above, inside `out`, exclusively borrowed.
                unsafe { *po.offset((i * so[0] + j * so[1]) as isize) = acc_v };
            }
        }
        Ok(true)
    });
    drop(acc);
    pool.stats.launches.fetch_add(1, Ordering::Relaxed);
    r
}
