//! A plugin device's own communicator on 2 ranks (`mpirun -n 2`, see
//! `run-mpi-tests.sh`): the emu plugin, loaded from the build, registers its
//! all_reduce through the C ABI; the registry picks it up with no code in the
//! program, it runs (the plugin's own counter grows, nothing is staged) and the
//! values agree with the CPU's; a copy of the plugin without a communicator
//! gets the same values through host staging.

mod common;
mod plugin_common;

use common::{e, expect_eq, Cases};
use opal::{DType, Device, DeviceType, Tensor};
use opal_distributed::{init_process_group, registry, ProcessGroup, ReduceOp};
use plugin_common::{load_emu_plugins, native_all_reduces};
use std::path::Path;

fn t(v: &[f64], shape: &[i64], dtype: DType, device: Device) -> Result<Tensor, String> {
    Tensor::from_slice(v, shape)
        .and_then(|x| x.to_device_dtype(device, dtype))
        .map_err(e)
}

/// Runs `f`, then checks that the plugin `lib` ran `native` all_reduces itself.
fn counted(lib: &Path, native: u64, f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    let before = native_all_reduces(lib);
    f()?;
    let ran = native_all_reduces(lib) - before;
    if ran != native {
        return Err(format!(
            "the plugin ran {ran} all_reduce(s) itself, expected {native}"
        ));
    }
    Ok(())
}

fn cases(c: &mut Cases, pg: &ProcessGroup, emu_lib: &Path, nc_lib: &Path) {
    let r = pg.rank() as f64;
    c.run("the registry picks up the plugin's communicator", || {
        let d = registry::describe(pg, DeviceType::PrivateUse1);
        if !d.starts_with("plugin 'emu' communicator (all_reduce), host staging through") {
            return Err(d);
        }
        let d = registry::describe(pg, DeviceType::PrivateUse2);
        if !d.starts_with("host staging through") {
            return Err(d);
        }
        Ok(())
    });
    // Rank 0 holds [1, 2, -3, 4], rank 1 [3, 0.5, 2, 4] (exact in every float dtype).
    let mine = if r == 0.0 {
        [1.0, 2.0, -3.0, 4.0]
    } else {
        [3.0, 0.5, 2.0, 4.0]
    };
    let expected: [(ReduceOp, [f64; 4]); 5] = [
        (ReduceOp::Sum, [4.0, 2.5, -1.0, 8.0]),
        (ReduceOp::Avg, [2.0, 1.25, -0.5, 4.0]),
        (ReduceOp::Product, [3.0, 1.0, -6.0, 16.0]),
        (ReduceOp::Min, [1.0, 0.5, -3.0, 4.0]),
        (ReduceOp::Max, [3.0, 2.0, 2.0, 4.0]),
    ];
    let emu = Device::parse("emu:1").unwrap();
    let nc = Device::parse("emunc:0").unwrap();
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for (op, want) in expected {
            c.run(
                &format!("all_reduce {op:?} {dtype:?} on the plugin's communicator"),
                || {
                    counted(emu_lib, 1, || {
                        let x = t(&mine, &[2, 2], dtype, emu)?;
                        pg.all_reduce(&x, op).map_err(e)?;
                        if x.device() != emu {
                            return Err(format!("moved to {}", x.device()));
                        }
                        expect_eq(&x, &want, "all_reduce")
                    })
                },
            );
        }
    }
    for dtype in [DType::I64, DType::I32] {
        c.run(
            &format!("all_reduce Sum {dtype:?} on the plugin's communicator"),
            || {
                counted(emu_lib, 1, || {
                    let x = t(&[r, 10.0 * r + 1.0, -7.0], &[3], dtype, emu)?;
                    pg.all_reduce(&x, ReduceOp::Sum).map_err(e)?;
                    expect_eq(&x, &[1.0, 12.0, -14.0], "all_reduce")
                })
            },
        );
    }
    c.run("all_reduce of bool on the plugin's communicator", || {
        counted(emu_lib, 2, || {
            let x = t(&[r, 0.0, 1.0], &[3], DType::Bool, emu)?;
            pg.all_reduce(&x, ReduceOp::Sum).map_err(e)?;
            expect_eq(&x, &[1.0, 0.0, 1.0], "or")?;
            let y = t(&[r, 0.0, 1.0], &[3], DType::Bool, emu)?;
            pg.all_reduce(&y, ReduceOp::Min).map_err(e)?;
            expect_eq(&y, &[0.0, 0.0, 1.0], "and")
        })
    });
    c.run(
        "async all_reduces on a side stream, in stream order",
        || {
            counted(emu_lib, 2, || {
                let s = opal::device::new_stream(emu).map_err(e)?;
                let _g = opal::device::StreamGuard::new(s).map_err(e)?;
                let x = t(&mine, &[4], DType::F32, emu)?;
                let w1 = pg.all_reduce_async(&x, ReduceOp::Sum).map_err(e)?;
                let w2 = pg.all_reduce_async(&x, ReduceOp::Max).map_err(e)?;
                w1.wait().map_err(e)?;
                w2.wait().map_err(e)?;
                expect_eq(&x, &[4.0, 2.5, -1.0, 8.0], "sum then max of equal values")
            })
        },
    );
    c.run("an empty tensor", || {
        counted(emu_lib, 1, || {
            let x = t(&[], &[0], DType::F32, emu)?;
            pg.all_reduce(&x, ReduceOp::Sum).map_err(e)
        })
    });
    c.run("a non-contiguous tensor is declined and staged", || {
        counted(emu_lib, 0, || {
            let base = t(
                &[1.0 + r, 2.0, 3.0, 4.0, 5.0, 6.0],
                &[2, 3],
                DType::F32,
                emu,
            )?;
            // A view made directly (emu's transpose runs through the CPU
            // fallback: a copy).
            let x = base.as_strided(&[3, 2], &[1, 3], 0).map_err(e)?;
            if x.is_contiguous() {
                return Err("the view is contiguous".into());
            }
            pg.all_reduce(&x, ReduceOp::Sum).map_err(e)?;
            expect_eq(&x, &[3.0, 8.0, 4.0, 10.0, 6.0, 12.0], "the view")?;
            expect_eq(&base, &[3.0, 4.0, 6.0, 8.0, 10.0, 12.0], "through the view")
        })
    });
    c.run(
        "the same all_reduce on a plugin without a communicator is staged",
        || {
            counted(nc_lib, 0, || {
                let x = t(&mine, &[2, 2], DType::F32, nc)?;
                pg.all_reduce(&x, ReduceOp::Avg).map_err(e)?;
                expect_eq(&x, &[2.0, 1.25, -0.5, 4.0], "staged")
            })
        },
    );
    c.run(
        "the other collectives on the plugin device are staged",
        || {
            counted(emu_lib, 0, || {
                let x = t(&[r, 1.0 - r], &[2], DType::F32, emu)?;
                pg.broadcast(&x, 1).map_err(e)?;
                expect_eq(&x, &[1.0, 0.0], "broadcast")
            })
        },
    );
    c.run(
        "a disagreement is the group's Err before the plugin runs",
        || {
            counted(emu_lib, 0, || {
                let x = t(
                    &mine[..2 + pg.rank()],
                    &[2 + pg.rank() as i64],
                    DType::F32,
                    emu,
                )?;
                match pg.all_reduce(&x, ReduceOp::Sum) {
                    Err(err) if err.to_string().contains("disagree") => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            })
        },
    );
}

fn main() {
    opal_cpu::init().unwrap();
    let pg = init_process_group().expect("init_process_group");
    pg.set_timeout(std::time::Duration::from_secs(60));
    let (emu_lib, nc_lib) = load_emu_plugins(&format!("mpi-plugin-comm-rank{}", pg.rank()));
    let mut c = Cases::new(pg.rank());
    cases(&mut c, &pg, &emu_lib, &nc_lib);
    std::process::exit(c.finish("mpi_plugin_comm"));
}
