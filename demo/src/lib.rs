//! Opal's main demo: a 2-layer MLP with a loss and a small CNN, forward passes
//! written only with generated operators (`opal::ops`), run unchanged on the CPU
//! and on the example out-of-tree device `emu` (only the device differs).
//!
//! Weights and inputs are drawn on the host from a seeded [`Generator`] and copied
//! to the device with `_to_copy`, so both devices see the same numbers. On `emu`,
//! each step records how many native emu kernels and how many CPU-fallback calls it
//! took ([`Step`]): that is the dispatch path.
//!
//! Owns: the demo models and their run. `main.rs` only prints.

pub mod training;

use std::time::{Duration, Instant};

use opal::{ops, Device, Generator, Result, Tensor};

/// Registers the backends the demo runs on: the CPU and `emu` (idempotent).
pub fn init() -> Result<()> {
    opal_cpu::init()?;
    opal_emu::init()
}

/// Copies `t` to `device` (`Tensor.to(device)` in PyTorch): `_to_copy`, which
/// dispatches on `t`'s device.
pub fn to(t: &Tensor, device: Device) -> Result<Tensor> {
    ops::_to_copy::with(t, ops::_to_copy::Options::default().device(device))
}

/// A host tensor of `shape` with normal values of standard deviation `std`.
fn randn(g: &Generator, shape: &[i64], std: f64) -> Result<Tensor> {
    let n = shape.iter().product::<i64>();
    let v = g.with_state(|s| (0..n).map(|_| (s.next_normal() * std) as f32).collect());
    Tensor::from_vec::<f32>(v, shape)
}

/// A fully connected layer, `y = x W^T + b`, He-initialised (ReLU follows).
pub struct Linear {
    weight: Tensor,
    bias: Tensor,
}

impl Linear {
    fn new(g: &Generator, inputs: i64, outputs: i64) -> Result<Self> {
        let std = (2.0 / inputs as f64).sqrt();
        Ok(Linear {
            weight: randn(g, &[outputs, inputs], std)?,
            bias: randn(g, &[outputs], 0.1)?,
        })
    }

    fn to(&self, device: Device) -> Result<Self> {
        Ok(Linear {
            weight: to(&self.weight, device)?,
            bias: to(&self.bias, device)?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        ops::linear::with(
            x,
            &self.weight,
            ops::linear::Options::default().bias(&self.bias),
        )
    }
}

/// The model parameters and a batch of inputs, all on one device.
pub struct Demo {
    fc1: Linear,
    fc2: Linear,
    conv_weight: Tensor,
    conv_bias: Tensor,
    fc3: Linear,
    features: Tensor,
    labels: Tensor,
    images: Tensor,
}

/// What the forward passes produce.
pub struct Outputs {
    /// MLP log-probabilities, 64x10.
    pub log_probs: Tensor,
    /// Mean negative log-likelihood of the labels under them (0-dim).
    pub loss: Tensor,
    /// CNN class probabilities, 16x10.
    pub probs: Tensor,
}

/// One step of the forward passes on a device: how it was served.
pub struct Step {
    /// Operator(s) the step calls.
    pub name: &'static str,
    /// Kernels that ran natively on the device (only `emu` counts them).
    pub native: u64,
    /// Calls served by the CPU fallback (copy in, CPU kernel, copy out).
    pub fallback: u64,
}

/// Runs steps and records, per step, the device's native kernel launches and the
/// CPU-fallback calls (both process-wide counters, read before and after).
struct Tracer {
    device: Device,
    steps: Vec<Step>,
}

impl Tracer {
    fn counters(&self) -> (u64, u64) {
        // Only emu devices count launches; the CPU has no counter (0).
        let native = opal_emu::stats(self.device).map_or(0, |s| s.launches);
        (native, opal::fallback::calls())
    }

    fn step<T>(&mut self, name: &'static str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let (n0, f0) = self.counters();
        let out = f()?;
        let (n1, f1) = self.counters();
        self.steps.push(Step {
            name,
            native: n1 - n0,
            fallback: f1 - f0,
        });
        Ok(out)
    }
}

impl Demo {
    /// Parameters and inputs drawn on the host from `seed`: an MLP 256 -> 128 -> 10
    /// on 64 feature vectors with labels, and a CNN (3x3 conv 3 -> 16, ReLU, 2x2 max
    /// pool, linear 4096 -> 10) on 16 RGB images of 32x32.
    pub fn new(seed: u64) -> Result<Self> {
        let g = Generator::new(Device::cpu());
        g.manual_seed(seed);
        let labels = g.with_state(|s| (0..64).map(|_| i64::from(s.next_u32() % 10)).collect());
        Ok(Demo {
            fc1: Linear::new(&g, 256, 128)?,
            fc2: Linear::new(&g, 128, 10)?,
            conv_weight: randn(&g, &[16, 3, 3, 3], (2.0f64 / 27.0).sqrt())?,
            conv_bias: randn(&g, &[16], 0.1)?,
            fc3: Linear::new(&g, 16 * 16 * 16, 10)?,
            features: randn(&g, &[64, 256], 1.0)?,
            labels: Tensor::from_vec::<i64>(labels, &[64])?,
            images: randn(&g, &[16, 3, 32, 32], 1.0)?,
        })
    }

    /// The same parameters and inputs on `device`.
    pub fn to(&self, device: Device) -> Result<Self> {
        Ok(Demo {
            fc1: self.fc1.to(device)?,
            fc2: self.fc2.to(device)?,
            conv_weight: to(&self.conv_weight, device)?,
            conv_bias: to(&self.conv_bias, device)?,
            fc3: self.fc3.to(device)?,
            features: to(&self.features, device)?,
            labels: to(&self.labels, device)?,
            images: to(&self.images, device)?,
        })
    }

    /// MLP forward and loss: linear, ReLU, linear, log-softmax, NLL loss.
    fn mlp(&self, t: &mut Tracer) -> Result<(Tensor, Tensor)> {
        let h = t.step("linear (addmm)", || self.fc1.forward(&self.features))?;
        let h = t.step("relu", || ops::relu(&h))?;
        let logits = t.step("linear (addmm)", || self.fc2.forward(&h))?;
        let log_probs = t.step("_log_softmax", || ops::_log_softmax(&logits, 1, false))?;
        // reduction 1 = mean; -100 is PyTorch's default ignore_index.
        let (loss, _total_weight) = t.step("nll_loss_forward", || {
            ops::nll_loss_forward(&log_probs, &self.labels, None, 1, -100)
        })?;
        Ok((log_probs, loss))
    }

    /// CNN forward: convolution, ReLU, max pool, flatten, linear, softmax.
    fn cnn(&self, t: &mut Tracer) -> Result<Tensor> {
        let (one, zero) = (&[1, 1][..], &[0, 0][..]);
        let h = t.step("convolution", || {
            let bias = Some(&self.conv_bias);
            ops::convolution(
                &self.images,
                &self.conv_weight,
                bias,
                one,
                one,
                one,
                false,
                zero,
                1,
            )
        })?;
        let h = t.step("relu", || ops::relu(&h))?;
        let (h, _indices) = t.step("max_pool2d_with_indices", || {
            ops::max_pool2d_with_indices(&h, &[2, 2])
        })?;
        let h = t.step("flatten (view)", || {
            ops::flatten_using_ints::with(
                &h,
                ops::flatten_using_ints::Options::default().start_dim(1),
            )
        })?;
        let logits = t.step("linear (addmm)", || self.fc3.forward(&h))?;
        t.step("_softmax", || ops::_softmax(&logits, 1, false))
    }
}

/// The result of running the demo on one device.
pub struct Run {
    /// The device it ran on.
    pub device: Device,
    /// The outputs, copied back to the CPU.
    pub outputs: Outputs,
    /// How each step was dispatched (first run).
    pub steps: Vec<Step>,
    /// Median wall time of the MLP forward + loss, and of the CNN forward.
    pub mlp_time: Duration,
    /// See `mlp_time`.
    pub cnn_time: Duration,
}

/// Median wall time of `reps` calls of `f` (at least one).
fn median_time(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    let mut times = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        f()?;
        times.push(t0.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// Moves `demo` to `device`, runs both forward passes there, and times `reps` more
/// runs of each.
pub fn run(demo: &Demo, device: Device, reps: usize) -> Result<Run> {
    let on = demo.to(device)?;
    let mut t = Tracer {
        device,
        steps: Vec::new(),
    };
    let (log_probs, loss) = on.mlp(&mut t)?;
    let probs = on.cnn(&mut t)?;
    let cpu = Device::cpu();
    let outputs = Outputs {
        log_probs: to(&log_probs, cpu)?,
        loss: to(&loss, cpu)?,
        probs: to(&probs, cpu)?,
    };
    let mut quiet = Tracer {
        device,
        steps: Vec::new(),
    };
    let mlp_time = median_time(reps, || on.mlp(&mut quiet).map(drop))?;
    let cnn_time = median_time(reps, || on.cnn(&mut quiet).map(drop))?;
    Ok(Run {
        device,
        outputs,
        steps: t.steps,
        mlp_time,
        cnn_time,
    })
}

/// Largest absolute difference between two CPU tensors of one shape, computed with
/// operators (`sub`, `abs`, `amax` over all elements).
pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> Result<f64> {
    let d = ops::abs(&ops::sub_tensor(a, b)?)?;
    Ok(ops::amax(&d)?.item()?.to_f64())
}
