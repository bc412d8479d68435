// libtorch's figures for opal-bench's core-opset keys (`core_<op>_<size>_us`), measured
// on this machine in the same run as opal-bench: the same ops on the same shapes,
// float32 (bool for `any`), 2 intra-op threads, the median over 7 repetitions of the
// mean time of N calls after a warm-up (as ../../../shared/anchors/libtorch_bench.cpp
// times). Sizes: `1k` = 1,024 input elements, `1m` = 1,048,576. The shapes are listed
// once, in opal-bench's bench/src/measures/core_ops.rs; keep the two in step.
// Build and run: bench/anchors/core_ops.sh > /tmp/core_ops.json
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/headeronly/version.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using clk = std::chrono::steady_clock;

template <class F> double median_us(int iters, F f) {
  for (int i = 0; i < std::max(iters / 4, 3); i++) f();
  std::vector<double> v;
  for (int r = 0; r < 7; r++) {
    auto t0 = clk::now();
    for (int i = 0; i < iters; i++) f();
    v.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count() / iters);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static std::string out;
static void put(const std::string& key, double us) {
  char buf[128];
  snprintf(buf, sizeof buf, ", \"%s\": %.3f", key.c_str(), us);
  out += buf;
}

// One size: `side` is the square root of the element count (32 or 1024).
static void run(const char* tag, int64_t side, int iters) {
  const int64_t n = side * side;
  auto x = at::randn({n});
  auto pos = at::rand({n}) + 0.5;  // inside acos/log domains after scaling
  auto k = std::string("core_");
  auto s = std::string("_") + tag + "_us";
  put(k + "log2" + s, median_us(iters, [&] { auto r = at::log2(pos); }));
  put(k + "sin" + s, median_us(iters, [&] { auto r = at::sin(x); }));
  put(k + "div_scalar" + s, median_us(iters, [&] { auto r = at::div(x, 3.0); }));
  put(k + "gt_scalar" + s, median_us(iters, [&] { auto r = at::gt(x, 0.25); }));
  auto m = at::randn({side, side});
  auto b = at::gt(m, 1.5);
  put(k + "any_dim" + s, median_us(iters, [&] { auto r = at::any(b, 1, false); }));
  put(k + "var_dim" + s, median_us(iters, [&] { auto r = at::var(m, at::IntArrayRef{1}, 1.0, false); }));
  put(k + "mean_dim" + s, median_us(iters, [&] { auto r = at::mean(m, at::IntArrayRef{1}, false); }));
  auto mt = m.t();
  put(k + "clone_strided" + s, median_us(iters, [&] { auto r = at::clone(mt); }));
  auto dst = at::empty({side, side});
  put(k + "copy_strided" + s, median_us(iters, [&] { dst.copy_(mt); }));
  auto idx = at::randint(0, n, {n / 4}, at::kLong);
  auto vals = at::randn({n / 4});
  put(k + "index_put" + s, median_us(iters, [&] {
    auto r = at::index_put(x, c10::List<std::optional<at::Tensor>>({idx}), vals, false);
  }));
  auto sidx = at::randint(0, n / 4, {n}, at::kLong);
  auto base = at::zeros({n / 4});
  put(k + "scatter_reduce_sum" + s, median_us(iters, [&] {
    auto r = at::scatter_reduce(base, 0, sidx, x, "sum", true);
  }));
  // N=4, C=16: H*W = n / 64.
  int64_t hw = side / 8;
  auto bn_in = at::randn({4, 16, hw, hw});
  auto w = at::randn({16}), bias = at::randn({16}), rm = at::randn({16}), rv = at::rand({16}) + 0.5;
  put(k + "batch_norm_infer" + s, median_us(iters, [&] {
    auto r = at::_native_batch_norm_legit_no_training(bn_in, w, bias, rm, rv, 0.1, 1e-5);
  }));
  // N=1, C=4, H=W=side/2: n elements in, 4n out.
  auto img = at::randn({1, 4, side / 2, side / 2});
  put(k + "upsample_bilinear2d" + s, median_us(std::max(iters / 4, 1), [&] {
    auto r = at::upsample_bilinear2d(img, at::IntArrayRef{side, side}, false, std::nullopt, std::nullopt);
  }));
  put(k + "avg_pool2d" + s, median_us(iters, [&] {
    auto r = at::avg_pool2d(img, {3, 3}, {2, 2}, {1, 1}, false, true, std::nullopt);
  }));
}

int main() {
  at::set_num_threads(2);
  at::manual_seed(0);
  run("1k", 32, 20000);
  run("1m", 1024, 40);
  printf("{\"engine\": \"libtorch %d.%d.%d\", \"threads\": %d%s}\n", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH, at::get_num_threads(), out.c_str());
  return 0;
}
