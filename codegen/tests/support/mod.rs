//! Test support for the emit tests: native functions built from schema strings
//! (for emitter tests that must not depend on the YAML loader).

#![allow(dead_code)]

use std::collections::BTreeMap;

use opal_codegen::model::{
    DeviceCheck, FunctionSchema, Loc, NativeFunction, NativeFunctions, OperatorName, Origin,
    Variants,
};

/// A declared function with the given schema, `variants: function` and no dispatch.
pub fn function(schema: &str) -> NativeFunction {
    let func: FunctionSchema = opal_codegen::parse::parse_schema(schema)
        .unwrap_or_else(|e| panic!("bad test schema {schema}: {e:?}"));
    NativeFunction {
        namespace: "aten".to_string(),
        func,
        origin: Origin::Declared,
        loc: Loc::SYNTHETIC,
        key_locs: BTreeMap::new(),
        variants: Variants {
            function: true,
            method: false,
        },
        dispatch: BTreeMap::new(),
        structured: false,
        structured_delegate: None,
        structured_inherits: None,
        precomputed: Vec::new(),
        autogen: Vec::new(),
        tags: Vec::new(),
        device_check: DeviceCheck::ExactSame,
        device_guard: true,
        manual_cpp_binding: false,
        manual_kernel_registration: false,
        use_const_ref_for_mutable_tensors: false,
        python_module: None,
        category_override: None,
        cpp_no_default_args: Vec::new(),
        ufunc_inner_loop: BTreeMap::new(),
        is_abstract: false,
        has_composite_implicit_autograd_kernel: false,
        has_composite_explicit_autograd_kernel: false,
    }
}

/// `function` with `variants: function, method`.
pub fn method(schema: &str) -> NativeFunction {
    let mut f = function(schema);
    f.variants.method = true;
    f
}

/// `function` with `structured_delegate: delegate`.
pub fn delegated(schema: &str, delegate: &str) -> NativeFunction {
    let mut f = function(schema);
    let d: OperatorName = opal_codegen::parse::parse_schema(&format!("{delegate}() -> ()"))
        .map(|s| s.name)
        .unwrap_or_else(|e| panic!("bad delegate {delegate}: {e:?}"));
    f.structured_delegate = Some(d);
    f
}

pub fn functions(fs: Vec<NativeFunction>) -> NativeFunctions {
    NativeFunctions {
        functions: fs,
        known_tags: Vec::new(),
    }
}
