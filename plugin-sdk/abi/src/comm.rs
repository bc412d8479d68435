//! ABI 1.4 (appended): a plugin device's own collective communicator
//! ([`OpalCommunicator`], registered with
//! [`crate::OpalRegistrar::register_communicator`]) and the host's transport of
//! one process group that the host lends it for a call ([`OpalCommGroup`]).
//!
//! Owns: the communicator's types and codes. Must not: contain behaviour.

use crate::{OpalStatus, OpalTensor};
use core::ffi::c_void;

/// Reduction codes of [`OpalCommunicator::all_reduce`] and
/// [`OpalCommGroup::host_all_reduce`] (`torch.distributed.ReduceOp`'s order).
pub mod reduce_op {
    /// The sum (bool: a logical or).
    pub const SUM: i32 = 0;
    /// The sum divided by the group's size (floating and complex dtypes only).
    pub const AVG: i32 = 1;
    /// The product (bool: a logical and).
    pub const PRODUCT: i32 = 2;
    /// The minimum (bool: a logical and; not for complex dtypes).
    pub const MIN: i32 = 3;
    /// The maximum (bool: a logical or; not for complex dtypes).
    pub const MAX: i32 = 4;
}

/// The host's transport of one process group, lent to a plugin's communicator
/// for one call. The table itself is borrowed for the call (a plugin that needs
/// it later copies it: it holds values only); `ctx` is borrowed too, and a
/// plugin that uses it after returning (from work it queued on a stream) first
/// takes a reference with `retain` and gives it back once with `release`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct OpalCommGroup {
    /// Byte size of this table as the host compiled it.
    pub size: usize,
    /// The group, passed back to the functions below.
    pub ctx: *mut c_void,
    /// This process's rank in the group.
    pub rank: i32,
    /// The number of ranks.
    pub world_size: i32,
    /// Takes a new reference to `ctx`, valid until released.
    pub retain: unsafe extern "C" fn(ctx: *mut c_void),
    /// Gives back a reference taken with `retain`, exactly once.
    pub release: unsafe extern "C" fn(ctx: *mut c_void),
    /// Reduces `count` elements of dtype code `dtype` (any [`crate::dtype`]) at
    /// `data` (host memory, aligned for the dtype, readable and writable) across
    /// the group with `op` ([`reduce_op`]), in place, blocking until every rank
    /// has contributed (or the group's timeout passed: an error). Every rank's
    /// communicator calls it the same number of times, in the same order, with
    /// the same count, dtype and op.
    pub host_all_reduce: unsafe extern "C" fn(
        ctx: *mut c_void,
        data: *mut c_void,
        count: usize,
        dtype: i32,
        op: i32,
    ) -> OpalStatus,
}

/// A plugin device's collectives, registered with
/// [`crate::OpalRegistrar::register_communicator`]. The host copies the table
/// during that call; `user` is kept and passed back for the process. A null
/// function leaves that collective to the host, which stages it through host
/// memory.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct OpalCommunicator {
    /// Byte size of this table as the plugin compiled it.
    pub size: usize,
    /// Passed back to every function; must allow calls from any thread.
    pub user: *mut c_void,
    /// `all_reduce` of `tensor` (a borrowed tensor of the plugin's device, any
    /// strides and dtype, which the host holds for writing during the call) with
    /// `op` ([`reduce_op`]), in place, ordered on stream `stream` of the
    /// tensor's device (the caller's current stream): after the work queued on
    /// it before, before the work queued after. `group` is the host's transport
    /// (borrowed, see [`OpalCommGroup`]). The host's work handle completes when
    /// the stream has run everything queued so far. [`crate::code::DECLINED`],
    /// returned before any `host_all_reduce` call, lets the host stage this
    /// call itself.
    pub all_reduce: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            tensor: OpalTensor,
            op: i32,
            group: *const OpalCommGroup,
            stream: i64,
        ) -> OpalStatus,
    >,
}

/// The size of the first layout of [`OpalCommunicator`] (the host refuses a
/// shorter table).
pub const COMMUNICATOR_SIZE_1_4: usize = core::mem::size_of::<OpalCommunicator>();

/// The size of the first layout of [`OpalCommGroup`] (a plugin uses no field a
/// shorter table lacks).
pub const COMM_GROUP_SIZE_1_4: usize = core::mem::size_of::<OpalCommGroup>();
