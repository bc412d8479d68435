//! ABI 1.4 (appended) on the plugin side: [`Communicator`], a device's own
//! collectives, registered with [`crate::Registrar::communicator`], and
//! [`Group`] / [`OwnedGroup`], the host's transport of the process group a call
//! runs on (a plugin copies its device data to host memory, reduces it across
//! the ranks with [`Group::all_reduce_host`], and copies it back, in its stream
//! order).
//!
//! Owns: the trait, its table and trampoline (which catches panics), the group
//! wrappers. Must not: reach other ranks except through the host's group.

use crate::abi::{self, OpalCommGroup, OpalCommunicator, OpalStatus, OpalTensor};
use crate::registrar::Registrar;
use crate::{check, guarded, DType, Error, Result, Tensor};
use std::ffi::c_void;

/// A reduction (`torch.distributed.ReduceOp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum (bool: a logical or).
    Sum,
    /// The sum divided by the group's size.
    Avg,
    /// The product (bool: a logical and).
    Product,
    /// The minimum.
    Min,
    /// The maximum.
    Max,
}

impl ReduceOp {
    /// The ABI code ([`abi::reduce_op`]).
    pub fn code(self) -> i32 {
        match self {
            ReduceOp::Sum => abi::reduce_op::SUM,
            ReduceOp::Avg => abi::reduce_op::AVG,
            ReduceOp::Product => abi::reduce_op::PRODUCT,
            ReduceOp::Min => abi::reduce_op::MIN,
            ReduceOp::Max => abi::reduce_op::MAX,
        }
    }

    /// The reduction of an ABI code.
    pub fn from_code(c: i32) -> Result<ReduceOp> {
        [
            ReduceOp::Sum,
            ReduceOp::Avg,
            ReduceOp::Product,
            ReduceOp::Min,
            ReduceOp::Max,
        ]
        .into_iter()
        .find(|r| r.code() == c)
        .ok_or_else(|| Error {
            code: abi::code::INVALID_ARGUMENT,
            message: format!("unknown reduction code {c}"),
        })
    }
}

/// Bytes per element of `d`.
fn element_size(d: DType) -> usize {
    match d {
        DType::Bool | DType::U8 | DType::I8 => 1,
        DType::I16 | DType::F16 | DType::BF16 => 2,
        DType::I32 | DType::F32 => 4,
        DType::I64 | DType::F64 | DType::C64 => 8,
        DType::C128 => 16,
    }
}

/// The host's group, borrowed for one [`Communicator`] call.
pub struct Group<'a> {
    raw: &'a OpalCommGroup,
}

/// The host's group kept past the call (for work queued on a stream); gives its
/// reference back when dropped.
pub struct OwnedGroup {
    raw: OpalCommGroup,
}

// SAFETY: the host's group functions may be called from any thread (ABI,
// "Threads"), and the reference this holds keeps `ctx` alive.
unsafe impl Send for OwnedGroup {}
// SAFETY: as above.
unsafe impl Sync for OwnedGroup {}

/// `host_all_reduce` of `bytes` through `raw`.
fn all_reduce_host(
    raw: &OpalCommGroup,
    bytes: &mut [u8],
    dtype: DType,
    op: ReduceOp,
) -> Result<()> {
    let es = element_size(dtype);
    if !bytes.len().is_multiple_of(es) {
        return Err(Error::msg(format!(
            "all_reduce_host: {} bytes are not whole {dtype:?} elements",
            bytes.len()
        )));
    }
    // SAFETY: `ctx` is live (borrowed for the call, or retained); `bytes` is
    // `len / es` writable elements of host memory for the call.
    let st = unsafe {
        (raw.host_all_reduce)(
            raw.ctx,
            bytes.as_mut_ptr().cast(),
            bytes.len() / es,
            dtype.code(),
            op.code(),
        )
    };
    // SAFETY: a host status, consumed once.
    unsafe { check(st) }
}

impl Group<'_> {
    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.raw.rank.max(0) as usize
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.raw.world_size.max(0) as usize
    }

    /// Reduces `bytes` (whole elements of `dtype`, host memory) across the group
    /// with `op`, in place, blocking until every rank has contributed. Every
    /// rank calls it alike (same count, dtype, op, order).
    pub fn all_reduce_host(&self, bytes: &mut [u8], dtype: DType, op: ReduceOp) -> Result<()> {
        all_reduce_host(self.raw, bytes, dtype, op)
    }

    /// A reference to the group that outlives the call.
    pub fn retain(&self) -> OwnedGroup {
        // SAFETY: `ctx` is live during the call; the reference is given back once,
        // by `OwnedGroup`'s drop.
        unsafe { (self.raw.retain)(self.raw.ctx) };
        OwnedGroup { raw: *self.raw }
    }
}

impl OwnedGroup {
    /// As [`Group::all_reduce_host`].
    pub fn all_reduce_host(&self, bytes: &mut [u8], dtype: DType, op: ReduceOp) -> Result<()> {
        all_reduce_host(&self.raw, bytes, dtype, op)
    }
}

impl Drop for OwnedGroup {
    fn drop(&mut self) {
        // SAFETY: gives back the reference `Group::retain` took, once.
        unsafe { (self.raw.release)(self.raw.ctx) };
    }
}

/// A device's own collectives. Each call is ordered on a stream of the tensor's
/// device; returning `Err(Error::declined())` before moving any data lets the
/// host stage that call through host memory instead.
pub trait Communicator: Sync + 'static {
    /// `all_reduce` of `t` (this device's, any strides and dtype) with `op`, in
    /// place, on stream `stream` of `t`'s device, through `group`.
    fn all_reduce(&self, t: &Tensor, op: ReduceOp, group: &Group, stream: i64) -> Result<()>;
}

unsafe extern "C" fn all_reduce_trampoline(
    user: *mut c_void,
    tensor: OpalTensor,
    op: i32,
    group: *const OpalCommGroup,
    stream: i64,
) -> OpalStatus {
    guarded(
        || "the plugin's all_reduce".to_string(),
        || {
            // SAFETY: `user` is the table's own: a leaked `&'static dyn Communicator`.
            let c = unsafe { *user.cast::<&'static dyn Communicator>() };
            // SAFETY: the host lends a table of at least its `size` bytes for the call.
            let raw = unsafe { group.as_ref() }.ok_or_else(|| Error::msg("null group"))?;
            if raw.size < abi::COMM_GROUP_SIZE_1_4 {
                return Err(Error::msg(format!(
                    "the host's group table has {} bytes, ABI 1.4 needs {}",
                    raw.size,
                    abi::COMM_GROUP_SIZE_1_4
                )));
            }
            let t = Tensor::from_handle(tensor, false)?;
            c.all_reduce(&t, ReduceOp::from_code(op)?, &Group { raw }, stream)
        },
    )
}

impl Registrar<'_> {
    /// Makes `c` the collective communicator of the plugin's device type (ABI
    /// 1.4, appended): `opal-distributed` runs `all_reduce` on the device's
    /// tensors through it. An `ABI_MISMATCH` error naming both versions on a
    /// host whose registrar lacks the function.
    pub fn communicator(&mut self, c: &'static dyn Communicator) -> Result<&mut Self> {
        let raw = self.raw();
        let end = std::mem::offset_of!(abi::OpalRegistrar, register_communicator)
            + std::mem::size_of::<usize>();
        if !abi::has_field(raw.size, end) {
            return Err(Error {
                code: abi::code::ABI_MISMATCH,
                message: format!(
                    "the plugin was built for ABI {}.{} and registers a communicator, which \
                     needs a host whose registrar has register_communicator ({end} bytes); \
                     this host's has {}",
                    abi::ABI_MAJOR,
                    abi::ABI_MINOR,
                    raw.size
                ),
            });
        }
        let table = OpalCommunicator {
            size: std::mem::size_of::<OpalCommunicator>(),
            user: Box::leak(Box::new(c)) as *mut &'static dyn Communicator as *mut c_void,
            all_reduce: Some(all_reduce_trampoline),
        };
        // SAFETY: the registrar is valid during init and its size covers the
        // field; the host copies the table; `user` is leaked (alive for the process).
        let st = unsafe { (raw.register_communicator)(raw.ctx, &table) };
        // SAFETY: a host status, consumed once.
        unsafe { check(st) }?;
        Ok(self)
    }
}
