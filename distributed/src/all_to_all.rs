//! `all_to_all` and `all_to_all_single`: every rank sends one block to every
//! rank, blocks of any size (PyTorch's uneven all-to-all). Before the data
//! moves, ranks all-gather how many elements each sends and expects, so a block
//! whose size its receiver does not expect is an `Err` on every rank instead of
//! a truncated message.
//!
//! Owns: the block bookkeeping of all-to-all. Must not: call MPI (the engine
//! does).

use crate::engine::{wait_until, Buf, Coll};
use crate::group::{defined, host_cat, write_blocks, ProcessGroup, Work};
use crate::stage::{host_empty, write_back};
use crate::types::Kind;
use opal::autograd::NoGradGuard;
use opal::{ops, DType, OpalError, Result, Tensor};

/// Checks that what each rank sends to each other one is what that one
/// expects; every rank sees the same table, so every rank returns the same `Err`.
fn check_counts(table: &[Vec<i64>], what: &str) -> Result<()> {
    let n = table.len();
    for (i, row) in table.iter().enumerate() {
        for (j, peer) in table.iter().enumerate() {
            let (sends, expects) = (row[j], peer[n + i]);
            if sends != expects {
                return Err(OpalError::msg(format!(
                    "{what}: rank {i} sends {sends} elements to rank {j} (its input {j}), \
                     which expects {expects} (its output {i})"
                )));
            }
        }
    }
    Ok(())
}

impl ProcessGroup {
    /// Sends `inputs[j]` to rank j and receives rank i's `inputs[rank]` into
    /// `outs[i]`. Blocks may differ in shape and size (`outs[i]` must have as
    /// many elements as rank i sends here, and the shape of the caller's
    /// choosing); every tensor has one dtype.
    pub fn all_to_all(&self, outs: &[Tensor], inputs: &[Tensor]) -> Result<()> {
        self.all_to_all_async(outs, inputs)?.wait()
    }

    /// [`Self::all_to_all`], returning once started.
    pub fn all_to_all_async(&self, outs: &[Tensor], inputs: &[Tensor]) -> Result<Work> {
        let what = "all_to_all";
        let dtype = list_dtype(inputs, outs, self.size(), what)?;
        let expect: Vec<i64> = outs.iter().map(Tensor::numel).collect();
        let outs = outs.to_vec();
        self.exchange_blocks(what, dtype, inputs, expect, move |r| write_blocks(r, &outs))
    }

    /// Sends `inputs[j]` to rank j and receives `expect[i]` elements from rank i,
    /// one block after another in a flat host tensor that `finish` writes out.
    fn exchange_blocks(
        &self,
        what: &'static str,
        dtype: DType,
        inputs: &[Tensor],
        expect: Vec<i64>,
        finish: impl FnOnce(&Tensor) -> Result<()> + Send + 'static,
    ) -> Result<Work> {
        let deadline = self.begin(Kind::AllToAll, dtype, 0, -1, &[])?;
        let mine: Vec<i64> = inputs
            .iter()
            .map(Tensor::numel)
            .chain(expect.clone())
            .collect();
        let table = self.all_gather_counts(&mine, deadline, what)?;
        check_counts(&table, what)?;
        let _ng = NoGradGuard::new();
        let send = host_cat(inputs, dtype)?;
        let recv = host_empty(&[expect.iter().sum()], dtype)?;
        let bytes = |n: i64| n as usize * send.element_size();
        let c = Coll::AllToAll {
            send_counts: inputs.iter().map(|t| bytes(t.numel())).collect(),
            recv_counts: expect.iter().map(|&n| bytes(n)).collect(),
            send: Buf::of(&send)?,
            recv: Buf::of(&recv)?,
        };
        self.start(what, c, Some(Box::new(move || finish(&recv))), deadline)
    }

    /// [`Self::all_to_all`] of one tensor split along dim 0: `input`'s rows in
    /// blocks of `input_split_sizes` rows (equal blocks when `None`), rank i's
    /// block for this rank into `output`'s rows in blocks of
    /// `output_split_sizes`. Both tensors have the same shape past dim 0.
    pub fn all_to_all_single(
        &self,
        output: &Tensor,
        input: &Tensor,
        output_split_sizes: Option<&[i64]>,
        input_split_sizes: Option<&[i64]>,
    ) -> Result<()> {
        self.all_to_all_single_async(output, input, output_split_sizes, input_split_sizes)?
            .wait()
    }

    /// [`Self::all_to_all_single`], returning once started.
    pub fn all_to_all_single_async(
        &self,
        output: &Tensor,
        input: &Tensor,
        output_split_sizes: Option<&[i64]>,
        input_split_sizes: Option<&[i64]>,
    ) -> Result<Work> {
        let what = "all_to_all_single";
        defined(output, what, "output")?;
        defined(input, what, "input")?;
        if input.dim() == 0 || output.dim() == 0 || input.sizes()[1..] != output.sizes()[1..] {
            return Err(OpalError::msg(format!(
                "{what}: output {:?} and input {:?} must have a dim 0 and the same sizes past it",
                output.sizes(),
                input.sizes()
            )));
        }
        if input.dtype() != output.dtype() {
            return Err(OpalError::msg(format!(
                "{what}: output is {:?}, input {:?}; both must have one dtype",
                output.dtype(),
                input.dtype()
            )));
        }
        let mut at = 0;
        let ins: Vec<Tensor> = self
            .rows(input, input_split_sizes, what, "input_split_sizes")?
            .into_iter()
            .map(|s| {
                let block = ops::narrow(input, 0, at, s);
                at += s;
                block
            })
            .collect::<Result<_>>()?;
        let row: i64 = output.sizes()[1..].iter().product();
        let expect: Vec<i64> = self
            .rows(output, output_split_sizes, what, "output_split_sizes")?
            .into_iter()
            .map(|s| s * row)
            .collect();
        // The output is written once, whole: a narrowed view of it may be a copy
        // on a device whose views fall back to the CPU.
        let target = output.clone();
        self.exchange_blocks(what, input.dtype(), &ins, expect, move |r| {
            write_back(r, &target)
        })
    }

    /// How many rows of `t` (along dim 0) go to or come from each rank.
    fn rows(&self, t: &Tensor, split: Option<&[i64]>, what: &str, arg: &str) -> Result<Vec<i64>> {
        let (rows, n) = (t.sizes()[0], self.size() as i64);
        let sizes = match split {
            Some(s) => s.to_vec(),
            None if rows % n == 0 => vec![rows / n; n as usize],
            None => {
                return Err(OpalError::msg(format!(
                    "{what}: dim 0 ({rows}) does not split evenly into {n} ranks; pass {arg}"
                )))
            }
        };
        if sizes.len() != n as usize
            || sizes.iter().any(|&s| s < 0)
            || sizes.iter().sum::<i64>() != rows
        {
            return Err(OpalError::msg(format!(
                "{what}: {arg}={sizes:?} must have {n} non-negative entries summing to dim 0 ({rows})"
            )));
        }
        Ok(sizes)
    }

    /// Every rank's `mine` (same length on every rank), in rank order.
    fn all_gather_counts(
        &self,
        mine: &[i64],
        deadline: std::time::Instant,
        what: &str,
    ) -> Result<Vec<Vec<i64>>> {
        let n = self.size();
        let send = Tensor::from_slice(mine, &[mine.len() as i64])?;
        let recv = host_empty(&[(n * mine.len()) as i64], DType::I64)?;
        let c = Coll::AllGather {
            send: Buf::of(&send)?,
            recv: Buf::of(&recv)?,
        };
        let p = self.engine().start(c)?;
        wait_until(p, deadline, what).inspect_err(|e| self.abort_with(e.to_string()))?;
        let all = recv.to_vec::<i64>()?;
        Ok(all.chunks(mine.len()).map(<[i64]>::to_vec).collect())
    }
}

/// The one dtype of both lists, each of one tensor per rank.
fn list_dtype(inputs: &[Tensor], outs: &[Tensor], n: usize, what: &str) -> Result<DType> {
    for (arg, ts) in [("input_tensor_list", inputs), ("output_tensor_list", outs)] {
        if ts.len() != n {
            return Err(OpalError::msg(format!(
                "{what}: {arg} has {} tensors, the group has {n} ranks",
                ts.len()
            )));
        }
        for (i, t) in ts.iter().enumerate() {
            defined(t, what, &format!("{arg}[{i}]"))?;
        }
    }
    let dtype = inputs[0].dtype();
    let odd = inputs.iter().chain(outs).find(|t| t.dtype() != dtype);
    if let Some(t) = odd {
        return Err(OpalError::msg(format!(
            "{what}: tensors of dtypes {dtype:?} and {:?}; all must have one dtype",
            t.dtype()
        )));
    }
    Ok(dtype)
}
