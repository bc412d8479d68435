//! A plugin device's own collective communicator on the host: the table a plugin
//! registers with `register_communicator` (ABI 1.4, appended), kept per device
//! type, and the host transport of a process group that a call lends the plugin
//! ([`OpalCommGroup`]).
//!
//! The runtime does not know process groups: whoever runs collectives
//! (`opal-distributed`) finds the table with [`communicator`] and passes its
//! group as a [`HostTransport`]; this module turns that into the C table and
//! checks everything the plugin passes back.
//!
//! Owns: the registered tables and the transport's C functions. Must not: run
//! collectives itself or depend on `opal-distributed`.

use super::host::{guarded, reg};
use super::value;
use crate::device::DeviceType;
use crate::dtype::DType;
use crate::error::{OpalError, Result};
use crate::tensor::{KernelAccess, Tensor};
use opal_plugin_abi::{code, reduce_op, OpalCommGroup, OpalCommunicator, OpalStatus};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// A reduction of a plugin communicator (`opal_plugin_abi::reduce_op`'s codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommReduce {
    /// The sum.
    Sum,
    /// The sum divided by the group's size.
    Avg,
    /// The product.
    Product,
    /// The minimum.
    Min,
    /// The maximum.
    Max,
}

impl CommReduce {
    fn code(self) -> i32 {
        match self {
            CommReduce::Sum => reduce_op::SUM,
            CommReduce::Avg => reduce_op::AVG,
            CommReduce::Product => reduce_op::PRODUCT,
            CommReduce::Min => reduce_op::MIN,
            CommReduce::Max => reduce_op::MAX,
        }
    }

    fn from_code(c: i32) -> Option<CommReduce> {
        [
            CommReduce::Sum,
            CommReduce::Avg,
            CommReduce::Product,
            CommReduce::Min,
            CommReduce::Max,
        ]
        .into_iter()
        .find(|r| r.code() == c)
    }
}

/// The host side of one process group, as a plugin's communicator sees it.
pub trait HostTransport: Send + Sync {
    /// This process's rank.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Reduces `bytes` (the elements of `dtype`, in order) across the group with
    /// `op`, in place, blocking.
    fn all_reduce(&self, bytes: &mut [u8], dtype: DType, op: CommReduce) -> Result<()>;
}

/// A plugin's communicator table, copied and checked when registered.
pub struct PluginCommunicator {
    plugin: Arc<str>,
    raw: OpalCommunicator,
    calls: AtomicU64,
}

// SAFETY: the ABI requires the functions (and what `user` refers to) to allow
// calls from any thread, concurrently (docs/abi.md, "Threads").
unsafe impl Send for PluginCommunicator {}
// SAFETY: as above.
unsafe impl Sync for PluginCommunicator {}

/// What a lent group is: the transport, and whether the plugin moved data
/// through it (a `DECLINED` after that would leave the ranks out of step).
struct GroupCtx {
    transport: Arc<dyn HostTransport>,
    plugin: Arc<str>,
    used: AtomicBool,
}

impl PluginCommunicator {
    /// Copies and checks the table at `raw` of `plugin`.
    ///
    /// # Safety
    /// `raw` is null or points to a readable table of at least its `size` bytes.
    unsafe fn copy(plugin: &Arc<str>, raw: *const OpalCommunicator) -> Result<Self> {
        let bad =
            |what: String| OpalError::msg(format!("plugin '{plugin}''s communicator: {what}"));
        if raw.is_null() {
            return Err(bad("null table".into()));
        }
        // SAFETY: per the contract `size`, the first field, is readable.
        let size = unsafe { std::ptr::addr_of!((*raw).size).read() };
        if size < opal_plugin_abi::COMMUNICATOR_SIZE_1_4 {
            return Err(bad(format!(
                "the table has {size} bytes, ABI 1.4 needs {}",
                opal_plugin_abi::COMMUNICATOR_SIZE_1_4
            )));
        }
        // SAFETY: the table holds at least this layout (checked above); a longer
        // one (a later version) has it as its prefix.
        let raw = unsafe { raw.read() };
        Ok(PluginCommunicator {
            plugin: plugin.clone(),
            raw,
            calls: AtomicU64::new(0),
        })
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// True when the plugin runs `all_reduce` itself.
    pub fn has_all_reduce(&self) -> bool {
        self.raw.all_reduce.is_some()
    }

    /// How many `all_reduce` calls the plugin has taken (returned `OK`) so far.
    pub fn all_reduce_calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Runs the plugin's `all_reduce` of `t` (a tensor of its device) on stream
    /// `stream` of `t`'s device, moving data through `transport`. `Ok(false)`
    /// when the plugin has none or declined this call before moving any data
    /// (the caller then stages it).
    pub fn all_reduce(
        &self,
        t: &Tensor,
        op: CommReduce,
        transport: Arc<dyn HostTransport>,
        stream: i64,
    ) -> Result<bool> {
        let Some(f) = self.raw.all_reduce else {
            return Ok(false);
        };
        let who = || format!("plugin '{}''s all_reduce", self.plugin);
        let to_i32 = |n: usize, what: &str| {
            i32::try_from(n)
                .map_err(|_| OpalError::msg(format!("{}: {what} {n} exceeds i32", who())))
        };
        let (rank, world_size) = (
            to_i32(transport.rank(), "rank")?,
            to_i32(transport.size(), "size")?,
        );
        let ctx = Arc::new(GroupCtx {
            transport,
            plugin: self.plugin.clone(),
            used: AtomicBool::new(false),
        });
        let group = OpalCommGroup {
            size: std::mem::size_of::<OpalCommGroup>(),
            ctx: Arc::as_ptr(&ctx).cast_mut().cast(),
            rank,
            world_size,
            retain: group_retain,
            release: group_release,
            host_all_reduce,
        };
        // The plugin writes `t` during the call (or queues work that does).
        let acc = KernelAccess::new(&[], &[t])?;
        // SAFETY: `t` is borrowed for the call; `group` and `ctx` (kept by the
        // `Arc` above) outlive it; the plugin's `user` lives for the process.
        let st = unsafe { f(self.raw.user, value::borrow(t), op.code(), &group, stream) };
        drop(acc);
        if st.code == code::DECLINED {
            let used = ctx.used.load(Ordering::Acquire);
            // SAFETY: a status from the plugin, consumed once (its message freed).
            let _ = unsafe { st.into_result() };
            if used {
                return Err(OpalError::msg(format!(
                    "{} declined after moving data through the group (the ranks are out of step)",
                    who()
                )));
            }
            return Ok(false);
        }
        // SAFETY: a status from the plugin, consumed once.
        unsafe { value::check(st, who) }?;
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }
}

type Table = HashMap<DeviceType, Arc<PluginCommunicator>>;

fn table() -> &'static RwLock<Table> {
    static T: OnceLock<RwLock<Table>> = OnceLock::new();
    T.get_or_init(Default::default)
}

/// The communicator a plugin registered for `device`, if any.
pub fn communicator(device: DeviceType) -> Option<Arc<PluginCommunicator>> {
    table()
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .get(&device)
        .cloned()
}

/// Makes `c` the communicator of `device` (when the plugin's entry succeeded).
pub(super) fn install(device: DeviceType, c: PluginCommunicator) {
    table()
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .insert(device, Arc::new(c));
}

/// The registrar's `register_communicator`.
pub(super) unsafe extern "C" fn register_communicator(
    ctx: *mut c_void,
    comm: *const OpalCommunicator,
) -> OpalStatus {
    guarded("register_communicator", || {
        // SAFETY: called during the entry with the registrar's own ctx (ABI).
        let r = unsafe { reg(ctx) }?;
        // SAFETY: null or a readable table for the call (ABI).
        r.communicator = Some(unsafe { PluginCommunicator::copy(&r.plugin, comm) }?);
        Ok(())
    })
}

/// # Safety
/// `ctx` is a group context this module lent (live: borrowed or retained).
unsafe fn group_ctx<'a>(ctx: *mut c_void) -> Result<&'a GroupCtx> {
    // SAFETY: forwarded contract.
    unsafe { ctx.cast::<GroupCtx>().cast_const().as_ref() }
        .ok_or_else(|| OpalError::msg("null group context"))
}

unsafe extern "C" fn group_retain(ctx: *mut c_void) {
    if !ctx.is_null() {
        // SAFETY: a live context is an `Arc<GroupCtx>`'s pointer (ABI: borrowed or
        // retained while the plugin calls this).
        unsafe { Arc::increment_strong_count(ctx.cast::<GroupCtx>().cast_const()) };
    }
}

unsafe extern "C" fn group_release(ctx: *mut c_void) {
    if !ctx.is_null() {
        // SAFETY: gives back one reference `group_retain` took (ABI: exactly once).
        unsafe { Arc::decrement_strong_count(ctx.cast::<GroupCtx>().cast_const()) };
    }
}

unsafe extern "C" fn host_all_reduce(
    ctx: *mut c_void,
    data: *mut c_void,
    count: usize,
    dtype: i32,
    op: i32,
) -> OpalStatus {
    guarded("host_all_reduce", || {
        // SAFETY: the plugin passes back a live context it was lent (ABI).
        let g = unsafe { group_ctx(ctx) }?;
        let bad = |what: String| {
            OpalError::msg(format!("plugin '{}''s host_all_reduce: {what}", g.plugin))
        };
        let dt = value::dtype_from(i64::from(dtype)).map_err(|e| bad(e.to_string()))?;
        let op =
            CommReduce::from_code(op).ok_or_else(|| bad(format!("unknown reduction code {op}")))?;
        let es = dt.size();
        let len = count
            .checked_mul(es)
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| bad(format!("{count} elements of {dt:?} overflow")))?;
        g.used.store(true, Ordering::Release);
        if len == 0 {
            return g.transport.all_reduce(&mut [], dt, op);
        }
        if data.is_null() {
            return Err(bad(format!("null data for {count} elements")));
        }
        // SAFETY: the ABI makes `data` `count` readable and writable elements of
        // `dtype` of host memory, not otherwise used during the call.
        let bytes = unsafe { std::slice::from_raw_parts_mut(data.cast::<u8>(), len) };
        g.transport.all_reduce(bytes, dt, op)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use opal_plugin_abi::OpalTensor;
    use std::sync::Mutex;

    /// A one-rank transport that records what it was asked.
    struct Recorder(Mutex<Vec<(usize, DType, CommReduce)>>);

    impl HostTransport for Recorder {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            1
        }
        fn all_reduce(&self, bytes: &mut [u8], dtype: DType, op: CommReduce) -> Result<()> {
            self.0.lock().unwrap().push((bytes.len(), dtype, op));
            Ok(())
        }
    }

    /// Moves 3 f32 through the group, then declines.
    unsafe extern "C" fn moves_then_declines(
        _: *mut c_void,
        _: OpalTensor,
        op: i32,
        g: *const OpalCommGroup,
        _: i64,
    ) -> OpalStatus {
        let mut buf = [0f32; 3];
        // SAFETY: the host's group, borrowed for the call; `buf` holds 3 f32.
        let g = unsafe { &*g };
        // SAFETY: as above.
        let st = unsafe {
            (g.host_all_reduce)(
                g.ctx,
                buf.as_mut_ptr().cast(),
                3,
                opal_plugin_abi::dtype::F32,
                op,
            )
        };
        assert_eq!(st.code, code::OK);
        OpalStatus::error(code::DECLINED, "")
    }

    /// Declines at once.
    unsafe extern "C" fn declines(
        _: *mut c_void,
        _: OpalTensor,
        _: i32,
        _: *const OpalCommGroup,
        _: i64,
    ) -> OpalStatus {
        OpalStatus::error(code::DECLINED, "")
    }

    fn comm(
        f: unsafe extern "C" fn(
            *mut c_void,
            OpalTensor,
            i32,
            *const OpalCommGroup,
            i64,
        ) -> OpalStatus,
        size: usize,
    ) -> Result<PluginCommunicator> {
        let raw = OpalCommunicator {
            size,
            user: std::ptr::null_mut(),
            all_reduce: Some(f),
        };
        // SAFETY: a readable table of `size_of` bytes.
        unsafe { PluginCommunicator::copy(&Arc::from("p"), &raw) }
    }

    #[test]
    fn a_short_table_is_refused_naming_the_plugin() {
        let e = comm(declines, 8).err().unwrap().to_string();
        assert!(
            e.contains("plugin 'p''s communicator") && e.contains("8 bytes"),
            "{e}"
        );
    }

    #[test]
    fn declining_before_moving_data_stages_and_after_is_an_error() {
        let t = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
        let rec = Arc::new(Recorder(Mutex::new(Vec::new())));
        let c = comm(declines, std::mem::size_of::<OpalCommunicator>()).unwrap();
        assert!(!c.all_reduce(&t, CommReduce::Sum, rec.clone(), 0).unwrap());
        let c = comm(moves_then_declines, std::mem::size_of::<OpalCommunicator>()).unwrap();
        let e = c
            .all_reduce(&t, CommReduce::Max, rec.clone(), 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("declined after moving data"), "{e}");
        assert_eq!(*rec.0.lock().unwrap(), [(12, DType::F32, CommReduce::Max)]);
        assert_eq!(c.all_reduce_calls(), 0);
    }
}
