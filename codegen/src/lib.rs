//! `opal-codegen`: loads PyTorch-style `native_functions.yaml` files into a validated,
//! located model and generates Opal's typed operator layer from it.
//!
//! # What users call
//!
//! - In a `build.rs`: [`Builder`] (the operator layer from a native YAML, with
//!   `derivatives.yaml` and `composites.yaml`), [`BackendBuilder`] (a backend from its
//!   backend YAML, Opal's format or torchgen's), [`autocast::Builder`] (autocast
//!   kernels from a cast policy). Each has `generate()` and `generate_or_exit()`.
//! - To read YAML: [`load`], [`load_with_tags`], [`load_str`], [`load_bytes`] into
//!   the [`model`], with located [`diagnostics`]; [`derivatives`] loads its file
//!   ([`composite`] only names its keys: the builders load composites);
//!   [`backend::run`] loads, resolves, generates and reports coverage of backend
//!   YAMLs.
//! - One stage at a time: [`parse`] (a `func:` schema, a YAML file without the
//!   rules), [`emit`] (the operator layer and the autograd kernels from a model,
//!   the naming check), [`op_ident`] (an operator's Rust name).
//! - The `opal-codegen` binary (feature `cli`) wraps all of the above, through
//!   this API only.
//!
//! # Internals
//!
//! Everything else is `pub(crate)`: the stages' pieces (`parse`'s lexer and
//! outline, `emit`'s per-item emitters and plan, `ident`'s type table, the
//! backend's stages between loading and `backend::run`: its plan, emitters and
//! coverage), `composite`'s loader, `validate` (torchgen's implicit rules and Rust's)
//! and `suggest` ("did you mean"); [`dispatch_keys`] is the one list of `validate`
//! others read. Tests that check a piece directly are unit tests inside the crate.

/// Builder methods that each set one field and return the builder: `name(arg:
/// Type) => field = value;` (the value written with `arg`), the doc comment above
/// each. The three builders (`Builder`, `BackendBuilder`, `autocast::Builder`)
/// declare their plain options this way.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($arg:ident: $ty:ty) => $field:ident = $value:expr;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.$field = $value;
                self
            }
        )*
    };
}

mod ast;
pub mod autocast;
pub mod backend;
pub mod builder;
pub mod composite;
pub mod derivatives;
pub mod diagnostics;
pub mod emit;
mod hash;
mod ident;
mod load;
pub mod model;
pub mod parse;
mod suggest;
mod validate;

pub use backend::{opal_native_yaml, BackendBuilder};
pub use builder::Builder;
pub use ident::op_ident;
pub use load::{load, load_bytes, load_str, load_tags_bytes, load_with_tags};
/// The dispatch key names a `native_functions.yaml` may use.
pub use validate::keys as dispatch_keys;

/// The global allocator for programs that generate code: with the `mimalloc`
/// feature (which `cli` enables) it is mimalloc, otherwise the system allocator.
/// Generation builds and drops millions of small token and syntax-tree nodes on two
/// threads; with glibc's allocator, `malloc`/`free` took about a third of backend
/// generation of 400 ops, while Opal's own build scripts (a few hundred ops, under a
/// second) gain less than compiling mimalloc's C sources costs, so they use the
/// default. Install it in a `build.rs` that generates from a large YAML, with
/// `features = ["mimalloc"]` on the build-dependency:
///
/// ```ignore
/// #[global_allocator]
/// static ALLOC: opal_codegen::BuildAllocator = opal_codegen::BuildAllocator;
/// ```
#[cfg(feature = "mimalloc")]
pub use mimalloc::MiMalloc as BuildAllocator;
/// The global allocator for programs that generate code: the system allocator,
/// since the `mimalloc` feature is off (see that feature in `Cargo.toml`).
#[cfg(not(feature = "mimalloc"))]
pub use std::alloc::System as BuildAllocator;

/// Asks the kernel to back this process's memory with ordinary pages, not
/// transparent huge pages (Linux with the `mimalloc` feature; elsewhere it does
/// nothing). mimalloc advises huge pages for its arenas, so a short-lived process
/// pays for zeroing its memory 2 MiB at a time and, right after a large process
/// exits, for the kernel compacting memory to find them: `check` of PyTorch 2.15's
/// YAML right after a torchgen parse took 53 ms (median of 8) that way against 41
/// ms with ordinary pages. Call it first thing in `main`; later faults obey it.
pub fn use_small_pages() {
    #[cfg(all(feature = "mimalloc", target_os = "linux"))]
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and changes only a flag of
    // this process's memory map; it touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
