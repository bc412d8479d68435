//! One-line, human summaries of operators for generated docs ("`add.Tensor`:
//! element-wise addition of two tensors, functional"), so the rustdoc index of
//! the generated ops says what each op does instead of one line for all.
//!
//! Owns: the wording, derived only from the schema (name, overload, kind,
//! returns) and the op's tags; deterministic. Must not: decide Rust names
//! (see `crate::ident`) or emit tokens (see `super::op_doc`).

use crate::model::{NativeFunction, SchemaKind};

/// Plain words for well-known base names; other ops are called "operator" (the
/// summary starts with the op's name anyway).
fn known(base: &str) -> Option<&'static str> {
    elementwise(base)
        .or_else(|| reduction(base))
        .or_else(|| linear_algebra(base))
        .or_else(|| shape(base))
        .or_else(|| factory(base))
        .or_else(|| neural_net(base))
        .or_else(|| indexing(base))
}

/// Element-wise arithmetic, comparisons, math functions and logic.
fn elementwise(base: &str) -> Option<&'static str> {
    Some(match base {
        "add" => "addition",
        "sub" => "subtraction",
        "mul" => "multiplication",
        "div" => "division",
        "remainder" => "remainder",
        "pow" => "power",
        "neg" => "negation",
        "abs" => "absolute value",
        "exp" => "exponential",
        "log" => "natural logarithm",
        "sqrt" => "square root",
        "rsqrt" => "reciprocal square root",
        "reciprocal" => "reciprocal",
        "eq" => "`==` comparison",
        "ne" => "`!=` comparison",
        "lt" => "`<` comparison",
        "le" => "`<=` comparison",
        "gt" => "`>` comparison",
        "ge" => "`>=` comparison",
        "where" => "selection by a condition",
        "clamp" => "clamping to a range",
        "lerp" => "linear interpolation",
        "atan2" => "two-argument arctangent",
        "maximum" => "element-wise maximum of two tensors",
        "minimum" => "element-wise minimum of two tensors",
        "addcmul" => "`self + value * t1 * t2`",
        "addcdiv" => "`self + value * t1 / t2`",
        "logical_and" => "logical and",
        "logical_or" => "logical or",
        "logical_not" => "logical not",
        "bitwise_and" => "bitwise and",
        "masked_fill" => "fill where a mask is true",
        "nan_to_num" => "replacement of NaN and infinities",
        "isnan" => "NaN test",
        "sign" => "sign",
        "log1p" => "`log(1 + x)`",
        "expm1" => "`exp(x) - 1`",
        "sin" => "sine",
        "cos" => "cosine",
        "tan" => "tangent",
        "tanh" => "hyperbolic tangent",
        "erf" => "error function",
        "floor" => "rounding down",
        "ceil" => "rounding up",
        "round" => "rounding to nearest",
        "trunc" => "rounding toward zero",
        _ => return None,
    })
}

/// Reductions over dimensions.
fn reduction(base: &str) -> Option<&'static str> {
    Some(match base {
        "sum" => "sum",
        "mean" => "mean",
        "prod" => "product",
        "var" => "variance",
        "std" => "standard deviation",
        "amax" | "max" => "maximum",
        "amin" | "min" => "minimum",
        "argmax" => "index of the maximum",
        "argmin" => "index of the minimum",
        "all" => "whether all elements are true",
        "any" => "whether any element is true",
        "logsumexp" => "log-sum-exp",
        "linalg_vector_norm" => "vector norm",
        "cumsum" => "cumulative sum",
        "topk" => "k largest or smallest elements",
        "sort" => "sort along a dimension",
        _ => return None,
    })
}

/// Matrix products and layers built on them.
fn linear_algebra(base: &str) -> Option<&'static str> {
    Some(match base {
        "mm" => "matrix product",
        "bmm" => "batched matrix product",
        "matmul" => "matrix product with broadcasting",
        "addmm" => "matrix product plus a matrix",
        "baddbmm" => "batched matrix product plus a tensor",
        "dot" => "dot product",
        "linear" => "linear layer (`x W^T + b`)",
        "convolution" => "convolution",
        _ => return None,
    })
}

/// Joining, views and other changes of shape or layout.
fn shape(base: &str) -> Option<&'static str> {
    Some(match base {
        "cat" => "concatenation along a dimension",
        "stack" => "stacking along a new dimension",
        "view" => "reshaped view",
        "reshape" => "reshape (a view when possible)",
        "permute" => "permutation of dimensions",
        "transpose" => "swap of two dimensions",
        "t" => "matrix transpose",
        "expand" => "broadcast view",
        "squeeze" => "removal of a size-1 dimension",
        "unsqueeze" => "insertion of a size-1 dimension",
        "_to_copy" => "copy with a new dtype, device or layout",
        "slice" => "slice view along a dimension",
        "select" => "view of one index along a dimension",
        "narrow" => "narrowed view along a dimension",
        "flatten" => "flattening of a range of dimensions",
        "split" => "split into equal-size chunks",
        "chunk" => "split into a number of chunks",
        "contiguous" => "contiguous tensor (`self` when already contiguous)",
        "flip" => "reversal along dimensions",
        "roll" => "roll along dimensions",
        "repeat" => "tiling by repetition",
        "constant_pad_nd" => "constant padding",
        "tril" => "lower triangle",
        "triu" => "upper triangle",
        _ => return None,
    })
}

/// Tensors made from sizes or values.
fn factory(base: &str) -> Option<&'static str> {
    Some(match base {
        "empty" => "uninitialised tensor",
        "zeros" => "tensor of zeros",
        "ones" => "tensor of ones",
        "full" => "tensor filled with a value",
        "arange" => "evenly spaced values by step",
        "linspace" => "evenly spaced values by count",
        "eye" => "identity matrix",
        "zeros_like" => "tensor of zeros shaped like `self`",
        "ones_like" => "tensor of ones shaped like `self`",
        "full_like" => "filled tensor shaped like `self`",
        "rand" => "uniform random numbers in [0, 1)",
        "randn" => "standard normal random numbers",
        _ => return None,
    })
}

/// Activations, normalisation, pooling and losses.
fn neural_net(base: &str) -> Option<&'static str> {
    Some(match base {
        "sigmoid" => "logistic sigmoid",
        "silu" => "SiLU activation",
        "relu" => "ReLU activation",
        "gelu" => "GELU activation",
        "softplus" => "softplus activation",
        "leaky_relu" => "leaky ReLU activation",
        "elu" => "ELU activation",
        "hardtanh" => "hard tanh activation",
        "threshold" => "threshold",
        "_softmax" => "softmax",
        "_log_softmax" => "log-softmax",
        "max_pool2d_with_indices" => "2-d max pooling with indices",
        "avg_pool2d" => "2-d average pooling",
        "_adaptive_avg_pool2d" => "2-d adaptive average pooling",
        "native_layer_norm" => "layer normalisation",
        "native_batch_norm" => "batch normalisation",
        "native_dropout" | "dropout" => "dropout",
        "upsample_nearest2d" => "2-d nearest-neighbour upsampling",
        "embedding" => "embedding lookup",
        "one_hot" => "one-hot encoding",
        "nll_loss_forward" | "nll_loss" => "negative log-likelihood loss",
        "mse_loss" => "mean squared error loss",
        "binary_cross_entropy" => "binary cross-entropy loss",
        _ => return None,
    })
}

/// Selection and scatter by indices.
fn indexing(base: &str) -> Option<&'static str> {
    Some(match base {
        "index_select" => "selection of indices along a dimension",
        "gather" => "gather along a dimension",
        "scatter" => "scatter along a dimension",
        "scatter_add" => "scatter-add along a dimension",
        "index" => "advanced indexing",
        _ => return None,
    })
}

/// What the overload says about the arguments, when it says something plain.
fn overload_words(overload: &str) -> Option<&'static str> {
    Some(match overload {
        "Tensor" => "of tensors",
        "Scalar" => "with a scalar",
        "Tensor_Tensor" => "of two tensors",
        "Tensor_Scalar" => "of a tensor and a scalar",
        "Scalar_Tensor" => "of a scalar and a tensor",
        "dim" | "dim_IntList" | "int" => "over dimensions",
        _ => return None,
    })
}

/// How the op treats its arguments.
fn kind_words(f: &NativeFunction) -> &'static str {
    let returns_alias = f
        .func
        .returns
        .iter()
        .any(|r| r.annotation.as_ref().is_some_and(|a| !a.is_write));
    match f.func.kind() {
        SchemaKind::Functional if returns_alias => "returns a view",
        SchemaKind::Functional => "functional",
        SchemaKind::Inplace => "in place",
        SchemaKind::Out => "writes into `out`",
        SchemaKind::Mutable => "mutates its `(a!)` arguments",
        SchemaKind::Scratch => "with scratch outputs",
    }
}

/// The op's one-line summary, e.g. "`add.Tensor`: element-wise addition of
/// tensors, functional", "`mm.out`: matrix product, writes into `out`" or
/// "`square`: operator, functional".
pub(crate) fn op_summary(f: &NativeFunction, op_name: &str) -> String {
    let base = f.func.name.name.base.as_str();
    let tagged = |t: &str| f.tags.iter().any(|x| x == t);
    let mut what = match known(base) {
        Some(words) => words.to_string(),
        None => "operator".to_string(),
    };
    let backward_of = base
        .strip_suffix("_backward")
        .or_else(|| base.strip_suffix("_backward_data"));
    if let Some(of) = backward_of {
        what = format!("gradient of `{}`", of.trim_start_matches('_'));
    }
    let mut s = format!("`{op_name}`: ");
    if tagged("pointwise") {
        s.push_str("element-wise ");
    }
    s.push_str(&what);
    if tagged("reduction") {
        s.push_str(" (a reduction)");
    } else if !f.func.has_tensor_arg() {
        s.push_str(" (a factory)");
    }
    if let Some(words) = overload_words(&f.func.name.overload_name) {
        s.push(' ');
        s.push_str(words);
    }
    s.push_str(", ");
    s.push_str(kind_words(f));
    if tagged("nondeterministic_seeded") {
        s.push_str(", random");
    }
    s
}
