// bench/bench_profiler_off.cpp — what ember's profiler hooks cost when no Profiler records
// (issue 28: "off by default at no measurable cost"), and what recording costs.
//
// Every op, module forward, range and kernel-table call passes one hook (Note [Profiling at
// no cost when off] in src/core/profiler.hpp): a relaxed atomic load and a not-taken branch.
// A build without the hooks cannot sit beside this one in the same run, so the cost is
// measured from its parts:
//   1. ns per hook: a loop of 10^8 detail::ProfileScope objects (off) against the same loop
//      without them (both with a compiler barrier per iteration);
//   2. hooks per step: one step recorded by a Profiler, counting every op, module, range and
//      kernel-table call it saw (each passed one hook when off);
//   3. the step's own time with nothing recording (median of interleaved blocks), and with a
//      Profiler recording (its overhead when on).
// Off cost per step = ns per hook × hooks per step, printed beside the step time. Workloads:
// `tiny` (z = z * a + b on 16 elements, 1000 ops: the op-bound worst case) and `mlp`
// (train::mlp(784, {256, 256}, 10), batch 128, Adam: bench_capture's MLP step), on the CPU
// and, when there is one, the GPU. Validation first: the recorded step computes what the
// unrecorded one does (bitwise).
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ember/ember.hpp"
#include "ember/optim/adam.hpp"
#include "ember/profiler.hpp"
#include "ember/train/models.hpp"

namespace {

using ember::Device;
using ember::Tensor;

// ns per off hook: a ProfileScope opened and closed with no Profiler recording.
double ns_per_hook() {
  return bench::ns_per_call(
      [] { ember::detail::ProfileScope s(ember::ProfileKind::op, "bench", -1); });
}

struct Workload {
  std::string name;
  std::function<Tensor()> step;  // one step; returns something to validate
};

Workload tiny(Device d) {
  auto z = std::make_shared<Tensor>(ember::ones({16}, {.device = d}));
  const Tensor a = ember::full({16}, 0.999, {.device = d});
  const Tensor b = ember::full({16}, 0.001, {.device = d});
  return {"tiny (1000 ops)", [z, a, b] {
            ember::NoGradGuard g;
            Tensor x = *z;
            for (int i = 0; i < 500; ++i) x = x * a + b;
            return x;
          }};
}

Workload mlp(Device d) {
  ember::manual_seed(42);
  auto net = std::make_shared<ember::nn::Module>(ember::train::mlp(784, {256, 256}, 10));
  (*net)->to(d);
  auto opt = std::make_shared<ember::optim::Adam>((*net)->parameters(),
                                                  ember::optim::AdamOptions{.lr = 1e-3});
  const Tensor x = ember::randn({128, 784}, {.device = d});
  const Tensor y = ember::randint(0, 10, {128}, {.dtype = ember::DType::i64, .device = d});
  return {"mlp Adam step", [net, opt, x, y] {
            opt->zero_grad();
            Tensor loss = ember::cross_entropy((*net)(x), y);
            loss.backward();
            opt->step();
            return loss.detach();
          }};
}

// Hooks one step passes: every recorded op, module, range and kernel-table call.
int64_t hooks_per_step(const Workload& w, Device d) {
  ember::synchronize(d);
  ember::Profiler prof;
  w.step();
  ember::synchronize(d);
  prof.stop();
  int64_t n = 0;
  for (const ember::ProfileRow& r : prof.rows({.row_limit = 0, .group_by_module = true}))
    n += r.calls;
  for (const auto& k : prof.kernels()) n += k.calls;
  return n;
}

bool run(const Workload& w, Device d, double hook_ns) {
  const auto sync = [d] { ember::synchronize(d); };
  // Validation: a recorded step and an unrecorded one from the same state give the same
  // value (the tiny chain is stateless; the MLP's loss is compared on a fresh copy each).
  if (w.name.rfind("tiny", 0) == 0) {
    const Tensor plain = w.step().to(Device::cpu());
    Tensor recorded;
    {
      ember::Profiler prof;
      recorded = w.step().to(Device::cpu());
    }
    const auto* p = static_cast<const float*>(plain.data_ptr());
    const auto* r = static_cast<const float*>(recorded.data_ptr());
    if (!bench::report("bench_profiler_off", "recorded tiny chain vs unrecorded (bitwise)",
                       bench::compare(r, p, plain.numel(), 0.0, 0.0), plain.numel()))
      return false;
  }
  const int64_t hooks = hooks_per_step(w, d);
  const auto off = bench::time_blocks([&] { w.step(); }, 5, 15, 20, sync);
  double on_ms = 0;
  {
    ember::Profiler prof;
    on_ms = bench::time_blocks([&] { w.step(); }, 2, 7, 5, sync).median;
  }
  const double off_cost_ms = hook_ns * static_cast<double>(hooks) * 1e-6;
  std::printf(
      "%-6s %-16s step %.4f ms off | hooks/step %lld x %.2f ns = %.5f ms (%.3f%% of the step) "
      "| recording: %.4f ms (+%.0f%%)\n",
      d.str().c_str(), w.name.c_str(), off.median, static_cast<long long>(hooks), hook_ns,
      off_cost_ms, 100.0 * off_cost_ms / off.median, on_ms, 100.0 * (on_ms / off.median - 1.0));
  bench::emit(
      "profiler_off_" + d.str() + "_" + w.name.substr(0, w.name.find(' ')), off.median,
      std::nullopt, "ms", false, 1.0,
      {bench::num("hooks_per_step", static_cast<double>(hooks)), bench::num("ns_per_hook", hook_ns),
       bench::num("off_cost_ms", off_cost_ms), bench::num("on_ms", on_ms)});
  return true;
}

}  // namespace

int main() {
  const double hook_ns = ns_per_hook();
  std::printf("bench_profiler_off: %.3f ns per hook with no Profiler recording\n", hook_ns);
  std::vector<Device> devices{Device::cpu()};
  if (ember::cuda_available()) devices.push_back(Device::cuda(0));
  bool ok = true;
  for (const Device d : devices) {
    ok = run(tiny(d), d, hook_ns) && ok;
    ok = run(mlp(d), d, hook_ns) && ok;
  }
  return ok ? 0 : 1;
}
