//! Data-parallel training (PyTorch's `DistributedDataParallel`): every rank holds
//! the same parameters (rank 0's, broadcast at construction), runs forward and
//! backward on its share of the batch, and gets the group's average gradient.
//!
//! Gradients are reduced in buckets (parameters in reverse registration order,
//! about the order backward produces their gradients, split by device, dtype and
//! `bucket_cap_bytes`). A post-accumulate-grad hook on each parameter marks it
//! ready; a bucket whose parameters are all ready is flattened and its average
//! started right away (buckets start in index order on every rank, so the ranks'
//! collectives match), while backward goes on with the rest of the graph. The
//! hook of the last parameter waits for every bucket and writes each averaged
//! gradient back to its parameter's `.grad` (a view of the bucket), so when
//! backward returns, every gradient is the group's average.
//!
//! Every parameter must receive a gradient in each synchronized backward pass
//! ([`DistributedDataParallel::backward`] checks it). Inside
//! [`DistributedDataParallel::no_sync`] nothing is reduced: gradients accumulate
//! locally and the next synchronized backward reduces the sum.
//!
//! Owns: bucketing and the gradient hooks. Must not: run the optimizer or the
//! model (the caller's code does).

use crate::group::{ProcessGroup, Work};
use crate::types::ReduceOp;
use opal::autograd::{register_post_accumulate_grad_hook, HookHandle, NoGradGuard};
use opal::{ops, OpalError, Result, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Options of [`DistributedDataParallel::new`].
#[derive(Clone, Debug)]
pub struct DdpOptions {
    /// Largest bucket, in bytes (a parameter larger than this gets a bucket of its
    /// own). PyTorch's default is 25 MiB.
    pub bucket_cap_bytes: usize,
}

impl Default for DdpOptions {
    fn default() -> Self {
        DdpOptions {
            bucket_cap_bytes: 25 << 20,
        }
    }
}

#[derive(Default)]
struct Pass {
    /// Parameters of each bucket whose gradient is final in this pass.
    ready: Vec<usize>,
    /// Buckets started so far (they start in index order).
    started: usize,
    works: Vec<(usize, Work, Tensor)>,
}

struct Shared {
    group: ProcessGroup,
    params: Vec<(String, Tensor)>,
    buckets: Vec<Vec<usize>>,
    bucket_of: Vec<usize>,
    pass: Mutex<Pass>,
    sync: AtomicBool,
}

/// A model's parameters kept in step across a process group.
pub struct DistributedDataParallel {
    shared: Arc<Shared>,
    _hooks: Vec<HookHandle>,
}

/// Turns gradient reduction back on when dropped (see
/// [`DistributedDataParallel::no_sync`]).
pub struct NoSync<'a> {
    ddp: &'a DistributedDataParallel,
}

impl Drop for NoSync<'_> {
    fn drop(&mut self) {
        self.ddp.shared.sync.store(true, Ordering::SeqCst);
    }
}

/// Splits parameter indices, last first, into buckets of one device and dtype and
/// at most `cap` bytes each.
fn buckets_of(params: &[(String, Tensor)], cap: usize) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut bytes = 0usize;
    for i in (0..params.len()).rev() {
        let t = &params[i].1;
        let n = t.numel() as usize * t.element_size();
        let fits = out.last().is_some_and(|b| {
            let first = &params[b[0]].1;
            first.device() == t.device() && first.dtype() == t.dtype() && bytes + n <= cap
        });
        if fits {
            bytes += n;
            out.last_mut().expect("a bucket").push(i);
        } else {
            bytes = n;
            out.push(vec![i]);
        }
    }
    out
}

impl Shared {
    fn on_ready(&self, i: usize) -> Result<()> {
        if !self.sync.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut pass = self.pass.lock().unwrap_or_else(|p| p.into_inner());
        let b = self.bucket_of[i];
        pass.ready[b] += 1;
        while pass.started < self.buckets.len()
            && pass.ready[pass.started] == self.buckets[pass.started].len()
        {
            let k = pass.started;
            let r = self.start_bucket(k);
            let (work, flat) = match r {
                Ok(x) => x,
                Err(e) => {
                    *pass = self.fresh_pass();
                    return Err(e);
                }
            };
            pass.works.push((k, work, flat));
            pass.started += 1;
        }
        // Polling lets the engine progress the buckets already started.
        for (_, w, _) in &pass.works {
            w.is_completed();
        }
        if pass.started < self.buckets.len() {
            return Ok(());
        }
        let works = std::mem::take(&mut pass.works);
        *pass = self.fresh_pass();
        drop(pass);
        for (k, work, flat) in works {
            work.wait()?;
            self.write_grads(k, &flat)?;
        }
        Ok(())
    }

    fn fresh_pass(&self) -> Pass {
        Pass {
            ready: vec![0; self.buckets.len()],
            ..Pass::default()
        }
    }

    fn grad_of(&self, i: usize) -> Result<Tensor> {
        let (name, p) = &self.params[i];
        p.grad().ok_or_else(|| {
            OpalError::msg(format!(
                "DistributedDataParallel: parameter `{name}` has no gradient"
            ))
        })
    }

    fn start_bucket(&self, k: usize) -> Result<(Work, Tensor)> {
        let _ng = NoGradGuard::new();
        let flat: Vec<Tensor> = self.buckets[k]
            .iter()
            .map(|&i| ops::reshape(&self.grad_of(i)?, &[-1]))
            .collect::<Result<_>>()?;
        let flat = ops::cat(&flat)?;
        let work = self.group.all_reduce_async(&flat, ReduceOp::Avg)?;
        Ok((work, flat))
    }

    fn write_grads(&self, k: usize, flat: &Tensor) -> Result<()> {
        let _ng = NoGradGuard::new();
        let mut at = 0;
        for &i in &self.buckets[k] {
            let p = &self.params[i].1;
            let n = p.numel();
            let g = ops::reshape(&ops::narrow(flat, 0, at, n)?, p.sizes())?;
            p.set_grad(Some(g));
            at += n;
        }
        Ok(())
    }
}

impl DistributedDataParallel {
    /// Wraps `params` (leaves that require grad, in the model's order): broadcasts
    /// rank 0's values to every rank and hooks each parameter's gradient.
    /// Collective: every rank of `group` calls it with the same parameter shapes.
    pub fn new(
        group: &ProcessGroup,
        params: Vec<(String, Tensor)>,
        opts: DdpOptions,
    ) -> Result<DistributedDataParallel> {
        for (name, p) in &params {
            if !p.is_leaf() || !p.requires_grad() {
                return Err(OpalError::msg(format!(
                    "DistributedDataParallel: parameter `{name}` must be a leaf that requires grad"
                )));
            }
        }
        for (_, p) in &params {
            group.broadcast(p, 0)?;
        }
        let buckets = buckets_of(&params, opts.bucket_cap_bytes.max(1));
        let mut bucket_of = vec![0; params.len()];
        for (k, b) in buckets.iter().enumerate() {
            for &i in b {
                bucket_of[i] = k;
            }
        }
        let shared = Arc::new(Shared {
            group: group.clone(),
            pass: Mutex::new(Pass {
                ready: vec![0; buckets.len()],
                ..Pass::default()
            }),
            params,
            buckets,
            bucket_of,
            sync: AtomicBool::new(true),
        });
        let mut hooks = Vec::with_capacity(shared.params.len());
        for (i, (_, p)) in shared.params.iter().enumerate() {
            // The hook holds the shared state weakly: the parameters' hooks must not
            // keep the wrapper (and so the hooks themselves) alive.
            let weak = Arc::downgrade(&shared);
            hooks.push(register_post_accumulate_grad_hook(p, move |_| {
                weak.upgrade().map_or(Ok(()), |s| s.on_ready(i))
            })?);
        }
        Ok(DistributedDataParallel {
            shared,
            _hooks: hooks,
        })
    }

    /// The parameters, as given.
    pub fn parameters(&self) -> &[(String, Tensor)] {
        &self.shared.params
    }

    /// The buckets: parameter indices, in the order they are reduced.
    pub fn buckets(&self) -> &[Vec<usize>] {
        &self.shared.buckets
    }

    /// The group.
    pub fn group(&self) -> &ProcessGroup {
        &self.shared.group
    }

    /// Gradient accumulation: until the guard drops, backward passes reduce
    /// nothing (PyTorch's `no_sync` context).
    pub fn no_sync(&self) -> NoSync<'_> {
        self.shared.sync.store(false, Ordering::SeqCst);
        NoSync { ddp: self }
    }

    /// `loss.backward()`, then a check that every parameter's gradient was reduced
    /// (an `Err` naming the parameters that got none, on a synchronized pass).
    pub fn backward(&self, loss: &Tensor) -> Result<()> {
        loss.backward()?;
        if !self.shared.sync.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut pass = self.shared.pass.lock().unwrap_or_else(|p| p.into_inner());
        if pass.ready.iter().all(|&r| r == 0) && pass.works.is_empty() {
            return Ok(());
        }
        let missing: Vec<&str> = self
            .shared
            .params
            .iter()
            .filter(|(_, p)| p.grad().is_none())
            .map(|(n, _)| n.as_str())
            .collect();
        *pass = self.shared.fresh_pass();
        Err(OpalError::msg(format!(
            "DistributedDataParallel: backward did not reach every parameter (no gradient: {}); each synchronized pass must give every parameter a gradient",
            if missing.is_empty() { "(some, in an unfinished bucket)".to_string() } else { missing.join(", ") }
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_go_last_first_and_respect_the_cap() {
        opal_cpu::init().unwrap();
        let p = |n: i64| Tensor::empty(&[n], opal::DType::F32, opal::Device::cpu()).unwrap();
        let params: Vec<(String, Tensor)> = [4, 4, 8, 1]
            .iter()
            .enumerate()
            .map(|(i, &n)| (format!("p{i}"), p(n)))
            .collect();
        // 16 + 16 + 32 + 4 bytes, cap 40: [3, 2], [1, 0].
        assert_eq!(buckets_of(&params, 40), vec![vec![3, 2], vec![1, 0]]);
        assert_eq!(
            buckets_of(&params, 1),
            vec![vec![3], vec![2], vec![1], vec![0]]
        );
    }
}
