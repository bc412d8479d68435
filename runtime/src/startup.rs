//! What the runtime registers when the global dispatcher is created: the
//! `CompositeImplicitAutograd` kernels, the autograd kernels generated from
//! `derivatives.yaml`, and autograd's refusing fallback.
//!
//! Owns: that list. It sits above `dispatch`, `composite` and `autograd`: the
//! dispatcher calls [`register_runtime_kernels`] once and imports none of those
//! modules. Must not: register anything for a backend.

use crate::dispatch::Dispatcher;
use crate::error::Result;

/// Registers the runtime's own kernels with `d`, which is being created. An `Err`
/// names a composite kernel that did not register; the autograd kernels report
/// their failures as warnings and never stop the others.
pub(crate) fn register_runtime_kernels(d: &Dispatcher) -> Result<()> {
    // The CompositeImplicitAutograd kernels ship with the runtime: registered
    // here, before any op is defined or called, so they need no init call.
    let composites = crate::composite::register(d);
    // So are the autograd kernels generated from derivatives.yaml.
    crate::autograd::generated::register(d);
    // Ops without a derivative refuse differentiable calls instead of silently
    // dropping the gradient.
    crate::autograd::register_fallback(d);
    composites
}
