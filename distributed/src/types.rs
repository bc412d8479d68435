//! The value types of collectives: reduction operations, how each Opal dtype
//! travels (its wire element type), and the header every rank compares before a
//! collective moves data.
//!
//! Owns: dtype and reduction rules (which pairs are refused, which travel widened).
//! Must not: call an engine or touch tensor data.

use opal::{DType, OpalError, Result};

/// A reduction, as `torch.distributed.ReduceOp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    /// The sum divided by the group's size (floating and complex dtypes only).
    Avg,
    Product,
    Min,
    Max,
}

impl ReduceOp {
    pub(crate) fn code(self) -> i64 {
        self as i64
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Avg => "avg",
            ReduceOp::Product => "product",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
        }
    }
}

/// An element type an engine moves and reduces natively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    U8,
    I8,
    I16,
    I32,
    I64,
    F32,
    F64,
    C64,
    C128,
}

/// A reduction an engine performs natively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Sum,
    Prod,
    Min,
    Max,
}

/// How a reduction of `dtype` with `op` runs: the element type on the wire (f16
/// and bf16 travel as f32 and are rounded back once; bool as bytes, where sum and
/// max are a logical or, product and min a logical and), the engine's operation,
/// and whether the result is divided by the group size afterwards (avg).
pub(crate) fn reduction(what: &str, dtype: DType, op: ReduceOp) -> Result<(Elem, Op, bool)> {
    let refuse = |why: &str| {
        Err(OpalError::msg(format!(
            "{what}: op={} is not supported for dtype={dtype:?} ({why})",
            op.name()
        )))
    };
    let elem = match dtype {
        DType::Bool => {
            return match op {
                ReduceOp::Sum | ReduceOp::Max => Ok((Elem::U8, Op::Max, false)),
                ReduceOp::Product | ReduceOp::Min => Ok((Elem::U8, Op::Min, false)),
                ReduceOp::Avg => refuse("an average of booleans is not a boolean"),
            }
        }
        DType::U8 => Elem::U8,
        DType::I8 => Elem::I8,
        DType::I16 => Elem::I16,
        DType::I32 => Elem::I32,
        DType::I64 => Elem::I64,
        DType::F16 | DType::BF16 | DType::F32 => Elem::F32,
        DType::F64 => Elem::F64,
        DType::C64 => Elem::C64,
        DType::C128 => Elem::C128,
    };
    let complex = matches!(elem, Elem::C64 | Elem::C128);
    let floating = matches!(elem, Elem::F32 | Elem::F64) || complex;
    Ok(match op {
        ReduceOp::Sum => (elem, Op::Sum, false),
        ReduceOp::Product => (elem, Op::Prod, false),
        ReduceOp::Avg if floating => (elem, Op::Sum, true),
        ReduceOp::Avg => return refuse("avg needs a floating or complex dtype"),
        ReduceOp::Min | ReduceOp::Max if complex => {
            return refuse("complex numbers are not ordered")
        }
        ReduceOp::Min => (elem, Op::Min, false),
        ReduceOp::Max => (elem, Op::Max, false),
    })
}

/// The dtype a reduction of `dtype` is computed in on the host (f16 and bf16
/// widen to f32; bool is reduced as its bytes).
pub(crate) fn wire_dtype(dtype: DType) -> DType {
    match dtype {
        DType::F16 | DType::BF16 => DType::F32,
        DType::Bool => DType::U8,
        d => d,
    }
}

/// Words in a [`Header`].
pub const HEADER_WORDS: usize = 16;

/// What each rank says about a collective before it moves data: the collective,
/// its sequence number in the group, the dtype, reduction and root, and the
/// shapes. Every rank receives every header, so every rank sees the same
/// mismatch and returns the same `Err`.
pub type Header = [i64; HEADER_WORDS];

/// The collectives, as header codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    AllReduce = 1,
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Barrier,
    Send,
    NewGroup,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::AllReduce => "all_reduce",
            Kind::Broadcast => "broadcast",
            Kind::Reduce => "reduce",
            Kind::AllGather => "all_gather",
            Kind::ReduceScatter => "reduce_scatter",
            Kind::AllToAll => "all_to_all",
            Kind::Barrier => "barrier",
            Kind::Send => "send/recv",
            Kind::NewGroup => "new_group",
        }
    }
}

pub(crate) fn dtype_code(d: DType) -> i64 {
    DType::ALL
        .iter()
        .position(|&x| x == d)
        .map_or(-1, |i| i as i64)
}

fn dtype_of_code(c: i64) -> String {
    usize::try_from(c)
        .ok()
        .and_then(|i| DType::ALL.get(i))
        .map_or_else(|| format!("code {c}"), |d| format!("{d:?}"))
}

/// Builds a header. `shape` is the tensor's shape as this rank sees it (for
/// collectives whose shapes differ by rank, the caller passes the part every
/// rank must agree on); more than 10 dimensions are folded into a hash.
pub(crate) fn header(
    kind: Kind,
    seq: u64,
    dtype: DType,
    op: i64,
    root: i64,
    shape: &[i64],
) -> Header {
    let mut h = [0i64; HEADER_WORDS];
    h[0] = kind as i64;
    h[1] = seq as i64;
    h[2] = dtype_code(dtype);
    h[3] = op;
    h[4] = root;
    h[5] = shape.len() as i64;
    if shape.len() <= HEADER_WORDS - 6 {
        h[6..6 + shape.len()].copy_from_slice(shape);
    } else {
        h[6] = shape.iter().fold(0xcbf2_9ce4_8422_2325u64, |a, &s| {
            (a ^ s as u64).wrapping_mul(0x0100_0000_01b3)
        }) as i64;
    }
    h
}

fn describe(h: &Header) -> String {
    let kind = [
        Kind::AllReduce,
        Kind::Broadcast,
        Kind::Reduce,
        Kind::AllGather,
        Kind::ReduceScatter,
        Kind::AllToAll,
        Kind::Barrier,
        Kind::Send,
        Kind::NewGroup,
    ]
    .into_iter()
    .find(|k| *k as i64 == h[0])
    .map_or("?", Kind::name);
    let nd = h[5].clamp(0, (HEADER_WORDS - 6) as i64) as usize;
    format!(
        "{kind} #{} dtype={} op={} root={} shape={:?}",
        h[1],
        dtype_of_code(h[2]),
        h[3],
        h[4],
        &h[6..6 + nd]
    )
}

/// Compares every rank's header with rank 0's (of the group): an `Err` naming the
/// collective, each disagreeing rank and what it called, identical on every rank.
pub(crate) fn check_headers(what: &str, ranks: &[usize], all: &[Header]) -> Result<()> {
    let first = &all[0];
    let bad: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(_, h)| *h != first)
        .map(|(i, h)| format!("rank {} called {}", ranks[i], describe(h)))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(OpalError::msg(format!(
        "{what}: the ranks disagree: rank {} called {}; {}",
        ranks[0],
        describe(first),
        bad.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reductions_follow_pytorch_rules() {
        assert_eq!(
            reduction("t", DType::Bool, ReduceOp::Sum).unwrap(),
            (Elem::U8, Op::Max, false)
        );
        assert_eq!(
            reduction("t", DType::Bool, ReduceOp::Product).unwrap(),
            (Elem::U8, Op::Min, false)
        );
        assert_eq!(
            reduction("t", DType::BF16, ReduceOp::Avg).unwrap(),
            (Elem::F32, Op::Sum, true)
        );
        let e = reduction("all_reduce", DType::I64, ReduceOp::Avg).unwrap_err();
        assert!(
            e.to_string().contains("op=avg") && e.to_string().contains("I64"),
            "{e}"
        );
        assert!(reduction("t", DType::C64, ReduceOp::Max).is_err());
        assert!(reduction("t", DType::Bool, ReduceOp::Avg).is_err());
        assert_eq!(
            reduction("t", DType::C128, ReduceOp::Product).unwrap(),
            (Elem::C128, Op::Prod, false)
        );
    }

    #[test]
    fn a_mismatch_names_the_ranks_and_what_they_called() {
        let a = header(Kind::AllReduce, 3, DType::F32, 0, -1, &[2, 3]);
        let b = header(Kind::AllReduce, 3, DType::F64, 0, -1, &[2, 3]);
        assert!(check_headers("all_reduce", &[0, 1], &[a, a]).is_ok());
        let e = check_headers("all_reduce", &[0, 1], &[a, b])
            .unwrap_err()
            .to_string();
        assert!(e.contains("rank 1 called all_reduce #3 dtype=F64"), "{e}");
        assert!(e.contains("shape=[2, 3]"), "{e}");
        let long = header(Kind::Broadcast, 0, DType::F32, 0, 0, &[1; 12]);
        let long2 = header(Kind::Broadcast, 0, DType::F32, 0, 0, &[1; 13]);
        assert_ne!(long, long2);
    }
}
