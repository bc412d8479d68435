"""Generated backend code size, Opal against torchgen, for the same op list.

Writes the backend YAML `torchgen_backend.py` times (the first 400 operators of
PyTorch 2.15's native_functions.yaml with a CPU kernel, under `backend: XLA`, in
torchgen's format, which opal-codegen reads too), generates it with
`torchgen.gen_backend_stubs` and with `opal-codegen backend` (with `--ops-path
::opal::ops`, the form a backend uses against the YAML its `opal` was generated
from, and without it, carrying the per-op items registration needs), and prints one JSON
object with the byte counts and ratios.

    cargo build --release -p opal-codegen --features cli
    ~/.cache/opal-anchors/venv/bin/python bench/anchors/backend_size.py target/release/opal-codegen
"""

import json
import os
import subprocess
import sys
import tempfile

import torchgen
import yaml

OPS = 400


def main():
    codegen = os.path.abspath(sys.argv[1])
    pkg = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native")
    native = os.path.join(pkg, "native_functions.yaml")
    with open(native) as f:
        entries = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    ops = []
    for e in entries:
        dispatch = e.get("dispatch") or {}
        if "CPU" in {k.strip() for key in dispatch for k in key.split(",")}:
            ops.append(e["func"].split("(", 1)[0])
    work = tempfile.mkdtemp()
    src = os.path.join(work, "bench.yaml")
    with open(src, "w") as f:
        f.write("backend: XLA\ncpp_namespace: bench\nsupported:\n")
        f.writelines(f"- {op}\n" for op in ops[:OPS])

    def size(d):
        return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))

    def run(args, out):
        os.makedirs(out)
        subprocess.run(args + [out], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return size(out)

    torch_bytes = run([sys.executable, "-m", "torchgen.gen_backend_stubs", "-s", src, "-o"], os.path.join(work, "tg"))
    base = [codegen, "backend", src, "--native", native]
    ops_path = run(base + ["--ops-path", "::opal::ops", "--out"], os.path.join(work, "opal_ops_path"))
    carried = run(base + ["--out"], os.path.join(work, "opal_carried"))
    print(json.dumps({
        "ops": min(OPS, len(ops)),
        "torchgen_bytes": torch_bytes,
        "opal_ops_path_bytes": ops_path,
        "opal_carried_bytes": carried,
        "opal_ops_path_ratio": round(ops_path / torch_bytes, 2),
        "opal_carried_ratio": round(carried / torch_bytes, 2),
    }, indent=1))


if __name__ == "__main__":
    main()
