"""Alternating runs of PyTorch's training anchor and opal-bench's training keys,
with each round's ratio and the median per key.

PyTorch's step times on this shared machine move by 1.5x from minute to minute, so
one pair says little: this runs `../shared/anchors/train_bench.py` and then
`opal-bench --json --only train`, N times, and prints for each key both programs'
figures, every round's speedup (PyTorch time / Opal time) and their median.

    cargo build --release -p opal-bench
    ~/.cache/opal-anchors/venv/bin/python bench/anchors/paired_train.py --runs 7
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired import run_json  # noqa: E402  (the last JSON line a command prints)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ANCHOR = os.path.join(ROOT, "..", "shared", "anchors", "train_bench.py")
KEYS = ["train_mlp_step_us", "train_cnn_step_us", "train_gpt_step_us", "autograd_add_1elem_ns"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--opal", default=os.path.join(ROOT, "target", "release", "opal-bench"))
    args = ap.parse_args()
    if not os.access(args.opal, os.X_OK):
        sys.exit(f"paired_train.py: no opal-bench at {args.opal}; run `cargo build --release -p opal-bench`")
    rounds = []
    for i in range(args.runs):
        anchor = run_json([sys.executable, ANCHOR])
        opal = run_json([args.opal, "--json", "--only", "train"])
        rounds.append((anchor, opal))
        print(f"round {i + 1}/{args.runs} done", file=sys.stderr)
    print("| key | opal | PyTorch | speedup per round | median |")
    print("|---|---|---|---|---|")
    for k in KEYS:
        ours = [o[k] for _, o in rounds]
        theirs = [a[k] for a, _ in rounds]
        ratios = [t / o for t, o in zip(theirs, ours)]
        print(f"| {k} | {' '.join(f'{x:.0f}' for x in ours)} | {' '.join(f'{x:.0f}' for x in theirs)} "
              f"| {' '.join(f'{r:.2f}' for r in ratios)} | {statistics.median(ratios):.2f}x |")
    print(f"\nload average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
