"""Load + validate of a native_functions.yaml: `opal-codegen check` as a whole process
against torchgen's in-process `parse_native_yaml`, alternating, same run.

Each round times torchgen's first parse in a fresh Python process, inside that
process (its import and the interpreter's start are not counted) and then `opal-codegen check` from spawn to
exit (process start, reading, parsing, validation, the Rust-name check, printing,
exit all counted). Prints one JSON object with every figure, the medians and the
ratio of the medians.

    cargo build --release -p opal-codegen --features cli
    ~/.cache/opal-anchors/venv/bin/python bench/anchors/codegen_load.py target/release/opal-codegen [--rounds 15]

The YAML is PyTorch 2.15's from ../shared/fixtures/pytorch-2.15 unless --yaml says
otherwise (its tags.yaml beside it).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_YAML = os.path.join(ROOT, "..", "shared", "fixtures", "pytorch-2.15", "native_functions.yaml")


TORCHGEN_PARSE = """
import sys, time
from torchgen.gen import parse_native_yaml
t = time.perf_counter()
parse_native_yaml(sys.argv[1], sys.argv[2])
print(time.perf_counter() - t)
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("codegen", help="path of the opal-codegen binary")
    ap.add_argument("--yaml", default=DEFAULT_YAML)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    tags = os.path.join(os.path.dirname(args.yaml), "tags.yaml")

    cmd = [os.path.abspath(args.codegen), "check", args.yaml, "--tags", tags]
    torchgen_s, opal_s = [], []
    for _ in range(args.rounds):
        # torchgen keeps parsed files in process-wide caches: one process per parse.
        out = subprocess.run([sys.executable, "-c", TORCHGEN_PARSE, args.yaml, tags],
                             check=True, capture_output=True, text=True).stdout
        torchgen_s.append(float(out.strip().splitlines()[-1]))
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        opal_s.append(time.perf_counter() - t)
    med_t, med_o = statistics.median(torchgen_s), statistics.median(opal_s)
    print(json.dumps({
        "yaml": os.path.relpath(args.yaml, ROOT),
        "rounds": args.rounds,
        "load_avg": os.getloadavg()[0],
        "torchgen_parse_ms": [round(x * 1e3, 1) for x in torchgen_s],
        "opal_check_process_ms": [round(x * 1e3, 1) for x in opal_s],
        "torchgen_parse_median_ms": round(med_t * 1e3, 1),
        "opal_check_process_median_ms": round(med_o * 1e3, 1),
        "speedup": round(med_t / med_o, 1),
    }, indent=1))


if __name__ == "__main__":
    main()
