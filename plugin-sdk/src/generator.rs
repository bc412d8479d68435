//! [`Generator`]: a handle to a host generator (ABI 1.4): the default generator of
//! a device index, or a `Generator` argument of a kernel. Draws give exactly the
//! numbers the host's own kernels draw, so a plugin's random kernel reproduces
//! the host's results for a seed.
//!
//! Owns: the handle and its calls. Must not: implement a generator.

use crate::abi::{self, draw, OpalGenerator};
use crate::{check, Device, Error, Result};
use std::ffi::c_void;
use std::sync::Arc;

struct Handle {
    h: OpalGenerator,
    owned: bool,
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.owned {
            if let Ok(api) = host_1_4() {
                // SAFETY: an owned handle of `generator_default`, released once.
                unsafe { (api.generator_release)(self.h) };
            }
        }
    }
}

// SAFETY: host generators may be used from any thread (docs/abi.md, "Threads");
// a borrowed handle is only valid during its kernel call, which `Value`'s
// lifetime rules already require.
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}

/// A host generator. Clones share the handle; an owned one is released when the
/// last clone drops. One from a kernel's arguments is borrowed: valid only during
/// the call.
#[derive(Clone)]
pub struct Generator(Arc<Handle>);

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Generator({:p})", self.0.h.0)
    }
}

fn host_1_4() -> Result<&'static abi::OpalHostApi> {
    crate::device::host_1_4("generators")
}

/// The host status of `st`, naming the call on failure.
fn named(st: abi::OpalStatus, what: &str) -> Result<()> {
    // SAFETY: a host status, consumed once.
    unsafe { check(st) }.map_err(|e| Error {
        code: e.code,
        message: format!("{what}: {}", e.message),
    })
}

impl Generator {
    /// A borrowed handle from a kernel's arguments.
    pub(crate) fn borrowed(h: OpalGenerator) -> Result<Generator> {
        if h.0.is_null() {
            return Err(Error::msg("a null generator handle"));
        }
        Ok(Generator(Arc::new(Handle { h, owned: false })))
    }

    /// The handle (borrowed for a call).
    pub(crate) fn handle(&self) -> OpalGenerator {
        self.0.h
    }

    /// The default generator of `device` (no index: the thread's current device
    /// of its kind); each index has its own.
    pub fn default_for(device: Device) -> Result<Generator> {
        let api = host_1_4()?;
        let mut h = OpalGenerator(std::ptr::null_mut());
        // SAFETY: the host's function (its table covers it) with a writable out.
        let st =
            unsafe { (api.generator_default)(device.code(), device.index.unwrap_or(-1), &mut h) };
        named(st, "generator_default")?;
        if h.0.is_null() {
            return Err(Error::msg(
                "generator_default: the host returned a null handle",
            ));
        }
        Ok(Generator(Arc::new(Handle { h, owned: true })))
    }

    /// Seeds the generator (its stream restarts).
    pub fn manual_seed(&self, seed: u64) -> Result<()> {
        // SAFETY: a live handle (owned, or borrowed for the current call).
        named(
            unsafe { (host_1_4()?.generator_manual_seed)(self.0.h, seed) },
            "manual_seed",
        )
    }

    /// The seed.
    pub fn initial_seed(&self) -> Result<u64> {
        let mut s = 0;
        // SAFETY: a live handle and a writable out.
        let st = unsafe { (host_1_4()?.generator_initial_seed)(self.0.h, &mut s) };
        named(st, "initial_seed")?;
        Ok(s)
    }

    fn draw<T>(&self, kind: u32, out: &mut [T]) -> Result<()> {
        // SAFETY: a live handle and room for `out.len()` aligned values of the
        // kind's type (each caller passes the matching `T`).
        let st = unsafe {
            (host_1_4()?.generator_draw)(
                self.0.h,
                kind,
                out.len(),
                out.as_mut_ptr().cast::<c_void>(),
            )
        };
        named(st, "generator_draw")
    }

    /// Fills `out` with random 32-bit words, in order.
    pub fn fill_u32(&self, out: &mut [u32]) -> Result<()> {
        self.draw(draw::U32, out)
    }

    /// Fills `out` with uniform samples in `[0, 1)` as the host's float32 `rand`.
    pub fn fill_uniform_f32(&self, out: &mut [f32]) -> Result<()> {
        self.draw(draw::UNIFORM_F32, out)
    }

    /// Fills `out` with uniform samples in `[0, 1)` as the host's float64 `rand`.
    pub fn fill_uniform_f64(&self, out: &mut [f64]) -> Result<()> {
        self.draw(draw::UNIFORM_F64, out)
    }

    /// Fills `out` with standard normal samples as the host's `randn`.
    pub fn fill_normal_f64(&self, out: &mut [f64]) -> Result<()> {
        self.draw(draw::NORMAL_F64, out)
    }

    /// Reserves `blocks` Philox-4x32-10 blocks: `(seed, first offset)`.
    pub fn reserve(&self, blocks: u64) -> Result<(u64, u64)> {
        let (mut s, mut o) = (0, 0);
        // SAFETY: a live handle and writable outs.
        let st = unsafe { (host_1_4()?.generator_reserve)(self.0.h, blocks, &mut s, &mut o) };
        named(st, "generator_reserve")?;
        Ok((s, o))
    }

    /// The state, restorable with [`Generator::set_state`].
    pub fn get_state(&self) -> Result<Vec<u8>> {
        let api = host_1_4()?;
        let mut buf = vec![0u8; 64];
        let mut len = 0usize;
        // SAFETY: a live handle, `buf.len()` writable bytes, a writable length.
        let st =
            unsafe { (api.generator_get_state)(self.0.h, buf.as_mut_ptr(), buf.len(), &mut len) };
        if len > buf.len() {
            // A longer state than this SDK expected: ask again with room for it.
            // SAFETY: a host status, consumed once (the failure is expected).
            let _ = unsafe { check(st) };
            buf.resize(len, 0);
            // SAFETY: as above, with room for `len` bytes.
            let st = unsafe {
                (api.generator_get_state)(self.0.h, buf.as_mut_ptr(), buf.len(), &mut len)
            };
            named(st, "generator_get_state")?;
        } else {
            named(st, "generator_get_state")?;
        }
        buf.truncate(len);
        Ok(buf)
    }

    /// Restores a state from [`Generator::get_state`].
    pub fn set_state(&self, state: &[u8]) -> Result<()> {
        // SAFETY: a live handle and `state.len()` readable bytes.
        let st =
            unsafe { (host_1_4()?.generator_set_state)(self.0.h, state.as_ptr(), state.len()) };
        named(st, "generator_set_state")
    }
}
