"""Alternating runs of the anchors and opal-bench, with the median ratio per key.

On a shared, noisy machine one anchor run and one Opal run minutes apart can differ
by 2x for reasons that have nothing to do with either. This runs the three programs
back to back N times (libtorch_bench.sh, torch_nn.py, then opal-bench --json), so
each Opal figure has an anchor figure from the same minute, and prints for every
shared key each run's speedup (anchor time / Opal time; Opal GFLOP/s / anchor
GFLOP/s) and their median, as a Markdown table; `--json FILE` also writes every raw
figure.

    cargo build --release -p opal-bench
    ~/.cache/opal-anchors/venv/bin/python bench/anchors/paired.py --runs 5
    ~/.cache/opal-anchors/venv/bin/python bench/anchors/paired.py --group core_ops

`--group core_ops` pairs `opal-bench --only core_ops` with libtorch's core_ops.sh
(the core ATen opset's `core_<op>_<size>_us` keys) instead.

Needs the anchor venv (../shared/anchors/setup.sh installs it) and a release build
of opal-bench at target/release/opal-bench (or --opal PATH).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED_ANCHORS = os.path.join(ROOT, "..", "shared", "anchors")


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--opal", default=os.path.join(ROOT, "target", "release", "opal-bench"))
    ap.add_argument("--json", dest="json_out", help="write every raw figure here")
    ap.add_argument("--group", choices=["default", "core_ops"], default="default")
    args = ap.parse_args()
    if not os.access(args.opal, os.X_OK):
        sys.exit(f"paired.py: no opal-bench at {args.opal}; run `cargo build --release -p opal-bench`")

    runs = []
    for i in range(args.runs):
        if args.group == "core_ops":
            anchor = run_json(["bash", os.path.join(HERE, "core_ops.sh")])
            opal = run_json([args.opal, "--only", "core_ops", "--json"])
        else:
            anchor = run_json(["bash", os.path.join(SHARED_ANCHORS, "libtorch_bench.sh")])
            anchor.update(run_json([sys.executable, os.path.join(HERE, "torch_nn.py")]))
            opal = run_json([args.opal, "--json"])
        runs.append({"anchor": anchor, "opal": opal})
        print(f"run {i + 1}/{args.runs} done", file=sys.stderr)

    keys = [k for k, v in runs[0]["opal"].items()
            if isinstance(v, (int, float)) and k in runs[0]["anchor"] and k != "threads"]
    print(f"| key | opal (median) | anchor (median) | speedup per run | median speedup |")
    print("|---|---|---|---|---|")
    for k in keys:
        ours = [r["opal"][k] for r in runs]
        theirs = [r["anchor"][k] for r in runs]
        if k.endswith("_gflops"):
            ratios = [o / t for o, t in zip(ours, theirs)]
        else:
            ratios = [t / o for o, t in zip(ours, theirs)]
        per_run = " / ".join(f"{x:.2f}x" for x in ratios)
        print(f"| {k} | {statistics.median(ours):.4g} | {statistics.median(theirs):.4g} "
              f"| {per_run} | {statistics.median(ratios):.2f}x |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
