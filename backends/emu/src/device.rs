//! The emulated device: its allocators (one pool per instance: `emu` under
//! PrivateUse1, `emu2` under PrivateUse2), the explicit copies between host and
//! device memory (the only way data crosses), and the "device kernels" the native
//! ops launch: strided loops that run on pool memory, never on host tensors.
//!
//! Device memory is touched only inside jobs on the device's queue
//! ([`crate::queue`]): a kernel checks its arguments and captures their geometry
//! ([`Operand`]) on the host, then queues a job and returns. The job runs on the
//! device's worker thread, the only thread that ever accesses that device's memory,
//! and checks every address range against the pool's arena before using it, so
//! nothing a host thread does (resizing, freeing, racing ops on other streams) can
//! make a job touch memory outside the arena or race with another access. Host
//! (CPU) memory is read and written on the calling thread under
//! `opal::tensor::KernelAccess`. Asynchronous: `fill`, `binary`, `relu`, `sum_all`,
//! `mm`, host-to-device copies and same-dtype device copies; synchronous (the host
//! waits for the job): device-to-host copies, dtype-converting copies and `iota`
//! (whose errors must reach the caller).
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

/// One tensor argument of a job, captured on the host when the kernel is
/// launched: the tensor (which keeps its storage alive) and its geometry then.
pub struct Operand {
    t: Tensor,
    sizes: Vec<i64>,
    strides: Vec<i64>,
    offset: i64,
    es: usize,
}

impl Operand {
    /// Captures `t`'s geometry now.
    pub fn of(t: &Tensor) -> Operand {
        Operand {
            t: t.clone(),
            sizes: t.sizes().to_vec(),
            strides: t.strides().to_vec(),
            offset: t.storage_offset(),
            es: t.element_size(),
        }
    }

    fn numel(&self) -> usize {
        self.sizes.iter().product::<i64>().max(0) as usize
    }

    /// The address of element (0, ..., 0) in `pool`'s memory, after checking that
    /// every element the captured geometry reaches lies inside the pool's arena and
    /// is aligned to the element size. Called on the worker when the job runs (the
    /// storage may have been reallocated since launch).
    fn ptr(&self, pool: &Pool) -> Result<*mut u8> {
        if self.numel() == 0 {
            return Ok(std::ptr::null_mut());
        }
        let (mut lo, mut hi) = (self.offset as i128, self.offset as i128);
        for (&n, &st) in self.sizes.iter().zip(&self.strides) {
            let span = (n as i128 - 1) * st as i128;
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
        let es = self.es as i128;
        let base = self.t.storage().data_ptr() as usize as i128;
        let (start, end) = (base + lo * es, base + (hi + 1) * es);
        let first = base + self.offset as i128 * es;
        let inside = start >= 0
            && usize::try_from(end - start)
                .ok()
                .is_some_and(|len| pool.contains_range(start as usize, len));
        if !inside || first % es != 0 {
            return Err(OpalError::device(format!(
                "emu kernel: a {:?} view at element offset {} no longer fits its device memory (was its storage changed while the kernel was queued?)",
                self.sizes, self.offset
            )));
        }
        // The address is inside the arena allocation (checked above): derive it
        // from the storage pointer to keep its provenance.
        Ok(self
            .t
            .storage()
            .data_ptr()
            .wrapping_offset((self.offset as isize).wrapping_mul(self.es as isize)))
    }
}

/// The current stream of `device` (the queue its kernels go to).
fn stream_of(device: Device) -> Result<opal::Stream> {
    opal::device::current_stream(device)
}

/// Address of the first element of the host tensor `t` in its storage.
fn host_ptr(t: &Tensor) -> *mut u8 {
    let off = t.storage_offset() as usize * t.element_size();
    t.storage().data_ptr().wrapping_add(off)
}

/// The elements of `op` (in `pool`), contiguous. Runs on the worker.
fn gather(op: &Operand, pool: &Pool) -> Result<Vec<u8>> {
    let p = op.ptr(pool)?;
    // SAFETY: `ptr` checked that every offset of the geometry is inside the
    // arena, which only this worker thread accesses.
    Ok(unsafe { gather_raw(p, &op.sizes, &op.strides, op.es) })
}

/// The elements at `p` + the offsets of `sizes`/`strides` (`es` bytes each),
/// contiguous.
///
/// # Safety
/// Every such element must be readable and not written meanwhile.
unsafe fn gather_raw(p: *const u8, sizes: &[i64], strides: &[i64], es: usize) -> Vec<u8> {
    let n = sizes.iter().product::<i64>().max(0) as usize;
    let mut out = vec![0u8; n * es];
    let mut i = 0usize;
    for_each_offset(sizes, [strides], |[o]| {
        // SAFETY: the caller vouches for the element at offset `o`; `i < n`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                p.offset(o * es as isize),
                out.as_mut_ptr().add(i * es),
                es,
            )
        };
        i += 1;
    });
    out
}

/// Writes the contiguous elements `bytes` of dtype `from` into `op` (in `pool`),
/// converting to `op`'s dtype `to`. Runs on the worker.
fn scatter(bytes: &[u8], from: DType, op: &Operand, to: DType, pool: &Pool) -> Result<()> {
    let p = op.ptr(pool)?;
    let (fes, tes) = (from.size(), op.es);
    if bytes.len() != op.numel() * fes {
        return Err(OpalError::device("emu copy: element counts differ"));
    }
    let mut err = None;
    let mut i = 0usize;
    for_each_offset(&op.sizes, [&op.strides], |[o]| {
        let src = &bytes[i * fes..(i + 1) * fes];
        // SAFETY: `ptr` checked the whole geometry against the arena, which only
        // this worker thread accesses; `tes` bytes at an element offset.
        let dst = unsafe { std::slice::from_raw_parts_mut(p.offset(o * tes as isize), tes) };
        if from == to {
            dst.copy_from_slice(src);
        } else if let Err(e) = opal::dtype::scalar_from_bytes(from, src)
            .and_then(|v| opal::dtype::scalar_to_bytes(&v, to, dst))
        {
            err.get_or_insert(e);
        }
        i += 1;
    });
    err.map_or(Ok(()), Err)
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
/// Synchronizes: runs after the work queued before it on the current stream.
pub fn copy_to_host(src: &Tensor) -> Result<Tensor> {
    let pool = pool_of(src.device())?;
    let op = Operand::of(src);
    let n = op.numel() * op.es;
    let bytes = crate::queue::run_sync(stream_of(src.device())?, move || gather(&op, pool))?;
    pool.stats.d2h_bytes.fetch_add(n as u64, Ordering::Relaxed);
    Tensor::from_bytes(&bytes, src.sizes(), src.dtype())
}

/// Copies `src` (a CPU tensor) into `dst` (an emu tensor of the same sizes and dtype;
/// either may be strided). The host bytes are read now; the device write is queued.
pub fn copy_from_host(src: &Tensor, dst: &Tensor) -> Result<()> {
    let pool = pool_of(dst.device())?;
    check_same(src, dst, "copy_from_host")?;
    let acc = KernelAccess::new(&[src], &[])?;
    // SAFETY: `src` is a host tensor whose storage `acc` borrows for reading; its
    // geometry's offsets stay inside that storage.
    let bytes = unsafe {
        gather_raw(
            host_ptr(src),
            src.sizes(),
            src.strides(),
            src.element_size(),
        )
    };
    drop(acc);
    let n = bytes.len();
    let (op, dt) = (Operand::of(dst), dst.dtype());
    crate::queue::enqueue(
        stream_of(dst.device())?,
        Box::new(move || scatter(&bytes, dt, &op, dt, pool)),
    )?;
    pool.stats.h2d_bytes.fetch_add(n as u64, Ordering::Relaxed);
    Ok(())
}

/// Queues on `t`'s current stream a job that reads `t`'s elements (logical order,
/// contiguous bytes), lets `f` change them, and writes them back: how a
/// communicator works on device memory in stream order, after the kernels queued
/// before it and before those queued after. `f` runs on the device's worker
/// thread; its `Err` is reported by the stream's next query or synchronize.
pub fn update_in_stream(
    t: &Tensor,
    f: impl FnOnce(&mut [u8]) -> Result<()> + Send + 'static,
) -> Result<()> {
    let pool = pool_of(t.device())?;
    let (op, dt) = (Operand::of(t), t.dtype());
    let n = (op.numel() * op.es) as u64;
    crate::queue::enqueue(
        stream_of(t.device())?,
        Box::new(move || {
            let mut bytes = gather(&op, pool)?;
            f(&mut bytes)?;
            scatter(&bytes, dt, &op, dt, pool)
        }),
    )?;
    pool.stats.launches.fetch_add(1, Ordering::Relaxed);
    pool.stats.d2d_bytes.fetch_add(n, Ordering::Relaxed);
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
/// converting the dtype element by element when they differ. Same device and
/// dtype: queued. A dtype conversion waits for the job (its errors are the
/// caller's); across devices the source is read first (waiting), then the write
/// is queued on the destination.
pub fn copy_device(src: &Tensor, dst: &Tensor) -> Result<()> {
    let pool = pool_of(dst.device())?;
    let src_pool = pool_of(src.device())?;
    if src.sizes() != dst.sizes() {
        return check_same(src, dst, "copy");
    }
    let (sd, dd) = (src.dtype(), dst.dtype());
    let (sop, dop) = (Operand::of(src), Operand::of(dst));
    let n = dop.numel() * dop.es;
    let stream = stream_of(dst.device())?;
    if std::ptr::eq(pool, src_pool) {
        let job = move || scatter(&gather(&sop, src_pool)?, sd, &dop, dd, pool);
        if sd == dd {
            crate::queue::enqueue(stream, Box::new(job))?;
        } else {
            crate::queue::run_sync(stream, job)?;
        }
    } else {
        let bytes =
            crate::queue::run_sync(stream_of(src.device())?, move || gather(&sop, src_pool))?;
        crate::queue::run_sync(stream, move || scatter(&bytes, sd, &dop, dd, pool))?;
    }
    pool.stats.d2d_bytes.fetch_add(n as u64, Ordering::Relaxed);
    pool.stats.launches.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Writes `value` (converted to `t`'s dtype) into every element of the emu tensor
/// `t` (queued).
pub fn fill(t: &Tensor, value: &Scalar) -> Result<()> {
    let pool = pool_of(t.device())?;
    let es = t.element_size();
    let mut bytes = [0u8; 16];
    opal::dtype::scalar_to_bytes(value, t.dtype(), &mut bytes[..es])?;
    let op = Operand::of(t);
    launch(t.device(), pool, move || {
        let d = op.ptr(pool)?;
        for_each_offset(&op.sizes, [&op.strides], |[o]| {
            // SAFETY: offset inside the checked arena range, accessed only by
            // this worker; `es <= 16` bytes.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), d.offset(o * es as isize), es) };
        });
        Ok(())
    })
}

/// Queues `job` on the current stream of `device` and counts a launch.
fn launch(
    device: Device,
    pool: &'static Pool,
    job: impl FnOnce() -> Result<()> + Send + 'static,
) -> Result<()> {
    crate::queue::enqueue(stream_of(device)?, Box::new(job))?;
    pool.stats.launches.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Writes `start + i * step` into element `i` of the 1-d emu tensor `t`; waits
/// for the job (a value that does not fit the dtype is the caller's error).
pub fn iota(t: &Tensor, start: &Scalar, step: &Scalar) -> Result<()> {
    let pool = pool_of(t.device())?;
    let (es, dt) = (t.element_size(), t.dtype());
    let op = Operand::of(t);
    let float = matches!(start, Scalar::Float(_)) || matches!(step, Scalar::Float(_));
    let (start, step) = (*start, *step);
    crate::queue::run_sync(stream_of(t.device())?, move || {
        let d = op.ptr(pool)?;
        let mut bytes = [0u8; 16];
        let mut i = 0i64;
        let mut err = None;
        for_each_offset(&op.sizes, [&op.strides], |[o]| {
            let v = if float {
                Scalar::Float(start.to_f64() + i as f64 * step.to_f64())
            } else {
                Scalar::Int(start.to_i64() + i * step.to_i64())
            };
            match opal::dtype::scalar_to_bytes(&v, dt, &mut bytes[..es]) {
                // SAFETY: offset inside the checked arena range, accessed only by
                // this worker; `es <= 16` bytes.
                Ok(()) => unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), d.offset(o * es as isize), es)
                },
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
            i += 1;
        });
        err.map_or(Ok(()), Err)
    })?;
    pool.stats.launches.fetch_add(1, Ordering::Relaxed);
    Ok(())
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

/// Whether the native kernels compute in `dt`.
fn native(dt: DType) -> bool {
    matches!(dt, DType::F32 | DType::F64 | DType::I64 | DType::I32)
}

/// Runs `body` with the dtype's Rust type (one of the [`native`] dtypes).
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
            other => Err(OpalError::device(format!(
                "emu kernel: no native kernel for {other}"
            ))),
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
/// device (queued). Returns `Ok(false)` (nothing queued) when the dtypes or
/// devices are not ones the native kernel handles.
pub fn binary(op: Binary, a: &Tensor, b: &Tensor, alpha: &Scalar, out: &Tensor) -> Result<bool> {
    let dt = out.dtype();
    if !native(dt)
        || a.dtype() != dt
        || b.dtype() != dt
        || a.device() != out.device()
        || b.device() != out.device()
    {
        return Ok(false);
    }
    let pool = pool_of(out.device())?;
    let sizes = out.sizes().to_vec();
    let (mut oa, mut ob) = (Operand::of(a), Operand::of(b));
    (oa.strides, ob.strides) = (broadcast_strides(a, &sizes)?, broadcast_strides(b, &sizes)?);
    (oa.sizes, ob.sizes) = (sizes.clone(), sizes);
    let (oo, alpha) = (Operand::of(out), *alpha);
    launch(out.device(), pool, move || {
        let (pa, pb, po) = (oa.ptr(pool)?, ob.ptr(pool)?, oo.ptr(pool)?);
        with_num!(dt, T => {
            let al = T::from_scalar(&alpha);
            let (pa, pb, po) = (pa as *const T, pb as *const T, po as *mut T);
            for_each_offset(&oo.sizes, [&oa.strides, &ob.strides, &oo.strides], |[x, y, z]| {
                // SAFETY: every offset of the three geometries was checked inside
                // the arena (aligned elements of T), which only this worker accesses.
                unsafe {
                    let (u, v) = (*pa.offset(x), *pb.offset(y));
                    *po.offset(z) = match op {
                        Binary::Add => u + al * v,
                        Binary::Sub => u - al * v,
                        Binary::Mul => u * v,
                    };
                }
            });
            Ok(())
        })
    })?;
    Ok(true)
}

/// `out = max(a, 0)`, elementwise, same sizes and dtype (queued).
pub fn relu(a: &Tensor, out: &Tensor) -> Result<bool> {
    let dt = a.dtype();
    if !native(dt) || dt != out.dtype() || a.sizes() != out.sizes() || a.device() != out.device() {
        return Ok(false);
    }
    let pool = pool_of(out.device())?;
    let (oa, oo) = (Operand::of(a), Operand::of(out));
    launch(out.device(), pool, move || {
        let (pa, po) = (oa.ptr(pool)?, oo.ptr(pool)?);
        with_num!(dt, T => {
            let (pa, po) = (pa as *const T, po as *mut T);
            for_each_offset(&oo.sizes, [&oa.strides, &oo.strides], |[x, z]| {
                // SAFETY: offsets checked inside the arena, aligned elements of T,
                // accessed only by this worker.
                unsafe {
                    let u = *pa.offset(x);
                    *po.offset(z) = if u > T::ZERO { u } else { T::ZERO };
                }
            });
            Ok(())
        })
    })?;
    Ok(true)
}

/// The sum of all elements of `a` into the 0-d tensor `out` (same dtype; queued).
pub fn sum_all(a: &Tensor, out: &Tensor) -> Result<bool> {
    let dt = a.dtype();
    if !native(dt) || dt != out.dtype() || out.numel() != 1 || a.device() != out.device() {
        return Ok(false);
    }
    let pool = pool_of(out.device())?;
    let (oa, oo) = (Operand::of(a), Operand::of(out));
    launch(out.device(), pool, move || {
        let (pa, po) = (oa.ptr(pool)?, oo.ptr(pool)?);
        with_num!(dt, T => {
            let pa = pa as *const T;
            let mut s = T::ZERO;
            // SAFETY: offsets checked inside the arena, aligned elements of T.
            for_each_offset(&oa.sizes, [&oa.strides], |[x]| s += unsafe { *pa.offset(x) });
            // SAFETY: `out` has one element, checked inside the arena.
            unsafe { *(po as *mut T) = s };
            Ok(())
        })
    })?;
    Ok(true)
}

/// `out = a @ b` for 2-d tensors of one dtype (`out` sized `[n, m]`; queued).
pub fn mm(a: &Tensor, b: &Tensor, out: &Tensor) -> Result<bool> {
    let dt = out.dtype();
    if !native(dt)
        || a.dtype() != dt
        || b.dtype() != dt
        || a.dim() != 2
        || b.dim() != 2
        || out.dim() != 2
    {
        return Ok(false);
    }
    if a.device() != out.device() || b.device() != out.device() {
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
    let (oa, ob, oo) = (Operand::of(a), Operand::of(b), Operand::of(out));
    launch(out.device(), pool, move || {
        let (pa, pb, po) = (oa.ptr(pool)?, ob.ptr(pool)?, oo.ptr(pool)?);
        let (sa, sb, so) = (&oa.strides, &ob.strides, &oo.strides);
        with_num!(dt, T => {
            let (pa, pb, po) = (pa as *const T, pb as *const T, po as *mut T);
            for i in 0..n {
                for j in 0..m {
                    let mut acc_v = T::ZERO;
                    for p in 0..k {
                        // SAFETY: i < n, j < m, p < k index inside each captured 2-d
                        // geometry, checked inside the arena.
                        acc_v += unsafe { *pa.offset((i * sa[0] + p * sa[1]) as isize) * *pb.offset((p * sb[0] + j * sb[1]) as isize) };
                    }
                    // SAFETY: as above, inside `out`'s checked range.
                    unsafe { *po.offset((i * so[0] + j * so[1]) as isize) = acc_v };
                }
            }
            Ok(())
        })
    })?;
    Ok(true)
}
