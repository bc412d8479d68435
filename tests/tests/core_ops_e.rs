//! Group e's core ops beyond what the golden fixtures express: `randperm`'s
//! permutation property and seeding, the views and storage ops (`diagonal` shares
//! storage, `resize_` keeps or restrides, `empty_strided` takes its strides),
//! `nonzero` refusing meta tensors, the large inputs that take the threaded paths
//! of `nonzero`, `masked_scatter` and `index_put` (checked against plain loops),
//! and the errors PyTorch raises.
//!
//! Owns: these checks. Must not: restate golden cases (PyTorch's values live there).

use opal::{ops, DType, Device, Generator, MemoryFormat, Scalar, Tensor};

fn init() {
    opal_cpu::init().expect("CPU backend registers");
    opal_meta::init().expect("Meta backend registers");
}

/// A deterministic pseudo-random sequence (no dependency on any generator).
fn lcg(n: usize, seed: u64) -> Vec<u64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s >> 33
        })
        .collect()
}

#[test]
fn randperm_is_a_seeded_permutation() {
    init();
    let p = ops::randperm(1000).unwrap();
    assert_eq!((p.dtype(), p.sizes()), (DType::I64, &[1000][..]));
    let mut v = p.to_vec::<i64>().unwrap();
    assert_ne!(
        v,
        (0..1000).collect::<Vec<_>>(),
        "a shuffle, not the identity"
    );
    v.sort_unstable();
    assert_eq!(v, (0..1000).collect::<Vec<_>>());

    let draw = |seed| {
        let g = Generator::new(Device::cpu());
        g.manual_seed(seed);
        ops::randperm_generator::call(50, Some(&g), Some(DType::F32), None, None, None)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    };
    assert_eq!(draw(7), draw(7));
    assert_ne!(draw(7), draw(8));
    let mut f = draw(3);
    f.sort_by(f32::total_cmp);
    assert_eq!(f, (0..50).map(|x| x as f32).collect::<Vec<_>>());

    let u = ops::randperm::call(256, Some(DType::U8), None, None, None).unwrap();
    let mut u = u.to_vec::<u8>().unwrap();
    u.sort_unstable();
    assert_eq!(u, (0..=255).collect::<Vec<u8>>());
    assert_eq!(ops::randperm(0).unwrap().sizes(), &[0]);

    for (n, dt) in [
        (129, DType::I8),
        (2050, DType::F16),
        (2, DType::Bool),
        (-1, DType::I64),
    ] {
        let e = ops::randperm::call(n, Some(dt), None, None, None).unwrap_err();
        assert!(e.to_string().contains("randperm"), "{n} {dt:?}: {e}");
    }
    let m = ops::randperm::call(6, Some(DType::I32), None, Some(Device::meta()), None).unwrap();
    assert!(m.device().is_meta());
    assert_eq!((m.dtype(), m.sizes()), (DType::I32, &[6][..]));
}

#[test]
fn diagonal_is_a_view_and_resize_keeps_or_restrides() {
    init();
    let x = Tensor::from_vec((0..12).map(|v| v as f32).collect::<Vec<_>>(), &[3, 4]).unwrap();
    let d = ops::diagonal::call(&x, 1, 0, 1).unwrap();
    assert_eq!(
        (d.sizes(), d.strides(), d.storage_offset()),
        (&[3][..], &[5][..], 1)
    );
    assert_eq!(d.to_vec::<f32>().unwrap(), vec![1.0, 6.0, 11.0]);
    // Writing through the view writes `x`.
    ops::add_tensor_::call(
        &d,
        &Tensor::from_slice(&[100f32], &[]).unwrap(),
        &Scalar::Int(1),
    )
    .unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap()[6], 106.0);
    assert!(ops::diagonal::call(&x, 0, 1, -1).is_err());
    let m = Tensor::empty(&[2, 3, 4], DType::F32, Device::meta()).unwrap();
    assert_eq!(ops::diagonal::call(&m, -1, 2, 1).unwrap().sizes(), &[2, 3]);

    // Same sizes and no format: untouched (strides too), as in PyTorch.
    let t = ops::transpose_int(&Tensor::from_vec(vec![0f32; 6], &[3, 2]).unwrap(), 0, 1).unwrap();
    let r = ops::resize_::call(&t, &[2, 3], None).unwrap();
    assert_eq!(r.strides(), &[1, 2]);
    let g = Tensor::from_vec((0..4).map(|v| v as i64).collect::<Vec<_>>(), &[4]).unwrap();
    ops::resize_::call(&g, &[2, 5], None).unwrap();
    assert_eq!((g.sizes(), g.strides()), (&[2, 5][..], &[5, 1][..]));
    assert_eq!(&g.to_vec::<i64>().unwrap()[..4], &[0, 1, 2, 3]);
    ops::resize_::call(&g, &[1, 2, 3, 4], Some(MemoryFormat::ChannelsLast)).unwrap();
    assert_eq!(g.strides(), &[24, 1, 8, 2]);
    assert!(ops::resize_::call(&g, &[2, 3], Some(MemoryFormat::ChannelsLast)).is_err());
    assert!(ops::resize_::call(&g, &[-1], None).is_err());
    let mm = Tensor::empty(&[3], DType::F32, Device::meta()).unwrap();
    ops::resize_::call(&mm, &[4, 4], None).unwrap();
    assert_eq!(mm.sizes(), &[4, 4]);

    let e = ops::empty_strided::call(&[2, 3], &[1, 2], Some(DType::I32), None, None, None).unwrap();
    assert_eq!((e.strides(), e.dtype()), (&[1, 2][..], DType::I32));
    assert!(ops::empty_strided::call(&[2, 3], &[1], None, None, None, None).is_err());
    let em =
        ops::empty_strided::call(&[2, 3], &[3, 1], None, None, Some(Device::meta()), None).unwrap();
    assert!(em.device().is_meta());
}

#[test]
fn nonzero_and_masked_scatter_match_plain_loops_on_large_inputs() {
    init();
    let (rows, cols) = (300usize, 257usize);
    let bits: Vec<bool> = lcg(rows * cols, 1).iter().map(|r| r % 3 == 0).collect();
    let x = Tensor::from_vec(
        bits.iter().map(|&b| b as i32).collect::<Vec<_>>(),
        &[rows as i64, cols as i64],
    )
    .unwrap();
    let nz = ops::nonzero(&x).unwrap();
    let want: Vec<i64> = (0..rows * cols)
        .filter(|&i| bits[i])
        .flat_map(|i| [(i / cols) as i64, (i % cols) as i64])
        .collect();
    assert_eq!(nz.sizes(), &[want.len() as i64 / 2, 2]);
    assert_eq!(nz.to_vec::<i64>().unwrap(), want);
    let meta = Tensor::empty(&[3], DType::F32, Device::meta()).unwrap();
    let e = ops::nonzero(&meta).unwrap_err().to_string();
    assert!(e.contains("nonzero") && e.contains("meta"), "{e}");

    let mask = Tensor::from_vec(bits.clone(), &[rows as i64, cols as i64]).unwrap();
    let base: Vec<f32> = (0..rows * cols).map(|i| -(i as f32)).collect();
    let src: Vec<f32> = (0..rows * cols).map(|i| i as f32 * 0.5).collect();
    let s = Tensor::from_vec(base.clone(), &[rows as i64, cols as i64]).unwrap();
    let out = ops::masked_scatter(
        &s,
        &mask,
        &Tensor::from_vec(src.clone(), &[src.len() as i64]).unwrap(),
    )
    .unwrap();
    let mut k = 0;
    let want: Vec<f32> = (0..rows * cols)
        .map(|i| {
            if bits[i] {
                k += 1;
                src[k - 1]
            } else {
                base[i]
            }
        })
        .collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), want);

    let small = Tensor::from_vec(vec![0f32; 3], &[3]).unwrap();
    let m3 = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
    let short = Tensor::from_vec(vec![1f32], &[1]).unwrap();
    assert!(ops::masked_scatter(&small, &m3, &short).is_err());
    let ints = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    assert!(ops::masked_scatter(&small, &m3, &ints).is_err());
    let m8 = Tensor::from_vec(vec![1u8, 0, 1], &[3]).unwrap();
    assert!(ops::masked_scatter(&small, &m8, &small).is_err());
}

#[test]
fn index_put_matches_plain_loops_on_large_inputs() {
    init();
    // Rows named repeatedly, accumulated: the column-parallel path.
    let (n, c) = (400usize, 200usize);
    let rows: Vec<i64> = lcg(250, 2)
        .iter()
        .map(|r| (r % n as u64) as i64 - 100)
        .collect();
    let vals: Vec<f64> = (0..250 * c).map(|i| (i % 97) as f64 - 40.0).collect();
    let base: Vec<f64> = (0..n * c).map(|i| i as f64 * 0.25).collect();
    let idx = Tensor::from_vec(rows.clone(), &[250]).unwrap();
    let x = Tensor::from_vec(base.clone(), &[n as i64, c as i64]).unwrap();
    let v = Tensor::from_vec(vals.clone(), &[250, c as i64]).unwrap();
    let mut want_acc = base.clone();
    let mut want_set = base.clone();
    for (j, &r) in rows.iter().enumerate() {
        let r = if r < 0 { r + n as i64 } else { r } as usize;
        for q in 0..c {
            want_acc[r * c + q] += vals[j * c + q];
            want_set[r * c + q] = vals[j * c + q];
        }
    }
    let acc = ops::index_put::call(&x, &[Some(idx.clone())], &v, true).unwrap();
    assert_eq!(acc.to_vec::<f64>().unwrap(), want_acc);
    let set = ops::index_put::call(&x, &[Some(idx.clone())], &v, false).unwrap();
    assert_eq!(set.to_vec::<f64>().unwrap(), want_set);
    // In place, into `self` itself.
    ops::index_put_::call(&x, &[Some(idx)], &v, true).unwrap();
    assert_eq!(x.to_vec::<f64>().unwrap(), want_acc);

    // An indexed middle dim under a leading one: the block-parallel path.
    let (a, b, d) = (200usize, 8usize, 30usize);
    let mid: Vec<i64> = vec![7, 0, 3, 3, -1];
    let y = Tensor::from_vec(vec![1i32; a * b * d], &[a as i64, b as i64, d as i64]).unwrap();
    let add = Tensor::from_vec(vec![2i32; 5 * d], &[5, d as i64]).unwrap();
    let r = ops::index_put::call(
        &y,
        &[None, Some(Tensor::from_vec(mid, &[5]).unwrap())],
        &add,
        true,
    )
    .unwrap();
    let got = r.to_vec::<i32>().unwrap();
    for i in 0..a {
        for j in 0..b {
            let hits = match j {
                7 => 2, // 7 and -1
                3 => 2,
                0 => 1,
                _ => 0,
            };
            for k in 0..d {
                assert_eq!(got[(i * b + j) * d + k], 1 + 2 * hits, "({i}, {j}, {k})");
            }
        }
    }

    let f = Tensor::from_vec(vec![0f32; 5], &[5]).unwrap();
    let i = Tensor::from_vec(vec![7i64], &[1]).unwrap();
    let one = Tensor::from_vec(vec![1f32], &[1]).unwrap();
    assert!(ops::index_put::call(&f, &[Some(i.clone())], &one, false).is_err());
    let wide = Tensor::from_vec(vec![1f64], &[1]).unwrap();
    let i0 = Tensor::from_vec(vec![0i64], &[1]).unwrap();
    assert!(ops::index_put::call(&f, &[Some(i0.clone())], &wide, false).is_err());
    assert!(ops::index_put::call(&f, &[None], &one, false).is_err());
    let three = Tensor::from_vec(vec![1f32; 3], &[3]).unwrap();
    let two = Tensor::from_vec(vec![0i64, 1], &[2]).unwrap();
    assert!(ops::index_put::call(&f, &[Some(two)], &three, false).is_err());
}

#[test]
fn overload_errors_name_the_op() {
    init();
    let x = Tensor::from_vec(vec![1.0f32, -2.0], &[2]).unwrap();
    let e = ops::clamp_tensor::call(&x, None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("clamp") && e.contains("min"), "{e}");
    let i = Tensor::from_vec(vec![5i32, 7], &[2]).unwrap();
    let z = Tensor::from_vec(vec![0i32, 1], &[2]).unwrap();
    assert!(ops::fmod_tensor(&i, &z)
        .unwrap_err()
        .to_string()
        .contains("fmod"));
    assert!(ops::fmod_scalar(&i, &Scalar::Int(0)).is_err());
    let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
    assert!(ops::pow_scalar(&Scalar::Bool(true), &b).is_err());
    assert!(ops::fmod_tensor(&b, &b).is_err());
    assert!(ops::mean(&i).unwrap_err().to_string().contains("mean"));
    assert!(ops::var_dim::call(&i, Some(&[0]), true, false).is_err());
    // The in-place forms cannot change self's dtype or shape.
    let f = Tensor::from_vec(vec![1.5f32], &[]).unwrap();
    assert!(ops::clamp_tensor_::call(&i, Some(&f), None).is_err());
    assert!(ops::fmod_scalar_(&i, &Scalar::Float(2.5)).is_err());
}
