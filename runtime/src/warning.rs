//! Warnings of library code, PyTorch's `TORCH_WARN`: something a caller should know
//! that is not an error, such as an `out=` tensor with elements being resized (the
//! op still runs). Without the `tracing` feature a warning is printed to stderr as
//! `warning: <source>: <message>`; with it, it is a `tracing` event at level WARN
//! (target `opal`, field `source`) and nothing is printed, so the application's
//! subscriber decides where it goes.
//!
//! Owns: the one place library code reports warnings. Must not: decide what is worth
//! a warning or how often (callers do, e.g. once per op), or report errors (those are
//! `Err` values).

/// Reports `message` about `source` (an op name such as `aten::add.out`, or a
/// component) as a warning.
pub fn warn(source: &str, message: &str) {
    #[cfg(feature = "tracing")]
    tracing::warn!(target: "opal", source, "{message}");
    #[cfg(not(feature = "tracing"))]
    eprintln!("warning: {source}: {message}");
}
