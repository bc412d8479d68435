#!/usr/bin/env bash
# Builds and runs core_ops.cpp against the anchor venv's libtorch (../../../shared/anchors/setup.sh
# installs it); prints one JSON line of `core_<op>_<size>_us` keys for opal-bench --vs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${OPAL_ANCHORS:-$HOME/.cache/opal-anchors}/venv
[ -x "$venv/bin/python" ] || { echo "no anchor venv: run ../shared/anchors/setup.sh" >&2; exit 1; }
tp=$("$venv/bin/python" -c 'import torch, os; print(os.path.dirname(torch.__file__))')
bin=${OPAL_ANCHORS:-$HOME/.cache/opal-anchors}/core_ops_bench
if [ ! -x "$bin" ] || [ "$here/core_ops.cpp" -nt "$bin" ]; then
  g++ -O2 -std=c++20 -D_GLIBCXX_USE_CXX11_ABI=1 -I"$tp/include" -I"$tp/include/torch/csrc/api/include" \
    "$here/core_ops.cpp" -L"$tp/lib" -ltorch_cpu -lc10 -Wl,-rpath,"$tp/lib" -o "$bin"
fi
exec "$bin"
