//! Trains a small MLP (2 -> 16 -> 1, ReLU) by full-batch gradient descent to fit
//! `y = sin(2 x0) + x1^2`, with the backward pass written by hand in Opal ops.
//! Asserts that the loss falls to under a fifth of its starting value.
//!
//! Run: `cargo run --release -p opal-runtime --example train_mlp`

use opal::ops;
use opal::{Device, Generator, Result, Scalar, Tensor};

/// Uniform numbers in `[-scale, scale)` from a seeded generator, as a tensor.
fn uniform(g: &Generator, shape: &[i64], scale: f64) -> Result<Tensor> {
    let n: i64 = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|_| ((g.next_f64() * 2.0 - 1.0) * scale) as f32)
        .collect();
    Tensor::from_vec(v, shape)
}

/// The training data: a 16 x 16 grid over `[-1, 1]^2`.
fn data() -> Result<(Tensor, Tensor)> {
    let side = 16;
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for i in 0..side {
        for j in 0..side {
            let x0 = -1.0 + 2.0 * i as f32 / (side - 1) as f32;
            let x1 = -1.0 + 2.0 * j as f32 / (side - 1) as f32;
            xs.extend([x0, x1]);
            ys.push((2.0 * x0).sin() + x1 * x1);
        }
    }
    let n = ys.len() as i64;
    Ok((
        Tensor::from_vec(xs, &[n, 2])?,
        Tensor::from_vec(ys, &[n, 1])?,
    ))
}

struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

/// The loss and the gradients of `w1, b1, w2, b2`.
fn loss_and_grads(m: &Mlp, x: &Tensor, y: &Tensor) -> Result<(f64, [Tensor; 4])> {
    let n = x.sizes()[0] as f64;
    // Forward.
    let z = (&ops::mm(x, &m.w1)? + &m.b1)?;
    let h = ops::relu(&z)?;
    let pred = (&ops::mm(&h, &m.w2)? + &m.b2)?;
    let err = (&pred - y)?;
    let loss = ops::mean_dim(&(&err * &err)?, None)?;
    // Backward: d loss / d pred = 2 (pred - y) / n.
    let d = (&err * (2.0 / n))?;
    let gw2 = ops::mm(&ops::t(&h)?, &d)?;
    let gb2 = ops::sum_dim_intlist(&d, Some(&[0]))?;
    let dh = ops::mm(&d, &ops::t(&m.w2)?)?;
    let dz = ops::threshold_backward(&dh, &z, &Scalar::Float(0.0))?;
    let gw1 = ops::mm(&ops::t(x)?, &dz)?;
    let gb1 = ops::sum_dim_intlist(&dz, Some(&[0]))?;
    let loss = match loss.item()? {
        Scalar::Float(v) => v,
        other => return Err(opal::OpalError::msg(format!("loss is {other:?}"))),
    };
    Ok((loss, [gw1, gb1, gw2, gb2]))
}

fn train(steps: usize, lr: f64) -> Result<(f64, f64)> {
    opal_cpu::init()?;
    let g = Generator::new(Device::cpu());
    g.manual_seed(42);
    let hidden = 16;
    let mut m = Mlp {
        w1: uniform(&g, &[2, hidden], 1.0)?,
        b1: uniform(&g, &[hidden], 0.5)?,
        w2: uniform(&g, &[hidden, 1], 0.25)?,
        b2: Tensor::from_vec(vec![0.0f32], &[1])?,
    };
    let (x, y) = data()?;
    let (first, _) = loss_and_grads(&m, &x, &y)?;
    let mut last = first;
    for step in 0..steps {
        let (loss, [gw1, gb1, gw2, gb2]) = loss_and_grads(&m, &x, &y)?;
        if step % (steps / 5).max(1) == 0 {
            println!("step {step:4}  loss {loss:.5}");
        }
        m.w1 = (&m.w1 - (&gw1 * lr)?)?;
        m.b1 = (&m.b1 - (&gb1 * lr)?)?;
        m.w2 = (&m.w2 - (&gw2 * lr)?)?;
        m.b2 = (&m.b2 - (&gb2 * lr)?)?;
        last = loss;
    }
    let (end, _) = loss_and_grads(&m, &x, &y)?;
    println!("loss {first:.5} -> {end:.5} after {steps} steps (last step {last:.5})");
    Ok((first, end))
}

fn main() -> Result<()> {
    let (first, end) = train(400, 0.1)?;
    assert!(
        end.is_finite() && end < first / 5.0,
        "loss did not fall enough: {first} -> {end}"
    );
    Ok(())
}

#[cfg(test)]
#[test]
fn example_runs_and_the_loss_falls() -> Result<()> {
    main()
}
