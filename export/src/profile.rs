//! Where a run's time goes: [`Runner::profile`] runs the program repeatedly with
//! a clock read around every step of its plan and reports the time per step
//! and per kind of step (an operator, a fused element-wise run, the fused safe
//! softmax, the builtins), so a slow model points at what to speed up.
//!
//! Owns: [`Profile`] and its table. Must not: change how a run executes (the
//! runner adds each step's time to a slice it is given, nothing else).

use crate::error::Result;
use crate::limits::RunLimits;
use crate::runner::Runner;
use opal::Tensor;
use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

/// One step of the plan: what it runs, the graph node it starts at, and its
/// mean time per run.
#[derive(Clone, Debug)]
pub struct StepTime {
    /// The operator (`aten::mm`), or `fused element-wise`, `fused safe softmax`,
    /// `builtin`.
    pub what: String,
    /// The graph node the step runs (the first one of a fused run).
    pub node: String,
    /// Median time per run.
    pub time: Duration,
}

/// Per-step times of a program: the median over the profiled runs.
#[derive(Clone, Debug)]
pub struct Profile {
    /// The plan's steps in order.
    pub steps: Vec<StepTime>,
    /// Median wall time of a whole run (the steps plus the input checks, the
    /// stored values' set-up and the outputs).
    pub total: Duration,
    /// How many runs were timed.
    pub runs: usize,
}

impl Profile {
    /// Time per run and step count by kind of step, slowest first.
    pub fn by_kind(&self) -> Vec<(String, usize, Duration)> {
        let mut m: HashMap<&str, (usize, Duration)> = HashMap::new();
        for s in &self.steps {
            let e = m.entry(&s.what).or_default();
            e.0 += 1;
            e.1 += s.time;
        }
        let mut v: Vec<_> = m
            .into_iter()
            .map(|(k, (n, t))| (k.to_string(), n, t))
            .collect();
        v.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        v
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let total = us(self.total).max(f64::MIN_POSITIVE);
        let in_steps: Duration = self.steps.iter().map(|s| s.time).sum();
        writeln!(
            f,
            "{:.1} us per run ({} runs), {:.1} us in {} steps",
            us(self.total),
            self.runs,
            us(in_steps),
            self.steps.len()
        )?;
        writeln!(f, "{:>9} {:>6} {:>6}  kind", "us", "%", "steps")?;
        for (k, n, t) in self.by_kind() {
            writeln!(
                f,
                "{:>9.2} {:>5.1}% {:>6}  {k}",
                us(t),
                100.0 * us(t) / total,
                n
            )?;
        }
        let mut slow: Vec<&StepTime> = self.steps.iter().collect();
        slow.sort_by_key(|s| std::cmp::Reverse(s.time));
        writeln!(f, "slowest steps:")?;
        for s in slow.iter().take(12) {
            writeln!(
                f,
                "{:>9.2} {:>5.1}%  {} ({})",
                us(s.time),
                100.0 * us(s.time) / total,
                s.node,
                s.what
            )?;
        }
        Ok(())
    }
}

impl Runner {
    /// Runs `runs` times (after one warm-up run) with every step timed; see
    /// [`Profile`]. The clock reads add a little to each step.
    pub fn profile(&self, inputs: &[Tensor], runs: usize) -> Result<Profile> {
        let _no_grad = opal::autograd::NoGradGuard::new();
        let runs = runs.clamp(1, 1_000_000);
        let limits = RunLimits::default();
        let labels = self.step_labels();
        let named = |e: crate::Error| e.context(self.name());
        self.execute_timed(inputs, &limits, None).map_err(named)?;
        // Medians, not means: on a shared machine one descheduled run would
        // otherwise dominate the step it hit.
        let mut per_step = vec![Vec::with_capacity(runs); labels.len()];
        let mut totals = Vec::with_capacity(runs);
        let mut times = vec![Duration::ZERO; labels.len()];
        for _ in 0..runs {
            times.fill(Duration::ZERO);
            let start = std::time::Instant::now();
            self.execute_timed(inputs, &limits, Some(&mut times))
                .map_err(named)?;
            totals.push(start.elapsed());
            for (all, t) in per_step.iter_mut().zip(&times) {
                all.push(*t);
            }
        }
        let total = median(&mut totals);
        let steps = labels
            .into_iter()
            .zip(&mut per_step)
            .map(|((what, node), ts)| StepTime {
                what,
                node,
                time: median(ts),
            })
            .collect();
        Ok(Profile { steps, total, runs })
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}
