//! The bodies of Opal's fuzz targets, one function per target, taking the fuzzer's
//! bytes. Included (`#[path]`) by the cargo-fuzz binaries in `fuzz_targets/` and by
//! the stable replay test `tests/tests/fuzz_replay.rs`, so a reproducer committed
//! under `regressions/<target>/` replays through exactly the code that found it.
//!
//! Owns: how bytes become inputs, and what counts as a failure: a panic, an abort
//! or a hang. Any `Err` is fine. Must not: fix or special-case what the code under
//! test does (a crash found here is fixed where it happens).

use std::sync::OnceLock;

use opal::dispatch::{Dispatcher, OpDef};
use opal::{DType, Device, Dimname, Generator, IValue, Layout, MemoryFormat, Scalar, Tensor};
use opal_codegen::diagnostics::Diagnostics;

/// `schema`: bytes as a `func:` string. Parsing either fails with a diagnostic that
/// renders, or succeeds and the canonical form parses back to itself.
pub fn schema(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    match opal_codegen::parse::parse_schema(src) {
        Ok(f) => {
            let printed = f.to_string();
            match opal_codegen::parse::parse_schema(&printed) {
                Ok(again) => assert_eq!(again.to_string(), printed, "canonical form changed"),
                Err(e) => panic!("canonical form `{printed}` of `{src}` does not parse: {e}"),
            }
        }
        Err(e) => {
            let mut d = Diagnostics::new("fuzz.schema", src);
            d.push(e);
            let _ = d.render(false, 80);
        }
    }
}

/// `native_yaml`: bytes as a `native_functions.yaml`; what loads is also generated.
pub fn native_yaml(data: &[u8]) {
    let tags = ["core".to_string(), "pointwise".to_string()];
    match opal_codegen::load_bytes(data, "fuzz.yaml", Some(&tags)) {
        Ok(nf) => {
            let _ = opal_codegen::emit::generate(&nf, &opal_codegen::emit::EmitOptions::default());
        }
        Err(d) => {
            let _ = d.render(false, 80);
        }
    }
}

/// The native YAML backend YAMLs are resolved against: the emit fixture (every
/// schema type, overloads, structured delegates, a factory op).
const BACKEND_NATIVE: &str =
    include_str!("../codegen/tests/fixtures/emit/ops/native_functions.yaml");

/// `backend_yaml`: bytes as a backend YAML, resolved against [`BACKEND_NATIVE`]; what
/// resolves is generated and its coverage reported.
pub fn backend_yaml(data: &[u8]) {
    use opal_codegen::backend::run::{coverage_of, generate_code, Inputs};
    use opal_codegen::backend::SourceFile;

    static NATIVES: OnceLock<opal_codegen::model::NativeFunctions> = OnceLock::new();
    let natives = NATIVES.get_or_init(|| {
        opal_codegen::load_str(BACKEND_NATIVE, "native_functions.yaml", None)
            .unwrap_or_else(|d| panic!("the fixture loads: {d}"))
    });
    let spec = match opal_codegen::backend::load_bytes("fuzz_backend.yaml", data) {
        Ok(spec) => spec,
        Err(e) => {
            let _ = e.render(false, 80);
            return;
        }
    };
    let inputs = Inputs {
        spec,
        natives: natives.clone(),
        backend_file: SourceFile {
            path: "fuzz_backend.yaml".into(),
            text: String::from_utf8_lossy(data).into(),
        },
        native_file: SourceFile {
            path: "native_functions.yaml".into(),
            text: BACKEND_NATIVE.into(),
        },
        runtime: None,
        skip_unknown_ops: false,
        carry_entry_points: false,
    };
    if let Err(e) = generate_code(&inputs, true, None) {
        let _ = e.render(false, 80);
    }
    let (report, errors) = coverage_of(&inputs);
    let _ = report.render(opal_codegen::backend::Format::Text);
    if let Some(e) = errors {
        let _ = e.render(false, 80);
    }
}

/// Every defined operator with its definition, after the CPU and Meta backends
/// registered theirs.
fn operators() -> &'static [(String, &'static OpDef)] {
    static OPS: OnceLock<Vec<(String, &'static OpDef)>> = OnceLock::new();
    OPS.get_or_init(|| {
        opal_cpu::init().expect("opal_cpu::init");
        opal_meta::init().expect("opal_meta::init");
        let d = Dispatcher::global();
        d.op_names()
            .into_iter()
            .filter_map(|n| Some((n.clone(), d.find(&n)?.def()?)))
            .collect()
    })
}

/// `boxed_call`: bytes choose an operator and a stack of values that mostly fit its
/// schema (wrong types, undefined tensors and wrong arity now and then), and the
/// operator is called by name through boxed dispatch.
pub fn boxed_call(data: &[u8]) {
    let ops = operators();
    if ops.is_empty() {
        return;
    }
    let mut r = Reader { data, at: 0 };
    let (name, def) = &ops[usize::from(r.u16()) % ops.len()];
    let device = if r.byte().is_multiple_of(4) {
        Device::meta()
    } else {
        Device::cpu()
    };
    let mut stack: Vec<IValue> = def
        .args
        .iter()
        .map(|a| {
            if r.byte().is_multiple_of(32) {
                any_value(&mut r, device)
            } else {
                value_of(a.ty, &mut r, device)
            }
        })
        .collect();
    match r.byte() % 64 {
        0 => {
            stack.pop();
        }
        1 => stack.push(IValue::Int(1)),
        _ => {}
    }
    let _ = Dispatcher::global().call_boxed(name, &mut stack);
}

/// The fuzzer's bytes, read from the front; zeros once they run out.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[usize::from(self.byte()) % from.len()]
    }

    fn int(&mut self) -> i64 {
        self.pick(&[
            0,
            1,
            2,
            3,
            -1,
            -2,
            4,
            5,
            7,
            8,
            16,
            -3,
            i64::MAX,
            i64::MIN,
            1 << 40,
            -(1 << 40),
        ])
    }

    fn float(&mut self) -> f64 {
        self.pick(&[
            0.0,
            1.0,
            -1.0,
            0.5,
            2.0,
            -0.0,
            1e-5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e300,
            -2.5,
        ])
    }
}

/// Tensor sizes stay small: at most 4 dims of at most 4 elements.
const MAX_DIM: u8 = 4;

/// A tensor of a random dtype, shape and contents on `device` (sometimes a strided
/// view, sometimes undefined).
fn tensor(r: &mut Reader<'_>, device: Device) -> Tensor {
    let dtype = r.pick(&DType::ALL);
    if r.byte().is_multiple_of(32) {
        return Tensor::undefined();
    }
    let ndim = r.byte() % (MAX_DIM + 1);
    let sizes: Vec<i64> = (0..ndim)
        .map(|_| i64::from(r.byte() % (MAX_DIM + 1)))
        .collect();
    let numel: i64 = sizes.iter().product();
    let bytes: Vec<u8> = (0..numel as usize * dtype.size())
        .map(|_| match dtype {
            DType::Bool => r.byte() & 1,
            _ => r.byte(),
        })
        .collect();
    let t = if device == Device::cpu() {
        Tensor::from_bytes(&bytes, &sizes, dtype)
    } else {
        Tensor::empty(&sizes, dtype, device)
    };
    let Ok(t) = t else {
        return Tensor::undefined();
    };
    if ndim >= 2 && r.byte().is_multiple_of(4) {
        // A transposed view: same storage, swapped strides.
        let (mut s, mut st) = (t.sizes().to_vec(), t.strides().to_vec());
        s.swap(0, 1);
        st.swap(0, 1);
        if let Ok(v) = t.as_strided(&s, &st, t.storage_offset()) {
            return v;
        }
    }
    t
}

fn scalar(r: &mut Reader<'_>) -> Scalar {
    match r.byte() % 3 {
        0 => Scalar::Int(r.int()),
        1 => Scalar::Float(r.float()),
        _ => Scalar::Bool(r.byte() & 1 == 1),
    }
}

/// A value of the schema type `ty` (as `ArgDef::ty` spells it: `Tensor(a!)`,
/// `int[2]`, `Tensor?[]`, ...).
fn value_of(ty: &str, r: &mut Reader<'_>, device: Device) -> IValue {
    // Alias annotations do not change the value.
    let ty = match (ty.find('('), ty.find(')')) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &ty[..a], &ty[b + 1..]),
        _ => ty.to_string(),
    };
    if let Some(inner) = ty.strip_suffix('?') {
        if r.byte().is_multiple_of(4) {
            return IValue::None;
        }
        return value_of(inner, r, device);
    }
    if let Some(open) = ty.rfind('[') {
        let elem = &ty[..open];
        let n = ty[open + 1..ty.len() - 1]
            .parse::<usize>()
            .ok()
            .filter(|_| !r.byte().is_multiple_of(8))
            .unwrap_or(usize::from(r.byte() % 5));
        return match elem {
            "Tensor" => IValue::TensorList((0..n).map(|_| tensor(r, device)).collect()),
            "Tensor?" => IValue::OptionalTensorList(
                (0..n)
                    .map(|_| (!r.byte().is_multiple_of(4)).then(|| tensor(r, device)))
                    .collect(),
            ),
            "float" => IValue::DoubleList((0..n).map(|_| r.float()).collect()),
            "bool" => IValue::BoolList((0..n).map(|_| r.byte() & 1 == 1).collect()),
            "str" => IValue::StrList((0..n).map(|_| "a".to_string()).collect()),
            "Scalar" => IValue::ScalarList((0..n).map(|_| scalar(r)).collect()),
            _ => IValue::IntList((0..n).map(|_| r.int()).collect()),
        };
    }
    match ty.as_str() {
        "Tensor" => IValue::Tensor(tensor(r, device)),
        "int" | "SymInt" | "DeviceIndex" => IValue::Int(r.int()),
        "float" => IValue::Double(r.float()),
        "bool" | "SymBool" => IValue::Bool(r.byte() & 1 == 1),
        "str" => IValue::Str(
            r.pick(&[
                "mean", "sum", "none", "reflect", "constant", "", "tanh", "x",
            ])
            .to_string(),
        ),
        "Scalar" => IValue::Scalar(scalar(r)),
        "ScalarType" => IValue::DType(r.pick(&DType::ALL)),
        "Layout" => IValue::Layout(r.pick(&[Layout::Strided, Layout::Sparse])),
        "Device" => IValue::Device(r.pick(&[Device::cpu(), Device::meta()])),
        "MemoryFormat" => IValue::MemoryFormat(r.pick(&[
            MemoryFormat::Contiguous,
            MemoryFormat::Preserve,
            MemoryFormat::ChannelsLast,
        ])),
        "Generator" => IValue::Generator(Generator::new(device)),
        "Dimname" => Dimname::new("N").map_or(IValue::None, IValue::Dimname),
        _ => IValue::None,
    }
}

/// A value of any kind, for an argument of another type.
fn any_value(r: &mut Reader<'_>, device: Device) -> IValue {
    let ty = r.pick(&[
        "Tensor",
        "int",
        "float",
        "bool",
        "str",
        "Scalar",
        "int[]",
        "Tensor[]",
        "Tensor?[]",
        "None",
    ]);
    value_of(ty, r, device)
}

/// `safetensors`: bytes as a safetensors file of tensors (what `opal run --inputs`
/// and `opal::serialize::load_file` read). Any `Err` is fine; what loads has
/// exactly the bytes its header declares, so it is bounded by the input's size.
pub fn safetensors(data: &[u8]) {
    if let Ok(loaded) = opal::serialize::load_from_bytes(data, None) {
        let bytes: usize = loaded
            .tensors
            .values()
            .map(|t| t.numel() as usize * t.element_size())
            .sum();
        assert!(
            bytes <= data.len(),
            "{bytes} bytes of tensors from a {}-byte file",
            data.len()
        );
    }
}

/// `plugin_manifest`: bytes as a plugin manifest (`*.opal-plugin.json`). Parsing
/// either fails with a message naming the manifest, or gives a manifest (which the
/// loader then checks against the host: ABI, device name, library path).
pub fn plugin_manifest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = std::path::Path::new("fuzz.opal-plugin.json");
    match opal::plugin::manifest::parse(path, text) {
        Ok(_) => {}
        Err(e) => assert!(
            e.to_string().contains("fuzz.opal-plugin.json"),
            "the error does not name the manifest: {e}"
        ),
    }
}

/// `pt2`: bytes as a `.pt2` archive (what `opal-pt2` and
/// `opal_export::ExportedProgram` read), under small limits. Any `Err` is fine;
/// what opens holds no more stored bytes than the input has, inspects, and when
/// every node is runnable runs on meta with the traced input sizes.
pub fn pt2(data: &[u8]) {
    use opal_export::{ExportedProgram, LoadLimits, RunLimits};
    let limits = LoadLimits {
        max_archive_bytes: 1 << 22,
        max_json_bytes: 1 << 22,
        max_weight_bytes: 1 << 22,
        max_nodes: 10_000,
    };
    let Ok(p) = ExportedProgram::open_bytes(data.to_vec(), "fuzz.pt2", &limits) else {
        return;
    };
    assert!(
        p.weight_bytes() <= data.len() as u64,
        "{} stored bytes from a {}-byte archive",
        p.weight_bytes(),
        data.len()
    );
    let _ = p.inspect(Device::meta()).to_string();
    let Ok(runner) = p.to_device(Device::meta()) else {
        return;
    };
    let inputs: Option<Vec<Tensor>> = p
        .inputs()
        .iter()
        .map(|s| Tensor::empty(&s.traced, s.dtype, Device::meta()).ok())
        .collect();
    if let Some(inputs) = inputs {
        let run = RunLimits {
            max_peak_intermediate_bytes: 1 << 26,
        };
        let _ = runner.run_with(&inputs, &run);
    }
}
