//! The three training fixtures (`../shared/fixtures/training/{mlp,cnn,gpt}`) as Opal
//! programs: each model's forward pass written with Opal's operators (as its
//! `spec.json` describes it), backward through the generated autograd kernels, and
//! plain SGD. Every size comes from the fixture directory.
//!
//! Used by the demo (the README's main command) and by `tests/tests/training.rs`
//! (parity with PyTorch's trajectories).
//!
//! Owns: model definitions and the training loop. Must not: compare with PyTorch
//! (that is the test's job).

use opal::autograd::NoGradGuard;
use opal::{ops, DType, Device, Scalar, Tensor};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

type R<T> = Result<T, String>;

fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

/// One fixture directory, loaded.
pub struct Fixture {
    pub dir: PathBuf,
    pub model: String,
    pub spec: Value,
    pub init: BTreeMap<String, Tensor>,
    pub data: BTreeMap<String, Tensor>,
    pub trajectory: Value,
}

fn read_json(p: &Path) -> R<Value> {
    let text = std::fs::read_to_string(p).map_err(|x| format!("{}: {x}", p.display()))?;
    serde_json::from_str(&text).map_err(|x| format!("{}: {x}", p.display()))
}

fn read_st(p: &Path) -> R<BTreeMap<String, Tensor>> {
    opal::serialize::load_file(p, None)
        .map(|l| l.tensors)
        .map_err(|x| format!("{}: {x}", p.display()))
}

impl Fixture {
    /// Loads `dir` (`spec.json`, `init.safetensors`, `data.safetensors`,
    /// `trajectory.json`).
    pub fn load(dir: &Path) -> R<Fixture> {
        let spec = read_json(&dir.join("spec.json"))?;
        Ok(Fixture {
            dir: dir.to_path_buf(),
            model: spec["model"]
                .as_str()
                .ok_or("spec.json: no model")?
                .to_string(),
            init: read_st(&dir.join("init.safetensors"))?,
            data: read_st(&dir.join("data.safetensors"))?,
            trajectory: read_json(&dir.join("trajectory.json"))?,
            spec,
        })
    }

    /// The fixture with its floating-point data already in `dtype` on `device` (as
    /// a benchmark does once, outside the timed steps).
    pub fn with_data_as(mut self, dtype: DType, device: Device) -> R<Fixture> {
        for t in self.data.values_mut() {
            let dt = if t.dtype().is_floating_point() {
                dtype
            } else {
                t.dtype()
            };
            *t = t.to_device_dtype(device, dt).map_err(e)?;
        }
        Ok(self)
    }

    /// A size from `spec.json`'s `sizes`.
    pub fn size(&self, name: &str) -> R<i64> {
        self.spec["sizes"][name]
            .as_i64()
            .ok_or_else(|| format!("spec.json: no integer size `{name}`"))
    }

    fn float(&self, name: &str) -> R<f64> {
        self.spec["sizes"][name]
            .as_f64()
            .ok_or_else(|| format!("spec.json: no size `{name}`"))
    }

    /// The parameters after the last step, as PyTorch computed them.
    pub fn final_params(&self, dtype: &str) -> R<BTreeMap<String, Tensor>> {
        read_st(&self.dir.join(format!("final_{dtype}.safetensors")))
    }

    /// PyTorch's loss at each step.
    pub fn losses(&self, dtype: &str) -> R<Vec<f64>> {
        self.trajectory[dtype]["loss"]
            .as_array()
            .ok_or_else(|| format!("trajectory.json: no {dtype} losses"))?
            .iter()
            .map(|v| {
                v.as_f64()
                    .ok_or_else(|| "trajectory.json: bad loss".to_string())
            })
            .collect()
    }

    /// A tolerance of `spec.json` for `dtype`.
    pub fn tolerance(&self, dtype: &str, name: &str) -> R<f64> {
        self.spec["tolerance"][dtype][name]
            .as_f64()
            .ok_or_else(|| format!("spec.json: no tolerance {dtype}.{name}"))
    }
}

/// What a training run produced.
pub struct Trained {
    pub losses: Vec<f64>,
    pub params: BTreeMap<String, Tensor>,
    /// Wall time of each step (forward, backward, update), in microseconds.
    pub step_us: Vec<f64>,
}

/// `spec.json`'s dtype name as a [`DType`].
pub fn dtype_of(name: &str) -> R<DType> {
    DType::parse(name).map_err(e)
}

fn scalar_f64(t: &Tensor) -> R<f64> {
    let t = t.to_device_dtype(Device::cpu(), DType::F64).map_err(e)?;
    t.to_vec::<f64>()
        .map_err(e)?
        .first()
        .copied()
        .ok_or_else(|| "empty loss".to_string())
}

struct Model<'a> {
    fx: &'a Fixture,
    p: &'a BTreeMap<String, Tensor>,
    device: Device,
}

impl Model<'_> {
    fn w(&self, name: &str) -> R<&Tensor> {
        self.p
            .get(name)
            .ok_or_else(|| format!("init.safetensors: no parameter `{name}`"))
    }

    fn linear(&self, x: &Tensor, prefix: &str, bias: bool) -> R<Tensor> {
        let b = if bias {
            Some(self.w(&format!("{prefix}.bias"))?)
        } else {
            None
        };
        ops::linear::call(x, self.w(&format!("{prefix}.weight"))?, b).map_err(e)
    }

    fn nll(&self, logits: &Tensor, y: &Tensor) -> R<Tensor> {
        let logp = ops::_log_softmax::call(logits, 1, false).map_err(e)?;
        Ok(ops::nll_loss_forward::call(&logp, y, None, 1, -100)
            .map_err(e)?
            .0)
    }

    fn layer_norm(&self, x: &Tensor, prefix: &str, d: i64, eps: f64) -> R<Tensor> {
        let (w, b) = (
            self.w(&format!("{prefix}.weight"))?,
            self.w(&format!("{prefix}.bias"))?,
        );
        Ok(ops::native_layer_norm::call(x, &[d], Some(w), Some(b), eps)
            .map_err(e)?
            .0)
    }

    fn loss(&self, step: i64, dtype: DType) -> R<Tensor> {
        let data = |n: &str| -> R<Tensor> {
            let t = self
                .fx
                .data
                .get(n)
                .ok_or_else(|| format!("data.safetensors: no `{n}`"))?;
            let t = ops::select_int(t, 0, step).map_err(e)?;
            let dt = if t.dtype().is_floating_point() {
                dtype
            } else {
                t.dtype()
            };
            t.to_device_dtype(self.device, dt).map_err(e)
        };
        match self.fx.model.as_str() {
            "mlp" => {
                let (x, y) = (data("x")?, data("y")?);
                let h = ops::relu(&self.linear(&x, "fc1", true)?).map_err(e)?;
                self.nll(&self.linear(&h, "fc2", true)?, &y)
            }
            "cnn" => {
                let (x, y) = (data("x")?, data("y")?);
                let (w, b) = (self.w("conv.weight")?, self.w("conv.bias")?);
                let h = ops::convolution::call(
                    &x,
                    w,
                    Some(b),
                    &[1, 1],
                    &[1, 1],
                    &[1, 1],
                    false,
                    &[0, 0],
                    1,
                )
                .map_err(e)?;
                let h = ops::relu(&h).map_err(e)?;
                let h = ops::max_pool2d_with_indices::call(
                    &h,
                    &[2, 2],
                    &[2, 2],
                    &[0, 0],
                    &[1, 1],
                    false,
                )
                .map_err(e)?
                .0;
                let h = ops::flatten_using_ints::call(&h, 1, -1).map_err(e)?;
                self.nll(&self.linear(&h, "fc", true)?, &y)
            }
            "gpt" => self.gpt(&data("tokens")?),
            m => Err(format!("unknown model `{m}` in spec.json")),
        }
    }

    fn gpt(&self, tokens: &Tensor) -> R<Tensor> {
        let fx = self.fx;
        let (t, d, heads, layers, eps) = (
            fx.size("T")?,
            fx.size("d")?,
            fx.size("heads")?,
            fx.size("layers")?,
            fx.float("eps")?,
        );
        let b = tokens.sizes()[0];
        let dh = d / heads;
        let idx = ops::narrow(tokens, 1, 0, t).map_err(e)?;
        let targets = ops::narrow(tokens, 1, 1, t).map_err(e)?;
        let pos = ops::arange_start_step::call(
            &Scalar::Int(0),
            &Scalar::Int(t),
            &Scalar::Int(1),
            Some(DType::I64),
            None,
            Some(self.device),
            None,
        )
        .map_err(e)?;
        let mut x = ops::add_tensor(
            &ops::embedding(self.w("tok_emb.weight")?, &idx).map_err(e)?,
            &ops::embedding(self.w("pos_emb.weight")?, &pos).map_err(e)?,
        )
        .map_err(e)?;
        let ones =
            ops::ones::call(&[t, t], Some(x.dtype()), None, Some(self.device), None).map_err(e)?;
        let mask = ops::triu::call(&ones, 1)
            .map_err(e)?
            .to_dtype(DType::Bool)
            .map_err(e)?;
        let heads_of = |z: &Tensor| -> R<Tensor> {
            let z = ops::reshape(z, &[b, t, heads, dh]).map_err(e)?;
            ops::transpose_int(&z, 1, 2).map_err(e)
        };
        for i in 0..layers {
            let p = format!("blocks.{i}");
            let h = self.layer_norm(&x, &format!("{p}.ln1"), d, eps)?;
            let qkv = self.linear(&h, &format!("{p}.attn.qkv"), true)?;
            let parts = ops::split_tensor::call(&qkv, d, -1).map_err(e)?;
            let (q, k, v) = (
                heads_of(&parts[0])?,
                heads_of(&parts[1])?,
                heads_of(&parts[2])?,
            );
            let kt = ops::transpose_int(&k, -2, -1).map_err(e)?;
            let a = ops::matmul(&q, &kt).map_err(e)?;
            let a = ops::mul_scalar(&a, &Scalar::Float(1.0 / (dh as f64).sqrt())).map_err(e)?;
            let a =
                ops::masked_fill_scalar(&a, &mask, &Scalar::Float(f64::NEG_INFINITY)).map_err(e)?;
            let a = ops::_softmax::call(&a, -1, false).map_err(e)?;
            let y = ops::matmul(&a, &v).map_err(e)?;
            let y = ops::transpose_int(&y, 1, 2).map_err(e)?;
            let y = ops::reshape(&y, &[b, t, d]).map_err(e)?;
            let y = self.linear(&y, &format!("{p}.attn.proj"), true)?;
            x = ops::add_tensor(&x, &y).map_err(e)?;
            let h = self.layer_norm(&x, &format!("{p}.ln2"), d, eps)?;
            let h = ops::gelu::call(&self.linear(&h, &format!("{p}.mlp.fc"), true)?, "none")
                .map_err(e)?;
            let h = self.linear(&h, &format!("{p}.mlp.proj"), true)?;
            x = ops::add_tensor(&x, &h).map_err(e)?;
        }
        let x = self.layer_norm(&x, "ln_f", d, eps)?;
        let logits = self.linear(&x, "head", false)?;
        let v = logits.sizes()[2];
        let logits = ops::reshape(&logits, &[b * t, v]).map_err(e)?;
        let targets = ops::reshape(&targets, &[b * t]).map_err(e)?;
        self.nll(&logits, &targets)
    }
}

/// The parameters of `init.safetensors` in `dtype` on `device`, as leaves that
/// require grad.
pub fn init_params(fx: &Fixture, dtype: DType, device: Device) -> R<BTreeMap<String, Tensor>> {
    let mut params = BTreeMap::new();
    for (name, t) in &fx.init {
        let p = t
            .to_device_dtype(device, dtype)
            .map_err(e)?
            .detach()
            .map_err(e)?;
        p.set_requires_grad(true).map_err(e)?;
        params.insert(name.clone(), p);
    }
    Ok(params)
}

/// The model's loss on batch `batch` (forward only, recorded for autograd): for
/// training loops of their own (data-parallel ones, say).
pub fn forward_loss(
    fx: &Fixture,
    params: &BTreeMap<String, Tensor>,
    batch: usize,
    dtype: DType,
    device: Device,
) -> R<Tensor> {
    Model {
        fx,
        p: params,
        device,
    }
    .loss(batch as i64, dtype)
}

/// One SGD step on batch `batch`: forward, backward, update. Returns the loss
/// and the updated parameters.
pub fn step(
    fx: &Fixture,
    params: &BTreeMap<String, Tensor>,
    batch: usize,
    dtype: DType,
    device: Device,
) -> R<(f64, BTreeMap<String, Tensor>)> {
    let lr = fx.float("lr")?;
    let model = Model {
        fx,
        p: params,
        device,
    };
    let loss = model.loss(batch as i64, dtype)?;
    loss.backward()
        .map_err(|x| format!("step {batch}: backward: {x}"))?;
    let value = scalar_f64(&loss)?;
    let _no_grad = NoGradGuard::new();
    let mut next = BTreeMap::new();
    for (name, p) in params {
        let g = p
            .grad()
            .ok_or_else(|| format!("step {batch}: parameter `{name}` got no gradient"))?;
        // `p - lr * g` in one op (as torch.optim.SGD's `add_(g, alpha=-lr)`): the
        // kernel rounds `lr * g` before subtracting, like the anchor's two ops.
        let upd = ops::sub_tensor::with(
            &p.detach().map_err(e)?,
            &g,
            ops::sub_tensor::Options::default().alpha(Scalar::Float(lr)),
        )
        .map_err(e)?;
        upd.set_requires_grad(true).map_err(e)?;
        next.insert(name.clone(), upd);
    }
    Ok((value, next))
}

/// Trains the fixture's model in `dtype` on `device` for `steps` steps (default:
/// the spec's), returning the losses, the final parameters (on the CPU) and the
/// step times.
pub fn train(fx: &Fixture, dtype: DType, device: Device, steps: Option<usize>) -> R<Trained> {
    let steps = steps.unwrap_or(fx.size("steps")? as usize);
    let mut params = init_params(fx, dtype, device)?;
    let mut out = Trained {
        losses: Vec::with_capacity(steps),
        params: BTreeMap::new(),
        step_us: Vec::with_capacity(steps),
    };
    for i in 0..steps {
        let start = Instant::now();
        let (loss, next) = step(fx, &params, i, dtype, device)?;
        params = next;
        out.losses.push(loss);
        out.step_us.push(start.elapsed().as_secs_f64() * 1e6);
    }
    for (name, p) in params {
        out.params
            .insert(name, p.to(Device::cpu()).map_err(e)?.detach().map_err(e)?);
    }
    Ok(out)
}
