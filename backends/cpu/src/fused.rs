//! Fused element-wise programs over f32: a short straight-line program of
//! element-wise operations (arithmetic with tensors of one shape or constants,
//! clamps, activations) run block by block, so the intermediate values stay in
//! a few kilobytes of cache instead of being written to and read back from
//! memory by one kernel launch each. The graph interpreter of `opal-export`
//! builds these from chains of ATen nodes.
//!
//! Owns: [`Program`], its validation and its evaluation (vectorized builds for
//! AVX2 / AVX-512, split over threads for large tensors). Must not: know about
//! graphs, tensors or the dispatcher.

use crate::nn::vecmath::{erf_f32, has_avx2, has_avx512, multiversion, tanh_f32};
use opal::{OpalError, Result};

/// Elements per block: every register of a block fits in L1 together.
const BLOCK: usize = 256;
/// Below this many elements one thread runs the whole program.
const PARALLEL_MIN: usize = 1 << 15;

/// One operation. Binary ones read `a` and `b`; unary ones only `a`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    /// `a < b ? b : a` (NaN in `a` stays NaN, like `clamp(min=)`).
    ClampMin,
    /// `a > b ? b : a` (like `clamp(max=)`).
    ClampMax,
    /// `a ^ b` for a constant `b` (2 and 3 as products).
    Pow,
    Neg,
    Relu,
    Tanh,
    Sigmoid,
    Exp,
    Rsqrt,
    /// The exact GELU.
    Gelu,
    /// The tanh GELU.
    GeluTanh,
}

impl Op {
    /// True for operations that read `b`.
    pub fn is_binary(self) -> bool {
        matches!(
            self,
            Op::Add | Op::Sub | Op::Mul | Op::Div | Op::ClampMin | Op::ClampMax | Op::Pow
        )
    }
}

/// A register or a constant.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Operand {
    /// Registers `0..inputs` are the inputs; the rest hold results.
    Reg(usize),
    Const(f32),
}

/// `dst = op(a, b)`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Instr {
    pub op: Op,
    pub a: Operand,
    pub b: Operand,
    pub dst: usize,
}

/// A validated program: instruction `i` writes register `inputs + i`, and reads
/// only inputs, constants and registers written before it.
#[derive(Clone, Debug)]
pub struct Program {
    inputs: usize,
    instrs: Vec<Instr>,
    outputs: Vec<usize>,
}

impl Program {
    /// Checks the register discipline: `instrs[i].dst == inputs + i`, every read
    /// register defined earlier, every output a result register, `b` a constant
    /// for [`Op::Pow`].
    pub fn new(inputs: usize, instrs: Vec<Instr>, outputs: Vec<usize>) -> Result<Program> {
        let bad = |m: String| Err(OpalError::msg(format!("fused element-wise program: {m}")));
        for (i, ins) in instrs.iter().enumerate() {
            if ins.dst != inputs + i {
                return bad(format!(
                    "instruction {i} writes register {}, expected {}",
                    ins.dst,
                    inputs + i
                ));
            }
            let reads = [Some(ins.a), ins.op.is_binary().then_some(ins.b)];
            for r in reads.into_iter().flatten() {
                if let Operand::Reg(r) = r {
                    if r >= ins.dst {
                        return bad(format!(
                            "instruction {i} reads register {r} before it is written"
                        ));
                    }
                }
            }
            if ins.op == Op::Pow && !matches!(ins.b, Operand::Const(_)) {
                return bad(format!("instruction {i}: pow needs a constant exponent"));
            }
        }
        if let Some(o) = outputs
            .iter()
            .find(|&&o| o < inputs || o >= inputs + instrs.len())
        {
            return bad(format!("output register {o} is not a result"));
        }
        Ok(Program {
            inputs,
            instrs,
            outputs,
        })
    }

    /// Number of inputs.
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// Number of outputs.
    pub fn outputs(&self) -> usize {
        self.outputs.len()
    }

    /// Runs the program over `n` elements: `inputs[k]` and `outputs[k]` all have
    /// length `n`.
    pub fn run(&self, n: usize, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<()> {
        if inputs.len() != self.inputs
            || outputs.len() != self.outputs.len()
            || inputs.iter().any(|s| s.len() != n)
            || outputs.iter().any(|s| s.len() != n)
        {
            return Err(OpalError::msg(format!(
                "fused element-wise program: expected {} inputs and {} outputs of {n} elements",
                self.inputs,
                self.outputs.len()
            )));
        }
        if n < PARALLEL_MIN || rayon::current_num_threads() < 2 {
            run_range(self, inputs, outputs, 0, n);
            return Ok(());
        }
        let parts = rayon::current_num_threads().min(n / (PARALLEL_MIN / 2));
        let per = n.div_ceil(parts).div_ceil(BLOCK) * BLOCK;
        let outs: Vec<crate::parallel::SharedPtr<f32>> = outputs
            .iter_mut()
            .map(|o| crate::parallel::SharedPtr(o.as_mut_ptr()))
            .collect();
        crate::parallel::fork_chunks(n.div_ceil(per), |c| {
            let (s, e) = (c * per, ((c + 1) * per).min(n));
            let mut mine: Vec<&mut [f32]> = outs
                .iter()
                // SAFETY: each output has `n` elements (checked above) and stays
                // borrowed by the caller until the fork returns; chunks cover
                // disjoint ranges `s..e`, so no element is written twice.
                .map(|p| unsafe { std::slice::from_raw_parts_mut(p.at(s), e - s) })
                .collect();
            let ins: Vec<&[f32]> = inputs.iter().map(|x| &x[s..e]).collect();
            run_range(self, &ins, &mut mine, 0, e - s);
        });
        Ok(())
    }
    /// Runs a one-output program with its output written over input `donor`:
    /// `data` holds that input on entry and the output on return (a value that
    /// nothing reads after the program gives its buffer instead of a new one
    /// being allocated). `others` are the other inputs in order, each of
    /// `data.len()` elements. Each block of the donor is read before the same
    /// block of the output is written, so the values are those of [`Program::run`].
    pub fn run_in_place(&self, donor: usize, others: &[&[f32]], data: &mut [f32]) -> Result<()> {
        let n = data.len();
        if self.outputs.len() != 1
            || donor >= self.inputs
            || others.len() + 1 != self.inputs
            || others.iter().any(|s| s.len() != n)
        {
            return Err(OpalError::msg(format!(
                "fused element-wise program: in place needs one output and {} other inputs of {n} elements, got {} outputs, donor {donor}, {} other inputs",
                self.inputs.saturating_sub(1),
                self.outputs.len(),
                others.len()
            )));
        }
        let t = self.outputs[0] - self.inputs;
        let run = |start: usize, chunk: &mut [f32]| {
            let mut regs = vec![0.0f32; self.instrs.len() * BLOCK];
            let mut held = [0.0f32; BLOCK];
            for (b, blk) in chunk.chunks_mut(BLOCK).enumerate() {
                let (at, len) = (start + b * BLOCK, blk.len());
                held[..len].copy_from_slice(blk);
                let ins: Vec<&[f32]> = (0..self.inputs)
                    .map(|k| match k.cmp(&donor) {
                        std::cmp::Ordering::Less => &others[k][at..at + len],
                        std::cmp::Ordering::Equal => &held[..len],
                        std::cmp::Ordering::Greater => &others[k - 1][at..at + len],
                    })
                    .collect();
                run_block(self, &ins, &mut regs, 0, len);
                blk.copy_from_slice(&regs[t * BLOCK..t * BLOCK + len]);
            }
        };
        if n < PARALLEL_MIN || rayon::current_num_threads() < 2 {
            run(0, data);
            return Ok(());
        }
        let parts = rayon::current_num_threads().min(n / (PARALLEL_MIN / 2));
        let per = n.div_ceil(parts).div_ceil(BLOCK) * BLOCK;
        crate::parallel::fork_chunks_mut(data, per, |c, chunk| run(c * per, chunk));
        Ok(())
    }
}

fn run_range(p: &Program, inputs: &[&[f32]], outputs: &mut [&mut [f32]], s: usize, e: usize) {
    let mut regs = vec![0.0f32; p.instrs.len() * BLOCK];
    let mut at = s;
    while at < e {
        let len = BLOCK.min(e - at);
        run_block(p, inputs, &mut regs, at, len);
        for (o, &r) in outputs.iter_mut().zip(&p.outputs) {
            let t = r - p.inputs;
            o[at..at + len].copy_from_slice(&regs[t * BLOCK..t * BLOCK + len]);
        }
        at += len;
    }
}

multiversion!(run_block(p: &Program, inputs: &[&[f32]], regs: &mut [f32], at: usize, len: usize) -> () {
    for (i, ins) in p.instrs.iter().enumerate() {
        // Results before instruction i live below `i * BLOCK`; it writes its own block.
        let (done, rest) = regs.split_at_mut(i * BLOCK);
        let dst = &mut rest[..len];
        let src = |o: Operand| -> Src<'_> {
            match o {
                Operand::Const(c) => Src::Const(c),
                Operand::Reg(r) if r < p.inputs => Src::Slice(&inputs[r][at..at + len]),
                Operand::Reg(r) => {
                    let t = r - p.inputs;
                    Src::Slice(&done[t * BLOCK..t * BLOCK + len])
                }
            }
        };
        let (a, b) = (src(ins.a), src(ins.b));
        match ins.op {
            Op::Add => binary(dst, a, b, |x, y| x + y),
            Op::Sub => binary(dst, a, b, |x, y| x - y),
            Op::Mul => binary(dst, a, b, |x, y| x * y),
            Op::Div => binary(dst, a, b, |x, y| x / y),
            Op::ClampMin => binary(dst, a, b, |x, y| if x < y { y } else { x }),
            Op::ClampMax => binary(dst, a, b, |x, y| if x > y { y } else { x }),
            Op::Pow => match b {
                Src::Const(2.0) => unary(dst, a, |x| x * x),
                Src::Const(3.0) => unary(dst, a, |x| x * x * x),
                Src::Const(y) => unary(dst, a, |x| x.powf(y)),
                Src::Slice(_) => unreachable!("Program::new requires a constant exponent"),
            },
            Op::Neg => unary(dst, a, |x| -x),
            Op::Relu => unary(dst, a, |x| if x < 0.0 { 0.0 } else { x }),
            Op::Tanh => unary(dst, a, tanh_f32),
            Op::Sigmoid => unary(dst, a, |x| 1.0 / (1.0 + crate::nn::vecmath::exp_f32(-x))),
            Op::Exp => unary(dst, a, crate::nn::vecmath::exp_f32),
            Op::Rsqrt => unary(dst, a, |x| 1.0 / x.sqrt()),
            Op::Gelu => unary(dst, a, |x| x * 0.5 * (1.0 + erf_f32(x * std::f32::consts::FRAC_1_SQRT_2))),
            Op::GeluTanh => unary(dst, a, |x| {
                let inner = 0.797_884_6 * (x + 0.044_715 * x * x * x);
                0.5 * x * (1.0 + tanh_f32(inner))
            }),
        }
    }
});

#[derive(Copy, Clone)]
enum Src<'a> {
    Slice(&'a [f32]),
    Const(f32),
}

#[inline(always)]
fn binary(dst: &mut [f32], a: Src<'_>, b: Src<'_>, f: impl Fn(f32, f32) -> f32) {
    match (a, b) {
        (Src::Slice(a), Src::Slice(b)) => {
            for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
                *d = f(x, y);
            }
        }
        (Src::Slice(a), Src::Const(y)) => {
            for (d, &x) in dst.iter_mut().zip(a) {
                *d = f(x, y);
            }
        }
        (Src::Const(x), Src::Slice(b)) => {
            for (d, &y) in dst.iter_mut().zip(b) {
                *d = f(x, y);
            }
        }
        (Src::Const(x), Src::Const(y)) => dst.fill(f(x, y)),
    }
}

#[inline(always)]
fn unary(dst: &mut [f32], a: Src<'_>, f: impl Fn(f32) -> f32) {
    match a {
        Src::Slice(a) => {
            for (d, &x) in dst.iter_mut().zip(a) {
                *d = f(x);
            }
        }
        Src::Const(x) => dst.fill(f(x)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(r: usize) -> Operand {
        Operand::Reg(r)
    }

    #[test]
    fn hardswish_chain_matches_its_definition() {
        // y = x * clamp(x + 3, 0, 6) / 6, over sizes around the block and the
        // parallel split.
        let prog = Program::new(
            1,
            vec![
                Instr {
                    op: Op::Add,
                    a: reg(0),
                    b: Operand::Const(3.0),
                    dst: 1,
                },
                Instr {
                    op: Op::ClampMin,
                    a: reg(1),
                    b: Operand::Const(0.0),
                    dst: 2,
                },
                Instr {
                    op: Op::ClampMax,
                    a: reg(2),
                    b: Operand::Const(6.0),
                    dst: 3,
                },
                Instr {
                    op: Op::Mul,
                    a: reg(0),
                    b: reg(3),
                    dst: 4,
                },
                Instr {
                    op: Op::Div,
                    a: reg(4),
                    b: Operand::Const(6.0),
                    dst: 5,
                },
            ],
            vec![5, 1],
        )
        .unwrap();
        for n in [0, 1, 255, 256, 257, 1000, 70_001] {
            let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 8.0).collect();
            let (mut y, mut t) = (vec![0.0; n], vec![0.0; n]);
            prog.run(n, &[&x], &mut [&mut y, &mut t]).unwrap();
            for i in 0..n {
                let want = x[i] * (x[i] + 3.0).clamp(0.0, 6.0) / 6.0;
                assert_eq!(y[i], want, "n={n} i={i}");
                assert_eq!(t[i], x[i] + 3.0);
            }
        }
    }

    #[test]
    fn activations_and_pow_match_scalar_math() {
        let x: Vec<f32> = (0..600).map(|i| (i as f32 - 300.0) / 50.0).collect();
        for (op, f) in [
            (Op::Tanh, (|v: f64| v.tanh()) as fn(f64) -> f64),
            (Op::Sigmoid, |v| 1.0 / (1.0 + (-v).exp())),
            (Op::Relu, |v| v.max(0.0)),
            (Op::Neg, |v| -v),
            (Op::Exp, |v| v.exp()),
            (Op::GeluTanh, |v| {
                0.5 * v * (1.0 + (0.797_884_560_802_865_4 * (v + 0.044715 * v * v * v)).tanh())
            }),
            (Op::Gelu, |v| 0.5 * v * (1.0 + libm::erf(v / 2f64.sqrt()))),
        ] {
            let p = Program::new(
                1,
                vec![Instr {
                    op,
                    a: reg(0),
                    b: Operand::Const(0.0),
                    dst: 1,
                }],
                vec![1],
            )
            .unwrap();
            let mut y = vec![0.0; x.len()];
            p.run(x.len(), &[&x], &mut [&mut y]).unwrap();
            for (&v, &g) in x.iter().zip(&y) {
                let w = f(v as f64);
                assert!(
                    (g as f64 - w).abs() <= 1e-6 * w.abs().max(1.0),
                    "{op:?}({v}) = {g}, want {w}"
                );
            }
        }
        let p = Program::new(
            1,
            vec![Instr {
                op: Op::Pow,
                a: reg(0),
                b: Operand::Const(3.0),
                dst: 1,
            }],
            vec![1],
        )
        .unwrap();
        let mut y = vec![0.0; x.len()];
        p.run(x.len(), &[&x], &mut [&mut y]).unwrap();
        assert_eq!(y[0], x[0] * x[0] * x[0]);
    }

    #[test]
    fn in_place_runs_match_runs_into_new_buffers() {
        // y = (a - x) * relu(x) with the buffer of x or of a taken, over sizes
        // around the block and the parallel split.
        let prog = Program::new(
            2,
            vec![
                Instr {
                    op: Op::Sub,
                    a: reg(1),
                    b: reg(0),
                    dst: 2,
                },
                Instr {
                    op: Op::Relu,
                    a: reg(0),
                    b: Operand::Const(0.0),
                    dst: 3,
                },
                Instr {
                    op: Op::Mul,
                    a: reg(2),
                    b: reg(3),
                    dst: 4,
                },
            ],
            vec![4],
        )
        .unwrap();
        for n in [0, 1, 255, 257, 1000, 70_001] {
            let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 8.0).collect();
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let mut want = vec![0.0; n];
            prog.run(n, &[&x, &a], &mut [&mut want]).unwrap();
            let mut y = x.clone();
            prog.run_in_place(0, &[&a], &mut y).unwrap();
            assert_eq!(y, want, "n={n}, the first input's buffer");
            let mut y = a.clone();
            prog.run_in_place(1, &[&x], &mut y).unwrap();
            assert_eq!(y, want, "n={n}, the second input's buffer");
        }
        let mut y = vec![0.0; 4];
        assert!(prog.run_in_place(2, &[&[0.0; 4]], &mut y).is_err());
        assert!(prog.run_in_place(0, &[&[0.0; 3]], &mut y).is_err());
    }

    #[test]
    fn bad_programs_and_sizes_are_errors() {
        let ins = |dst, a| Instr {
            op: Op::Add,
            a: reg(a),
            b: Operand::Const(1.0),
            dst,
        };
        assert!(Program::new(1, vec![ins(2, 0)], vec![2])
            .unwrap_err()
            .to_string()
            .contains("writes register 2"));
        assert!(Program::new(1, vec![ins(1, 1)], vec![1])
            .unwrap_err()
            .to_string()
            .contains("before it is written"));
        assert!(Program::new(1, vec![ins(1, 0)], vec![0])
            .unwrap_err()
            .to_string()
            .contains("not a result"));
        let pow = Instr {
            op: Op::Pow,
            a: reg(0),
            b: reg(0),
            dst: 1,
        };
        assert!(Program::new(1, vec![pow], vec![1])
            .unwrap_err()
            .to_string()
            .contains("constant exponent"));
        let p = Program::new(1, vec![ins(1, 0)], vec![1]).unwrap();
        let mut y = vec![0.0; 3];
        assert!(p.run(4, &[&[0.0; 4]], &mut [&mut y]).is_err());
    }
}
