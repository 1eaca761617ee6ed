// bench/bench_capture.cpp — captured steps (train::CapturedStep) against eager ember and
// against PyTorch, eager and CUDA-graphed, in the same run (issue 9). Skips with a message
// (exit 0) when there is no CUDA device.
//
//   tiny  16 f32 elements, z = z * a + b 500 times = 1000 ops, forward only: µs per op eager
//         (target ≤ 3.5 and ≥ 2.5× PyTorch eager) and captured (target ≤ 0.6).
//   mlp   train::mlp(784, {256, 256}, 10), batch 128, Adam lr 1e-3, data on the GPU: ms per
//         step eager (target ≥ 5× PyTorch's fused Adam in each of five runs) and captured
//         (target ≤ 0.04 ms and ≥ 5× PyTorch's whole-step CUDA graph, capturable Adam).
//   cnn   train::fashion_cnn(), batch 128 (conv + BatchNorm + pool): eager and captured beside
//         PyTorch eager and graphed (reported).
// `bench_capture profile` prints the CNN eager step's Profiler table and ends with the captured
// step's replays (for Nsight Compute); `python3 bench/torch/capture_bench.py profile` prints
// PyTorch's kernel table of the same step.
// Each step also reports kernels per step (the graph's kernel nodes), GPU time per step (the
// graph replayed back to back: device-bound) and host time per step (a block of calls issued
// with no sync). Timing: median of blocks, the device synchronised before and after each
// block. Validation first: captured steps against eager steps from the same weights, bitwise.
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "bench_util.hpp"
#include "ember/ember.hpp"
#include "ember/optim/adam.hpp"
#include "ember/train/capture.hpp"
#include "ember/train/models.hpp"
#include "nlohmann/json.hpp"
#include "torch_reference.hpp"
#if defined(EMBER_BENCH_LAUNCH_FLOOR)
#include "launch_floor.hpp"
#endif

namespace {

using ember::Device;
using ember::Tensor;
using ember::train::CapturedStep;

const Device kGpu = Device::cuda(0);
constexpr int kChainSteps = 500;  // 2 ops each
constexpr int kChainOps = 2 * kChainSteps;
constexpr int kRuns = 5;  // independent timings of each step figure

void sync() { ember::synchronize(kGpu); }

bench::Timing time_blocks(const std::function<void()>& fn, int warmup, int blocks, int per_block) {
  return bench::time_blocks(fn, warmup, blocks, per_block, sync);
}

/// Host time of one call, µs: `calls` calls issued back to back, no sync inside.
double host_us(const std::function<void()>& fn, int calls) {
  sync();
  const auto start = bench::Clock::now();
  for (int i = 0; i < calls; ++i) fn();
  const double us = std::chrono::duration<double>(bench::Clock::now() - start).count() * 1e6;
  sync();
  return us / calls;
}

std::optional<double> ref(const nlohmann::json& py, const char* group, const char* key) {
  if (py.is_null() || !py.contains(group) || !py[group].contains(key) || py[group][key].is_null())
    return std::nullopt;
  return py[group][key].get<double>();
}

std::vector<double> refs(const nlohmann::json& py, const char* group, const char* key) {
  if (py.is_null() || !py.contains(group) || !py[group].contains(key)) return {};
  return py[group][key].get<std::vector<double>>();
}

Tensor chain(Tensor z, const Tensor& a, const Tensor& b) {
  for (int i = 0; i < kChainSteps; ++i) z = z * a + b;
  return z;
}

// What one launch costs with no ember code in the way (bench/launch_floor.cu): the floor the
// tiny op's figures are read against.
void bench_launch_floor() {
#if defined(EMBER_BENCH_LAUNCH_FLOOR)
  LaunchFloor floor;
  try {
    floor = launch_floor();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launch_floor: could not run: %s\n", e.what());
    return;
  }
  std::fprintf(stderr, "launch_floor: %-38s %8s %8s %8s  (µs; %d launches)\n", "launch", "host",
               "stream", "graph", 1000);
  for (const LaunchFloorFigure& f : floor.launches) {
    std::fprintf(stderr, "launch_floor: %-38s %8.3f %8.3f %8.3f\n", f.name.c_str(), f.host_us,
                 f.stream_us, f.graph_us);
    bench::emit("launch_floor", f.host_us, std::nullopt, "us", false, 1.0,
                {bench::str("launch", f.name), bench::num("stream_us", f.stream_us),
                 bench::num("graph_us", f.graph_us)});
  }
  for (const LaunchFloorCall& c : floor.calls) {
    std::fprintf(stderr, "launch_floor: host call %-28s %8.4f µs\n", c.name.c_str(), c.us);
    bench::emit("launch_floor_call", c.us, std::nullopt, "us", false, 1.0,
                {bench::str("call", c.name)});
  }
#else
  std::fprintf(stderr, "launch_floor: not built (bench_capture without CUDA headers)\n");
#endif
}

bool bench_tiny(const nlohmann::json& py) {
  ember::NoGradGuard no_grad;
  ember::manual_seed(0);
  const Tensor x = ember::rand({16}, {.device = kGpu}, -1.0, 1.0);
  const Tensor a = ember::full({16}, 1.0001, {.device = kGpu});
  const Tensor b = ember::full({16}, 0.0001, {.device = kGpu});
  CapturedStep graph([&](const std::vector<Tensor>& in) { return std::vector{chain(in[0], a, b)}; },
                     {.warmup = 0});
  const std::vector<float> want = chain(x, a, b).to_vector<float>();
  const std::vector<float> got = graph({x})[0].to_vector<float>();
  if (!bench::report("capture_tiny", "captured chain vs eager chain",
                     bench::compare(got.data(), want.data(), 16, 0.0, 0.0), 16))
    return false;
  const double eager =
      time_blocks([&] { bench::do_not_optimize(chain(x, a, b).data_ptr()); }, 3, 21, 1).median *
      1e3 / kChainOps;
  const double captured = time_blocks([&] { graph({x}); }, 3, 21, 10).median * 1e3 / kChainOps;
  const double eager_host =
      host_us([&] { bench::do_not_optimize(chain(x, a, b).data_ptr()); }, 1) / kChainOps;
  // Where an eager op's host time goes (host issue per call, no sync): an in-place op (checks
  // and one launch, no allocation), a new tensor with no kernel (allocation and its free), and
  // an out-of-place op (both).
  Tensor z = x.clone();
  const double inplace_us = host_us([&] { z.mul_(a); }, 1000);
  const double alloc_us = host_us(
      [&] { bench::do_not_optimize(ember::empty({16}, {.device = kGpu}).data_ptr()); }, 1000);
  const double outofplace_us = host_us([&] { bench::do_not_optimize((z * a).data_ptr()); }, 1000);
  // The kernel table's slots alone (no op layer): fill (one tiny kernel) and binary mul.
  const ember::backend::Backend& be = ember::backend::backend_for(kGpu);
  const ember::backend::View zv{z.data_ptr(), z.dtype(), 0, z.shape(), z.strides()};
  const ember::backend::View av{a.data_ptr(), a.dtype(), 0, a.shape(), a.strides()};
  const double fill_us = host_us([&] { be.fill(zv, 1.0); }, 1000);
  const double slot_us =
      host_us([&] { be.binary(ember::backend::BinaryOp::mul, zv, zv, av); }, 1000);
  std::fprintf(stderr,
               "capture_tiny: host µs per call: in-place mul_ %.2f, empty() %.2f, z * a %.2f; "
               "slots alone: fill %.2f, binary mul %.2f\n",
               inplace_us, alloc_us, outofplace_us, fill_us, slot_us);
  const auto py_eager = ref(py, "tiny", "eager_us_per_op");
  const auto py_graph = ref(py, "tiny", "graph_us_per_op");
  std::fprintf(stderr,
               "capture_tiny: eager %.2f µs/op (host issue %.2f), captured %.3f µs/op (%lld "
               "kernels); PyTorch eager %.2f, graphed %.3f\n",
               eager, eager_host, captured, static_cast<long long>(graph.kernels_per_step()),
               py_eager.value_or(NAN), py_graph.value_or(NAN));
  bench::emit("capture_tiny_eager", eager, py_eager, "us/op", false, 2.5,
              {bench::num("target_us_per_op", 3.5), bench::num("host_us_per_op", eager_host)});
  bench::emit("capture_tiny_graph", captured, py_graph, "us/op", false, 1.0,
              {bench::num("target_us_per_op", 0.6),
               bench::num("kernels", static_cast<double>(graph.kernels_per_step()))});
  return true;
}

// One training step (zero_grad, forward, cross_entropy, backward, Adam) of `net`.
struct Trainer {
  ember::nn::Module net;
  std::unique_ptr<ember::optim::Adam> opt;
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) {
    opt->zero_grad();
    Tensor loss = ember::cross_entropy(net(in[0]), in[1]);
    loss.backward();
    opt->step();
    return {loss};
  }
};

Trainer make_trainer(const std::function<ember::nn::Module()>& make) {
  ember::manual_seed(42);
  Trainer t{make(), nullptr};
  t.net->to(kGpu);
  t.net->train();
  t.opt = std::make_unique<ember::optim::Adam>(t.net->parameters(),
                                               ember::optim::AdamOptions{.lr = 1e-3});
  return t;
}

// Eager and captured: the same 5 losses from the same weights, bitwise.
bool validate_step(const char* name, const std::function<ember::nn::Module()>& make,
                   const std::vector<Tensor>& batch) {
  Trainer eager = make_trainer(make), graphed = make_trainer(make);
  CapturedStep step([&](const std::vector<Tensor>& in) { return graphed(in); });
  std::vector<float> want, got;
  for (int i = 0; i < 5; ++i) {
    want.push_back(eager(batch)[0].item<float>());
    got.push_back(step(batch)[0].item<float>());
  }
  return bench::report(name, "captured losses vs eager losses (5 Adam steps, bitwise)",
                       bench::compare(got.data(), want.data(), 5, 0.0, 0.0), 5);
}

void bench_step(const char* name, const std::function<ember::nn::Module()>& make,
                const std::vector<Tensor>& batch, const nlohmann::json& py, bool targets) {
  Trainer eager = make_trainer(make), graphed = make_trainer(make);
  CapturedStep step([&](const std::vector<Tensor>& in) { return graphed(in); });
  for (int i = 0; i < 3; ++i) step(batch);  // warm-up and capture
  std::vector<double> eager_ms, graph_ms;
  for (int r = 0; r < kRuns; ++r) {
    eager_ms.push_back(time_blocks([&] { eager(batch); }, 10, 25, 10).median);
    graph_ms.push_back(time_blocks([&] { step(batch); }, 10, 25, 10).median);
  }
  const double eager_host = host_us([&] { eager(batch); }, 20);
  const double graph_host = host_us([&] { step(batch); }, 20);
  // Replays back to back keep the device busy: the time per replay is the GPU's per step.
  const double gpu_ms = time_blocks([&] { step(batch); }, 10, 11, 100).best;
  const std::string group = name;
  const std::vector<double> py_eager = refs(py, group.c_str(), "eager_ms");
  const std::vector<double> py_graph = refs(py, group.c_str(), "graph_ms");
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? NAN : v[v.size() / 2];
  };
  double worst_eager = INFINITY, worst_graph = INFINITY;
  for (int r = 0; r < kRuns; ++r) {
    if (r < static_cast<int>(py_eager.size()))
      worst_eager = std::min(worst_eager, py_eager[r] / eager_ms[r]);
    if (r < static_cast<int>(py_graph.size()))
      worst_graph = std::min(worst_graph, py_graph[r] / graph_ms[r]);
  }
  std::fprintf(stderr,
               "%s: eager %.4f ms/step (host %.1f µs), captured %.4f ms/step (host %.1f µs, GPU "
               "%.4f ms, %lld kernels); PyTorch eager %.4f, graphed %.4f; worst of %d runs: "
               "%.2fx eager, %.2fx graphed\n",
               name, median(eager_ms), eager_host, median(graph_ms), graph_host, gpu_ms,
               static_cast<long long>(step.kernels_per_step()), median(py_eager), median(py_graph),
               kRuns, worst_eager, worst_graph);
  const std::vector<bench::Field> common = {
      bench::num("kernels_per_step", static_cast<double>(step.kernels_per_step())),
      bench::num("gpu_ms_per_step", gpu_ms),
      bench::num("torch_kernels_per_step", ref(py, name, "kernels_per_step").value_or(NAN))};
  auto with = [&](std::vector<bench::Field> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  const double eager_target = targets ? 5.0 : 1.0, graph_target = targets ? 5.0 : 1.0;
  bench::emit(std::string(name) + "_eager", median(eager_ms),
              py_eager.empty() ? std::nullopt : std::optional<double>(median(py_eager)), "ms",
              false, eager_target,
              with({bench::num("host_us_per_step", eager_host),
                    bench::num("worst_run_speedup", worst_eager)}));
  bench::emit(std::string(name) + "_graph", median(graph_ms),
              py_graph.empty() ? std::nullopt : std::optional<double>(median(py_graph)), "ms",
              false, graph_target,
              with({bench::num("host_us_per_step", graph_host),
                    bench::num("worst_run_speedup", worst_graph),
                    bench::num("target_ms", targets ? 0.04 : NAN)}));
}

// `bench_capture profile`: the CNN's eager step under ember's Profiler (10 steps after 3), then
// the captured step's warm-up, capture and 4 replays, last of all, so that a kernel profiler
// (Nsight Compute) can take the final kernels_per_step kernels as one replay.
void profile_cnn(const std::vector<Tensor>& batch) {
  Trainer eager = make_trainer([] { return ember::train::fashion_cnn(); });
  for (int i = 0; i < 3; ++i) eager(batch);
  {
    ember::Profiler prof;
    prof.name_modules(eager.net);
    for (int i = 0; i < 10; ++i) {
      eager(batch);
      prof.step();
    }
    prof.stop();
    std::printf("cnn eager step, 10 steps:\n%s\n",
                prof.table({.sort_by = ember::ProfileSort::device_time, .row_limit = 40}).c_str());
  }
  Trainer graphed = make_trainer([] { return ember::train::fashion_cnn(); });
  CapturedStep step([&](const std::vector<Tensor>& in) { return graphed(in); });
  for (int i = 0; i < 8; ++i) step(batch);
  ember::synchronize(kGpu);
  std::printf("cnn captured step: %lld kernels a replay (the last that many kernels are one)\n",
              static_cast<long long>(step.kernels_per_step()));
}

}  // namespace

int main(int argc, char** argv) {
  if (!ember::cuda_available()) {
    std::fprintf(stderr, "bench_capture: no CUDA device; skipped\n");
    return 0;
  }
  // `bench_capture tiny`: the launch floor and the tiny op only (PyTorch's tiny figures too).
  const bool tiny_only = argc > 1 && std::string(argv[1]) == "tiny";
  if (argc > 1 && std::string(argv[1]) == "profile") {
    ember::manual_seed(1);
    profile_cnn({ember::rand({128, 1, 28, 28}, {.device = kGpu}),
                 ember::randint(0, 10, {128}, {.device = kGpu})});
    return 0;
  }
  const nlohmann::json py = bench::run_torch_script(
      "bench_capture", tiny_only ? "capture_bench.py tiny" : "capture_bench.py");
  bench_launch_floor();
  ember::manual_seed(1);
  const std::vector<Tensor> flat = {ember::rand({128, 784}, {.device = kGpu}),
                                    ember::randint(0, 10, {128}, {.device = kGpu})};
  const std::vector<Tensor> images = {ember::rand({128, 1, 28, 28}, {.device = kGpu}),
                                      ember::randint(0, 10, {128}, {.device = kGpu})};
  auto mlp = [] { return ember::train::mlp(784, {256, 256}, 10); };
  auto cnn = [] { return ember::train::fashion_cnn(); };
  bool ok = bench_tiny(py);
  if (tiny_only) return ok ? 0 : 1;
  ok = validate_step("capture_mlp", mlp, flat) && ok;
  ok = validate_step("capture_cnn", cnn, images) && ok;
  if (!ok) return 1;
  bench_step("mlp", mlp, flat, py, true);
  bench_step("cnn", cnn, images, py, false);
  return 0;
}
