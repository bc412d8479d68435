//! `opal-codegen backend --plugin`: the plugin side of a backend YAML. From the same
//! resolved [`Plan`] as a static backend it writes a module for a crate that
//! depends on `opal-plugin-sdk` (never on `opal`): a typed kernel trait
//! `<Backend>PluginKernels` (one method per supported op, in the Rust types of the
//! SDK, following the schema the kernel was written against: pinned or current),
//! the boxed shims the host calls through the C ABI, typed entries (ABI 1.1: one
//! `extern "C"` function per op whose C signature follows its schema, written by
//! `opal_plugin_sdk::typed_entry!`) for ops whose arguments all have a typed class
//! and that return one tensor, out entries (ABI 1.2: for such ops tagged
//! `pointwise` that write no argument, an opt-in `<OP>_INTO` constant and an
//! `<op>_into` method writing into a result the host made by the `ELEMENTWISE`
//! rule, written by `opal_plugin_sdk::out_entry!` and registered only when the
//! constant is true), `register::<K>(reg)` for the plugin's `init`, and
//! the manifest (`<device>.opal-plugin.json`) listing those schemas, from which the
//! host builds the defaulted-argument adapters at load time.
//!
//! Not generated for plugins: ops derived through `structured_delegate` (a plugin
//! registers only what it lists), and ops with argument or return types that do
//! not cross ABI 1.0 (generators, streams, dimnames, ...): they are listed in the
//! module's `NOT_GENERATED` with the reason, and the host's fallback serves them.
//!
//! Owns: plugin-side emission. Must not: resolve backends (`plan`) or change what
//! static backends get (`emit`).

use std::fmt::Write as _;

use crate::model::{Argument, BaseTy, FunctionSchema, Type};

use super::plan::Plan;
use super::spec::{BackendSpec, FallbackPolicy};

/// The generated plugin module and manifest.
#[derive(Clone, Debug)]
pub struct PluginCode {
    /// The Rust module (for `include!` or a `mod.rs`).
    pub module: String,
    /// The manifest JSON.
    pub manifest: String,
    /// Ops left out, with why.
    pub not_generated: Vec<(String, String)>,
}

/// How one argument is read from the boxed arguments and passed to the trait.
struct ArgCode {
    ty: &'static str,
    getter: &'static str,
    /// How the local is passed (`x`, `&x`, `x.as_deref()`).
    pass: &'static str,
}

fn arg_code(t: &Type) -> Option<ArgCode> {
    let plain = |ty, getter| ArgCode {
        ty,
        getter,
        pass: "{}",
    };
    Some(match t {
        Type::Base(b) => match b {
            BaseTy::Tensor => plain("&Tensor", "tensor"),
            BaseTy::Int | BaseTy::SymInt | BaseTy::DeviceIndex => plain("i64", "int"),
            BaseTy::Float => plain("f64", "float"),
            BaseTy::Bool => plain("bool", "boolean"),
            BaseTy::Scalar => plain("Scalar", "scalar"),
            BaseTy::ScalarType => plain("DType", "dtype"),
            BaseTy::Device => plain("Device", "device"),
            BaseTy::Layout => plain("i64", "layout"),
            BaseTy::MemoryFormat => plain("i64", "memory_format"),
            _ => return None,
        },
        Type::Optional(inner) => match &**inner {
            Type::Base(b) => match b {
                BaseTy::Tensor => plain("Option<&Tensor>", "opt_tensor"),
                BaseTy::Int | BaseTy::SymInt | BaseTy::DeviceIndex => {
                    plain("Option<i64>", "opt_int")
                }
                BaseTy::Float => plain("Option<f64>", "opt_float"),
                BaseTy::Bool => plain("Option<bool>", "opt_boolean"),
                BaseTy::Scalar => plain("Option<Scalar>", "opt_scalar"),
                BaseTy::ScalarType => plain("Option<DType>", "opt_dtype"),
                BaseTy::Device => plain("Option<Device>", "opt_device"),
                BaseTy::Layout => plain("Option<i64>", "opt_layout"),
                BaseTy::MemoryFormat => plain("Option<i64>", "opt_memory_format"),
                _ => return None,
            },
            Type::List { elem, .. }
                if matches!(**elem, Type::Base(BaseTy::Int | BaseTy::SymInt)) =>
            {
                ArgCode {
                    ty: "Option<&[i64]>",
                    getter: "opt_int_list",
                    pass: "{}.as_deref()",
                }
            }
            _ => return None,
        },
        Type::List { elem, .. } => match **elem {
            Type::Base(BaseTy::Int | BaseTy::SymInt) => ArgCode {
                ty: "&[i64]",
                getter: "int_list",
                pass: "&{}",
            },
            Type::Base(BaseTy::Tensor) => ArgCode {
                ty: "&[Tensor]",
                getter: "tensor_list",
                pass: "&{}",
            },
            _ => return None,
        },
    })
}

/// The typed-entry class (`opal_plugin_sdk::typed::<class>`) of an argument type,
/// when it has one (`docs/abi.md`, "Typed entries").
fn typed_class(t: &Type) -> Option<&'static str> {
    Some(match t {
        Type::Base(b) => match b {
            BaseTy::Tensor => "Tensor",
            BaseTy::Int | BaseTy::SymInt => "Int",
            BaseTy::Float => "Float",
            BaseTy::Bool => "Bool",
            BaseTy::Scalar => "Scalar",
            BaseTy::ScalarType => "DType",
            _ => return None,
        },
        Type::Optional(inner) => match &**inner {
            Type::Base(BaseTy::Tensor) => "OptTensor",
            Type::Base(BaseTy::ScalarType) => "OptDType",
            Type::List { elem, .. }
                if matches!(**elem, Type::Base(BaseTy::Int | BaseTy::SymInt)) =>
            {
                "OptIntList"
            }
            _ => return None,
        },
        Type::List { elem, .. } if matches!(**elem, Type::Base(BaseTy::Int | BaseTy::SymInt)) => {
            "IntList"
        }
        _ => return None,
    })
}

fn return_type(s: &FunctionSchema) -> Option<String> {
    let one = |t: &Type| -> Option<&'static str> {
        Some(match t {
            Type::Base(BaseTy::Tensor) => "Tensor",
            Type::Base(BaseTy::Int | BaseTy::SymInt) => "i64",
            Type::Base(BaseTy::Float) => "f64",
            Type::Base(BaseTy::Bool) => "bool",
            Type::Base(BaseTy::Scalar) => "Scalar",
            _ => return None,
        })
    };
    let tys: Option<Vec<&str>> = s.returns.iter().map(|r| one(&r.ty)).collect();
    let tys = tys?;
    match tys.len() {
        0 => Some("()".to_string()),
        1 => Some(tys[0].to_string()),
        2 | 3 if tys.iter().all(|t| *t == "Tensor") => Some(format!("({})", tys.join(", "))),
        _ => None,
    }
}

/// One op's trait method, shims (boxed, and typed where every argument has a typed
/// class and the op returns one tensor, and an out entry where such an op is
/// `pointwise` and writes no argument) and registration lines, or why not.
fn op_code(
    trait_name: &str,
    qualified: &str,
    schema: &FunctionSchema,
    pointwise: bool,
) -> Result<(String, String, String), String> {
    let ident = crate::ident::op_ident(&schema.name)?;
    let ret = return_type(schema).ok_or_else(|| {
        let tys: Vec<String> = schema.returns.iter().map(|r| r.ty.to_string()).collect();
        format!(
            "returns ({}) do not cross the plugin ABI 1.0",
            tys.join(", ")
        )
    })?;
    let args: Vec<&Argument> = schema.arguments.all().collect();
    let (mut params, mut reads, mut passes) = (Vec::new(), String::new(), Vec::new());
    let mut locals = Vec::new();
    let mut typed = (ret == "Tensor").then(Vec::new);
    for (i, a) in args.iter().enumerate() {
        let code = arg_code(&a.ty).ok_or_else(|| {
            format!(
                "argument '{}' of type {} does not cross the plugin ABI 1.0",
                a.name, a.ty
            )
        })?;
        let local = crate::ident::arg_ident(&a.name)?;
        typed = typed.and_then(|mut t| {
            t.push(format!("{local}: {}", typed_class(&a.ty)?));
            Some(t)
        });
        params.push(format!("{local}: {}", code.ty));
        locals.push(local.clone());
        let _ = writeln!(
            reads,
            "    let {local} = args::{}(__args, {i}, \"{}\")?;",
            code.getter, a.name
        );
        passes.push(code.pass.replace("{}", &local));
    }
    let mut method = format!(
        "    /// `{schema}`\n    fn {ident}({}) -> Result<{ret}>;\n",
        params.join(", ")
    );
    let mut shim = format!(
        "#[allow(non_snake_case)]\nfn __shim_{ident}<K: {trait_name}>(__args: &[Value]) -> Result<Vec<Value>> {{\n{reads}    Ok(args::IntoReturns::into_returns(K::{ident}({})?))\n}}\n",
        passes.join(", ")
    );
    let mut reg = format!("    reg.kernel(\"{qualified}\", __shim_{ident}::<K>)?;\n");
    if let Some(t) = typed {
        let _ = write!(
            shim,
            "opal_plugin_sdk::typed_entry! {{\n    /// The typed entry of `{qualified}`.\n    #[allow(non_snake_case)]\n    fn __typed_{ident}<K: {trait_name}>({}) -> Tensor = K::{ident};\n}}\n",
            t.join(", ")
        );
        let _ = writeln!(
            reg,
            "    reg.typed_kernel(\"{qualified}\", __typed_{ident}::<K>())?;"
        );
        if pointwise && !args.iter().any(|a| a.is_write()) {
            let flag = ident.to_uppercase();
            let _ = write!(
                method,
                "    /// Whether [`Self::{ident}_into`] is written: `register` then registers it as\n    \
                 /// the out entry of `{qualified}` (ABI 1.2), which the host calls with the result\n    \
                 /// it made by the `ELEMENTWISE` rule. Set it only when that rule gives this op's\n    \
                 /// result (the first tensor's sizes, dtype and device).\n    \
                 const {flag}_INTO: bool = false;\n    \
                 /// `{schema}` writing into `out`, a new contiguous tensor the host made with\n    \
                 /// `{first}`'s sizes, dtype and device (every tensor argument has them).\n    \
                 fn {ident}_into({}, out: &Tensor) -> Result<()> {{\n        \
                 let _ = ({}, out);\n        \
                 Err(opal_plugin_sdk::Error::declined())\n    }}\n",
                params.join(", "),
                locals.join(", "),
                first = locals.first().map_or("self", String::as_str),
            );
            let _ = write!(
                shim,
                "opal_plugin_sdk::out_entry! {{\n    /// The out entry of `{qualified}`.\n    #[allow(non_snake_case)]\n    fn __out_{ident}<K: {trait_name}>({}) -> out(ELEMENTWISE) = K::{ident}_into;\n}}\n",
                t.join(", ")
            );
            let _ = writeln!(
                reg,
                "    if K::{flag}_INTO {{\n        reg.out_kernel(\"{qualified}\", __out_{ident}::<K>())?;\n    }}"
            );
        }
    }
    Ok((method, shim, reg))
}

/// Generates the plugin side of `spec` from its resolved `plan`; `library` is the
/// file name the manifest names (`libopal_emu_plugin.so`).
pub(crate) fn generate_plugin(spec: &BackendSpec, plan: &Plan, library: &str) -> PluginCode {
    let trait_name = format!("{}PluginKernels", spec.backend.value);
    let ns = &spec.namespace.value;
    let (mut methods, mut shims, mut regs) = (String::new(), String::new(), String::new());
    let mut not_generated = Vec::new();
    let mut manifest_ops = Vec::new();
    for op in &plan.ops {
        let schema = op.kernel_schema();
        let qualified = format!("{ns}::{}", op.func.func.name);
        let pointwise = op.func.tags.iter().any(|t| t == "pointwise");
        match op_code(&trait_name, &qualified, schema, pointwise) {
            Ok((m, s, r)) => {
                methods.push_str(&m);
                shims.push_str(&s);
                regs.push_str(&r);
                manifest_ops.push(format!(
                    "    {{\"name\": \"{qualified}\", \"schema\": \"{}\"}}",
                    schema
                        .to_string()
                        .replace('\\', "\\\\")
                        .replace('"', "\\\"")
                ));
            }
            Err(why) => not_generated.push((qualified, why)),
        }
    }
    let manifest = format!(
        "{{\n  \"name\": \"{dev}\",\n  \"library\": \"{library}\",\n  \"device\": \"{dev}\",\n  \"dispatch_key\": \"{key}\",\n  \"abi\": \"1.4\",\n  \"ops\": [\n{ops}\n  ]\n}}\n",
        dev = spec.device.value,
        key = spec.dispatch_key.value.as_str(),
        ops = manifest_ops.join(",\n"),
    );
    let cpu = spec.fallback.value == FallbackPolicy::Cpu;
    let mut m = String::new();
    let _ = write!(
        m,
        "// @generated by opal-codegen backend --plugin from the backend YAML of `{backend}`.\n\
         // Plugin side: depends on opal-plugin-sdk only. Do not edit.\n\n\
         #[allow(unused_imports)]\n\
         use opal_plugin_sdk::{{args, DType, Device, Registrar, Result, Scalar, Tensor, Value}};\n\n\
         /// The kernels of `{backend}` as a plugin, one per supported op, typed after\n\
         /// the schema each was written against.\n\
         pub trait {trait_name} {{\n{methods}{transfer}{hooks}}}\n\n\
         {shims}\n{adapter}\n\
         /// Registers every kernel{fb}, and the device runtime when\n\
         /// `DEVICE_RUNTIME` is true (call it from the plugin's `init`).\n\
         pub fn register<K: {trait_name} + 'static>(reg: &mut Registrar) -> Result<()> {{\n{cpu_line}{regs}    if K::DEVICE_RUNTIME {{\n        reg.device_runtime(Box::leak(Box::new(__DeviceRuntime::<K>(std::marker::PhantomData))))?;\n    }}\n    Ok(())\n}}\n\n\
         /// Ops of the backend YAML that are not generated for the plugin, and why.\n\
         pub const NOT_GENERATED: &[(&str, &str)] = &[{ng}];\n\n\
         /// The plugin's manifest (`{device}.opal-plugin.json`).\n\
         pub const MANIFEST: &str = r#\"{manifest}\"#;\n",
        backend = spec.backend.value,
        methods = methods,
        transfer = if cpu {
            "    /// Moves data for the CPU fallback (`fallback: cpu`).\n    fn transfer() -> &'static dyn opal_plugin_sdk::Transfer;\n"
        } else {
            ""
        },
        shims = shims,
        hooks = device_hooks(&spec.backend.value),
        adapter = device_adapter(&trait_name),
        fb = if cpu { " and the CPU fallback" } else { "" },
        cpu_line = if cpu { "    reg.cpu_fallback(K::transfer())?;\n" } else { "" },
        regs = regs,
        ng = not_generated
            .iter()
            .map(|(o, w)| format!("({o:?}, {w:?})"))
            .collect::<Vec<_>>()
            .join(", "),
        device = spec.device.value,
        manifest = manifest,
    );
    PluginCode {
        module: m,
        manifest,
        not_generated,
    }
}

/// The device hooks that can fail: name, parameters, their names, the `Ok` type.
const FALLIBLE_HOOKS: [(&str, &str, &str, &str); 11] = [
    ("set_device", "index: i32", "index", "()"),
    ("new_stream", "index: i32", "index", "i64"),
    ("query_stream", "index: i32, id: i64", "index, id", "bool"),
    (
        "synchronize_stream",
        "index: i32, id: i64",
        "index, id",
        "()",
    ),
    ("synchronize_device", "index: i32", "index", "()"),
    (
        "create_event",
        "index: i32, timing: bool",
        "index, timing",
        "Box<dyn opal_plugin_sdk::Event>",
    ),
    (
        "memory_stats",
        "index: i32",
        "index",
        "opal_plugin_sdk::MemoryStats",
    ),
    ("reset_peak_memory_stats", "index: i32", "index", "()"),
    ("empty_cache", "index: i32", "index", "()"),
    (
        "serialize_backend_meta",
        "key: &str, value: &str",
        "key, value",
        "Option<String>",
    ),
    (
        "deserialize_backend_meta",
        "key: &str, text: &str",
        "key, text",
        "String",
    ),
];

/// The device-runtime hooks of the plugin's kernel trait (ABI 1.4): an opt-in
/// `DEVICE_RUNTIME` constant and one method per hook whose body says, as a
/// `NotImplemented` error, that `backend` has not written it (the few hooks that
/// cannot fail describe one synchronous device with its default stream).
fn device_hooks(backend: &str) -> String {
    let ni = |hook: &str| {
        format!(
            "Err(opal_plugin_sdk::Error::not_implemented(\"{backend}'s device hook `{hook}`\"))"
        )
    };
    let mut h = String::from(
        "    /// Registers the device runtime below (ABI 1.4) when true; until then\n    \
         /// the host gives the device its default runtime.\n    \
         const DEVICE_RUNTIME: bool = false;\n",
    );
    let _ = write!(
        h,
        "    /// Devices of the type (hook `device_count`).\n    fn device_count() -> usize {{\n        1\n    }}\n    \
         /// Whether stream `id` exists (hook `stream_exists`): the default stream only.\n    \
         fn stream_exists(index: i32, id: i64) -> bool {{\n        let _ = index;\n        id == 0\n    }}\n    \
         /// Pinned host memory (hook `host_allocator`): none.\n    \
         fn host_allocator() -> Option<&'static dyn opal_plugin_sdk::Allocator> {{\n        None\n    }}\n    \
         /// Autocast dtypes (hook `autocast_dtypes`): float16 and bfloat16.\n    \
         fn autocast_dtypes() -> Vec<DType> {{\n        vec![DType::F16, DType::BF16]\n    }}\n"
    );
    for (name, params, args, ret) in FALLIBLE_HOOKS {
        let _ = write!(
            h,
            "    /// Device hook `{name}`: not written yet.\n    fn {name}({params}) -> Result<{ret}> {{\n        let _ = {};\n        {}\n    }}\n",
            if args.contains(',') {
                format!("({args})")
            } else {
                args.to_string()
            },
            ni(name)
        );
    }
    h
}

/// The adapter that makes a kernel trait's hooks an `opal_plugin_sdk::DeviceRuntime`.
fn device_adapter(trait_name: &str) -> String {
    let mut a = format!(
        "/// The device hooks of `K` as the SDK's device runtime.\n\
         #[doc(hidden)]\npub struct __DeviceRuntime<K>(std::marker::PhantomData<fn() -> K>);\n\n\
         impl<K: {trait_name} + 'static> opal_plugin_sdk::DeviceRuntime for __DeviceRuntime<K> {{\n    \
         fn device_count(&self) -> usize {{\n        K::device_count()\n    }}\n    \
         fn stream_exists(&self, index: i32, id: i64) -> bool {{\n        K::stream_exists(index, id)\n    }}\n    \
         fn host_allocator(&self) -> Option<&'static dyn opal_plugin_sdk::Allocator> {{\n        K::host_allocator()\n    }}\n    \
         fn autocast_dtypes(&self) -> Vec<DType> {{\n        K::autocast_dtypes()\n    }}\n"
    );
    for (name, params, args, ret) in FALLIBLE_HOOKS {
        let _ = write!(
            a,
            "    fn {name}(&self, {params}) -> Result<{ret}> {{\n        K::{name}({args})\n    }}\n"
        );
    }
    a.push_str("}\n");
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emu_plugin() -> PluginCode {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let inputs = super::super::run::load_inputs(
            &root.join("backends/emu/emu.yaml"),
            &root.join("runtime/native_functions.yaml"),
            None,
        )
        .unwrap();
        super::super::run::resolve_inputs(&inputs)
            .generate_plugin("libopal_emu_plugin.so")
            .unwrap()
    }

    #[test]
    fn emu_yaml_gives_a_typed_trait_shims_and_a_manifest() {
        let code = emu_plugin();
        let m = &code.module;
        assert!(m.contains("pub trait EmuPluginKernels {"), "{m}");
        // The pinned sum follows its old schema; add.out its pinned one.
        assert!(
            m.contains("fn sum(self_: &Tensor) -> Result<Tensor>;"),
            "{m}"
        );
        assert!(m.contains("fn add_out(self_: &Tensor, other: &Tensor, alpha: Scalar, out: &Tensor) -> Result<Tensor>;"), "{m}");
        assert!(
            m.contains("fn view(self_: &Tensor, size: &[i64]) -> Result<Tensor>;"),
            "{m}"
        );
        assert!(
            m.contains("fn transfer() -> &'static dyn opal_plugin_sdk::Transfer;"),
            "{m}"
        );
        assert!(
            m.contains("reg.kernel(\"aten::sum\", __shim_sum::<K>)?;"),
            "{m}"
        );
        assert!(
            m.contains("let size = args::int_list(__args, 1, \"size\")?;"),
            "{m}"
        );
        // Typed entries (ABI 1.1) for ops whose types all have a typed class and
        // that return one tensor, registered after the boxed shim.
        assert!(m.contains("fn __typed_add_out<K: EmuPluginKernels>(self_: Tensor, other: Tensor, alpha: Scalar, out: Tensor) -> Tensor = K::add_out;"), "{m}");
        assert!(m.contains("fn __typed_view<K: EmuPluginKernels>(self_: Tensor, size: IntList) -> Tensor = K::view;"), "{m}");
        let boxed = m.find("reg.kernel(\"aten::add.out\", __shim_add_out::<K>)?;");
        let typed = m.find("reg.typed_kernel(\"aten::add.out\", __typed_add_out::<K>())?;");
        assert!(boxed.is_some() && typed.is_some() && boxed < typed, "{m}");
        // Out entries (ABI 1.2): pointwise ops writing no argument get an opt-in
        // method, registered only when its constant is true; `add.out` writes `out`.
        assert!(m.contains("const RELU_INTO: bool = false;"), "{m}");
        assert!(
            m.contains("fn relu_into(self_: &Tensor, out: &Tensor) -> Result<()> {"),
            "{m}"
        );
        assert!(m.contains("fn __out_relu<K: EmuPluginKernels>(self_: Tensor) -> out(ELEMENTWISE) = K::relu_into;"), "{m}");
        assert!(m.contains("    if K::RELU_INTO {\n        reg.out_kernel(\"aten::relu\", __out_relu::<K>())?;\n    }"), "{m}");
        assert!(!m.contains("ADD_OUT_INTO") && !m.contains("MM_INTO"), "{m}");
        // Device-runtime hooks (ABI 1.4): opt-in, every fallible one a clear
        // NotImplemented error until written.
        assert!(m.contains("const DEVICE_RUNTIME: bool = false;"), "{m}");
        assert!(
            m.contains("fn memory_stats(index: i32) -> Result<opal_plugin_sdk::MemoryStats> {"),
            "{m}"
        );
        assert!(
            m.contains(
                "Err(opal_plugin_sdk::Error::not_implemented(\"Emu's device hook `new_stream`\"))"
            ),
            "{m}"
        );
        assert!(m.contains("impl<K: EmuPluginKernels + 'static> opal_plugin_sdk::DeviceRuntime for __DeviceRuntime<K>"), "{m}");
        assert!(
            m.contains("    if K::DEVICE_RUNTIME {\n        reg.device_runtime("),
            "{m}"
        );
        assert!(!m.contains("todo!"), "{m}");
        // `full` has a `Layout?` argument, which has no typed class: boxed only.
        assert!(
            m.contains("__shim_full") && !m.contains("__typed_full"),
            "{m}"
        );
        assert!(
            code.manifest.contains("\"abi\": \"1.4\""),
            "{}",
            code.manifest
        );
        let v: Vec<&str> = code
            .manifest
            .lines()
            .filter(|l| l.contains("\"schema\""))
            .collect();
        assert!(
            v.iter()
                .any(|l| l.contains("\"sum(Tensor self) -> Tensor\"")),
            "{}",
            code.manifest
        );
        assert!(code.manifest.contains("\"dispatch_key\": \"PrivateUse1\""));
        assert!(code.not_generated.is_empty(), "{:?}", code.not_generated);
    }

    #[test]
    fn ops_with_types_outside_the_abi_are_listed_not_generated() {
        let schema = crate::parse::parse_schema(
            "bernoulli(Tensor self, *, Generator? generator=None) -> Tensor",
        )
        .unwrap();
        let e = op_code("T", "aten::bernoulli", &schema, false).unwrap_err();
        assert!(e.contains("'generator'") && e.contains("Generator?"), "{e}");
        let schema =
            crate::parse::parse_schema("split(Tensor self, int size) -> Tensor[]").unwrap();
        assert!(op_code("T", "aten::split", &schema, false)
            .unwrap_err()
            .contains("Tensor[]"));
    }
}
