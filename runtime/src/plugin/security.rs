//! The checks that come before a plugin file is read or loaded: ownership and
//! permissions of manifests, libraries and their directories, and whether the
//! process may trust its environment at all.
//!
//! Owns: those checks. Must not: read or load the files it checks.

use crate::error::{OpalError, Result};
use std::path::Path;

/// True when the process runs with other privileges than its real user's (setuid or
/// setgid): then environment paths are not trusted.
#[cfg(unix)]
pub fn elevated() -> bool {
    // SAFETY: these four calls only read the process's credentials; they cannot fail.
    unsafe { libc::getuid() != libc::geteuid() || libc::getgid() != libc::getegid() }
}

/// Not Unix: no setuid.
#[cfg(not(unix))]
pub fn elevated() -> bool {
    false
}

/// Refuses `path` (a file or directory) when someone other than the effective
/// user or root owns it, or when its group or others may write it. Symbolic
/// links are followed (the target is what gets read).
#[cfg(unix)]
pub fn check_path(path: &Path, what: &str) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(path)
        .map_err(|e| OpalError::msg(format!("cannot stat the {what} {}: {e}", path.display())))?;
    // SAFETY: reads the process's effective user id; cannot fail.
    let me = unsafe { libc::geteuid() };
    if md.uid() != me && md.uid() != 0 {
        return Err(OpalError::msg(format!(
            "refusing the {what} {}: it is owned by user {}, not by this user ({me}) or root",
            path.display(),
            md.uid()
        )));
    }
    let mode = md.mode();
    if mode & 0o022 != 0 {
        return Err(OpalError::msg(format!(
            "refusing the {what} {}: it is group- or world-writable (mode {:o}); \
             chmod go-w it",
            path.display(),
            mode & 0o7777
        )));
    }
    Ok(())
}

/// Not Unix: plugins are not supported, so nothing is ever trusted.
#[cfg(not(unix))]
pub fn check_path(path: &Path, what: &str) -> Result<()> {
    Err(OpalError::msg(format!(
        "refusing the {what} {}: plugins are supported on Unix only",
        path.display()
    )))
}

/// [`check_path`] for a file and the directory holding it.
pub fn check_file_and_dir(path: &Path, what: &str) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    check_path(dir, &format!("directory of the {what}"))?;
    check_path(path, what)
}
