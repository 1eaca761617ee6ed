// bench/bench_anomaly.cpp — what AnomalyGuard's hooks cost when no guard lives (issue 31:
// "off by default at no measurable cost"), and what checking costs when one does, beside
// PyTorch's torch.autograd.detect_anomaly on the same step (bench/torch/anomaly_bench.py).
//
// The hooks (Note [Anomaly checks at no cost when off] in src/autograd/anomaly.cpp) are one
// relaxed atomic load in attach() per recorded op and one in the engine per backward node. A
// build without them cannot sit beside this one in the same run, so the off cost is measured
// from its parts, as bench_profiler_off does:
//   1. ns per hook: a loop of 10^8 `if (detail::anomaly_checking())` branches against the same
//      loop without them (a compiler barrier per iteration in both);
//   2. hooks per step: the nodes of one step's graph (walked from the loss), each passing the
//      attach hook once (accumulators excepted) and the engine's hook once;
//   3. the step's own time with no guard, and with one (its cost when on): blocks of 10 steps,
//      off and on in turns, the median of 15 each.
// Workload: bench_capture's MLP step, train::mlp(784, {256, 256}, 10), batch 128, Adam lr 1e-3,
// on the CPU and, when there is one, the GPU. Validation first: five steps with the guard on
// give bitwise the losses and weights of five steps without it.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "autograd/node.hpp"
#include "bench_util.hpp"
#include "ember/anomaly.hpp"
#include "ember/ember.hpp"
#include "ember/optim/adam.hpp"
#include "ember/train/models.hpp"
#include "nlohmann/json.hpp"
#include "torch_reference.hpp"

namespace {

using ember::Device;
using ember::Tensor;

// ns per off hook: the guard's test (never taken: no guard lives).
double ns_per_hook() {
  return bench::ns_per_call([] {
    if (ember::detail::anomaly_checking()) [[unlikely]]
      std::abort();
  });
}

struct Mlp {
  ember::nn::Module net;
  std::unique_ptr<ember::optim::Adam> opt;
  Tensor x, y;
};

Mlp make_mlp(Device d) {
  ember::manual_seed(42);
  Mlp m{ember::train::mlp(784, {256, 256}, 10), nullptr, Tensor(), Tensor()};
  m.net->to(d);
  m.opt = std::make_unique<ember::optim::Adam>(m.net->parameters(),
                                               ember::optim::AdamOptions{.lr = 1e-3});
  m.x = ember::randn({128, 784}, {.device = d});
  m.y = ember::randint(0, 10, {128}, {.dtype = ember::DType::i64, .device = d});
  return m;
}

Tensor step(Mlp& m) {
  m.opt->zero_grad();
  Tensor loss = ember::cross_entropy(m.net(m.x), m.y);
  loss.backward();
  m.opt->step();
  return loss.detach();
}

// Losses of `steps` steps, then every weight, as host floats.
std::vector<float> trajectory(Device d, int steps, bool guarded) {
  Mlp m = make_mlp(d);
  std::unique_ptr<ember::AnomalyGuard> guard;
  if (guarded) guard = std::make_unique<ember::AnomalyGuard>();
  std::vector<float> out;
  for (int i = 0; i < steps; ++i) out.push_back(step(m).to(Device::cpu()).item<float>());
  for (const Tensor& p : m.net->parameters()) {
    const std::vector<float> v = p.detach().to(Device::cpu()).to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Hooks one step passes when off: attach() per op node, the engine per node it runs.
int64_t hooks_per_step(Mlp& m) {
  m.opt->zero_grad();
  Tensor loss = ember::cross_entropy(m.net(m.x), m.y);
  std::unordered_set<const ember::autograd::Node*> seen;
  std::vector<const ember::autograd::Node*> stack{loss.grad_fn().get()};
  int64_t ops = 0;
  while (!stack.empty()) {
    const ember::autograd::Node* n = stack.back();
    stack.pop_back();
    if (!n || !seen.insert(n).second) continue;
    if (!n->is_accumulator()) ++ops;
    for (const auto& e : n->edges) stack.push_back(e.node.get());
  }
  return ops + static_cast<int64_t>(seen.size());
}

bool run(Device d, double hook_ns, const nlohmann::json& torch_ref) {
  const auto sync = [d] { ember::synchronize(d); };
  const std::vector<float> plain = trajectory(d, 5, false), guarded = trajectory(d, 5, true);
  const bench::Compare c =
      bench::compare(guarded.data(), plain.data(), static_cast<int64_t>(plain.size()), 0.0, 0.0);
  const bool same_bits = plain.size() == guarded.size() &&
                         std::memcmp(plain.data(), guarded.data(), plain.size() * 4) == 0;
  if (!bench::report("bench_anomaly", "5 MLP steps with AnomalyGuard vs without (bitwise)", c,
                     static_cast<int64_t>(plain.size())) ||
      !same_bits)
    return false;
  Mlp m = make_mlp(d);
  const int64_t hooks = hooks_per_step(m);
  // Blocks of 10 steps, off and on in turns (load from other processes falls on both alike).
  const auto off_block = [&] {
    for (int i = 0; i < 10; ++i) step(m);
    sync();
  };
  const auto on_block = [&] {
    const ember::AnomalyGuard guard;
    for (int i = 0; i < 10; ++i) step(m);
    sync();
  };
  sync();
  const std::vector<bench::Timing> t = bench::time_interleaved({off_block, on_block}, 2, 15);
  const double off_ms = t[0].median * 1e3 / 10, on_ms = t[1].median * 1e3 / 10;
  const double off_cost_ms = hook_ns * static_cast<double>(hooks) * 1e-6;
  std::optional<double> torch_off, torch_on;
  if (!torch_ref.is_null()) {
    torch_off = torch_ref["off_ms"].get<double>();
    torch_on = torch_ref["on_ms"].get<double>();
  }
  std::fprintf(stderr,
               "bench_anomaly: %-6s mlp Adam step %.4f ms off | hooks/step %lld x %.3f ns = "
               "%.6f ms (%.4f%% of the step) | guard on: %.4f ms (%.2fx)",
               d.str().c_str(), off_ms, static_cast<long long>(hooks), hook_ns, off_cost_ms,
               100.0 * off_cost_ms / off_ms, on_ms, on_ms / off_ms);
  if (torch_off)
    std::fprintf(stderr, " | PyTorch %.4f ms off, %.4f ms in detect_anomaly (%.2fx)", *torch_off,
                 *torch_on, *torch_on / *torch_off);
  std::fprintf(stderr, "\n");
  // ember's step time beside PyTorch's (speedup > 1: ember's step is faster), with the guard's
  // figures beside it.
  bench::emit("anomaly_off_" + d.str() + "_mlp", off_ms, torch_off, "ms", false, 1.0,
              {bench::num("hooks_per_step", static_cast<double>(hooks)),
               bench::num("ns_per_hook", hook_ns), bench::num("off_cost_ms", off_cost_ms),
               bench::num("off_cost_percent", 100.0 * off_cost_ms / off_ms)});
  bench::emit("anomaly_on_" + d.str() + "_mlp", on_ms, torch_on, "ms", false, 1.0,
              {bench::num("on_over_off", on_ms / off_ms),
               bench::num("torch_on_over_off", torch_off ? *torch_on / *torch_off : std::nan(""))});
  return true;
}

}  // namespace

int main() {
  const double hook_ns = ns_per_hook();
  std::fprintf(stderr, "bench_anomaly: %.3f ns per hook with no AnomalyGuard alive\n", hook_ns);
  std::vector<Device> devices{Device::cpu()};
  if (ember::cuda_available()) devices.push_back(Device::cuda(0));
  bool ok = true;
  for (const Device d : devices) {
    const std::string args = std::string("anomaly_bench.py --device ") +
                             (d.is_cuda() ? "cuda" : "cpu") + " --threads " +
                             std::to_string(ember::get_num_threads());
    ok = run(d, hook_ns, bench::run_torch_script("bench_anomaly", args)) && ok;
  }
  return ok ? 0 : 1;
}
