//! ABI 1.4 generators on the host: the [`opal_plugin_abi::OpalHostApi`] functions
//! that give a plugin the default generator of a device index, seed it, draw from
//! it exactly as the host's own kernels do, reserve Philox blocks, and save and
//! restore its state; and the handles (`Generator` arguments cross as borrowed
//! handles, [`opal_plugin_abi::tag::GENERATOR`]).
//!
//! Owns: the handle conversions and those functions. Must not: implement a
//! generator (the runtime's [`Generator`] is the only one).

use super::host::guarded;
use super::value::device_from;
use crate::error::{OpalError, Result};
use crate::generator::Generator;
use opal_plugin_abi::{draw, OpalGenerator, OpalStatus};
use std::ffi::c_void;

/// A borrowed handle to `g` (valid while `g` is).
pub fn borrow(g: &Generator) -> OpalGenerator {
    OpalGenerator(g as *const Generator as *mut c_void)
}

/// The generator behind a handle.
///
/// # Safety
/// `h` is null or a live handle (borrowed from [`borrow`] or owned from
/// `generator_default`), valid for `'a`.
pub unsafe fn deref<'a>(h: OpalGenerator) -> Result<&'a Generator> {
    // SAFETY: forwarded contract: both kinds point to a `Generator`.
    unsafe { h.0.cast::<Generator>().as_ref() }
        .ok_or_else(|| OpalError::msg("a null generator handle"))
}

/// Writes `v` through `out`, refusing a null pointer.
///
/// # Safety
/// `out` is null or writable.
unsafe fn put<T>(out: *mut T, v: T, what: &str) -> Result<()> {
    // SAFETY: forwarded contract.
    let o = unsafe { out.as_mut() }.ok_or_else(|| OpalError::msg(format!("{what}: null out")))?;
    *o = v;
    Ok(())
}

pub unsafe extern "C" fn generator_default(
    device_type: i32,
    index: i32,
    out: *mut OpalGenerator,
) -> OpalStatus {
    guarded("generator_default", || {
        let d = device_from(i64::from(device_type), i64::from(index.max(-1)))?;
        crate::device_runtime::check_device(d)?;
        let g = Box::new(Generator::default_for_device(d));
        let h = OpalGenerator(Box::into_raw(g).cast());
        // SAFETY: `out` is writable (ABI); on failure the handle is freed here.
        unsafe { put(out, h, "generator_default") }.inspect_err(|_| {
            // SAFETY: `h` was just leaked above and never handed out.
            drop(unsafe { Box::from_raw(h.0.cast::<Generator>()) })
        })
    })
}

pub unsafe extern "C" fn generator_release(g: OpalGenerator) {
    if g.0.is_null() {
        return;
    }
    // SAFETY: an owned handle of `generator_default`, released once (ABI).
    let _ = std::panic::catch_unwind(|| drop(unsafe { Box::from_raw(g.0.cast::<Generator>()) }));
}

pub unsafe extern "C" fn generator_manual_seed(g: OpalGenerator, seed: u64) -> OpalStatus {
    guarded("generator_manual_seed", || {
        // SAFETY: a live handle (ABI).
        unsafe { deref(g) }?.manual_seed(seed);
        Ok(())
    })
}

pub unsafe extern "C" fn generator_initial_seed(g: OpalGenerator, out: *mut u64) -> OpalStatus {
    guarded("generator_initial_seed", || {
        // SAFETY: a live handle and a writable out (ABI).
        let s = unsafe { deref(g) }?.initial_seed();
        // SAFETY: as above.
        unsafe { put(out, s, "generator_initial_seed") }
    })
}

/// The most values one `generator_draw` call may ask for (2^40: far beyond any
/// tensor, small enough that the byte count cannot overflow).
const MAX_DRAW: usize = 1 << 40;

pub unsafe extern "C" fn generator_draw(
    g: OpalGenerator,
    kind: u32,
    n: usize,
    out: *mut c_void,
) -> OpalStatus {
    guarded("generator_draw", || {
        // SAFETY: a live handle (ABI).
        let g = unsafe { deref(g) }?;
        if n == 0 {
            return Ok(());
        }
        if n > MAX_DRAW || out.is_null() {
            return Err(OpalError::msg(format!(
                "generator_draw: {n} values into {out:p} (at most {MAX_DRAW}, into non-null memory)"
            )));
        }
        /// Fills `n` values of `T` at `out` from `f`.
        ///
        /// # Safety
        /// `out` points to room for `n` aligned `T`.
        unsafe fn fill<T>(
            g: &Generator,
            out: *mut c_void,
            n: usize,
            f: impl Fn(&mut crate::generator::PhiloxState) -> T,
        ) -> Result<()> {
            if !(out as usize).is_multiple_of(std::mem::align_of::<T>()) {
                return Err(OpalError::msg(format!(
                    "generator_draw: {out:p} is not aligned for its values"
                )));
            }
            // SAFETY: forwarded contract, alignment checked.
            let v = unsafe { std::slice::from_raw_parts_mut(out.cast::<T>(), n) };
            g.with_state(|st| v.iter_mut().for_each(|x| *x = f(st)));
            Ok(())
        }
        // SAFETY: the ABI requires room for `n` values of the kind's type at `out`.
        unsafe {
            match kind {
                draw::U32 => fill::<u32>(g, out, n, |st| st.next_u32()),
                draw::UNIFORM_F32 => fill::<f32>(g, out, n, |st| st.next_f32()),
                draw::UNIFORM_F64 => fill::<f64>(g, out, n, |st| st.next_f64()),
                draw::NORMAL_F64 => fill::<f64>(g, out, n, |st| st.next_normal()),
                k => Err(OpalError::msg(format!("generator_draw: unknown kind {k}"))),
            }
        }
    })
}

pub unsafe extern "C" fn generator_reserve(
    g: OpalGenerator,
    blocks: u64,
    seed: *mut u64,
    offset: *mut u64,
) -> OpalStatus {
    guarded("generator_reserve", || {
        if seed.is_null() || offset.is_null() {
            return Err(OpalError::msg("generator_reserve: null out"));
        }
        // SAFETY: a live handle (ABI).
        let (s, o) = unsafe { deref(g) }?.reserve(blocks);
        // SAFETY: both writable (ABI; checked non-null above).
        unsafe { put(seed, s, "generator_reserve")? };
        // SAFETY: as above.
        unsafe { put(offset, o, "generator_reserve") }
    })
}

pub unsafe extern "C" fn generator_get_state(
    g: OpalGenerator,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> OpalStatus {
    guarded("generator_get_state", || {
        // SAFETY: a live handle (ABI).
        let state = unsafe { deref(g) }?.get_state();
        // SAFETY: `len` is writable (ABI).
        unsafe { put(len, state.len(), "generator_get_state") }?;
        if cap < state.len() || buf.is_null() {
            return Err(OpalError::msg(format!(
                "generator_get_state: the state has {} bytes, the buffer {cap}",
                state.len()
            )));
        }
        // SAFETY: `buf` has room for `cap` >= `state.len()` bytes (ABI).
        unsafe { std::ptr::copy_nonoverlapping(state.as_ptr(), buf, state.len()) };
        Ok(())
    })
}

pub unsafe extern "C" fn generator_set_state(
    g: OpalGenerator,
    bytes: *const u8,
    len: usize,
) -> OpalStatus {
    guarded("generator_set_state", || {
        // SAFETY: `len` readable bytes (ABI).
        let b = unsafe { opal_plugin_abi::slice(bytes, len) }
            .ok_or_else(|| OpalError::msg("generator_set_state: null bytes"))?;
        // SAFETY: a live handle (ABI).
        unsafe { deref(g) }?.set_state(b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use opal_plugin_abi::{code, device_type};

    fn ok(st: OpalStatus) {
        // SAFETY: a host status, consumed once.
        let r = unsafe { st.into_result() };
        assert!(r.is_ok(), "{r:?}");
    }

    /// The host functions on a default generator of the CPU: seeding, draws equal
    /// to the runtime's own, reservations, state round trips, and bad arguments
    /// refused with an error (never a panic or a write past the buffer).
    #[test]
    fn generator_functions_follow_the_runtime_generator() {
        let mut h = OpalGenerator(std::ptr::null_mut());
        // SAFETY (this block and those below): live handles, writable outs of the
        // sizes passed, as the ABI requires.
        unsafe {
            ok(generator_default(device_type::CPU, 0, &mut h));
            ok(generator_manual_seed(h, 99));
            let mut seed = 0;
            ok(generator_initial_seed(h, &mut seed));
            assert_eq!(seed, 99);
            let mut got = [0f32; 5];
            ok(generator_draw(
                h,
                draw::UNIFORM_F32,
                5,
                got.as_mut_ptr().cast(),
            ));
            let reference = crate::generator::Generator::new(crate::Device::cpu());
            reference.manual_seed(99);
            let want: Vec<f32> = reference.with_state(|st| (0..5).map(|_| st.next_f32()).collect());
            assert_eq!(got.to_vec(), want);

            let mut state = [0u8; 64];
            let mut len = 0;
            ok(generator_get_state(
                h,
                state.as_mut_ptr(),
                state.len(),
                &mut len,
            ));
            let (mut a, mut b) = ([0u32; 3], [0u32; 3]);
            ok(generator_draw(h, draw::U32, 3, a.as_mut_ptr().cast()));
            ok(generator_set_state(h, state.as_ptr(), len));
            ok(generator_draw(h, draw::U32, 3, b.as_mut_ptr().cast()));
            assert_eq!(a, b, "the state replays the stream");

            let (mut s, mut o) = (0, 0);
            ok(generator_reserve(h, 4, &mut s, &mut o));
            let (mut s2, mut o2) = (0, 0);
            ok(generator_reserve(h, 1, &mut s2, &mut o2));
            assert_eq!((s, s2, o2), (99, 99, o + 4));

            let mut small = [0u8; 4];
            let st = generator_get_state(h, small.as_mut_ptr(), small.len(), &mut len);
            assert_eq!((st.code, len), (code::ERROR, 34));
            let _ = st.into_result();
            assert_eq!(small, [0; 4], "nothing written into a short buffer");
            let st = generator_draw(h, 77, 1, a.as_mut_ptr().cast());
            let e = st.into_result().unwrap_err().1;
            assert!(e.contains("unknown kind 77"), "{e}");
            let st = generator_set_state(h, state.as_ptr(), 3);
            let e = st.into_result().unwrap_err().1;
            assert!(e.contains("34 bytes"), "{e}");
            let st = generator_manual_seed(OpalGenerator(std::ptr::null_mut()), 1);
            assert!(st.into_result().unwrap_err().1.contains("null generator"));
            generator_release(h);
        }
    }
}
