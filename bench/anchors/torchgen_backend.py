"""torchgen's backend generation on this machine, for `cargo bench -p opal-codegen --bench backend`.

Writes a backend YAML supporting, under the XLA key (torchgen accepts only its own
keys), the first 400 operators of PyTorch 2.15's
native_functions.yaml that have a CPU kernel (the rule codegen/benches/backend.rs
uses), runs `python -m torchgen.gen_backend_stubs` on it (the command out-of-tree
backends run, which loads the native YAML itself) and prints one JSON object with
`backend_gen_400_s`, the median of 5 runs, each a fresh process.

    ~/.cache/opal-anchors/venv/bin/python bench/anchors/torchgen_backend.py
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torchgen
import yaml

OPS = 400
RUNS = 5


def cpu_ops(native_yaml):
    with open(native_yaml) as f:
        entries = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    names = []
    for e in entries:
        dispatch = e.get("dispatch") or {}
        keys = {k.strip() for key in dispatch for k in key.split(",")}
        if "CPU" in keys:
            names.append(e["func"].split("(", 1)[0])
    return names[:OPS]


def main():
    pkg = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native")
    ops = cpu_ops(os.path.join(pkg, "native_functions.yaml"))
    work = tempfile.mkdtemp()
    src = os.path.join(work, "bench.yaml")
    with open(src, "w") as f:
        f.write("backend: XLA\ncpp_namespace: bench\nsupported:\n")
        f.writelines(f"- {op}\n" for op in ops)
    times = []
    for i in range(RUNS):
        out = os.path.join(work, f"out{i}")
        os.makedirs(out)
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "torchgen.gen_backend_stubs", "-s", src, "-o", out],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        times.append(time.perf_counter() - t)
    print(json.dumps({
        "engine": "torchgen " + __import__("torch").__version__,
        "ops": len(ops),
        "backend_gen_400_s": round(statistics.median(times), 3),
    }))


if __name__ == "__main__":
    main()
