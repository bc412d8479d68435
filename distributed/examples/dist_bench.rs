//! Timings of opal-distributed on the ranks of `mpirun -n 2` (the keys of
//! `bench/anchors/dist_gloo.py`, PyTorch's Gloo backend): all_reduce (sum) of
//! 1 KB, 1 MB and 64 MB of f32, and a data-parallel training step (forward,
//! backward with bucketed gradient averaging, SGD) of the MLP and GPT training
//! fixtures, each rank on half of the batch. Rank 0 prints one JSON line
//! (medians, microseconds).
//!
//! ```sh
//! cargo build --release -p opal-distributed --features mpi --example dist_bench
//! RAYON_NUM_THREADS=1 mpirun -n 2 target/release/examples/dist_bench
//! ```

use opal::autograd::NoGradGuard;
use opal::{ops, DType, Device, Scalar, Tensor};
use opal_demo::training::{forward_loss, init_params, Fixture};
use opal_distributed::{
    init_process_group, DdpOptions, DistributedDataParallel, ProcessGroup, ReduceOp,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn all_reduce_us(pg: &ProcessGroup, bytes: usize, iters: usize) -> f64 {
    let n = bytes / 4;
    let x = Tensor::from_vec(vec![1.0f32; n], &[n as i64]).unwrap();
    for _ in 0..3 {
        pg.all_reduce(&x, ReduceOp::Sum).unwrap();
    }
    let mut ts = Vec::with_capacity(iters);
    for _ in 0..iters {
        pg.barrier().unwrap();
        let t = Instant::now();
        pg.all_reduce(&x, ReduceOp::Sum).unwrap();
        ts.push(t.elapsed().as_secs_f64() * 1e6);
    }
    median(ts)
}

fn ddp_step_us(pg: &ProcessGroup, model: &str, steps: usize) -> f64 {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/training")
        .join(model);
    let mut fx = Fixture::load(&dir).unwrap();
    for t in fx.data.values_mut() {
        let half = t.sizes()[1] / pg.size() as i64;
        *t = ops::contiguous(&ops::narrow(t, 1, pg.rank() as i64 * half, half).unwrap()).unwrap();
    }
    let fx = fx.with_data_as(DType::F32, Device::cpu()).unwrap();
    let lr = fx.spec["sizes"]["lr"].as_f64().unwrap();
    let params: BTreeMap<String, Tensor> = init_params(&fx, DType::F32, Device::cpu()).unwrap();
    let ddp = DistributedDataParallel::new(
        pg,
        params.iter().map(|(n, t)| (n.clone(), t.clone())).collect(),
        DdpOptions::default(),
    )
    .unwrap();
    let mut ts = Vec::with_capacity(steps);
    for i in 0..steps + 5 {
        pg.barrier().unwrap();
        let t = Instant::now();
        let loss = forward_loss(&fx, &params, 0, DType::F32, Device::cpu()).unwrap();
        ddp.backward(&loss).unwrap();
        let _ng = NoGradGuard::new();
        for p in params.values() {
            let g = p.grad().unwrap();
            ops::sub_tensor_::with(
                p,
                &g,
                ops::sub_tensor_::Options::default().alpha(Scalar::Float(lr)),
            )
            .unwrap();
            p.set_grad(None);
        }
        if i >= 5 {
            ts.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    median(ts)
}

fn main() {
    opal_cpu::init().unwrap();
    let pg = init_process_group().unwrap();
    let keys = [
        ("allreduce_1kb_f32_us", all_reduce_us(&pg, 1 << 10, 500)),
        ("allreduce_1mb_f32_us", all_reduce_us(&pg, 1 << 20, 100)),
        ("allreduce_64mb_f32_us", all_reduce_us(&pg, 64 << 20, 10)),
        ("ddp_mlp_step_us", ddp_step_us(&pg, "mlp", 30)),
        ("ddp_gpt_step_us", ddp_step_us(&pg, "gpt", 30)),
    ];
    if pg.rank() == 0 {
        let mut out = serde_json::Map::new();
        out.insert(
            "engine".into(),
            format!(
                "opal-distributed, {}",
                opal_distributed::mpi_library_version()
                    .lines()
                    .next()
                    .unwrap_or("")
            )
            .into(),
        );
        out.insert("ranks".into(), pg.size().into());
        for (k, v) in keys {
            out.insert(k.into(), ((v * 10.0).round() / 10.0).into());
        }
        println!("{}", serde_json::Value::Object(out));
    }
}
