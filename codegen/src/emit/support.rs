//! The `prelude` and `support` modules emitted once per output: the runtime names
//! generated code uses (re-exported by absolute path), and small generic helpers the
//! per-op code calls (boxed stack handling, argument definitions, meta copies for
//! structured derivation, BackendSelect keys), so per-op code stays short and fast to
//! compile.
//!
//! Owns: those two modules' text. Must not: contain anything op-specific.

use proc_macro2::TokenStream;
use quote::quote;

use super::Ctx;
use crate::ident::{self, PRELUDE};

/// The `prelude` module: `pub use <rt>::{...}` for every name in [`PRELUDE`].
pub(crate) fn prelude(cx: &Ctx) -> TokenStream {
    let rt = cx.rt();
    let uses = PRELUDE.iter().map(|(path, names)| {
        let names = names.iter().map(|n| ident::ident(n));
        if path.is_empty() {
            quote!(pub use #rt::{#(#names),*};)
        } else {
            let p = ident::ident(path);
            quote!(pub use #rt::#p::{#(#names),*};)
        }
    });
    quote! {
        /// The runtime names generated code uses, imported by absolute path.
        #[doc(hidden)]
        pub mod prelude {
            #(#uses)*
        }
    }
}

/// The `support` module.
pub(crate) fn support(cx: &Ctx) -> TokenStream {
    let arg_defs = arg_defs();
    let entry_checks = entry_checks(cx.rt());
    let boxed_calls = boxed_calls(cx.rt());
    let derivations = derivations();
    quote! {
        /// Helpers shared by the generated operators (called only by generated code).
        #[doc(hidden)]
        #[allow(dead_code, reason = "each helper serves only some kinds of operators")]
        pub mod support {
            use super::prelude::*;

            #arg_defs
            #entry_checks
            #boxed_calls
            #derivations
        }
    }
}

/// The `ArgDef` flags and constructors of the operators' definitions.
fn arg_defs() -> TokenStream {
    quote! {
        /// `ArgDef` flag: keyword-only.
        pub const KW: u8 = 1;
        /// `ArgDef` flag: an out= argument.
        pub const OUT: u8 = 2;
        /// `ArgDef` flag: written to (`(a!)`).
        pub const MUT: u8 = 4;

        /// A positional `ArgDef` without default that is not written to.
        pub const fn arg(name: &'static str, ty: &'static str) -> ArgDef {
            self::arg_full(name, ty, 0, None)
        }

        /// An `ArgDef` from its name, type, flags and default.
        pub const fn arg_full(
            name: &'static str,
            ty: &'static str,
            flags: u8,
            default: Option<fn() -> IValue>,
        ) -> ArgDef {
            ArgDef {
                name,
                ty,
                default,
                kwarg_only: flags & KW != 0,
                out: flags & OUT != 0,
                mutable: flags & MUT != 0,
            }
        }
    }
}

/// The key set and entry checks of a typed call: the holds of its tensor
/// arguments and the device rules.
fn entry_checks(rt: &TokenStream) -> TokenStream {
    quote! {
        /// The key set of a call from the key set of its tensor arguments.
        #[inline]
        pub fn keys(arg_keys: DispatchKeySet) -> DispatchKeySet {
            #rt::dispatch::dispatch_keyset(arg_keys)
        }

        pub use #rt::tensor::{
            with_op_holds as held, with_op_holds_dyn as held_dyn, DeviceRule, OpArg, OpChecks,
        };

        /// Device rule: none (the op moves data between devices).
        pub const DEVICES_ANY: DeviceRule = DeviceRule::Any;
        /// Device rule: every tensor argument on one device.
        pub const DEVICES_SAME: DeviceRule = DeviceRule::Same;
        /// Device rule: one device, zero-dim CPU inputs acting as scalars.
        pub const DEVICES_SAME_OR_CPU_SCALAR: DeviceRule = DeviceRule::SameOrCpuScalar;

        /// The entry checks of an op.
        pub const fn checks(devices: DeviceRule, write_overlap: bool, no_overlap: u64) -> OpChecks {
            OpChecks { devices, write_overlap, no_overlap }
        }
    }
}

/// Boxed calls: the boxed kernel adapter, calling a boxed kernel, and the
/// arguments and returns taken off a stack.
fn boxed_calls(rt: &TokenStream) -> TokenStream {
    let kernels = boxed_kernels(rt);
    let stack = stack_values();
    quote! {
        #kernels
        #stack
    }
}

/// Wrapping a typed body as a boxed kernel and calling one.
fn boxed_kernels(rt: &TokenStream) -> TokenStream {
    quote! {
        fn missing(def: &OpDef, what: &str, have: usize) -> OpalError {
            OpalError::msg(format!(
                "{}: boxed stack holds {have} values, expected {} {what}",
                def.name,
                if what == "arguments" { def.args.len() } else { def.returns.len() }
            ))
        }

        /// A boxed kernel from `body`, which gets the call's key set, its arguments
        /// (taken off the stack per `def`) and the stack to push the returns on.
        /// The arguments are held and checked (`checks`) as in a typed call.
        pub fn boxed<F>(
            def: &'static OpDef,
            checks: OpChecks,
            body: F,
        ) -> ::std::sync::Arc<BoxedKernelFn>
        where
            F: Fn(DispatchKeySet, &mut Args, &mut Stack) -> Result<()> + Send + Sync + 'static,
        {
            ::std::sync::Arc::new(move |_: &OperatorHandle, ks: DispatchKeySet, stack: &mut Stack| {
                #rt::dispatch::with_stack_holds(def.name, def.args, checks, stack, |stack| {
                    let mut args = Args::take(stack, def)?;
                    body(ks, &mut args, stack)
                })
            })
        }

        /// Calls a boxed kernel with `args` and returns the stack it leaves.
        pub fn call_boxed(
            k: &BoxedKernelFn,
            op: &OperatorHandle,
            ks: DispatchKeySet,
            mut args: Stack,
        ) -> Result<Stack> {
            k(op, ks, &mut args)?;
            Ok(args)
        }
    }
}

/// The arguments and returns of a boxed call, taken off its stack by position.
fn stack_values() -> TokenStream {
    quote! {
        /// The arguments of a boxed call, taken off the end of the stack.
        pub struct Args {
            it: ::std::vec::IntoIter<IValue>,
            def: &'static OpDef,
            i: usize,
        }

        impl Args {
            /// Removes the last `def.args.len()` values of `stack`.
            pub fn take(stack: &mut Stack, def: &'static OpDef) -> Result<Self> {
                match stack.len().checked_sub(def.args.len()) {
                    Some(at) => Ok(Args { it: stack.split_off(at).into_iter(), def, i: 0 }),
                    None => Err(self::missing(def, "arguments", stack.len())),
                }
            }

            /// The next argument, converted to `T`.
            #[allow(clippy::should_implement_trait, reason = "fallible, typed per call")]
            pub fn next<T: FromIValue>(&mut self) -> Result<T> {
                let name = self.def.args.get(self.i).map_or("?", |a| a.name);
                self.i += 1;
                match self.it.next() {
                    Some(v) => T::from_ivalue(v).map_err(|e| {
                        OpalError::msg(format!("{}: argument `{name}`: {e}", self.def.name))
                    }),
                    None => Err(OpalError::msg(format!(
                        "{}: missing argument `{name}`",
                        self.def.name
                    ))),
                }
            }
        }

        /// The returns of a boxed call, taken off the end of the stack.
        pub struct Rets {
            it: ::std::vec::IntoIter<IValue>,
            def: &'static OpDef,
        }

        impl Rets {
            /// Removes the last `def.returns.len()` values of `stack`.
            pub fn take(mut stack: Stack, def: &'static OpDef) -> Result<Self> {
                match stack.len().checked_sub(def.returns.len()) {
                    Some(at) => Ok(Rets { it: stack.split_off(at).into_iter(), def }),
                    None => Err(self::missing(def, "returns", stack.len())),
                }
            }

            /// The next return, converted to `T`.
            #[allow(clippy::should_implement_trait, reason = "fallible, typed per call")]
            pub fn next<T: FromIValue>(&mut self) -> Result<T> {
                match self.it.next() {
                    Some(v) => T::from_ivalue(v).map_err(|e| {
                        OpalError::msg(format!("{}: return value: {e}", self.def.name))
                    }),
                    None => Err(OpalError::msg(format!("{}: missing return value", self.def.name))),
                }
            }
        }

        /// The single return of a boxed call.
        pub fn ret1<T: FromIValue>(stack: Stack, def: &'static OpDef) -> Result<T> {
            Rets::take(stack, def)?.next()
        }
    }
}

/// What BackendSelect kernels and structured derivations share: the
/// redispatch key set, meta copies of the arguments, the outputs' device and
/// shape checks.
fn derivations() -> TokenStream {
    quote! {
        /// The key set a BackendSelect kernel redispatches with: the keys below
        /// BackendSelect plus the backend of `device` (cpu when `None`).
        pub fn backend_select_keys(ks: DispatchKeySet, device: Option<Device>) -> DispatchKeySet {
            let backend = device.map_or(Device::cpu().backend_key(), Device::backend_key);
            ks.below(DispatchKey::BackendSelect).add(backend)
        }

        /// A meta tensor with the sizes, strides and dtype of `t`. A wrapped number
        /// (a Scalar passed as a tensor) stays as it is: converting it would lose the
        /// flag that makes it promote like a scalar, and meta kernels accept it.
        pub fn to_meta(t: &Tensor) -> Result<Tensor> {
            if t.is_wrapped_number() {
                return Ok(t.clone());
            }
            Tensor::empty_strided(t.sizes(), t.strides(), t.dtype(), Device::meta())
        }

        /// [`to_meta`] of an optional tensor.
        pub fn opt_to_meta(t: Option<&Tensor>) -> Result<Option<Tensor>> {
            t.map(self::to_meta).transpose()
        }

        /// [`to_meta`] of every tensor of a list.
        pub fn list_to_meta(ts: &[Tensor]) -> Result<Vec<Tensor>> {
            ts.iter().map(self::to_meta).collect()
        }

        /// [`to_meta`] of every present tensor of a list.
        pub fn opt_list_to_meta(ts: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
            ts.iter().map(|t| self::opt_to_meta(t.as_ref())).collect()
        }

        /// The device the outputs of a derived kernel live on: that of the first
        /// tensor that is not a zero-dim CPU scalar, else the first's.
        pub fn device_of(ts: &[&Tensor]) -> Device {
            ts.iter()
                .find(|t| !(t.device().is_cpu() && t.dim() == 0))
                .or(ts.first())
                .map_or_else(Device::cpu, |t| t.device())
        }

        /// [`device_of`] the first tensor of a list (error when empty).
        pub fn device_of_list(ts: &[Tensor]) -> Result<Device> {
            match ts.first() {
                Some(t) => Ok(t.device()),
                None => Err(OpalError::msg(
                    "structured kernel: empty tensor list, no device for the outputs",
                )),
            }
        }

        /// A tensor on `device` with the sizes, strides and dtype of the meta result `m`.
        pub fn empty_from_meta(m: &Tensor, device: Device) -> Result<Tensor> {
            Tensor::empty_strided(m.sizes(), m.strides(), m.dtype(), device)
        }

        /// Checks that an in-place op's meta result has the shape of `self`.
        pub fn check_inplace(op: &str, this: &Tensor, m: &Tensor) -> Result<()> {
            if this.sizes() == m.sizes() {
                Ok(())
            } else {
                Err(OpalError::msg(format!(
                    "{op}: output with shape {:?} doesn't match the broadcast shape {:?}",
                    this.sizes(),
                    m.sizes()
                )))
            }
        }
    }
}
