//! The in-place view ops on the example `emu` device (PrivateUse1), which registers
//! none of them: the runtime's CompositeExplicitAutograd kernels restride the emu
//! tensor itself, without a round trip through the CPU fallback (which would restride
//! a host copy and lose the change).

use opal::{ops, Device, Result, Tensor};

fn to_cpu(t: &Tensor) -> Tensor {
    ops::_to_copy::call(t, None, None, Some(Device::cpu()), None, false, None).expect("to cpu")
}

fn iota(shape: &[i64]) -> Tensor {
    let n: i64 = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|v| v as f32).collect();
    Tensor::from_slice(&data, shape).expect("tensor")
}

#[test]
fn in_place_view_ops_restride_emu_tensors_on_the_device() -> Result<()> {
    opal_cpu::init()?;
    opal_emu::init()?;
    let emu = Device::parse("emu:0")?;
    let host = iota(&[2, 3, 4]);
    let x = ops::_to_copy::call(&host, None, None, Some(emu), None, false, None)?;
    let alias = x.clone();

    // The only test of this binary: nothing else moves the process-wide counter.
    let before = opal::fallback::calls();
    assert!(ops::transpose_(&x, 0, 2)?.is_same(&x));
    ops::unsqueeze_(&x, 1)?;
    assert_eq!(opal::fallback::calls(), before, "no CPU fallback call");

    assert_eq!(x.device(), emu);
    assert_eq!(
        (x.sizes(), x.strides()),
        (&[4, 1, 3, 2][..], &[1, 12, 4, 12][..])
    );
    assert_eq!(alias.sizes(), [4, 1, 3, 2]);
    let want = ops::unsqueeze(&ops::transpose_int(&host, 0, 2)?, 1)?;
    assert_eq!(want.strides(), x.strides());
    assert_eq!(to_cpu(&x).to_vec::<f32>()?, want.to_vec::<f32>()?);

    ops::squeeze_dim_(&x, 1)?;
    assert_eq!((x.sizes(), x.strides()), (&[4, 3, 2][..], &[1, 4, 12][..]));
    let e = ops::t_(&x).expect_err("t_ on a 3-d tensor");
    assert!(
        e.to_string()
            .contains("t_() expects a tensor with <= 2 dimensions"),
        "{e}"
    );
    assert!(ops::squeeze_dim_(&x, 3).is_err());
    assert_eq!(x.sizes(), [4, 3, 2]);

    let m = ops::_to_copy::call(&iota(&[2, 3]), None, None, Some(emu), None, false, None)?;
    ops::t_(&m)?;
    assert_eq!((m.sizes(), m.strides()), (&[3, 2][..], &[1, 3][..]));
    assert_eq!(to_cpu(&m).to_vec::<f32>()?, [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    Ok(())
}
