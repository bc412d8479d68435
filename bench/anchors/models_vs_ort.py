"""Exported models, paired: Opal, onnxruntime and PyTorch eager in the same run.

Each round runs `opal-bench --json --only models` (a fresh process), PyTorch
eager (a fresh process: after torch.onnx.export a process's eager runs are orders
of magnitude slower) and then, in this process, onnxruntime 1.31 on the same models (the builders
of ../shared/anchors/export_models.py, seed 0, the same inputs as the fixtures),
all on 2 threads, timed like ../shared/anchors/ort_bench.py (median of single
runs after 3 warm-up runs). The ONNX exports and onnxruntime sessions are made
once, before the first round. Prints a Markdown table: per model the medians over
the rounds, and the median of the per-round ratios (a ratio above 1 means Opal is
faster), then the peak memory table.

Peak memory is what one inference allocates beyond what was live before it (the
weights and inputs are not counted, the outputs are): Opal's
`model_<name>_peak_bytes` (its counting allocator, kernel scratch included),
PyTorch's from the CPU allocation events of `torch.profiler` (profile_memory).

    cargo build --release -p opal-bench
    ~/.cache/opal-anchors/venv/bin/python bench/anchors/models_vs_ort.py --rounds 5 [--only NAME...] [--json FILE]
"""

import argparse
import json
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED_ANCHORS = os.path.join(ROOT, "..", "shared", "anchors")
THREADS = 2


def timeit(f):
    for _ in range(3):
        f()
    ts = []
    end = time.perf_counter() + 3.0
    while len(ts) < 5 or (time.perf_counter() < end and len(ts) < 200):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


def torch_peak_bytes(torch, model, args):
    """Peak of the running sum of CPU allocations during one forward."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
        model(*args)
    ev = [e for e in p.profiler.kineto_results.events() if e.name() == "[memory]"]
    ev.sort(key=lambda e: e.start_ns())
    cur = peak = 0
    for e in ev:
        cur += e.nbytes()
        peak = max(peak, cur)
    return peak


def eager_only(names):
    """In a process of its own: after torch.onnx.export (dynamo) in a process,
    PyTorch's eager runs there are orders of magnitude slower. Prints
    {name: {"us", "peak_bytes"}}; the profiler runs after the timing."""
    import torch

    torch.set_num_threads(THREADS)
    em = runpy.run_path(os.path.join(SHARED_ANCHORS, "export_models.py"))
    res = {}
    for name in names:
        torch.manual_seed(0)
        model, args = em["SETS"]["public"][name]()
        model.eval()
        with torch.no_grad():
            us = timeit(lambda: model(*args))
        res[name] = {"us": us}
    for name in names:
        torch.manual_seed(0)
        model, args = em["SETS"]["public"][name]()
        model.eval()
        with torch.no_grad():
            model(*args)
        res[name]["peak_bytes"] = torch_peak_bytes(torch, model, args)
    print(json.dumps(res))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--opal", default=os.path.join(ROOT, "target", "release", "opal-bench"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--json", dest="json_out", help="write every raw figure here")
    ap.add_argument("--eager", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.eager:
        return eager_only(a.eager)
    if not os.access(a.opal, os.X_OK):
        sys.exit(f"models_vs_ort.py: no opal-bench at {a.opal}; run `cargo build --release -p opal-bench`")

    import torch
    import onnxruntime as ort

    torch.set_num_threads(THREADS)
    em = runpy.run_path(os.path.join(SHARED_ANCHORS, "export_models.py"))
    tmp = tempfile.TemporaryDirectory()
    models = {}
    for name, build in em["SETS"]["public"].items():
        if a.only and name not in a.only:
            continue
        torch.manual_seed(0)
        model, args = build()
        model.eval()
        p = os.path.join(tmp.name, name + ".onnx")
        with torch.no_grad():
            torch.onnx.export(model, args, p, dynamo=True, verbose=False)
        so = ort.SessionOptions()
        so.intra_op_num_threads = THREADS
        so.inter_op_num_threads = 1
        s = ort.InferenceSession(p, so, providers=["CPUExecutionProvider"])
        feed = {i.name: x.numpy() for i, x in zip(s.get_inputs(), args)}
        models[name] = [model, args, s, feed, None]
        print(f"{name}: exported", file=sys.stderr, flush=True)

    rounds = []
    for r in range(a.rounds):
        env = dict(os.environ, RAYON_NUM_THREADS=str(THREADS))
        out = subprocess.run([a.opal, "--json", "--only", "models"], check=True,
                             capture_output=True, text=True, cwd=ROOT, env=env).stdout
        opal = json.loads(out.strip().splitlines()[-1])
        out = subprocess.run([sys.executable, __file__, "--eager", *models], check=True,
                             capture_output=True, text=True).stdout
        eager = json.loads(out.strip().splitlines()[-1])
        row = {}
        for name, (model, args, s, feed, _) in models.items():
            ortus = timeit(lambda: s.run(None, feed))
            row[name] = {"opal_us": opal.get(f"model_{name}_us"), "eager_us": eager[name]["us"], "ort_us": ortus,
                         "opal_peak_bytes": opal.get(f"model_{name}_peak_bytes")}
            models[name][4] = eager[name]["peak_bytes"]
        rounds.append(row)
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)


    med = lambda xs: statistics.median(xs)
    print("| model | Opal | onnxruntime | PyTorch eager | onnxruntime / Opal (per round) | median | eager / Opal |")
    print("|---|---|---|---|---|---|---|")
    for name in models:
        o = [r[name]["opal_us"] for r in rounds]
        t = [r[name]["ort_us"] for r in rounds]
        e = [r[name]["eager_us"] for r in rounds]
        if None in o:
            print(f"| {name} | (no Opal figure) | {med(t):.0f} µs | {med(e):.0f} µs | | | |")
            continue
        ro = [y / x for x, y in zip(o, t)]
        re = [y / x for x, y in zip(o, e)]
        per = " / ".join(f"{x:.2f}x" for x in ro)
        print(f"| {name} | {med(o):.0f} µs | {med(t):.0f} µs | {med(e):.0f} µs | {per} | {med(ro):.2f}x | {med(re):.1f}x |")
    print()
    print("| model | Opal peak | PyTorch eager peak | Opal / eager |")
    print("|---|---|---|---|")
    for name, m in models.items():
        ob = rounds[-1][name]["opal_peak_bytes"]
        tb = m[4]
        if ob is None:
            print(f"| {name} | (no Opal figure) | {tb / 1024:.0f} KiB | |")
        else:
            print(f"| {name} | {ob / 1024:.0f} KiB | {tb / 1024:.0f} KiB | {ob / tb:.2f} |")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"rounds": rounds, "eager_peak_bytes": {n: m[4] for n, m in models.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
