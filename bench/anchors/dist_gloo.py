#!/usr/bin/env python3
"""PyTorch's torch.distributed with the Gloo backend, 2 ranks on this machine: the
reference for opal-distributed's `dist_bench` (same keys).

Keys (medians, microseconds): allreduce_{1kb,1mb,64mb}_f32_us (all_reduce SUM of
that many bytes of float32, after a barrier), ddp_{mlp,gpt}_step_us (one training
step of ../shared/fixtures/training/<model> wrapped in DistributedDataParallel:
forward, backward with Gloo's gradient all_reduce, SGD; each rank on half of the
batch, float32). Each rank runs 1 thread (2 ranks on 2 cores), as `dist_bench`
under RAYON_NUM_THREADS=1. Prints one JSON line.

Run with the anchor venv: ~/.cache/opal-anchors/venv/bin/python bench/anchors/dist_gloo.py
With `--paired N`, it alternates N times with opal-distributed's `dist_bench`
under `mpirun -n 2` (build it first:
`cargo build --release -p opal-distributed --features mpi --example dist_bench`)
and prints a table: both medians and the median of the per-round ratios (Gloo
time / Opal time; above 1, Opal is faster).
"""
import argparse, json, os, socket, statistics, subprocess, sys, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "shared")
sys.path.insert(0, os.path.join(SHARED, "anchors"))
from train_bench import forward  # noqa: E402  (the fixtures' models, as PyTorch code)


def allreduce_us(nbytes, iters):
    x = torch.ones(nbytes // 4, dtype=torch.float32)
    for _ in range(3):
        dist.all_reduce(x)
    ts = []
    for _ in range(iters):
        dist.barrier()
        t = time.perf_counter()
        dist.all_reduce(x)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


class Model(torch.nn.Module):
    def __init__(self, kind, sizes, init):
        super().__init__()
        self.kind, self.sizes = kind, sizes
        self.names = list(init)
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(init[n].float().clone()) for n in self.names])

    def forward(self, batch):
        return forward(self.kind, self.sizes, dict(zip(self.names, self.ps)), batch)


def ddp_step_us(kind, rank, world, steps=30):
    d = os.path.join(SHARED, "fixtures", "training", kind)
    s = json.load(open(os.path.join(d, "spec.json")))["sizes"]
    init = load_file(os.path.join(d, "init.safetensors"))
    data = load_file(os.path.join(d, "data.safetensors"))
    half = lambda t: t.chunk(world, dim=0)[rank].contiguous()
    batch = (half(data["tokens"][0]),) if kind == "gpt" else (half(data["x"][0].float()), half(data["y"][0]))
    model = torch.nn.parallel.DistributedDataParallel(Model(kind, s, init))
    opt = torch.optim.SGD(model.parameters(), lr=s["lr"])
    ts = []
    for i in range(steps + 5):
        dist.barrier()
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(batch)
        loss.backward()
        opt.step()
        if i >= 5:
            ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


def run(rank, world, port, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    out = {
        "allreduce_1kb_f32_us": allreduce_us(1 << 10, 500),
        "allreduce_1mb_f32_us": allreduce_us(1 << 20, 100),
        "allreduce_64mb_f32_us": allreduce_us(64 << 20, 10),
        "ddp_mlp_step_us": ddp_step_us("mlp", rank, world),
        "ddp_gpt_step_us": ddp_step_us("gpt", rank, world),
    }
    if rank == 0:
        queue.put(out)
    dist.destroy_process_group()


def gloo():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=run, args=(r, 2, port, queue)) for r in range(2)]
    for p in procs:
        p.start()
    res = queue.get()
    for p in procs:
        p.join()
    out = {"engine": f"torch {torch.__version__} distributed gloo", "ranks": 2}
    out.update({k: round(v, 1) for k, v in res.items()})
    return out


KEYS = ["allreduce_1kb_f32_us", "allreduce_1mb_f32_us", "allreduce_64mb_f32_us", "ddp_mlp_step_us", "ddp_gpt_step_us"]


def opal(exe):
    cmd = ["mpirun", "-n", "2", "--oversubscribe", "-x", "RAYON_NUM_THREADS=1"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    text = subprocess.run(cmd + [exe], check=True, capture_output=True, text=True).stdout
    return json.loads([l for l in text.splitlines() if l.startswith("{")][-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paired", type=int, default=0, help="rounds alternating with opal's dist_bench")
    root = os.path.dirname(os.path.dirname(HERE))
    ap.add_argument("--opal", default=os.path.join(root, "target", "release", "examples", "dist_bench"))
    args = ap.parse_args()
    if args.paired == 0:
        print(json.dumps(gloo()))
        return
    rounds = []
    for i in range(args.paired):
        rounds.append((gloo(), opal(args.opal)))
        print(f"round {i + 1}/{args.paired}: {json.dumps(rounds[-1])}", file=sys.stderr)
    print("| key | Opal (median) | Gloo (median) | median ratio (range) |")
    print("|---|---|---|---|")
    for k in KEYS:
        g = [r[0][k] for r in rounds]
        o = [r[1][k] for r in rounds]
        ratios = [a / b for a, b in zip(g, o)]
        print(f"| `{k}` | {statistics.median(o):.1f} µs | {statistics.median(g):.1f} µs | "
              f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}–{max(ratios):.2f}x) |")


if __name__ == "__main__":
    main()
