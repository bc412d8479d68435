//! Every collective on 2 ranks (`mpirun -n 2`, see `run-mpi-tests.sh`): values,
//! every dtype, non-contiguous tensors, async handles, sub-groups, disagreeing
//! ranks, and the same collectives on `emu` (its own all_reduce, staging for the
//! rest).

mod common;

use common::{e, expect_eq, Cases};
use opal::{ops, Complex, DType, Device, Tensor};
use opal_distributed::{init_process_group, ProcessGroup, ReduceOp};

fn t(v: &[f64], shape: &[i64], dtype: DType, device: Device) -> Result<Tensor, String> {
    Tensor::from_slice(v, shape)
        .and_then(|x| x.to_device_dtype(device, dtype))
        .map_err(e)
}

fn all_reduce_cases(c: &mut Cases, pg: &ProcessGroup, device: Device) {
    let r = pg.rank() as f64;
    // Rank 0 holds [1, 2, -3, 4], rank 1 [3, 0.5, 2, 4] (exact in every float dtype).
    let mine = |r: f64| {
        if r == 0.0 {
            vec![1.0, 2.0, -3.0, 4.0]
        } else {
            vec![3.0, 0.5, 2.0, 4.0]
        }
    };
    let cases: [(ReduceOp, [f64; 4]); 5] = [
        (ReduceOp::Sum, [4.0, 2.5, -1.0, 8.0]),
        (ReduceOp::Avg, [2.0, 1.25, -0.5, 4.0]),
        (ReduceOp::Product, [3.0, 1.0, -6.0, 16.0]),
        (ReduceOp::Min, [1.0, 0.5, -3.0, 4.0]),
        (ReduceOp::Max, [3.0, 2.0, 2.0, 4.0]),
    ];
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for (op, want) in &cases {
            c.run(&format!("all_reduce {op:?} {dtype:?} on {device}"), || {
                let x = t(&mine(r), &[2, 2], dtype, device)?;
                pg.all_reduce(&x, *op).map_err(e)?;
                expect_eq(&x, want, "result")
            });
        }
    }
    for dtype in [DType::I64, DType::I32, DType::I16, DType::I8] {
        c.run(&format!("all_reduce integer {dtype:?} on {device}"), || {
            let x = t(&[r + 1.0, -2.0 * r, 5.0], &[3], dtype, device)?;
            pg.all_reduce(&x, ReduceOp::Sum).map_err(e)?;
            expect_eq(&x, &[3.0, -2.0, 10.0], "sum")?;
            let y = t(&[r + 1.0, -2.0 * r, 5.0], &[3], dtype, device)?;
            pg.all_reduce(&y, ReduceOp::Max).map_err(e)?;
            expect_eq(&y, &[2.0, 0.0, 5.0], "max")
        });
    }
    c.run(&format!("all_reduce u8 and bool on {device}"), || {
        let x = t(&[r, 200.0 * (1.0 - r)], &[2], DType::U8, device)?;
        pg.all_reduce(&x, ReduceOp::Max).map_err(e)?;
        expect_eq(&x, &[1.0, 200.0], "u8 max")?;
        // Rank 0 [1, 0, 1, 0], rank 1 [1, 1, 0, 0]: or = sum/max, and = product/min.
        let b = |r: f64| {
            if r == 0.0 {
                [1.0, 0.0, 1.0, 0.0]
            } else {
                [1.0, 1.0, 0.0, 0.0]
            }
        };
        let or = t(&b(r), &[4], DType::Bool, device)?;
        pg.all_reduce(&or, ReduceOp::Sum).map_err(e)?;
        expect_eq(&or, &[1.0, 1.0, 1.0, 0.0], "bool sum")?;
        let and = t(&b(r), &[4], DType::Bool, device)?;
        pg.all_reduce(&and, ReduceOp::Product).map_err(e)?;
        expect_eq(&and, &[1.0, 0.0, 0.0, 0.0], "bool product")?;
        let avg = t(&b(r), &[4], DType::Bool, device)?;
        let err = pg.all_reduce(&avg, ReduceOp::Avg).unwrap_err().to_string();
        if !err.contains("op=avg") || !err.contains("Bool") {
            return Err(format!("bool avg: {err}"));
        }
        Ok(())
    });
    // (emu holds no complex tensors: the CPU backend's copies refuse them.)
    c.run(&format!("all_reduce complex on {device}"), || {
        if !device.is_cpu() {
            return Ok(());
        }
        let v = [Complex::new(1.0 + r, -r), Complex::new(2.0, 1.0)];
        let z = Tensor::from_slice(&v, &[2])
            .and_then(|z| z.to(device))
            .map_err(e)?;
        pg.all_reduce(&z, ReduceOp::Sum).map_err(e)?;
        let got = z
            .to(Device::cpu())
            .and_then(|z| z.to_vec::<Complex<f64>>())
            .map_err(e)?;
        if got != [Complex::new(3.0, -1.0), Complex::new(4.0, 2.0)] {
            return Err(format!("complex sum: {got:?}"));
        }
        match pg.all_reduce(&z, ReduceOp::Max) {
            Err(err) if err.to_string().contains("op=max") => Ok(()),
            other => Err(format!("complex max: {:?}", other.map_err(e))),
        }
    });
    c.run(&format!("collectives of empty tensors on {device}"), || {
        let x = Tensor::empty(&[0, 3], DType::F32, device).map_err(e)?;
        pg.all_reduce(&x, ReduceOp::Sum).map_err(e)?;
        pg.broadcast(&x, 1).map_err(e)?;
        let outs = [x.clone(), x.clone()];
        pg.all_gather(&outs, &x).map_err(e)?;
        if x.numel() != 0 {
            return Err(format!("the empty tensor became {:?}", x.sizes()));
        }
        Ok(())
    });
    c.run(&format!("all_reduce non-contiguous on {device}"), || {
        let base = t(
            &[1.0 + r, 2.0, 3.0, 4.0, 5.0, 6.0],
            &[2, 3],
            DType::F32,
            device,
        )?;
        let x = ops::transpose_int(&base, 0, 1).map_err(e)?;
        pg.all_reduce(&x, ReduceOp::Sum).map_err(e)?;
        expect_eq(&x, &[3.0, 8.0, 4.0, 10.0, 6.0, 12.0], "the view")?;
        if device.is_cpu() {
            // (emu's transpose runs through the CPU fallback: a copy, not a view.)
            expect_eq(&base, &[3.0, 4.0, 6.0, 8.0, 10.0, 12.0], "through the view")?;
        }
        Ok(())
    });
}

fn movement_cases(c: &mut Cases, pg: &ProcessGroup, device: Device) {
    let (rank, r) = (pg.rank(), pg.rank() as f64);
    for dtype in [DType::F32, DType::F16, DType::Bool, DType::I64] {
        c.run(&format!("broadcast {dtype:?} on {device}"), || {
            let x = t(&[r, 1.0 - r, 1.0], &[3], dtype, device)?;
            pg.broadcast(&x, 1).map_err(e)?;
            expect_eq(&x, &[1.0, 0.0, 1.0], "broadcast")
        });
    }
    c.run(&format!("reduce on {device}"), || {
        let x = t(&[r + 1.0, 10.0], &[2], DType::F64, device)?;
        pg.reduce(&x, 0, ReduceOp::Sum).map_err(e)?;
        let want = if rank == 0 { [3.0, 20.0] } else { [2.0, 10.0] };
        expect_eq(&x, &want, "reduce")
    });
    c.run(
        &format!("all_gather list and into tensor on {device}"),
        || {
            let x = t(&[r, r + 10.0], &[2], DType::BF16, device)?;
            let outs: Vec<Tensor> = (0..2)
                .map(|_| Tensor::empty(&[2], DType::BF16, device))
                .collect::<Result<_, _>>()
                .map_err(e)?;
            pg.all_gather(&outs, &x).map_err(e)?;
            expect_eq(&outs[0], &[0.0, 10.0], "from rank 0")?;
            expect_eq(&outs[1], &[1.0, 11.0], "from rank 1")?;
            let big = Tensor::empty(&[2, 2], DType::BF16, device).map_err(e)?;
            pg.all_gather_into_tensor(&big, &x).map_err(e)?;
            expect_eq(&big, &[0.0, 10.0, 1.0, 11.0], "into tensor")?;
            // Into a transposed (non-contiguous) output: logical order still wins.
            let base = Tensor::empty(&[2, 2], DType::BF16, device).map_err(e)?;
            let view = ops::transpose_int(&base, 0, 1).map_err(e)?;
            pg.all_gather_into_tensor(&view, &x).map_err(e)?;
            expect_eq(&view, &[0.0, 10.0, 1.0, 11.0], "into a view")
        },
    );
    c.run(
        &format!("reduce_scatter list and tensor on {device}"),
        || {
            let ins = [
                t(&[1.0 + r, 2.0], &[2], DType::F32, device)?,
                t(&[3.0, 4.0 * (r + 1.0)], &[2], DType::F32, device)?,
            ];
            let out = Tensor::empty(&[2], DType::F32, device).map_err(e)?;
            pg.reduce_scatter(&out, &ins, ReduceOp::Sum).map_err(e)?;
            let want = if rank == 0 { [3.0, 4.0] } else { [6.0, 12.0] };
            expect_eq(&out, &want, "list")?;
            let input = t(
                &[1.0 + r, 2.0, 3.0, 4.0 * (r + 1.0)],
                &[4],
                DType::F32,
                device,
            )?;
            pg.reduce_scatter_tensor(&out, &input, ReduceOp::Avg)
                .map_err(e)?;
            let want = if rank == 0 { [1.5, 2.0] } else { [3.0, 6.0] };
            expect_eq(&out, &want, "tensor, avg")
        },
    );
    c.run(&format!("all_to_all on {device}"), || {
        let ins = [
            t(&[10.0 * r, 1.0], &[2], DType::I32, device)?,
            t(&[10.0 * r + 1.0, 2.0], &[2], DType::I32, device)?,
        ];
        let outs: Vec<Tensor> = (0..2)
            .map(|_| Tensor::empty(&[2], DType::I32, device))
            .collect::<Result<_, _>>()
            .map_err(e)?;
        pg.all_to_all(&outs, &ins).map_err(e)?;
        // outs[i] = rank i's ins[rank].
        expect_eq(&outs[0], &[r, 1.0 + r], "from rank 0")?;
        expect_eq(&outs[1], &[10.0 + r, 1.0 + r], "from rank 1")
    });
    c.run(&format!("uneven all_to_all on {device}"), || {
        // Rank r sends r + j + 1 values to rank j: rank 0 sends 1 to itself and 2
        // to rank 1; rank 1 sends 2 to rank 0 and 3 to itself.
        let ins: Vec<Tensor> = (0..2)
            .map(|j| {
                let n = rank + j + 1;
                let v: Vec<f64> = (0..n).map(|k| (100 * rank + 10 * j + k) as f64).collect();
                t(&v, &[n as i64], DType::F32, device)
            })
            .collect::<Result<_, _>>()?;
        // outs[i] holds i + rank + 1 values, shaped as this rank likes ([n, 1]).
        let outs: Vec<Tensor> = (0..2)
            .map(|i| Tensor::empty(&[(i + rank + 1) as i64, 1], DType::F32, device))
            .collect::<Result<_, _>>()
            .map_err(e)?;
        pg.all_to_all(&outs, &ins).map_err(e)?;
        for (i, o) in outs.iter().enumerate() {
            let want: Vec<f64> = (0..i + rank + 1)
                .map(|k| (100 * i + 10 * rank + k) as f64)
                .collect();
            expect_eq(o, &want, &format!("from rank {i}"))?;
        }
        Ok(())
    });
    c.run(
        &format!("all_to_all_single with split sizes on {device}"),
        || {
            // Rows of 2: rank 0 sends 1 row to itself and 2 to rank 1; rank 1 sends 0
            // rows to rank 0 and 1 to itself.
            let rows: i64 = if rank == 0 { 3 } else { 1 };
            let v: Vec<f64> = (0..2 * rows)
                .map(|k| (10 * rank as i64 + k) as f64)
                .collect();
            let input = t(&v, &[rows, 2], DType::I64, device)?;
            let (ins, outs_split): (&[i64], &[i64]) = if rank == 0 {
                (&[1, 2], &[1, 0])
            } else {
                (&[0, 1], &[2, 1])
            };
            let out_rows: i64 = outs_split.iter().sum();
            let output = Tensor::empty(&[out_rows, 2], DType::I64, device).map_err(e)?;
            pg.all_to_all_single(&output, &input, Some(outs_split), Some(ins))
                .map_err(e)?;
            let want: &[f64] = if rank == 0 {
                &[0.0, 1.0]
            } else {
                &[2.0, 3.0, 4.0, 5.0, 10.0, 11.0]
            };
            expect_eq(&output, want, "rows")?;
            // Equal splits when none are given.
            let x = t(&[rank as f64, 1.0, 2.0, 3.0], &[4], DType::F32, device)?;
            let y = Tensor::empty(&[4], DType::F32, device).map_err(e)?;
            pg.all_to_all_single(&y, &x, None, None).map_err(e)?;
            let want = if rank == 0 {
                [0.0, 1.0, 1.0, 1.0]
            } else {
                [2.0, 3.0, 2.0, 3.0]
            };
            expect_eq(&y, &want, "equal splits")
        },
    );
    c.run(
        &format!("all_to_all with a block its receiver does not expect on {device}"),
        || {
            // Rank 1 sends 3 values to rank 0, which expects 2: an Err on both ranks.
            let ins: Vec<Tensor> = (0..2)
                .map(|j| {
                    let n = if rank == 1 && j == 0 { 3 } else { 2 };
                    t(&vec![0.0; n], &[n as i64], DType::F32, device)
                })
                .collect::<Result<_, _>>()?;
            let outs: Vec<Tensor> = (0..2)
                .map(|_| t(&[0.0, 0.0], &[2], DType::F32, device))
                .collect::<Result<_, _>>()?;
            match pg.all_to_all(&outs, &ins) {
                Err(err)
                    if err
                        .to_string()
                        .contains("rank 1 sends 3 elements to rank 0") =>
                {
                    Ok(())
                }
                other => Err(format!(
                    "expected the count error, got {:?}",
                    other.map_err(e)
                )),
            }
        },
    );
    c.run(&format!("send/recv with tags on {device}"), || {
        let x = t(&[1.0, 2.0, 3.0], &[3], DType::F16, device)?;
        let y = t(&[7.0, 8.0, 9.0], &[3], DType::F16, device)?;
        if rank == 0 {
            pg.send(&x, 1, 5).map_err(e)?;
            pg.send(&y, 1, 6).map_err(e)?;
        } else {
            let a = Tensor::empty(&[3], DType::F16, device).map_err(e)?;
            let b = Tensor::empty(&[3], DType::F16, device).map_err(e)?;
            pg.recv(&a, 0, 5).map_err(e)?;
            pg.recv(&b, 0, 6).map_err(e)?;
            expect_eq(&a, &[1.0, 2.0, 3.0], "tag 5")?;
            expect_eq(&b, &[7.0, 8.0, 9.0], "tag 6")?;
        }
        Ok(())
    });
}

fn group_cases(c: &mut Cases, pg: &ProcessGroup) {
    let rank = pg.rank();
    c.run("rank and size", || {
        if pg.size() != 2 || rank > 1 || pg.backend() != "mpi" {
            return Err(format!(
                "rank {rank} size {} backend {}",
                pg.size(),
                pg.backend()
            ));
        }
        Ok(())
    });
    c.run("async work handles", || {
        let xs: Vec<Tensor> = (0..4)
            .map(|i| Tensor::from_slice(&[i as f32 + rank as f32; 1000], &[1000]))
            .collect::<Result<_, _>>()
            .map_err(e)?;
        let works: Vec<_> = xs
            .iter()
            .map(|x| pg.all_reduce_async(x, ReduceOp::Sum))
            .collect::<Result<_, _>>()
            .map_err(e)?;
        for w in works.iter().rev() {
            w.wait().map_err(e)?;
            if !w.is_completed() {
                return Err("completed work says it is not".into());
            }
        }
        for (i, x) in xs.iter().enumerate() {
            expect_eq(x, &vec![2.0 * i as f64 + 1.0; 1000], "async sum")?;
        }
        pg.barrier_async().map_err(e)?.wait().map_err(e)
    });
    c.run("disagreeing ranks get the same error", || {
        let n = 2 + rank as i64;
        let x = Tensor::from_vec(vec![0f32; n as usize], &[n]).map_err(e)?;
        let err = pg.all_reduce(&x, ReduceOp::Sum).unwrap_err().to_string();
        if !err.contains("disagree")
            || !err.contains("rank 1 called all_reduce")
            || !err.contains("shape=[3]")
        {
            return Err(format!("shape mismatch: {err}"));
        }
        let dt = if rank == 0 { DType::F32 } else { DType::F64 };
        let y = Tensor::from_slice(&[0f32; 2], &[2])
            .and_then(|y| y.to_dtype(dt))
            .map_err(e)?;
        let err = pg.broadcast(&y, 0).unwrap_err().to_string();
        if !err.contains("dtype=F64") {
            return Err(format!("dtype mismatch: {err}"));
        }
        // Different collectives at the same point.
        let z = Tensor::from_slice(&[0f32; 2], &[2]).map_err(e)?;
        let err = if rank == 0 {
            pg.all_reduce(&z, ReduceOp::Sum)
        } else {
            pg.broadcast(&z, 0)
        };
        let err = err.unwrap_err().to_string();
        if !err.contains("rank 1 called broadcast") {
            return Err(format!("kind mismatch: {err}"));
        }
        // The group still works after a disagreement.
        pg.all_reduce(&z, ReduceOp::Sum).map_err(e)
    });
    c.run("bad arguments are errors, not hangs", || {
        let x = Tensor::from_slice(&[0f32; 2], &[2]).map_err(e)?;
        let err = pg.broadcast(&x, 5).unwrap_err().to_string();
        if !err.contains("src=5") {
            return Err(err);
        }
        let err = pg.send(&x, rank, 0).unwrap_err().to_string();
        if !err.contains("is this rank") {
            return Err(err);
        }
        let outs = vec![x.clone()];
        let err = pg.all_gather(&outs, &x).unwrap_err().to_string();
        if !err.contains("tensor_list has 1 tensors") {
            return Err(err);
        }
        Ok(())
    });
    c.run("sub-groups", || {
        let solo = pg.new_group(&[1]).map_err(e)?;
        match (&solo, rank) {
            (Some(g), 1) => {
                if g.size() != 1 || g.rank() != 0 || g.world_ranks() != [1] {
                    return Err("group of rank 1".into());
                }
                let x = Tensor::from_slice(&[2.0f32], &[1]).map_err(e)?;
                g.all_reduce(&x, ReduceOp::Sum).map_err(e)?;
                expect_eq(&x, &[2.0], "alone")?;
            }
            (None, 0) => {}
            _ => return Err(format!("rank {rank}: membership wrong")),
        }
        let both = pg.new_group(&[0, 1]).map_err(e)?.ok_or("not a member")?;
        let x = Tensor::from_slice(&[rank as f32], &[1]).map_err(e)?;
        both.all_reduce(&x, ReduceOp::Max).map_err(e)?;
        expect_eq(&x, &[1.0], "both")
    });
}

/// All_reduces of buffers large enough to take the engine's chunked ring (4 MB
/// and up): odd lengths (segments of unequal length, a short last chunk), every
/// operation, integers, bool, complex, f16, and two rings in flight at once.
fn large_all_reduce_cases(c: &mut Cases, pg: &ProcessGroup) {
    let r = pg.rank() as f64;
    // 5 MB of f32 and an odd count; element i of rank r is (i % 7) - 3 + r.
    let n = 1_250_003usize;
    let mine = |r: f64| -> Vec<f64> { (0..n).map(|i| (i % 7) as f64 - 3.0 + r).collect() };
    let want = |f: fn(f64, f64) -> f64| -> Vec<f64> {
        mine(0.0)
            .iter()
            .zip(mine(1.0))
            .map(|(a, b)| f(*a, b))
            .collect()
    };
    type Combine = fn(f64, f64) -> f64;
    let ops: [(ReduceOp, Combine); 5] = [
        (ReduceOp::Sum, |a, b| a + b),
        (ReduceOp::Avg, |a, b| (a + b) / 2.0),
        (ReduceOp::Product, |a, b| a * b),
        (ReduceOp::Min, f64::min),
        (ReduceOp::Max, f64::max),
    ];
    for (op, f) in ops {
        for dtype in [DType::F32, DType::F64, DType::I64, DType::F16] {
            if dtype == DType::I64 && op == ReduceOp::Avg {
                continue;
            }
            c.run(&format!("large all_reduce {op:?} {dtype:?}"), || {
                let x = t(&mine(r), &[n as i64], dtype, Device::cpu())?;
                pg.all_reduce(&x, op).map_err(e)?;
                expect_eq(&x, &want(f), "result")
            });
        }
    }
    c.run(
        "large all_reduce of bool (or) and i8 (wrapping sum)",
        || {
            let m = 5_000_001usize;
            let bits: Vec<f64> = (0..m)
                .map(|i| (i + pg.rank()).is_multiple_of(3) as u8 as f64)
                .collect();
            let b = t(&bits, &[m as i64], DType::Bool, Device::cpu())?;
            pg.all_reduce(&b, ReduceOp::Sum).map_err(e)?;
            let or: Vec<f64> = (0..m)
                .map(|i| (i.is_multiple_of(3) || (i + 1).is_multiple_of(3)) as u8 as f64)
                .collect();
            expect_eq(&b, &or, "bool sum")?;
            let v: Vec<f64> = (0..m).map(|i| (i % 100) as f64).collect();
            let x = t(&v, &[m as i64], DType::I8, Device::cpu())?;
            pg.all_reduce(&x, ReduceOp::Sum).map_err(e)?;
            let wrapped: Vec<f64> = v.iter().map(|a| f64::from((2 * *a as i64) as i8)).collect();
            expect_eq(&x, &wrapped, "i8 sum")
        },
    );
    c.run("large all_reduce of complex (sum)", || {
        let m = 400_001usize;
        let v: Vec<Complex<f64>> = (0..m)
            .map(|i| Complex::new(i as f64 + r, -(i as f64) * r))
            .collect();
        let z = Tensor::from_slice(&v, &[m as i64]).map_err(e)?;
        pg.all_reduce(&z, ReduceOp::Sum).map_err(e)?;
        let got = z.to_vec::<Complex<f64>>().map_err(e)?;
        let bad = (0..m).find(|&i| got[i] != Complex::new(2.0 * i as f64 + 1.0, -(i as f64)));
        match bad {
            None => Ok(()),
            Some(i) => Err(format!("complex sum at {i}: {:?}", got[i])),
        }
    });
    c.run("two large all_reduces in flight at once", || {
        let a = t(&mine(r), &[n as i64], DType::F32, Device::cpu())?;
        let b = t(&mine(1.0 - r), &[n as i64], DType::F32, Device::cpu())?;
        let wa = pg.all_reduce_async(&a, ReduceOp::Max).map_err(e)?;
        let wb = pg.all_reduce_async(&b, ReduceOp::Min).map_err(e)?;
        wb.wait().map_err(e)?;
        wa.wait().map_err(e)?;
        expect_eq(&a, &want(f64::max), "first (max)")?;
        expect_eq(&b, &want(f64::min), "second (min)")
    });
}

fn main() {
    opal_cpu::init().unwrap();
    opal_emu::init().unwrap();
    opal_distributed::emu_comm::register().unwrap();
    let pg = init_process_group().expect("init_process_group");
    pg.set_timeout(std::time::Duration::from_secs(60));
    let mut c = Cases::new(pg.rank());
    group_cases(&mut c, &pg);
    large_all_reduce_cases(&mut c, &pg);
    let emu = Device::parse("emu:0").unwrap();
    for device in [Device::cpu(), emu] {
        all_reduce_cases(&mut c, &pg, device);
        movement_cases(&mut c, &pg, device);
    }
    c.run("a single-process group needs no MPI", || {
        let solo = ProcessGroup::single_process();
        let x = Tensor::from_slice(&[3.0f32], &[1]).map_err(e)?;
        solo.all_reduce(&x, ReduceOp::Avg).map_err(e)?;
        expect_eq(&x, &[3.0], "solo")
    });
    std::process::exit(c.finish("mpi_collectives"));
}
