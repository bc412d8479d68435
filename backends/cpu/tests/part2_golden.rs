//! Golden check of the part-2 CPU kernels (linalg, nn, index, shape, factory)
//! against PyTorch 2.15's outputs in `cases.json` + `tensors.safetensors`, calling
//! the kernels directly (no dispatcher). Set `OPAL_GOLDEN_DIR` to run another set of
//! the same format.
//!
//! Owns: the op-name -> kernel-call table for part-2 ops. Must not: skip a case
//! silently (every case of a listed op runs; unknown part-2 ops fail the test).

use crate::golden_support;

use golden_support::{check, load_cases, Args, Case, Val};
use opal::{DType, Scalar, Tensor};
use opal_cpu::{factory, index, linalg, nn, shape};

type R = Result<Vec<Option<Tensor>>, String>;

fn one(t: opal::Result<Tensor>) -> R {
    t.map(|t| vec![Some(t)]).map_err(|e| e.to_string())
}

fn two(t: opal::Result<(Tensor, Tensor)>) -> R {
    t.map(|(a, b)| vec![Some(a), Some(b)])
        .map_err(|e| e.to_string())
}

fn three(t: opal::Result<(Tensor, Tensor, Tensor)>) -> R {
    t.map(|(a, b, c)| vec![Some(a), Some(b), Some(c)])
        .map_err(|e| e.to_string())
}

fn three_opt(t: opal::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)>) -> R {
    t.map(|(a, b, c)| vec![a, b, c]).map_err(|e| e.to_string())
}

fn opt_t(a: &Args<'_>, i: usize) -> Result<Option<Tensor>, String> {
    match &a.0[i] {
        Val::None => Ok(None),
        Val::Tensor(t) => Ok(Some(t.clone())),
        o => Err(format!("arg {i}: expected optional tensor, got {o:?}")),
    }
}

fn tlist(a: &Args<'_>, i: usize) -> Result<Vec<Tensor>, String> {
    match &a.0[i] {
        Val::TensorList(v) => Ok(v.clone()),
        o => Err(format!("arg {i}: expected tensor list, got {o:?}")),
    }
}

fn bools(a: &Args<'_>, i: usize) -> Result<Vec<bool>, String> {
    match &a.0[i] {
        Val::BoolList(v) => Ok(v.clone()),
        o => Err(format!("arg {i}: expected bool list, got {o:?}")),
    }
}

/// Calls the part-2 kernel for `case.op`; `None` when the op is not part 2's.
fn run(case: &Case) -> Option<R> {
    let a = Args(&case.args);
    let a = &a;
    macro_rules! t {
        ($i:expr) => {
            match a.tensor($i) {
                Ok(t) => t,
                Err(e) => return Some(Err(e)),
            }
        };
    }
    macro_rules! v {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => return Some(Err(e)),
            }
        };
    }
    let r = match case.op.as_str() {
        "mm" => one(linalg::mm(t!(0), t!(1))),
        "bmm" => one(linalg::bmm(t!(0), t!(1))),
        "addmm" => one(linalg::addmm(
            t!(0),
            t!(1),
            t!(2),
            &v!(a.scalar(3)),
            &v!(a.scalar(4)),
        )),
        "baddbmm" => one(linalg::baddbmm(
            t!(0),
            t!(1),
            t!(2),
            &v!(a.scalar(3)),
            &v!(a.scalar(4)),
        )),
        "dot" => one(linalg::dot(t!(0), t!(1))),
        "_softmax" => one(
            opal::rules::softmax::_softmax(t!(0), v!(a.int(1)), v!(a.bool(2)))
                .and_then(nn::_softmax),
        ),
        "_log_softmax" => {
            one(
                opal::rules::softmax::_log_softmax(t!(0), v!(a.int(1)), v!(a.bool(2)))
                    .and_then(nn::_log_softmax),
            )
        }
        "_softmax_backward_data" => one(opal::rules::softmax::_softmax_backward_data(
            t!(0),
            t!(1),
            v!(a.int(2)),
            v!(a.opt_dtype(3)).unwrap_or(DType::F32),
        )
        .and_then(nn::_softmax_backward_data)),
        "_log_softmax_backward_data" => one(opal::rules::softmax::_log_softmax_backward_data(
            t!(0),
            t!(1),
            v!(a.int(2)),
            v!(a.opt_dtype(3)).unwrap_or(DType::F32),
        )
        .and_then(nn::_log_softmax_backward_data)),
        "native_layer_norm" => three(
            opal::rules::norm::native_layer_norm(
                t!(0),
                &v!(a.int_list(1)),
                v!(opt_t(a, 2)).as_ref(),
                v!(opt_t(a, 3)).as_ref(),
                v!(a.float(4)),
            )
            .and_then(nn::native_layer_norm),
        ),
        "native_layer_norm_backward" => three_opt(
            opal::rules::norm::native_layer_norm_backward(
                t!(0),
                t!(1),
                &v!(a.int_list(2)),
                t!(3),
                t!(4),
                v!(opt_t(a, 5)).as_ref(),
                v!(opt_t(a, 6)).as_ref(),
                &v!(bools(a, 7)),
            )
            .and_then(nn::native_layer_norm_backward),
        ),
        "native_batch_norm" => three(
            opal::rules::norm::native_batch_norm(
                t!(0),
                v!(opt_t(a, 1)).as_ref(),
                v!(opt_t(a, 2)).as_ref(),
                v!(opt_t(a, 3)).as_ref(),
                v!(opt_t(a, 4)).as_ref(),
                v!(a.bool(5)),
                v!(a.float(6)),
                v!(a.float(7)),
            )
            .and_then(nn::native_batch_norm),
        ),
        "convolution" => one(opal::rules::conv::convolution(
            t!(0),
            t!(1),
            v!(opt_t(a, 2)).as_ref(),
            &v!(a.int_list(3)),
            &v!(a.int_list(4)),
            &v!(a.int_list(5)),
            v!(a.bool(6)),
            &v!(a.int_list(7)),
            v!(a.int(8)),
        )
        .and_then(nn::convolution)),
        "convolution_backward" => three_opt(
            opal::rules::conv::convolution_backward(
                t!(0),
                t!(1),
                t!(2),
                v!(a.opt_int_list(3)).as_deref(),
                &v!(a.int_list(4)),
                &v!(a.int_list(5)),
                &v!(a.int_list(6)),
                v!(a.bool(7)),
                &v!(a.int_list(8)),
                v!(a.int(9)),
                &v!(bools(a, 10)),
            )
            .and_then(nn::convolution_backward),
        ),
        "max_pool2d_with_indices" => two(opal::rules::pool::max_pool2d_with_indices(
            t!(0),
            &v!(a.int_list(1)),
            &v!(a.int_list(2)),
            &v!(a.int_list(3)),
            &v!(a.int_list(4)),
            v!(a.bool(5)),
        )
        .and_then(nn::max_pool2d_with_indices)),
        "max_pool2d_with_indices_backward" => {
            one(opal::rules::pool::max_pool2d_with_indices_backward(
                t!(0),
                t!(1),
                &v!(a.int_list(2)),
                &v!(a.int_list(3)),
                &v!(a.int_list(4)),
                &v!(a.int_list(5)),
                v!(a.bool(6)),
                t!(7),
            )
            .and_then(nn::max_pool2d_with_indices_backward))
        }
        "avg_pool2d" => one(opal::rules::pool::avg_pool2d(
            t!(0),
            &v!(a.int_list(1)),
            &v!(a.int_list(2)),
            &v!(a.int_list(3)),
            v!(a.bool(4)),
            v!(a.bool(5)),
            v!(a.opt_int(6)),
        )
        .and_then(nn::avg_pool2d)),
        "_adaptive_avg_pool2d" => one(opal::rules::pool::_adaptive_avg_pool2d(
            t!(0),
            &v!(a.int_list(1)),
        )
        .and_then(nn::_adaptive_avg_pool2d)),
        "upsample_nearest2d" => one(opal::rules::pool::upsample_nearest2d(
            t!(0),
            &v!(a.int_list(1)),
            v!(a.opt_float(2)),
            v!(a.opt_float(3)),
        )
        .and_then(nn::upsample_nearest2d)),
        "mse_loss" => {
            one(opal::rules::loss::mse_loss(t!(0), t!(1), v!(a.int(2))).and_then(nn::mse_loss))
        }
        "mse_loss_backward" => {
            one(
                opal::rules::loss::mse_loss_backward(t!(0), t!(1), t!(2), v!(a.int(3)))
                    .and_then(nn::mse_loss_backward),
            )
        }
        "nll_loss_forward" => two(opal::rules::loss::nll_loss_forward(
            t!(0),
            t!(1),
            v!(opt_t(a, 2)).as_ref(),
            v!(a.int(3)),
            v!(a.int(4)),
        )
        .and_then(nn::nll_loss_forward)),
        "nll_loss_backward" => one(opal::rules::loss::nll_loss_backward(
            t!(0),
            t!(1),
            t!(2),
            v!(opt_t(a, 3)).as_ref(),
            v!(a.int(4)),
            v!(a.int(5)),
            t!(6),
        )
        .and_then(nn::nll_loss_backward)),
        "binary_cross_entropy" => one(opal::rules::loss::binary_cross_entropy(
            t!(0),
            t!(1),
            v!(opt_t(a, 2)).as_ref(),
            v!(a.int(3)),
        )
        .and_then(nn::binary_cross_entropy)),
        "embedding" => one(opal::rules::bag::embedding(
            t!(0),
            t!(1),
            v!(a.int(2)),
            v!(a.bool(3)),
            v!(a.bool(4)),
        )
        .and_then(nn::embedding)),
        "embedding_dense_backward" => one(opal::rules::bag::embedding_dense_backward(
            t!(0),
            t!(1),
            v!(a.int(2)),
            v!(a.int(3)),
            v!(a.bool(4)),
        )
        .and_then(nn::embedding_dense_backward)),
        "one_hot" => one(nn::one_hot(t!(0), v!(a.int(1)))),
        "gather" => one(index::gather(t!(0), v!(a.int(1)), t!(2), v!(a.bool(3)))),
        "scatter.src" => one(index::scatter_src(t!(0), v!(a.int(1)), t!(2), t!(3))),
        "scatter_add" => one(index::scatter_add(t!(0), v!(a.int(1)), t!(2), t!(3))),
        "index_select" => one(index::index_select(t!(0), v!(a.int(1)), t!(2))),
        "index.Tensor" => match &a.0[1] {
            Val::OptTensorList(v) => one(index::index_tensor(t!(0), v)),
            o => Err(format!("arg 1: expected optional tensor list, got {o:?}")),
        },
        "cat" => one(shape::cat(&v!(tlist(a, 0)), v!(a.int(1)))),
        "stack" => one(shape::stack(&v!(tlist(a, 0)), v!(a.int(1)))),
        "flip" => one(shape::flip(t!(0), &v!(a.int_list(1)))),
        "roll" => one(shape::roll(t!(0), &v!(a.int_list(1)), &v!(a.int_list(2)))),
        "repeat" => one(shape::repeat(t!(0), &v!(a.int_list(1)))),
        "tril" => one(shape::tril(t!(0), v!(a.int(1)))),
        "triu" => one(shape::triu(t!(0), v!(a.int(1)))),
        "constant_pad_nd" => one(shape::constant_pad_nd(
            t!(0),
            &v!(a.int_list(1)),
            &v!(a.scalar(2)),
        )),
        "view" => one(shape::view(t!(0), &v!(a.int_list(1)))),
        "permute" => one(shape::permute(t!(0), &v!(a.int_list(1)))),
        "transpose.int" => one(shape::transpose_int(t!(0), v!(a.int(1)), v!(a.int(2)))),
        "t" => one(shape::t(t!(0))),
        "expand" => one(shape::expand(t!(0), &v!(a.int_list(1)), v!(a.bool(2)))),
        "squeeze.dim" => one(shape::squeeze_dim(t!(0), v!(a.int(1)))),
        "unsqueeze" => one(shape::unsqueeze(t!(0), v!(a.int(1)))),
        "slice.Tensor" => one(opal::rules::view::slice_tensor(
            t!(0),
            v!(a.int(1)),
            v!(a.opt_int(2)),
            v!(a.opt_int(3)),
            v!(a.int(4)),
        )
        .and_then(shape::pick)),
        "select.int" => one(
            opal::rules::view::select_int(t!(0), v!(a.int(1)), v!(a.int(2))).and_then(shape::pick),
        ),
        "narrow" => one(
            opal::rules::view::narrow(t!(0), v!(a.int(1)), v!(a.int(2)), v!(a.int(3)))
                .and_then(shape::pick),
        ),
        "contiguous" => one(shape::contiguous(t!(0), opal::MemoryFormat::Contiguous)),
        "_to_copy" => one(shape::_to_copy(
            t!(0),
            v!(a.opt_dtype(1)),
            None,
            None,
            None,
            false,
            None,
        )),
        "zeros" => one(opal::rules::factory::zeros(
            &v!(a.int_list(0)),
            v!(a.opt_dtype(1)),
            None,
            None,
            None,
        )
        .and_then(factory::fill)),
        "ones" => one(opal::rules::factory::ones(
            &v!(a.int_list(0)),
            v!(a.opt_dtype(1)),
            None,
            None,
            None,
        )
        .and_then(factory::fill)),
        "full" => one(opal::rules::factory::full(
            &v!(a.int_list(0)),
            &v!(a.scalar(1)),
            v!(a.opt_dtype(2)),
            None,
            None,
            None,
        )
        .and_then(factory::fill)),
        "eye" => one(factory::eye(
            v!(a.int(0)),
            v!(a.opt_dtype(1)),
            None,
            None,
            None,
        )),
        "arange.start_step" => one(opal::rules::factory::arange_start_step(
            &v!(a.scalar(0)),
            &v!(a.scalar(1)),
            &v!(a.scalar(2)),
            v!(a.opt_dtype(3)),
            None,
            None,
            None,
        )
        .and_then(factory::arange_start_step)),
        "linspace" => one(factory::linspace(
            &v!(a.scalar(0)),
            &v!(a.scalar(1)),
            v!(a.int(2)),
            v!(a.opt_dtype(3)),
            None,
            None,
            None,
        )),
        "zeros_like" => one(factory::zeros_like(
            t!(0),
            v!(a.opt_dtype(1)),
            None,
            None,
            None,
            None,
        )),
        "ones_like" => one(factory::ones_like(
            t!(0),
            v!(a.opt_dtype(1)),
            None,
            None,
            None,
            None,
        )),
        "full_like" => one(factory::full_like(
            t!(0),
            &v!(a.scalar(1)),
            v!(a.opt_dtype(2)),
            None,
            None,
            None,
            None,
        )),
        "rand" => one(factory::rand(
            &v!(a.int_list(0)),
            v!(a.opt_dtype(1)),
            None,
            None,
            None,
        )),
        "randn" => one(factory::randn(
            &v!(a.int_list(0)),
            v!(a.opt_dtype(1)),
            None,
            None,
            None,
        )),
        _ => return None,
    };
    Some(r)
}

/// Checks results, where an expected `None` output (a masked-out gradient) must
/// be `None` too.
fn check_opt(case: &Case, got: &[Option<Tensor>]) -> Result<(), String> {
    if got.len() != case.outputs.len() {
        return Err(format!(
            "{} outputs, expected {}",
            got.len(),
            case.outputs.len()
        ));
    }
    let mut present = Vec::new();
    let mut expected = Vec::new();
    for (k, (g, e)) in got.iter().zip(&case.outputs).enumerate() {
        match (g, e) {
            (None, Val::None) => {}
            (Some(g), Val::Tensor(_)) => {
                present.push(g.clone());
                expected.push(e.clone());
            }
            (g, e) => {
                return Err(format!(
                    "output {k}: got {:?}, expected {e:?}",
                    g.as_ref().map(|t| t.sizes().to_vec())
                ))
            }
        }
    }
    let sub = Case {
        id: case.id.clone(),
        op: case.op.clone(),
        schema: case.schema.clone(),
        args: Vec::new(),
        outputs: expected,
        atol: case.atol,
        rtol: case.rtol,
        check: case.check.clone(),
    };
    check(&sub, &present)
}

/// Ops part 2 owns: every case of these must run here.
const PART2_OPS: &[&str] = &[
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "dot",
    "_softmax",
    "_log_softmax",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "native_layer_norm",
    "native_layer_norm_backward",
    "native_batch_norm",
    "convolution",
    "convolution_backward",
    "max_pool2d_with_indices",
    "max_pool2d_with_indices_backward",
    "avg_pool2d",
    "_adaptive_avg_pool2d",
    "upsample_nearest2d",
    "mse_loss",
    "mse_loss_backward",
    "nll_loss_forward",
    "nll_loss_backward",
    "binary_cross_entropy",
    "embedding",
    "embedding_dense_backward",
    "one_hot",
    "gather",
    "scatter.src",
    "scatter_add",
    "index_select",
    "index.Tensor",
    "cat",
    "stack",
    "flip",
    "roll",
    "repeat",
    "tril",
    "triu",
    "constant_pad_nd",
    "view",
    "permute",
    "transpose.int",
    "t",
    "expand",
    "squeeze.dim",
    "unsqueeze",
    "slice.Tensor",
    "select.int",
    "narrow",
    "contiguous",
    "_to_copy",
    "zeros",
    "ones",
    "full",
    "eye",
    "arange.start_step",
    "linspace",
    "zeros_like",
    "ones_like",
    "full_like",
    "rand",
    "randn",
];

#[test]
fn part2_ops_match_pytorch_goldens() {
    let cases = load_cases().expect("golden cases load");
    let (mut passed, mut failed) = (0usize, Vec::new());
    for case in &cases {
        let listed = PART2_OPS.contains(&case.op.as_str());
        match run(case) {
            None if listed => failed.push(format!(
                "{}: part-2 op has no kernel call in this harness",
                case.id
            )),
            None => {}
            Some(Err(e)) => failed.push(format!("{}: kernel error: {e}", case.id)),
            Some(Ok(got)) => match check_opt(case, &got) {
                Ok(()) => passed += 1,
                Err(e) => failed.push(format!("{}: {e}", case.id)),
            },
        }
    }
    println!("part-2 golden: {passed} passed, {} failed", failed.len());
    for f in &failed {
        println!("  FAIL {f}");
    }
    assert!(passed > 0, "no part-2 golden case ran");
    assert!(
        failed.is_empty(),
        "{} part-2 golden cases failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn view_results_alias_their_input() {
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    for v in [
        shape::t(&a).unwrap(),
        shape::view(&a, &[4]).unwrap(),
        opal::rules::view::select_int(&a, 0, 1)
            .and_then(shape::pick)
            .unwrap(),
        shape::expand(&a, &[3, 2, 2], false).unwrap(),
    ] {
        assert!(v.shares_storage(&a));
    }
    let s = Scalar::Int(1);
    let m = linalg::addmm(&a, &a, &shape::t(&a).unwrap(), &s, &s).unwrap();
    assert_eq!(m.to_vec::<f32>().unwrap(), vec![6.0, 13.0, 14.0, 29.0]);
}
