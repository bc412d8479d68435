//! Dropout on the CPU through the generated ops: `native_dropout` (and its out=
//! form), `native_dropout_backward`, and the runtime's `dropout` / `dropout_`
//! composites. Masks come from the default CPU generator, so a seed reproduces them.

use opal::dispatch::Dispatcher;
use opal::{ops, DType, Device, DeviceType, Generator, IValue, Result, Tensor};
use std::sync::{Mutex, MutexGuard};

/// The default CPU generator is process-wide and tests run on several threads:
/// every test that seeds it and draws holds this lock.
static SEEDED: Mutex<()> = Mutex::new(());

fn seeded(seed: u64) -> MutexGuard<'static, ()> {
    opal_cpu::init().expect("CPU backend registers");
    let guard = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
    Generator::default_for(DeviceType::Cpu).manual_seed(seed);
    guard
}

fn ramp(n: usize) -> Result<Tensor> {
    let v: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.25 - 12.0).collect();
    Tensor::from_vec(v, &[n as i64])
}

fn mask_of(t: &Tensor) -> Vec<bool> {
    t.to_vec::<bool>().expect("bool mask")
}

#[test]
fn same_seed_same_mask_and_different_seed_different_mask() -> Result<()> {
    let x = ramp(10_000)?;
    let (y1, m1) = {
        let _g = seeded(7);
        ops::native_dropout(&x, 0.5, Some(true))?
    };
    let (y2, m2) = {
        let _g = seeded(7);
        ops::native_dropout(&x, 0.5, Some(true))?
    };
    let (_, m3) = {
        let _g = seeded(8);
        ops::native_dropout(&x, 0.5, None)?
    };
    assert_eq!(m1.dtype(), DType::Bool);
    assert_eq!(mask_of(&m1), mask_of(&m2));
    assert_eq!(y1.to_vec::<f32>()?, y2.to_vec::<f32>()?);
    assert_ne!(mask_of(&m1), mask_of(&m3));
    // Two draws in a row from one seed differ (the stream advances).
    let _g = seeded(7);
    let (_, a) = ops::native_dropout(&x, 0.5, Some(true))?;
    let (_, b) = ops::native_dropout(&x, 0.5, Some(true))?;
    assert_eq!(mask_of(&a), mask_of(&m1));
    assert_ne!(mask_of(&a), mask_of(&b));
    Ok(())
}

#[test]
fn fraction_dropped_is_p_and_kept_values_are_scaled_exactly() -> Result<()> {
    let n = 100_000;
    let x = ramp(n)?;
    for p in [0.1, 0.3, 0.75] {
        let (y, m) = {
            let _g = seeded(1234);
            ops::native_dropout(&x, p, Some(true))?
        };
        let mask = mask_of(&m);
        let dropped = mask.iter().filter(|&&k| !k).count() as f64 / n as f64;
        // Binomial sd is at most 0.0016 here; 0.01 is more than 6 sd.
        assert!((dropped - p).abs() < 0.01, "p={p}: dropped {dropped}");
        let scale = (1.0 / (1.0 - p)) as f32;
        for ((&v, &o), &k) in x
            .to_vec::<f32>()?
            .iter()
            .zip(&y.to_vec::<f32>()?)
            .zip(&mask)
        {
            assert_eq!(o, if k { v * scale } else { 0.0 });
        }
    }
    Ok(())
}

#[test]
fn p_zero_p_one_and_eval_mode() -> Result<()> {
    let _g = seeded(3);
    let x = Tensor::from_slice(&[1.5f32, -2.0, f32::INFINITY, 0.25], &[2, 2])?;
    let xs = x.to_vec::<f32>()?;
    for (p, train) in [(0.0, Some(true)), (0.6, Some(false))] {
        let (y, m) = ops::native_dropout(&x, p, train)?;
        assert_eq!(y.to_vec::<f32>()?, xs);
        assert!(!y.is_same(&x), "the output is a new tensor");
        assert_eq!(mask_of(&m), [true; 4]);
        assert_eq!(m.sizes(), [2, 2]);
    }
    let (y, m) = ops::native_dropout(&x, 1.0, Some(true))?;
    assert_eq!(y.to_vec::<f32>()?, [0.0; 4]);
    assert_eq!(mask_of(&m), [false; 4]);
    // Evaluation draws nothing: the next training call sees the seeded stream.
    let g = Generator::default_for(DeviceType::Cpu);
    g.manual_seed(3);
    let before = g.get_state();
    ops::native_dropout(&x, 0.5, Some(false))?;
    assert_eq!(g.get_state(), before);
    Ok(())
}

#[test]
fn half_precision_f64_and_strided_inputs() -> Result<()> {
    let src: Vec<f32> = (0..64).map(|i| i as f32 * 0.5).collect();
    for dt in [DType::F16, DType::BF16, DType::F64] {
        let x = ops::_to_copy::call(
            &Tensor::from_vec(src.clone(), &[8, 8])?,
            Some(dt),
            None,
            None,
            None,
            false,
            None,
        )?;
        let (y, m) = {
            let _g = seeded(5);
            ops::native_dropout(&x, 0.5, Some(true))?
        };
        assert_eq!(y.dtype(), dt);
        let as_f64 = |t: &Tensor| -> Result<Vec<f64>> {
            ops::_to_copy::call(t, Some(DType::F64), None, None, None, false, None)?.to_vec()
        };
        for ((&v, &o), &k) in as_f64(&x)?.iter().zip(&as_f64(&y)?).zip(&mask_of(&m)) {
            // 2v is exact in every dtype here (v < 32 with one fractional bit).
            assert_eq!(o, if k { 2.0 * v } else { 0.0 }, "{dt}");
        }
    }
    // A transposed view: the mask follows the logical (row-major) order.
    let x = Tensor::from_vec(src, &[8, 8])?;
    let t = ops::transpose_int(&x, 0, 1)?;
    let (yt, mt) = {
        let _g = seeded(9);
        ops::native_dropout(&t, 0.25, Some(true))?
    };
    let tv = ops::contiguous(&t)?;
    let (yc, mc) = {
        let _g = seeded(9);
        ops::native_dropout(&tv, 0.25, Some(true))?
    };
    assert_eq!(mask_of(&mt), mask_of(&mc));
    assert_eq!(yt.to_vec::<f32>()?, yc.to_vec::<f32>()?);
    Ok(())
}

#[test]
fn bad_arguments_are_errors() -> Result<()> {
    opal_cpu::init()?;
    let x = ramp(4)?;
    for p in [-0.01, 1.01, f64::NAN] {
        let e = ops::native_dropout(&x, p, Some(true))
            .unwrap_err()
            .to_string();
        assert!(e.contains("between 0 and 1"), "{e}");
        assert!(ops::dropout(&x, p, false).is_err());
        assert!(ops::dropout_(&x, p, true).is_err());
    }
    let ints = Tensor::from_slice(&[1i64, 2], &[2])?;
    assert!(ops::native_dropout(&ints, 0.5, Some(true)).is_err());
    Ok(())
}

#[test]
fn out_form_backward_and_boxed_call() -> Result<()> {
    let x = ramp(1000)?;
    let (y, m) = {
        let _g = seeded(11);
        ops::native_dropout(&x, 0.2, Some(true))?
    };
    let (o0, o1) = (
        Tensor::empty(&[0], DType::F32, Device::cpu())?,
        Tensor::empty(&[0], DType::Bool, Device::cpu())?,
    );
    {
        let _g = seeded(11);
        ops::native_dropout_out(&x, 0.2, Some(true), &o0, &o1)?;
    }
    assert_eq!(o0.to_vec::<f32>()?, y.to_vec::<f32>()?);
    assert_eq!(mask_of(&o1), mask_of(&m));

    let grad = ops::ones_like(&x)?;
    let gi = ops::native_dropout_backward(&grad, &m, 1.25)?;
    assert_eq!(gi.dtype(), DType::F32);
    for (&g, &k) in gi.to_vec::<f32>()?.iter().zip(&mask_of(&m)) {
        assert_eq!(g, if k { 1.25 } else { 0.0 });
    }
    let go = Tensor::empty(&[0], DType::F32, Device::cpu())?;
    ops::native_dropout_backward_out(&grad, &m, 1.25, &go)?;
    assert_eq!(go.to_vec::<f32>()?, gi.to_vec::<f32>()?);

    let mut stack = vec![
        IValue::Tensor(x.clone()),
        IValue::Double(0.2),
        IValue::Bool(true),
    ];
    {
        let _g = seeded(11);
        Dispatcher::global().call_boxed("aten::native_dropout", &mut stack)?;
    }
    let [IValue::Tensor(by), IValue::Tensor(bm)] = stack.as_slice() else {
        panic!("two tensors returned, got {stack:?}");
    };
    assert_eq!(by.to_vec::<f32>()?, y.to_vec::<f32>()?);
    assert_eq!(mask_of(bm), mask_of(&m));
    Ok(())
}

#[test]
fn dropout_composites_follow_native_dropout() -> Result<()> {
    let x = ramp(5000)?;
    // Not training, or p = 0: the input itself.
    opal_cpu::init()?;
    assert!(ops::dropout(&x, 0.5, false)?.is_same(&x));
    assert!(ops::dropout(&x, 0.0, true)?.is_same(&x));
    let (want, mask) = {
        let _g = seeded(21);
        ops::native_dropout(&x, 0.4, Some(true))?
    };
    let got = {
        let _g = seeded(21);
        ops::dropout(&x, 0.4, true)?
    };
    assert_eq!(got.to_vec::<f32>()?, want.to_vec::<f32>()?);
    // In place: same mask, same values, and the returned handle is `self`.
    let y = ramp(5000)?;
    let r = {
        let _g = seeded(21);
        ops::dropout_(&y, 0.4, true)?
    };
    assert!(r.is_same(&y));
    assert_eq!(y.to_vec::<f32>()?, want.to_vec::<f32>()?);
    let z = ramp(8)?;
    ops::dropout_(&z, 1.0, true)?;
    assert_eq!(z.to_vec::<f32>()?, [0.0; 8]);
    assert_eq!(mask.numel(), 5000);
    Ok(())
}
