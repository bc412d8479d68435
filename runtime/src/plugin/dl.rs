//! A minimal `dlopen`/`dlsym` wrapper. Libraries are never closed: kernels,
//! allocators and transfers of a loaded plugin stay registered for the life of the
//! process.
//!
//! Owns: opening libraries and finding symbols. Must not: call into them.

use crate::error::{OpalError, Result};
use std::ffi::{CStr, CString};
use std::path::Path;

/// An open library (never closed).
pub struct Lib {
    handle: *mut libc::c_void,
}

fn last_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string owned by libc, valid
    // until the next dl* call on this thread; it is copied at once.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown dynamic loader error".to_string()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

impl Lib {
    /// Opens `path` with `RTLD_NOW | RTLD_LOCAL` (its symbols stay private).
    pub fn open(path: &Path) -> Result<Lib> {
        use std::os::unix::ffi::OsStrExt;
        let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| {
            OpalError::msg(format!(
                "library path {} contains a NUL byte",
                path.display()
            ))
        })?;
        // SAFETY: `c` is a valid NUL-terminated path. Opening runs the library's ELF
        // initialisers; the caller validated the manifest and the file's ownership
        // and permissions first (see `plugin::security`).
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(OpalError::msg(format!(
                "cannot load {}: {}",
                path.display(),
                last_error()
            )));
        }
        Ok(Lib { handle })
    }

    /// The address of `name`, or `None` when the library does not export it.
    pub fn symbol(&self, name: &str) -> Option<*mut libc::c_void> {
        let c = CString::new(name).ok()?;
        // SAFETY: `handle` is an open library (never closed) and `c` a valid C string.
        let p = unsafe { libc::dlsym(self.handle, c.as_ptr()) };
        (!p.is_null()).then_some(p)
    }
}
