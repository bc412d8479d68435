//! [`Runner`]: a program compiled for one device, its stored tensors already
//! there; [`Runner::run`] checks the inputs against the export's metadata (dtypes,
//! static sizes, dynamic dimensions against their range constraints) and
//! interprets the plan, one boxed dispatch per node, freeing each value after its
//! last use.
//!
//! Owns: execution and input checking (its load-time passes are in `load`).
//! Must not: parse or resolve anything per run (the plan has it all).

use crate::error::{bail, Error, Result};
use crate::limits::RunLimits;
use crate::plan::{self, Bind, Fill, IntOp, Kind, Plan, SizeOf, Step, SymOut, SymVal};
use crate::program::{move_stored, move_to, ExportedProgram};
use crate::schema::{Dim, InputKind, Range, TensorMeta};
use opal::{Device, IValue, Tensor};
use std::collections::HashMap;

mod load;

/// A program ready to run on one device. Cheap to share across threads by
/// reference; each [`Runner::run`] has its own values.
pub struct Runner {
    name: String,
    device: Device,
    plan: Plan,
    /// Values every run starts with: the stored tensors, and the results of
    /// the steps folded at load (see [`Runner::fold_constants`]).
    stored: Vec<(usize, IValue)>,
    user: Vec<UserInput>,
    ranges: Vec<Range>,
    /// Node names and targets by node index (error messages).
    nodes: Vec<(String, String)>,
    /// Frames of finished runs, emptied, for the next runs: a run's slot
    /// table is bookkeeping the runner keeps, like its plan, not memory each
    /// inference allocates again (for Llama's 300 values, 14 KiB).
    frames: std::sync::Mutex<Vec<Frame>>,
}

/// Most emptied frames kept (one per thread that runs at once, up to this).
const KEPT_FRAMES: usize = 4;

/// One run's values: by slot, the bytes of each live intermediate and their
/// sum, and the argument stack reused by every step.
struct Frame {
    env: Vec<Option<IValue>>,
    bytes: Vec<u64>,
    live: u64,
    stack: Vec<IValue>,
}

impl Frame {
    fn new(slots: usize, max_stack: usize) -> Frame {
        Frame {
            env: vec![None; slots],
            bytes: vec![0; slots],
            live: 0,
            stack: Vec::with_capacity(max_stack),
        }
    }
}

struct UserInput {
    slot: usize,
    name: String,
    meta: Option<TensorMeta>,
}

impl Runner {
    pub(crate) fn new(p: &ExportedProgram, device: Device) -> Result<Runner> {
        crate::program::init_backends()?;
        // `emu` means the current emu device (`emu:0`): resolved once, so inputs
        // already there are not copied again on every run.
        let device = Tensor::empty(&[0], opal::DType::F32, device)?.device();
        let mut program = p.program.clone();
        let mut tensors = p.stored.clone();
        crate::fuse::fold_batch_norms(&mut program, &mut tensors)?;
        if device == Device::cpu() {
            crate::fuse::drop_answered_asserts(&mut program);
        }
        let plan = plan::compile(&program, device)?;
        let mut stored = Vec::new();
        let mut user = Vec::new();
        for ((gname, kind), &slot) in program.inputs.iter().zip(&plan.input_slots) {
            match kind {
                InputKind::Parameter(f) | InputKind::Buffer(f) | InputKind::Constant(f) => {
                    let t = tensors
                        .get(f)
                        .ok_or_else(|| Error::new(format!("stored tensor '{f}' is missing")))?;
                    stored.push((slot, t.clone()));
                }
                InputKind::User => user.push(UserInput {
                    slot,
                    name: gname.clone(),
                    meta: program.tensor_meta.get(gname).cloned(),
                }),
            }
        }
        let stored = move_stored(&stored, device)?
            .into_iter()
            .map(|(s, t)| (s, IValue::Tensor(t)))
            .collect();
        let mut runner = Runner {
            name: p.name.clone(),
            device,
            plan,
            stored,
            user,
            ranges: program.ranges.clone(),
            nodes: program
                .nodes
                .iter()
                .map(|n| (n.name.clone(), n.target.clone()))
                .collect(),
            frames: std::sync::Mutex::new(Vec::new()),
        };
        runner.fold_constants();
        if device == Device::cpu() {
            runner.contiguous_weights();
            let stored: Vec<usize> = runner.stored.iter().map(|(s, _)| *s).collect();
            let kept = [stored, runner.plan.input_slots.clone()].concat();
            crate::pointwise::donate(&mut runner.plan, &kept);
        }
        Ok(runner)
    }

    /// The steps of the plan, each with what it runs and the node it starts at:
    /// for [`crate::Profile`].
    pub(crate) fn step_labels(&self) -> Vec<(String, String)> {
        self.plan
            .steps
            .iter()
            .map(|s| {
                let what = match &s.kind {
                    Kind::Op { op, .. } => op.name().to_string(),
                    Kind::Pointwise { donor: None, .. } => "fused element-wise".to_string(),
                    Kind::Pointwise { .. } => "fused element-wise (in place)".to_string(),
                    Kind::SafeSoftmax { .. } => "fused safe softmax".to_string(),
                    Kind::RmsNorm { .. } => "fused RMS norm".to_string(),
                    Kind::PlaneScale { .. } => "aten::mul.Tensor (planes)".to_string(),
                    Kind::PlaneMean { .. } => "aten::mean.dim (planes)".to_string(),
                    Kind::Conv1x1 { .. } => "aten::convolution (1x1)".to_string(),
                    Kind::ScaleResidual { .. } => "fused layer scale and residual".to_string(),
                    Kind::SharedRhsBmm { .. } => "aten::bmm (one matrix)".to_string(),
                    Kind::Patchify { .. } => "aten::convolution (patches)".to_string(),
                    Kind::DepthwiseNhwc { .. } => {
                        "aten::convolution (depthwise, channels-last)".to_string()
                    }
                    Kind::LayerNorm { .. } => "fused layer norm".to_string(),
                    Kind::View { op, .. } => format!("{} (direct)", op.name()),
                    Kind::Alias { .. } | Kind::Size { .. } | Kind::Int { .. } => {
                        "builtin".to_string()
                    }
                };
                (what, self.nodes[s.node].0.clone())
            })
            .collect()
    }

    /// The archive it was loaded from (as error messages name it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device it runs on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Runs with the default [`RunLimits`]. Inputs on another device are copied
    /// to this one first.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        self.run_with(inputs, &RunLimits::default())
    }

    /// Runs with explicit limits.
    pub fn run_with(&self, inputs: &[Tensor], limits: &RunLimits) -> Result<Vec<Tensor>> {
        let _no_grad = opal::autograd::NoGradGuard::new();
        self.execute(inputs, limits)
            .map_err(|e| e.context(&self.name))
    }

    fn check_inputs(&self, inputs: &[Tensor]) -> Result<()> {
        if inputs.len() != self.user.len() {
            bail!(
                "the program takes {} inputs, {} were given",
                self.user.len(),
                inputs.len()
            );
        }
        let mut syms: HashMap<&str, i64> = HashMap::new();
        for (i, (u, t)) in self.user.iter().zip(inputs).enumerate() {
            let Some(m) = &u.meta else { continue };
            let what = || format!("input {i} ('{}')", u.name);
            if !t.is_defined() {
                bail!("{} is an undefined tensor", what());
            }
            if t.dtype() != m.dtype {
                bail!(
                    "{} is {}, the program expects {}",
                    what(),
                    t.dtype(),
                    m.dtype
                );
            }
            if t.dim() != m.sizes.len() {
                bail!(
                    "{} has {} dimensions, the program expects {}",
                    what(),
                    t.dim(),
                    m.sizes.len()
                );
            }
            for (d, (dim, &have)) in m.sizes.iter().zip(t.sizes()).enumerate() {
                match dim {
                    Dim::Int(want) if *want != have => bail!(
                        "{} dimension {d} is {have}, the program expects {want}",
                        what()
                    ),
                    Dim::Int(_) => {}
                    Dim::Expr { expr, .. } => {
                        let Some(sym) = dim.symbol() else { continue };
                        if let Some(&prev) = syms.get(sym) {
                            if prev != have {
                                bail!(
                                    "{} dimension {d} is {have}, but symbol {sym} ({expr}) is {prev} elsewhere",
                                    what()
                                );
                            }
                        }
                        syms.insert(sym, have);
                        if let Some(r) = self.ranges.iter().find(|r| r.symbol == sym) {
                            let lo = r.min.unwrap_or(i64::MIN);
                            let hi = r.max.unwrap_or(i64::MAX);
                            if have < lo || have > hi {
                                bail!(
                                    "{} dimension {d} is {have}, outside the range [{}, {}] of its dynamic dimension {sym}",
                                    what(),
                                    r.min.map_or("-inf".into(), |x| x.to_string()),
                                    r.max.map_or("inf".into(), |x| x.to_string())
                                );
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn node_err(&self, node: usize, e: impl std::fmt::Display) -> Error {
        let (n, t) = &self.nodes[node];
        Error::new(format!("node '{n}' ({t}): {e}"))
    }

    fn execute(&self, inputs: &[Tensor], limits: &RunLimits) -> Result<Vec<Tensor>> {
        self.execute_timed(inputs, limits, None)
    }

    /// [`Runner::execute`], adding each step's time to `times[step]` when given
    /// (one clock read per step; only profiling pays it).
    pub(crate) fn execute_timed(
        &self,
        inputs: &[Tensor],
        limits: &RunLimits,
        mut times: Option<&mut [std::time::Duration]>,
    ) -> Result<Vec<Tensor>> {
        self.check_inputs(inputs)?;
        let mut f = self
            .frames
            .lock()
            .ok()
            .and_then(|mut v| v.pop())
            .unwrap_or_else(|| Frame::new(self.plan.slots, self.plan.max_stack));
        for (slot, v) in &self.stored {
            f.env[*slot] = Some(v.clone());
        }
        for (u, t) in self.user.iter().zip(inputs) {
            f.env[u.slot] = Some(IValue::Tensor(move_to(t, self.device)?));
        }
        for (i, step) in self.plan.steps.iter().enumerate() {
            let t = times.as_ref().map(|_| std::time::Instant::now());
            self.step(step, &mut f, limits.max_peak_intermediate_bytes)?;
            for &x in &step.frees {
                f.env[x] = None;
                f.live -= f.bytes[x];
                f.bytes[x] = 0;
            }
            if let (Some(ts), Some(t)) = (times.as_deref_mut(), t) {
                ts[i] += t.elapsed();
            }
        }
        let env = &mut f.env;
        let outputs: Result<Vec<Tensor>> = self
            .plan
            .outputs
            .iter()
            .enumerate()
            .map(|(i, o)| match o {
                SymOut::Slot(s) => match env[*s].take() {
                    Some(IValue::Tensor(t)) => Ok(t),
                    Some(IValue::Int(v)) => Ok(Tensor::from_scalar(v)?),
                    Some(other) => bail!("output {i} is a {}", other.type_name()),
                    None => bail!("output {i} was never computed"),
                },
                SymOut::Int(v) => Ok(Tensor::from_scalar(*v)?),
                SymOut::None => bail!("output {i} is None"),
            })
            .collect();
        f.env.iter_mut().for_each(|v| *v = None);
        f.bytes.fill(0);
        f.live = 0;
        f.stack.clear();
        if let Ok(mut kept) = self.frames.lock() {
            if kept.len() < KEPT_FRAMES {
                kept.push(f);
            }
        }
        outputs
    }

    /// Runs one step on the frame's values (freeing nothing: the caller frees
    /// the step's last uses): `max` is the limit on the bytes of live
    /// intermediate values.
    fn step(&self, step: &Step, f: &mut Frame, max: u64) -> Result<()> {
        let over = |live: u64| {
            Error::new(format!(
                "intermediate values would take {live} bytes, over RunLimits::max_peak_intermediate_bytes ({max})"
            ))
        };
        let get = |s: usize| -> Result<&IValue> {
            f.env[s]
                .as_ref()
                .ok_or_else(|| Error::new("reads a value that is not defined at this point"))
        };
        let int = |v: SymVal| -> Result<i64> {
            match v {
                SymVal::Const(i) => Ok(i),
                SymVal::Slot(s) => match get(s)? {
                    IValue::Int(i) => Ok(*i),
                    other => bail!("expected an int value, got {}", other.type_name()),
                },
            }
        };
        // A step with one tensor result (a fused step, a direct view) leaves it
        // here; it is stored and counted after the match.
        let mut single: Option<(usize, Result<Tensor>)> = None;
        match &step.kind {
            Kind::Op {
                op,
                template,
                fills,
                binds,
                traced_bytes,
            } => {
                if f.live.saturating_add(*traced_bytes) > max {
                    return Err(self.node_err(step.node, over(f.live + traced_bytes)));
                }
                let stack = &mut f.stack;
                stack.clear();
                stack.extend_from_slice(template);
                for (pos, fill) in fills {
                    let v = (|| -> Result<IValue> {
                        Ok(match fill {
                            Fill::Value(s) => get(*s)?.clone(),
                            Fill::Tensors(ss) => IValue::TensorList(
                                ss.iter().map(|s| tensor(get(*s)?)).collect::<Result<_>>()?,
                            ),
                            Fill::OptTensors(ss) => IValue::OptionalTensorList(
                                ss.iter()
                                    .map(|s| s.map(|s| tensor(get(s)?)).transpose())
                                    .collect::<Result<_>>()?,
                            ),
                            Fill::WrappedInt(s) => IValue::Tensor(Tensor::wrapped_number(
                                &opal::Scalar::Int(int(SymVal::Slot(*s))?),
                            )?),
                            Fill::Ints(vs) => {
                                IValue::IntList(vs.iter().map(|v| int(*v)).collect::<Result<_>>()?)
                            }
                        })
                    })()
                    .map_err(|e| self.node_err(step.node, e))?;
                    stack[*pos] = v;
                }
                op.call_boxed(stack)
                    .map_err(|e| self.node_err(step.node, e))?;
                if stack.len() != binds.len() {
                    return Err(self.node_err(
                        step.node,
                        format!("returned {} values, expected {}", stack.len(), binds.len()),
                    ));
                }
                for (b, v) in binds.iter().zip(stack.drain(..)) {
                    match b {
                        Bind::Drop => {}
                        Bind::Slot(s) => put(&mut f.env, &mut f.bytes, &mut f.live, *s, v),
                        Bind::List(ss) => {
                            let IValue::TensorList(ts) = v else {
                                return Err(self.node_err(
                                    step.node,
                                    format!("returned {}, expected a tensor list", v.type_name()),
                                ));
                            };
                            if ts.len() != ss.len() {
                                return Err(self.node_err(
                                    step.node,
                                    format!(
                                        "returned {} tensors, the graph names {}",
                                        ts.len(),
                                        ss.len()
                                    ),
                                ));
                            }
                            for (s, t) in ss.iter().zip(ts) {
                                put(&mut f.env, &mut f.bytes, &mut f.live, *s, IValue::Tensor(t));
                            }
                        }
                    }
                }
                if f.live > max {
                    return Err(self.node_err(step.node, over(f.live)));
                }
            }
            Kind::Pointwise {
                program,
                inputs,
                outputs,
                sizes,
                donor,
            } => {
                let ts = inputs
                    .iter()
                    .map(|s| tensor(get(*s)?))
                    .collect::<Result<Vec<_>>>()
                    .map_err(|e| self.node_err(step.node, e))?;
                // The donor's slot lets go of it, so the step holds its only handle.
                if let Some(k) = donor {
                    f.env[inputs[*k]] = None;
                }
                let outs = crate::pointwise::run(program, ts, *donor, outputs.len(), sizes)
                    .map_err(|e| self.node_err(step.node, e))?;
                for (s, t) in outputs.iter().zip(outs) {
                    put(&mut f.env, &mut f.bytes, &mut f.live, *s, IValue::Tensor(t));
                }
                if f.live > max {
                    return Err(self.node_err(step.node, over(f.live)));
                }
            }
            Kind::SafeSoftmax { input, output, dim } => {
                let y = (|| crate::safe_softmax::run(&tensor(get(*input)?)?, *dim))();
                single = Some((*output, y));
            }
            Kind::RmsNorm {
                input,
                weight,
                output,
                eps,
            } => {
                let y = (|| {
                    let w = weight.map(|w| tensor(get(w)?)).transpose()?;
                    crate::rms_norm::run(&tensor(get(*input)?)?, w.as_ref(), *eps)
                })();
                single = Some((*output, y));
            }
            Kind::PlaneScale {
                planes,
                scales,
                output,
            } => {
                let y = (|| {
                    crate::channel_scale::run(&tensor(get(*planes)?)?, &tensor(get(*scales)?)?)
                })();
                single = Some((*output, y));
            }
            Kind::Conv1x1 {
                input,
                weight,
                bias,
                output,
            } => {
                let y = (|| {
                    let b = bias.map(|b| tensor(get(b)?)).transpose()?;
                    crate::conv1x1::run(&tensor(get(*input)?)?, &tensor(get(*weight)?)?, b.as_ref())
                })();
                single = Some((*output, y));
            }
            Kind::DepthwiseNhwc {
                input,
                weight,
                bias,
                output,
                geom,
            } => {
                let y = (|| {
                    let b = bias.map(|b| tensor(get(b)?)).transpose()?;
                    crate::depthwise_nhwc::run(
                        geom,
                        &tensor(get(*input)?)?,
                        &tensor(get(*weight)?)?,
                        b.as_ref(),
                    )
                })();
                single = Some((*output, y));
            }
            Kind::Patchify {
                input,
                weight,
                bias,
                output,
                kernel,
                nhwc,
            } => {
                let y = (|| {
                    let b = bias.map(|b| tensor(get(b)?)).transpose()?;
                    crate::patchify::run(
                        *kernel,
                        *nhwc,
                        &tensor(get(*input)?)?,
                        &tensor(get(*weight)?)?,
                        b.as_ref(),
                    )
                })();
                single = Some((*output, y));
            }
            Kind::SharedRhsBmm {
                input,
                matrix,
                output,
            } => {
                let y = (|| {
                    crate::shared_rhs_bmm::run(&tensor(get(*input)?)?, &tensor(get(*matrix)?)?)
                })();
                single = Some((*output, y));
            }
            Kind::ScaleResidual {
                scale,
                input,
                residual,
                output,
            } => {
                let y = (|| {
                    crate::scale_residual::run(
                        &tensor(get(*scale)?)?,
                        &tensor(get(*input)?)?,
                        &tensor(get(*residual)?)?,
                    )
                })();
                single = Some((*output, y));
            }
            Kind::PlaneMean {
                input,
                output,
                keepdim,
            } => {
                let y = (|| crate::plane_mean::run(&tensor(get(*input)?)?, *keepdim))();
                single = Some((*output, y));
            }
            Kind::LayerNorm {
                input,
                weight,
                bias,
                output,
                eps,
                dim,
            } => {
                let y = (|| {
                    let opt = |s: Option<usize>| s.map(|s| tensor(get(s)?)).transpose();
                    let (w, b) = (opt(*weight)?, opt(*bias)?);
                    crate::layer_norm::run(
                        &tensor(get(*input)?)?,
                        w.as_ref(),
                        b.as_ref(),
                        *dim,
                        *eps,
                    )
                })();
                single = Some((*output, y));
            }
            Kind::View { src, dst, op } => {
                let y =
                    (|| -> Result<Tensor> { Ok(crate::views::apply(op, &tensor(get(*src)?)?)?) })();
                single = Some((*dst, y));
            }
            Kind::Alias { src, dst } => {
                let v = get(*src).map_err(|e| self.node_err(step.node, e))?.clone();
                f.env[*dst] = Some(v);
            }
            Kind::Size {
                src,
                dim,
                what,
                dst,
            } => {
                let v = (|| -> Result<i64> {
                    let t = tensor(get(*src)?)?;
                    let d = || -> Result<usize> {
                        let n = t.dim() as i64;
                        let d = if *dim < 0 { dim + n } else { *dim };
                        if d < 0 || d >= n {
                            bail!("dimension {dim} is out of range for {n} dimensions");
                        }
                        Ok(d as usize)
                    };
                    Ok(match what {
                        SizeOf::Size => t.sizes()[d()?],
                        SizeOf::Stride => t.strides()[d()?],
                        SizeOf::Numel => t.numel(),
                        SizeOf::Offset => t.storage_offset(),
                    })
                })()
                .map_err(|e| self.node_err(step.node, e))?;
                f.env[*dst] = Some(IValue::Int(v));
            }
            Kind::Int { op, a, b, dst } => {
                let v = (|| -> Result<i64> { int_op(*op, int(*a)?, int(*b)?) })()
                    .map_err(|e| self.node_err(step.node, e))?;
                f.env[*dst] = Some(IValue::Int(v));
            }
        }
        if let Some((slot, y)) = single {
            let y = y.map_err(|e| self.node_err(step.node, e))?;
            put(
                &mut f.env,
                &mut f.bytes,
                &mut f.live,
                slot,
                IValue::Tensor(y),
            );
            if f.live > max {
                return Err(self.node_err(step.node, over(f.live)));
            }
        }
        Ok(())
    }
}

/// Stores a step's result in slot `s`, counting its bytes as live.
fn put(env: &mut [Option<IValue>], bytes: &mut [u64], live: &mut u64, s: usize, v: IValue) {
    bytes[s] = value_bytes(&v);
    *live += bytes[s];
    env[s] = Some(v);
}

fn tensor(v: &IValue) -> Result<Tensor> {
    match v {
        IValue::Tensor(t) => Ok(t.clone()),
        other => bail!("expected a tensor, got {}", other.type_name()),
    }
}

fn value_bytes(v: &IValue) -> u64 {
    match v {
        IValue::Tensor(t) => (t.numel().max(0) as u64).saturating_mul(t.dtype().size() as u64),
        _ => 0,
    }
}

/// Python's int arithmetic (floor division and modulo round toward -inf).
fn int_op(op: IntOp, a: i64, b: i64) -> Result<i64> {
    let r = match op {
        IntOp::Add => a.checked_add(b),
        IntOp::Sub => a.checked_sub(b),
        IntOp::Mul => a.checked_mul(b),
        IntOp::FloorDiv | IntOp::Mod if b == 0 => bail!("integer division by zero"),
        IntOp::FloorDiv => a.checked_div_euclid(b).map(|q| {
            // div_euclid rounds so the remainder is non-negative; Python floors.
            if b < 0 && a.rem_euclid(b) != 0 {
                q - 1
            } else {
                q
            }
        }),
        IntOp::Mod => a
            .checked_rem_euclid(b)
            .map(|r| if b < 0 && r != 0 { r + b } else { r }),
    };
    r.ok_or_else(|| Error::new(format!("integer overflow in {op:?}({a}, {b})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_ops_follow_python() {
        assert_eq!(int_op(IntOp::FloorDiv, 7, 2).unwrap(), 3);
        assert_eq!(int_op(IntOp::FloorDiv, -7, 2).unwrap(), -4);
        assert_eq!(int_op(IntOp::FloorDiv, 7, -2).unwrap(), -4);
        assert_eq!(int_op(IntOp::FloorDiv, -7, -2).unwrap(), 3);
        assert_eq!(int_op(IntOp::Mod, -7, 2).unwrap(), 1);
        assert_eq!(int_op(IntOp::Mod, 7, -2).unwrap(), -1);
        assert_eq!(int_op(IntOp::Mod, -7, -2).unwrap(), -1);
        assert_eq!(int_op(IntOp::Sub, 0, 5).unwrap(), -5);
        assert!(int_op(IntOp::FloorDiv, 1, 0)
            .unwrap_err()
            .to_string()
            .contains("zero"));
        assert!(int_op(IntOp::Mul, i64::MAX, 2)
            .unwrap_err()
            .to_string()
            .contains("overflow"));
    }
}
