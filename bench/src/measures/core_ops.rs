//! `core_<op>_<size>_us`: operators of the core ATen opset at two sizes, `1k` (1,024
//! input elements) and `1m` (1,048,576), f32 (bool for `any`), through the generated
//! ops. The shapes and arguments are those of `bench/anchors/core_ops.cpp`, which
//! prints libtorch's figures for the same keys; keep the two in step.
//!
//! A 2-D input is `side x side` with `side` 32 or 1024; the pooling and resampling
//! inputs are `1 x 4 x side/2 x side/2`; batch norm's is `4 x 16 x side/8 x side/8`.

use super::data::randn;
use crate::harness::{median_ns, Config, Results, Unit};
use opal::{ops, DType, Generator, Result, Scalar, Tensor};
use std::hint::black_box;

/// Records every key at both sizes.
pub fn run(cfg: &Config, out: &mut Results) -> Result<()> {
    measure_size(cfg, out, "1k", 32, 20_000)?;
    measure_size(cfg, out, "1m", 1024, 40)
}

/// Uniform integers in `0..high` (the anchor's `at::randint`).
fn randint(n: i64, high: i64, seed: u64) -> Result<Tensor> {
    let g = Generator::new(opal::Device::cpu());
    g.manual_seed(seed);
    let v: Vec<i64> = g.with_state(|s| {
        (0..n)
            .map(|_| ((s.next_normal().abs() * 1e6) as i64).rem_euclid(high))
            .collect()
    });
    Tensor::from_vec(v, &[n])
}

/// Times `f` after one untimed call (so an error is returned rather than timed).
fn time<R>(
    cfg: &Config,
    out: &mut Results,
    key: &str,
    iters: usize,
    mut f: impl FnMut() -> Result<R>,
) -> Result<()> {
    f()?;
    let ns = median_ns(cfg, iters, f);
    out.put(key, ns / 1e3, Unit::Us);
    Ok(())
}

fn measure_size(cfg: &Config, out: &mut Results, tag: &str, side: i64, iters: usize) -> Result<()> {
    let n = side * side;
    let key = |op: &str| format!("core_{op}_{tag}_us");
    let x = randn(&[n], DType::F32, 11)?;
    // Positive values keep log2 finite, as the anchor's `rand + 0.5`.
    let pos = ops::add_scalar(&ops::abs(&x)?, &Scalar::from(0.5))?;
    time(cfg, out, &key("log2"), iters, || ops::log2(black_box(&pos)))?;
    time(cfg, out, &key("sin"), iters, || ops::sin(black_box(&x)))?;
    let three = Scalar::from(3.0);
    time(cfg, out, &key("div_scalar"), iters, || {
        ops::div_scalar(black_box(&x), &three)
    })?;
    let quarter = Scalar::from(0.25);
    time(cfg, out, &key("gt_scalar"), iters, || {
        ops::gt_scalar(black_box(&x), &quarter)
    })?;

    let m = randn(&[side, side], DType::F32, 12)?;
    let b = ops::gt_scalar(&m, &Scalar::from(1.5))?;
    time(cfg, out, &key("any_dim"), iters, || {
        ops::any_dim(black_box(&b), 1)
    })?;
    time(cfg, out, &key("var_dim"), iters, || {
        ops::var_dim::call(black_box(&m), Some(&[1]), true, false)
    })?;
    time(cfg, out, &key("mean_dim"), iters, || {
        ops::mean_dim::call(black_box(&m), Some(&[1]), false, None)
    })?;
    let mt = ops::t(&m)?;
    time(cfg, out, &key("clone_strided"), iters, || {
        ops::clone(black_box(&mt))
    })?;
    let dst = ops::zeros(&[side, side])?;
    time(cfg, out, &key("copy_strided"), iters, || {
        ops::copy(black_box(&dst), &mt)
    })?;

    let idx = [Some(randint(n / 4, n, 20)?)];
    let vals = randn(&[n / 4], DType::F32, 21)?;
    time(cfg, out, &key("index_put"), iters, || {
        ops::index_put::call(black_box(&x), &idx, &vals, false)
    })?;

    let sidx = randint(n, n / 4, 13)?;
    let base = ops::zeros(&[n / 4])?;
    time(cfg, out, &key("scatter_reduce_sum"), iters, || {
        ops::scatter_reduce_two::call(black_box(&base), 0, &sidx, &x, "sum", true)
    })?;

    let hw = side / 8;
    let bn_in = randn(&[4, 16, hw, hw], DType::F32, 14)?;
    let (w, bias, mean) = (
        randn(&[16], DType::F32, 15)?,
        randn(&[16], DType::F32, 16)?,
        randn(&[16], DType::F32, 17)?,
    );
    let var = ops::add_scalar(
        &ops::abs(&randn(&[16], DType::F32, 18)?)?,
        &Scalar::from(0.5),
    )?;
    time(cfg, out, &key("batch_norm_infer"), iters, || {
        ops::_native_batch_norm_legit_no_training(
            black_box(&bn_in),
            Some(&w),
            Some(&bias),
            &mean,
            &var,
            0.1,
            1e-5,
        )
    })?;

    let img = randn(&[1, 4, side / 2, side / 2], DType::F32, 19)?;
    time(
        cfg,
        out,
        &key("upsample_bilinear2d"),
        (iters / 4).max(1),
        || ops::upsample_bilinear2d(black_box(&img), &[side, side], false),
    )?;
    time(cfg, out, &key("avg_pool2d"), iters, || {
        ops::avg_pool2d::call(
            black_box(&img),
            &[3, 3],
            &[2, 2],
            &[1, 1],
            false,
            true,
            None,
        )
    })
}
