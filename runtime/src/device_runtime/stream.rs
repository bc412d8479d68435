//! Streams and events: the runtime side of a device's execution queues. A
//! [`Stream`] (the schema type: a device and a backend-defined id, 0 being the
//! default stream) names one queue of a device; each thread has a current stream
//! per device ([`current_stream`], [`set_stream`], [`StreamGuard`]), which
//! backends read to pick the queue their kernels go to. An [`Event`] marks a point
//! in a stream: [`Event::record`], [`Event::query`], [`Event::synchronize`],
//! [`Event::elapsed_time`], and [`Stream::wait_event`] makes a stream wait for it.
//!
//! Everything goes through the device's [`DeviceHooks`]: a vendor implements
//! `new_stream`, `stream_exists`, `query_stream`, `synchronize_stream`,
//! `synchronize_device` and `create_event` (a [`DeviceEvent`]) once. The defaults
//! describe a synchronous device with only its default stream (the CPU): work is
//! done when an op returns, and events are host timestamps.
//!
//! Owns: the per-thread current streams, [`StreamGuard`] and [`Event`]. Must not:
//! run or order work itself (backends do).

use super::{check_device, hooks, resolve, DeviceHooks};
use crate::device_type::{Device, DeviceType};
use crate::error::{OpalError, Result};
use crate::types::Stream;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::Mutex;
use std::time::Instant;

/// A backend's event: a marker it puts into one of its streams. Made by
/// [`DeviceHooks::create_event`]; [`Event`] is the user-facing handle.
pub trait DeviceEvent: Send + Sync {
    /// Puts the marker at the current end of `stream` (replacing an earlier
    /// recording; waits made before keep waiting for that earlier one).
    fn record(&self, stream: Stream) -> Result<()>;
    /// Makes later work on `stream` wait until the latest recording has completed
    /// (no wait if never recorded).
    fn block(&self, stream: Stream) -> Result<()>;
    /// Whether the latest recording has completed (true if never recorded).
    fn query(&self) -> Result<bool>;
    /// Waits on this thread until the latest recording has completed.
    fn synchronize(&self) -> Result<()>;
    /// When the latest recording completed; an error if it has not, or never was.
    fn completed_at(&self) -> Result<Instant>;
}

/// The event of a synchronous device: recording completes at once, at the time of
/// the call.
#[derive(Default)]
pub struct HostEvent {
    at: Mutex<Option<Instant>>,
}

impl DeviceEvent for HostEvent {
    fn record(&self, _stream: Stream) -> Result<()> {
        *self.at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        Ok(())
    }
    fn block(&self, _stream: Stream) -> Result<()> {
        Ok(())
    }
    fn query(&self) -> Result<bool> {
        Ok(true)
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
    fn completed_at(&self) -> Result<Instant> {
        self.at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ok_or_else(|| OpalError::device("the event was never recorded"))
    }
}

thread_local! {
    /// This thread's current stream ids, per device with a non-default one.
    static CURRENT: RefCell<Vec<(DeviceType, i16, i64)>> = const { RefCell::new(Vec::new()) };
}

/// `device` resolved to an index (the thread's current device when it has none;
/// CPU and meta: 0) and checked against the device count.
fn indexed(device: Device) -> Result<Device> {
    let d = resolve(device);
    let d = match d.index() {
        Some(_) => d,
        None => Device::new(d.device_type(), Some(0)),
    };
    check_device(d)?;
    Ok(d)
}

fn index_of(d: Device) -> i16 {
    d.index().unwrap_or(0)
}

/// The default stream (id 0) of `device`.
pub fn default_stream(device: Device) -> Result<Stream> {
    let d = indexed(device)?;
    hooks(d.device_type())?;
    Ok(Stream::default_for(d))
}

/// This thread's current stream of `device` (its default stream until
/// [`set_stream`]).
pub fn current_stream(device: Device) -> Result<Stream> {
    let d = indexed(device)?;
    hooks(d.device_type())?;
    let (ty, i) = (d.device_type(), index_of(d));
    let id = CURRENT
        .try_with(|c| {
            c.borrow()
                .iter()
                .find(|e| e.0 == ty && e.1 == i)
                .map_or(0, |e| e.2)
        })
        .unwrap_or(0);
    Ok(Stream { device: d, id })
}

/// A new stream of `device` from its device runtime (an error naming the device
/// when it has only its default stream).
pub fn new_stream(device: Device) -> Result<Stream> {
    let d = indexed(device)?;
    let h = hooks(d.device_type())?;
    let id = h
        .new_stream(index_of(d))
        .map_err(|e| OpalError::device(format!("new_stream on '{d}': {e}")))?;
    Ok(Stream { device: d, id })
}

fn check_stream(s: Stream) -> Result<&'static dyn DeviceHooks> {
    let d = s.device;
    let h = hooks(d.device_type())?;
    if d.index().is_none() {
        return Err(OpalError::device(format!(
            "stream {} names device '{d}' without an index",
            s.id
        )));
    }
    check_device(d)?;
    if !h.stream_exists(s) {
        return Err(OpalError::device(format!(
            "device '{d}' has no stream {}: make streams with opal::device::new_stream",
            s.id
        )));
    }
    Ok(h)
}

/// Makes `stream` this thread's current stream of its device; returns the one it
/// replaces. An unknown stream is an error naming the device.
pub fn exchange_stream(stream: Stream) -> Result<Stream> {
    check_stream(stream)?;
    let prev = current_stream(stream.device)?;
    let (ty, i) = (stream.device.device_type(), index_of(stream.device));
    CURRENT
        .try_with(|c| {
            let mut c = c.borrow_mut();
            c.retain(|e| !(e.0 == ty && e.1 == i));
            if stream.id != 0 {
                c.push((ty, i, stream.id));
            }
        })
        .map_err(|_| OpalError::device("set_stream during thread teardown"))?;
    Ok(prev)
}

/// Makes `stream` this thread's current stream of its device.
pub fn set_stream(stream: Stream) -> Result<()> {
    exchange_stream(stream).map(drop)
}

/// Waits until all work queued on every stream of `device` has run; reports the
/// first error an asynchronous kernel of the device hit since the last report.
pub fn synchronize(device: Device) -> Result<()> {
    let d = indexed(device)?;
    hooks(d.device_type())?.synchronize_device(index_of(d))
}

impl Stream {
    /// Whether all work queued on this stream has run (an error from an
    /// asynchronous kernel is reported here).
    pub fn query(&self) -> Result<bool> {
        check_stream(*self)?.query_stream(*self)
    }

    /// Waits until all work queued on this stream has run.
    pub fn synchronize(&self) -> Result<()> {
        check_stream(*self)?.synchronize_stream(*self)
    }

    /// Makes later work on this stream wait for `event`'s latest recording.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        event.wait(*self)
    }

    /// A new event recorded on this stream.
    pub fn record_event(&self, timing: bool) -> Result<Event> {
        let e = Event::new(timing);
        e.record(*self)?;
        Ok(e)
    }
}

/// Makes a stream current for a scope, and its device the current device; both
/// are restored when the guard drops (also on unwinding). Not `Send`.
#[must_use = "the previous stream is restored when the guard drops"]
pub struct StreamGuard {
    prev: Stream,
    _device: super::DeviceGuard,
    _this_thread: PhantomData<*const ()>,
}

impl StreamGuard {
    /// Makes `stream` (and its device) current until the guard drops.
    pub fn new(stream: Stream) -> Result<StreamGuard> {
        check_stream(stream)?;
        let device = super::DeviceGuard::new(stream.device)?;
        let prev = exchange_stream(stream)?;
        Ok(StreamGuard {
            prev,
            _device: device,
            _this_thread: PhantomData,
        })
    }

    /// The stream that was current before and comes back after the guard.
    pub fn original_stream(&self) -> Stream {
        self.prev
    }
}

impl std::fmt::Debug for StreamGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamGuard")
            .field("original_stream", &self.prev)
            .finish()
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        // The previous stream was valid when taken; restoring it cannot fail
        // except during thread teardown, when nothing is left to restore.
        let _ = exchange_stream(self.prev);
    }
}

/// A marker in a stream: record it, ask whether the work before it has run, wait
/// for it, make another stream wait for it, and time the work between two events
/// (both made with `timing`). Bound to a device by its first [`Event::record`].
pub struct Event {
    timing: bool,
    inner: Mutex<Option<(Device, Box<dyn DeviceEvent>)>>,
}

impl Event {
    /// An event not yet recorded; `timing` lets it be used with
    /// [`Event::elapsed_time`].
    pub fn new(timing: bool) -> Event {
        Event {
            timing,
            inner: Mutex::new(None),
        }
    }

    fn with<R>(
        &self,
        f: impl FnOnce(Option<&(Device, Box<dyn DeviceEvent>)>) -> Result<R>,
    ) -> Result<R> {
        f(self
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref())
    }

    /// The device of its recordings, once recorded.
    pub fn device(&self) -> Option<Device> {
        self.with(|i| Ok(i.map(|(d, _)| *d))).unwrap_or(None)
    }

    /// Records the event at the current end of `stream` (an event recorded on one
    /// device cannot be recorded on another).
    pub fn record(&self, stream: Stream) -> Result<()> {
        let h = check_stream(stream)?;
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match &*inner {
            Some((d, _)) if *d != stream.device => Err(OpalError::device(format!(
                "the event was recorded on device '{d}' and cannot be recorded on stream {} of '{}'",
                stream.id, stream.device
            ))),
            Some((_, e)) => e.record(stream),
            None => {
                let e = h.create_event(index_of(stream.device), self.timing)?;
                e.record(stream)?;
                *inner = Some((stream.device, e));
                Ok(())
            }
        }
    }

    /// Records the event on this thread's current stream of `device`.
    pub fn record_current(&self, device: Device) -> Result<()> {
        self.record(current_stream(device)?)
    }

    /// Whether the work before the latest recording has run (true if never
    /// recorded, as in PyTorch).
    pub fn query(&self) -> Result<bool> {
        self.with(|i| i.map_or(Ok(true), |(_, e)| e.query()))
    }

    /// Waits until the work before the latest recording has run.
    pub fn synchronize(&self) -> Result<()> {
        self.with(|i| i.map_or(Ok(()), |(_, e)| e.synchronize()))
    }

    /// Makes later work on `stream` wait for the latest recording (nothing to wait
    /// for if never recorded). The stream must be on the event's device.
    pub fn wait(&self, stream: Stream) -> Result<()> {
        check_stream(stream)?;
        self.with(|i| match i {
            None => Ok(()),
            Some((d, _)) if *d != stream.device => Err(OpalError::device(format!(
                "stream {} of '{}' cannot wait for an event of device '{d}'",
                stream.id, stream.device
            ))),
            Some((_, e)) => e.block(stream),
        })
    }

    /// Milliseconds from this event's completion to `end`'s. Both need `timing`,
    /// a recording, and to have completed.
    pub fn elapsed_time(&self, end: &Event) -> Result<f64> {
        if !self.timing || !end.timing {
            return Err(OpalError::device(
                "elapsed_time needs both events made with timing enabled (Event::new(true))",
            ));
        }
        let at = |e: &Event, which: &str| {
            e.with(|i| match i {
                None => Err(OpalError::device(format!(
                    "elapsed_time: the {which} event was never recorded"
                ))),
                Some((_, ev)) => {
                    if !ev.query()? {
                        return Err(OpalError::device(format!(
                            "elapsed_time: the {which} event has not completed yet (synchronize it first)"
                        )));
                    }
                    ev.completed_at()
                }
            })
        };
        let (a, b) = (at(self, "start")?, at(end, "end")?);
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        Ok(if b >= a { ms(b - a) } else { -ms(a - b) })
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("timing", &self.timing)
            .field("device", &self.device())
            .finish()
    }
}
