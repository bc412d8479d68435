//! The API in a group of one process (no MPI needed, so these run in every
//! `cargo test`): each collective's plumbing on cpu and emu, dtype rules,
//! argument errors, the communicator registry, and data-parallel gradient hooks.

use opal::{ops, DType, Device, DeviceType, Tensor};
use opal_distributed::{registry, DdpOptions, DistributedDataParallel, ProcessGroup, ReduceOp};

fn init() -> Vec<Device> {
    opal_cpu::init().unwrap();
    opal_emu::init().unwrap();
    opal_distributed::emu_comm::register().unwrap();
    vec![Device::cpu(), Device::parse("emu:0").unwrap()]
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_device_dtype(Device::cpu(), DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

#[test]
fn collectives_of_one_rank_keep_or_copy_the_values() {
    for device in init() {
        let pg = ProcessGroup::single_process();
        assert_eq!((pg.rank(), pg.size(), pg.backend()), (0, 1, "self"));
        for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            let x = Tensor::from_slice(&[1.5f64, -2.0, 3.0, 4.0], &[2, 2])
                .unwrap()
                .to_device_dtype(device, dtype)
                .unwrap();
            let xt = ops::transpose_int(&x, 0, 1).unwrap();
            for op in [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max] {
                pg.all_reduce(&xt, op).unwrap();
            }
            assert_eq!(vals(&xt), [1.5, 3.0, -2.0, 4.0], "{dtype:?} on {device}");
        }
        let b = Tensor::from_slice(&[true, false], &[2])
            .unwrap()
            .to(device)
            .unwrap();
        pg.all_reduce(&b, ReduceOp::Min).unwrap();
        assert_eq!(vals(&b), [1.0, 0.0]);
        let err = pg.all_reduce(&b, ReduceOp::Avg).unwrap_err().to_string();
        assert!(err.contains("op=avg") && err.contains("Bool"), "{err}");

        let x = Tensor::from_slice(&[7i64, 8], &[2])
            .unwrap()
            .to(device)
            .unwrap();
        pg.broadcast(&x, 0).unwrap();
        pg.reduce(&x, 0, ReduceOp::Product).unwrap();
        assert_eq!(vals(&x), [7.0, 8.0]);
        let out = Tensor::empty(&[2], DType::I64, device).unwrap();
        pg.all_gather(std::slice::from_ref(&out), &x).unwrap();
        assert_eq!(vals(&out), [7.0, 8.0]);
        let out2 = Tensor::empty(&[1, 2], DType::I64, device).unwrap();
        pg.all_gather_into_tensor(&out2, &x).unwrap();
        assert_eq!(vals(&out2), [7.0, 8.0]);
        let rs = Tensor::empty(&[2], DType::I64, device).unwrap();
        pg.reduce_scatter(&rs, std::slice::from_ref(&x), ReduceOp::Sum)
            .unwrap();
        assert_eq!(vals(&rs), [7.0, 8.0]);
        pg.reduce_scatter_tensor(&rs, &x, ReduceOp::Max).unwrap();
        assert_eq!(vals(&rs), [7.0, 8.0]);
        let a2a = Tensor::empty(&[2], DType::I64, device).unwrap();
        pg.all_to_all(std::slice::from_ref(&a2a), std::slice::from_ref(&x))
            .unwrap();
        assert_eq!(vals(&a2a), [7.0, 8.0]);
        pg.barrier().unwrap();
        let w = pg.all_reduce_async(&x, ReduceOp::Sum).unwrap();
        w.wait().unwrap();
        assert!(w.is_completed());
    }
}

#[test]
fn bad_arguments_name_the_collective_and_the_argument() {
    init();
    let pg = ProcessGroup::single_process();
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let msg = |r: opal::Result<()>| r.unwrap_err().to_string();
    assert!(msg(pg.broadcast(&x, 3)).contains("broadcast: src=3 is not a rank"));
    assert!(msg(pg.send(&x, 0, 1)).contains("send: dst=0 is this rank"));
    let small = Tensor::empty(&[3], DType::F32, Device::cpu()).unwrap();
    assert!(msg(pg.all_gather_into_tensor(&small, &x)).contains("output_tensor is [3]"));
    let two = vec![x.clone(), x.clone()];
    assert!(
        msg(pg.all_gather(&two, &x)).contains("tensor_list has 2 tensors, the group has 1 ranks")
    );
    let other = Tensor::empty(&[2], DType::F64, Device::cpu()).unwrap();
    assert!(
        msg(pg.reduce_scatter(&x, std::slice::from_ref(&other), ReduceOp::Sum))
            .contains("input_list[0] is [2] F64")
    );
    assert!(msg(pg.all_reduce(&Tensor::undefined(), ReduceOp::Sum)).contains("tensor is undefined"));
    assert!(pg.new_group(&[0, 0]).is_err());
    assert!(pg.new_group(&[0]).unwrap().is_some());
    assert!(
        opal_distributed::init_process_group().is_err() || opal_distributed::is_mpi_available()
    );
}

#[test]
fn the_registry_names_how_each_device_runs() {
    init();
    let pg = ProcessGroup::single_process();
    assert_eq!(registry::describe(&pg, DeviceType::Cpu), "self");
    assert!(registry::describe(&pg, DeviceType::PrivateUse1).starts_with("emu stream communicator"));
    assert_eq!(
        registry::describe(&pg, DeviceType::PrivateUse2),
        "host staging through self"
    );
    assert!(registry::register_communicator(
        DeviceType::Cpu,
        registry::communicator(DeviceType::PrivateUse1).unwrap()
    )
    .is_err());
}

#[test]
fn ddp_hooks_reduce_every_gradient_during_backward() {
    for device in init() {
        let pg = ProcessGroup::single_process();
        let mk = |v: &[f32]| {
            let t = Tensor::from_slice(v, &[v.len() as i64])
                .unwrap()
                .to(device)
                .unwrap();
            t.set_requires_grad(true).unwrap();
            t
        };
        let (w, b) = (mk(&[1.0, 2.0, 3.0]), mk(&[0.5]));
        let params = vec![("w".to_string(), w.clone()), ("b".to_string(), b.clone())];
        let ddp = DistributedDataParallel::new(
            &pg,
            params,
            DdpOptions {
                bucket_cap_bytes: 4,
            },
        )
        .unwrap();
        assert_eq!(ddp.buckets(), [vec![1], vec![0]]);
        let x = Tensor::from_slice(&[1.0f32, 1.0, 2.0], &[3])
            .unwrap()
            .to(device)
            .unwrap();
        let loss =
            || ops::sum(&ops::add_tensor(&ops::mul_tensor(&w, &x).unwrap(), &b).unwrap()).unwrap();
        ddp.backward(&loss()).unwrap();
        assert_eq!(vals(&w.grad().unwrap()), [1.0, 1.0, 2.0]);
        assert_eq!(vals(&b.grad().unwrap()), [3.0]);
        {
            let _acc = ddp.no_sync();
            ddp.backward(&loss()).unwrap();
        }
        ddp.backward(&loss()).unwrap();
        assert_eq!(
            vals(&w.grad().unwrap()),
            [3.0, 3.0, 6.0],
            "accumulated over three passes on {device}"
        );
        // A parameter outside the graph: the pass is refused, naming it.
        w.set_grad(None);
        b.set_grad(None);
        let err = ddp
            .backward(&ops::sum(&ops::mul_tensor(&w, &x).unwrap()).unwrap())
            .unwrap_err();
        assert!(err.to_string().contains("no gradient: b"), "{err}");
    }
}
