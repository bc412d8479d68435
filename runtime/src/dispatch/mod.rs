//! Dispatch: TLS/global key state, the dispatcher, kernels, typed and boxed
//! calling, libraries. The keys and key sets are the `keys` module's (below the
//! tensor, which carries a key set); this module re-exports them.
//!
//! Submodules: `tls`
//! (include/exclude guards, global set, [`dispatch_keyset`]), `opdef` (static op
//! definitions), `kernel` (kernel representations), `table` (per-op tables and
//! precedence), `dispatcher` (registry, boxed calls), `holds` (what a boxed call
//! holds), `typed` (the lock-free typed path), `library` (grouped registrations).
//!
//! Must not: know tensor internals: of tensors it uses `Tensor::key_set` and the
//! tensor module's op-call interface (`with_op_holds_dyn`, `OpArg`, `OpChecks`)
//! only; nor autograd's or any kernel's. `runtime/tests/module_deps.rs` checks the
//! imports.

#![warn(missing_docs)]

mod dispatcher;
mod holds;
mod kernel;
mod library;
mod opdef;
mod table;
pub mod tls;
mod typed;

pub use crate::keys::key;
pub use crate::keys::{DispatchKey, DispatchKeySet};
pub use dispatcher::{Dispatcher, OperatorHandle, RegistrationHandle};
pub use holds::with_stack_holds;
pub use kernel::{BoxedKernelFn, Kernel, KernelFunction};
pub use library::Library;
pub use opdef::{ArgDef, OpDef};
pub use tls::{dispatch_keyset, ExcludeGuard, IncludeGuard};
pub use typed::{OpSlot, TypedOperatorHandle};
