// bench/bench_eager.cpp — eager overhead: a long chain of tiny ops with autograd, where the
// kernels cost nothing and dispatch, allocation and graph bookkeeping are everything.
//
//   x: leaf, 16 f32 elements, requires_grad.
//   forward: z = x; 500 times { z = z * 1.0001 + 0.0001 }   -> 1000 chain ops (500 mul, 500 add)
//   backward: z.sum().backward()
//   figure: (forward + sum + backward) / 1000 chain ops, in µs per op (median); the sum and
//   backward are inside the time but not counted as ops, for ember and libtorch alike.
//   reference: libtorch C++, same chain, same backward, one thread (torch::set_num_threads(1));
//   ember also on one thread (ember::set_num_threads(1)). target: libtorch / ember >= 3.
//
// Validation: x.grad must equal the closed form 1.0001^500 everywhere (and z the closed form
// a^n x + b (a^n - 1) / (a - 1)), and with libtorch ember's z and x.grad must match torch's.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ember/ember.hpp"

#ifdef EMBER_HAVE_LIBTORCH
#include <ATen/Parallel.h>
#include <torch/types.h>
#endif

namespace {

constexpr int64_t kElements = 16;
constexpr int kSteps = 500;       // each step is 2 ops
constexpr int kOps = 2 * kSteps;  // ops counted per run
constexpr double kA = 1.0001, kB = 0.0001;
constexpr double kTarget = 3.0;
constexpr int kWarmup = 3;
constexpr int kReps = 21;
const char* const kName = "eager_chain_1000_ops";

// ember: forward the chain from `x`; returns z.
ember::Tensor ember_chain(const ember::Tensor& x) {
  ember::Tensor z = x;
  for (int i = 0; i < kSteps; ++i) z = z * kA + kB;
  return z;
}

#ifdef EMBER_HAVE_LIBTORCH
at::Tensor torch_chain(const at::Tensor& x) {
  at::Tensor z = x;
  for (int i = 0; i < kSteps; ++i) z = z * kA + kB;
  return z;
}
#endif

}  // namespace

int main() {
  try {
    ember::manual_seed(0);
    ember::set_num_threads(1);
    const ember::Tensor x = ember::rand({kElements}, {}, -1.0, 1.0).requires_grad_();
    const std::vector<float> x_values = x.detach().to_vector<float>();

    // ---- validate ember against the closed form
    std::vector<float> z_ember, g_ember;
    {
      x.zero_grad();
      const ember::Tensor z = ember_chain(x);
      z_ember = z.detach().to_vector<float>();
      z.sum().backward();
      EMBER_CHECK(x.grad().defined(), "bench_eager: x.grad is undefined after backward");
      g_ember = x.grad().to_vector<float>();
    }
    const double an = std::pow(kA, kSteps);
    std::vector<double> z_closed(kElements), g_closed(kElements, an);
    for (int64_t i = 0; i < kElements; ++i)
      z_closed[i] = an * x_values[i] + kB * (an - 1.0) / (kA - 1.0);
    // f32 rounding over 500 steps: ~500 × 6e-8 relative at worst.
    bool ok = bench::report(kName, "ember x.grad vs closed form 1.0001^500",
                            bench::compare(g_ember.data(), g_closed.data(), kElements, 0.0, 1e-4),
                            kElements);
    ok = bench::report(kName, "ember z vs closed form",
                       bench::compare(z_ember.data(), z_closed.data(), kElements, 1e-5, 1e-4),
                       kElements) &&
         ok;
    if (!ok) return 1;

    std::vector<std::function<void()>> fns = {
        [&] {  // forward + backward
          x.zero_grad();
          ember_chain(x).sum().backward();
        },
        [&] {  // forward only (the graph is built and then dropped)
          ember::Tensor z = ember_chain(x);
          bench::do_not_optimize(z.data_ptr());
        },
    };

#ifdef EMBER_HAVE_LIBTORCH
    at::set_num_threads(1);
    const at::Tensor tx =
        torch::from_blob(const_cast<float*>(x_values.data()), {kElements}, torch::kFloat32)
            .clone()
            .requires_grad_(true);
    {
      const at::Tensor z = torch_chain(tx);
      z.sum().backward();
      const at::Tensor zc = z.detach().contiguous();
      const at::Tensor gc = tx.grad().contiguous();
      ok = bench::report(
          kName, "ember z vs libtorch z",
          bench::compare(z_ember.data(), zc.data_ptr<float>(), kElements, 1e-6, 1e-5), kElements);
      ok = bench::report(kName, "ember x.grad vs libtorch x.grad",
                         bench::compare(g_ember.data(), gc.data_ptr<float>(), kElements, 0.0, 1e-5),
                         kElements) &&
           ok;
      if (!ok) return 1;
    }
    fns.push_back([&] {
      tx.mutable_grad() = at::Tensor();  // set_to_none, as ember's zero_grad()
      torch_chain(tx).sum().backward();
    });
    fns.push_back([&] {
      at::Tensor z = torch_chain(tx);
      bench::do_not_optimize(z.data_ptr());
    });
#endif

    const std::vector<bench::Timing> t = bench::time_interleaved(fns, kWarmup, kReps);
    const double ember_us = t[0].median / kOps * 1e6;
    const double ember_fwd_us = t[1].median / kOps * 1e6;
    std::optional<double> torch_us;
    std::vector<bench::Field> extra = {bench::str("reference_impl", "libtorch 1.13 C++, 1 thread"),
                                       bench::num("threads", 1), bench::num("ops", kOps),
                                       bench::num("ember_forward_us_per_op", ember_fwd_us),
                                       bench::num("ember_best_us_per_op", t[0].best / kOps * 1e6)};
    if (t.size() > 2) {
      torch_us = t[2].median / kOps * 1e6;
      extra.push_back(bench::num("reference_best_us_per_op", t[2].best / kOps * 1e6));
      extra.push_back(bench::num("reference_forward_us_per_op", t[3].median / kOps * 1e6));
    }
    bench::emit(kName, ember_us, torch_us, "us/op", /*higher_is_better=*/false, kTarget, extra);

    const double flops = 2.0 * kElements * kOps;  // one flop per element per op, forward + backward
    std::fprintf(
        stderr,
        "%s: %d chain ops on %lld f32 elements (~%.0f useful flops per run); median of %d: "
        "ember %.3f ms per run = %.2f us/op (forward alone %.2f us/op, so backward ~%.2f "
        "us/op), %.4f GFLOP/s",
        kName, kOps, static_cast<long long>(kElements), flops, kReps, t[0].median * 1e3, ember_us,
        ember_fwd_us, ember_us - ember_fwd_us, flops / t[0].median * 1e-9);
    if (torch_us) {
      const double torch_fwd_us = t[3].median / kOps * 1e6;
      std::fprintf(stderr,
                   "; libtorch %.3f ms per run = %.2f us/op (forward %.2f, backward ~%.2f); "
                   "libtorch / ember = %.2f (target >= %.0f)\n",
                   t[2].median * 1e3, *torch_us, torch_fwd_us, *torch_us - torch_fwd_us,
                   *torch_us / ember_us, kTarget);
    } else {
      std::fprintf(stderr,
                   "; libtorch not available (built without EMBER_BENCH_LIBTORCH): reference is "
                   "null, no speedup (libtorch measured ~8.6 us/op on this machine earlier)\n");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_eager: error: %s\n", e.what());
    return 1;
  }
}
