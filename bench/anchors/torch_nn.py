"""PyTorch's figures for opal-bench's nn keys, measured on this machine in this run.

Prints one JSON object with `softmax_256x1024_f32_us` (`torch._softmax` over the
last dim), `layer_norm_256x1024_f32_us` (`torch.native_layer_norm` over 1024 with
weight and bias) and `conv2d_64x3x32x32_f32_us` (`torch.convolution` of a
64x3x32x32 input with 16 3x3 filters, bias, stride 1, padding 1; also printed under
opal-bench's key `conv2d_64x3x32x32_k3_16_f32_us`), with 2 intra-op threads,
timed like opal-bench and libtorch_bench.cpp: the median over 7 repetitions of the
mean time of N calls, after a warm-up. The ops are the ATen ones opal-bench calls.

    ~/.cache/opal-anchors/venv/bin/python bench/anchors/torch_nn.py > /tmp/torch_nn.json
    cargo run --release -p opal-bench -- --vs /tmp/torch_nn.json
"""

import json
import statistics
import sys
import time

import torch

REPS = 7


def median_us(fn, iters):
    """Median over REPS repetitions of the mean time of `iters` calls, in us."""
    for _ in range(max(iters // 4, 3)):
        fn()
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            fn()
        times.append((time.perf_counter_ns() - t0) / iters / 1e3)
    return statistics.median(times)


def main():
    torch.set_num_threads(2)
    torch.manual_seed(0)
    out = {
        "engine": f"pytorch {torch.__version__} (python)",
        "threads": torch.get_num_threads(),
    }
    with torch.inference_mode():
        x = torch.randn(256, 1024)
        out["softmax_256x1024_f32_us"] = median_us(
            lambda: torch._softmax(x, -1, False), 200
        )
        w, b = torch.randn(1024), torch.randn(1024)
        out["layer_norm_256x1024_f32_us"] = median_us(
            lambda: torch.native_layer_norm(x, [1024], w, b, 1e-5), 200
        )
        inp = torch.randn(64, 3, 32, 32)
        weight, bias = torch.randn(16, 3, 3, 3), torch.randn(16)
        conv = median_us(
            lambda: torch.convolution(
                inp, weight, bias, [1, 1], [1, 1], [1, 1], False, [0, 0], 1
            ),
            10,
        )
        out["conv2d_64x3x32x32_f32_us"] = conv
        out["conv2d_64x3x32x32_k3_16_f32_us"] = conv
    json.dump({k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
