//! Data-parallel training parity on 2 ranks (`mpirun -n 2`, see
//! `run-mpi-tests.sh`): each model of `../shared/fixtures/training`
//! (`OPAL_TRAINING_DIR`: another set) is trained with each rank on its half of
//! every batch, gradients averaged by [`DistributedDataParallel`] during backward
//! (small buckets, so several overlap), on cpu and on emu, in every dtype of the
//! spec. The per-step loss (the ranks' average) and the final parameters must
//! match PyTorch's one-process run within the spec's tolerances.

mod common;

use common::{e, f64s, Cases};
use opal::autograd::NoGradGuard;
use opal::{ops, DType, Device, Scalar, Tensor};
use opal_demo::training::{dtype_of, forward_loss, init_params, Fixture};
use opal_distributed::{
    init_process_group, DdpOptions, DistributedDataParallel, ProcessGroup, ReduceOp,
};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn models() -> Vec<PathBuf> {
    // Relative to the repository root, as the single-process training test.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join(
        std::env::var("OPAL_TRAINING_DIR").unwrap_or_else(|_| "../shared/fixtures/training".into()),
    );
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|x| panic!("{}: {x}", dir.display()))
        .filter_map(|d| d.ok().map(|d| d.path()))
        .filter(|p| p.join("spec.json").is_file())
        .collect();
    v.sort();
    v
}

/// The fixture with this rank's half of every batch (dimension 1 of each data
/// tensor).
fn shard(mut fx: Fixture, rank: usize, world: usize) -> Result<Fixture, String> {
    for (name, t) in fx.data.iter_mut() {
        let b = t.sizes()[1];
        if b % world as i64 != 0 {
            return Err(format!(
                "data `{name}`: batch {b} does not split across {world} ranks"
            ));
        }
        let n = b / world as i64;
        *t = ops::contiguous(&ops::narrow(t, 1, rank as i64 * n, n).map_err(e)?).map_err(e)?;
    }
    Ok(fx)
}

fn train(pg: &ProcessGroup, dir: &std::path::Path, dt: &str, device: Device) -> Result<(), String> {
    let full = Fixture::load(dir)?;
    let (expected, rtol) = (full.losses(dt)?, full.tolerance(dt, "loss_rtol")?);
    let (prt, pat) = (
        full.tolerance(dt, "param_rtol")?,
        full.tolerance(dt, "param_atol")?,
    );
    let want_final = full.final_params(dt)?;
    let lr = full.spec["sizes"]["lr"].as_f64().ok_or("spec.json: lr")?;
    let fx = shard(full, pg.rank(), pg.size())?;
    let dtype: DType = dtype_of(dt)?;
    let params: BTreeMap<String, Tensor> = init_params(&fx, dtype, device)?;
    let ddp = DistributedDataParallel::new(
        pg,
        params.iter().map(|(n, t)| (n.clone(), t.clone())).collect(),
        DdpOptions {
            bucket_cap_bytes: 16 << 10,
        },
    )
    .map_err(e)?;
    for (step, want) in expected.iter().enumerate() {
        let loss = forward_loss(&fx, &params, step, dtype, device)?;
        ddp.backward(&loss).map_err(e)?;
        let l = loss.to_device_dtype(Device::cpu(), DType::F64).map_err(e)?;
        pg.all_reduce(&l, ReduceOp::Avg).map_err(e)?;
        let got = f64s(&l)?[0];
        if (got - want).abs() > rtol * want.abs() {
            return Err(format!(
                "step {step}: loss {got} != PyTorch {want} (rtol {rtol})"
            ));
        }
        let _ng = NoGradGuard::new();
        for (name, p) in &params {
            let g = p
                .grad()
                .ok_or_else(|| format!("step {step}: `{name}` has no gradient"))?;
            ops::sub_tensor_::with(
                p,
                &g,
                ops::sub_tensor_::Options::default().alpha(Scalar::Float(lr)),
            )
            .map_err(e)?;
            p.set_grad(None);
        }
    }
    for (name, want) in want_final {
        let got = f64s(
            params
                .get(&name)
                .ok_or_else(|| format!("no parameter {name}"))?,
        )?;
        let w = f64s(&want)?;
        if let Some(i) = (0..w.len()).find(|&i| (got[i] - w[i]).abs() > pat + prt * w[i].abs()) {
            return Err(format!(
                "final {name}[{i}] = {} != PyTorch {}",
                got[i], w[i]
            ));
        }
    }
    Ok(())
}

fn main() {
    opal_cpu::init().unwrap();
    opal_emu::init().unwrap();
    opal_distributed::emu_comm::register().unwrap();
    let pg = init_process_group().expect("init_process_group");
    pg.set_timeout(std::time::Duration::from_secs(120));
    let mut c = Cases::new(pg.rank());
    for dir in models() {
        let model = dir.file_name().unwrap().to_string_lossy().into_owned();
        for device in [Device::cpu(), Device::parse("emu:0").unwrap()] {
            for dt in ["float64", "float32"] {
                let start = std::time::Instant::now();
                c.run(&format!("{model} {dt} on {device}, 2 ranks"), || {
                    train(&pg, &dir, dt, device)
                });
                if pg.rank() == 0 {
                    println!(
                        "  {model} {dt} on {device}: {:.1} s",
                        start.elapsed().as_secs_f64()
                    );
                }
            }
        }
    }
    std::process::exit(c.finish("mpi_training"));
}
