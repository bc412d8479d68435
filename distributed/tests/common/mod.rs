//! A tiny harness for tests that run as every rank of `mpirun -n 2`: each case
//! runs on every rank; each rank prints `rank R: N passed, M failed` and exits
//! non-zero on a failure.

#![allow(dead_code)]

use opal::{DType, Device, Tensor};

pub struct Cases {
    pub rank: usize,
    passed: usize,
    failed: Vec<String>,
}

impl Cases {
    pub fn new(rank: usize) -> Cases {
        Cases {
            rank,
            passed: 0,
            failed: Vec::new(),
        }
    }

    pub fn run(&mut self, name: &str, f: impl FnOnce() -> Result<(), String>) {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(Ok(())) => self.passed += 1,
            Ok(Err(e)) => self.failed.push(format!("{name}: {e}")),
            Err(_) => self.failed.push(format!("{name}: panicked")),
        }
    }

    /// Prints the summary; the process's exit status.
    pub fn finish(self, what: &str) -> i32 {
        for f in &self.failed {
            println!("rank {} FAIL {what}: {f}", self.rank);
        }
        println!(
            "rank {} {what}: {} passed, {} failed",
            self.rank,
            self.passed,
            self.failed.len()
        );
        i32::from(!self.failed.is_empty())
    }
}

pub fn e<E: std::fmt::Display>(x: E) -> String {
    x.to_string()
}

pub fn f64s(t: &Tensor) -> Result<Vec<f64>, String> {
    t.to_device_dtype(Device::cpu(), DType::F64)
        .and_then(|t| t.to_vec::<f64>())
        .map_err(e)
}

pub fn expect_eq(got: &Tensor, want: &[f64], what: &str) -> Result<(), String> {
    let g = f64s(got)?;
    if g.len() != want.len()
        || g.iter()
            .zip(want)
            .any(|(a, b)| (a - b).abs() > 1e-6 * b.abs().max(1.0))
    {
        return Err(format!("{what}: got {g:?}, want {want:?}"));
    }
    Ok(())
}
