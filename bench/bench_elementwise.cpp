// bench/bench_elementwise.cpp — ember add and mul of two 64 MB f32 tensors (16M elements) into
// a new tensor, against memcpy of a 64 MB buffer: the machine's practical bandwidth ceiling.
//
//   bytes moved: add/mul 3 × 64 MB (two reads, one write); memcpy 2 × 64 MB (one read, one
//   write). figure: GB/s (10^9 bytes/s, median). speedup = ember GB/s / memcpy GB/s.
//   target: >= 0.7. ember runs on its default threads (the cores), memcpy on one.
//
// Steady state: each iteration drops its result, so the Pass pool's cached 64 MB block is
// reused by the next; warm-up iterations fill the cache, and the timed ones must not reach the
// system allocator (checked through memory_stats, reported on stderr). With libtorch,
// torch::add / torch::mul on the same buffers are timed afterwards ("torch" field); libtorch
// allocates each 64 MB result fresh, so its figure includes the page faults (on a VM those
// can cost more than the arithmetic: see docs/benchmarks.md).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ember/ember.hpp"

#ifdef EMBER_HAVE_LIBTORCH
#include <ATen/Parallel.h>
#include <torch/types.h>
#endif

namespace {

constexpr int64_t kElements = int64_t{16} << 20;  // 16M f32 = 64 MB
constexpr double kBytes = static_cast<double>(kElements) * sizeof(float);
constexpr double kTarget = 0.7;
constexpr int kWarmup = 3;
constexpr int kReps = 15;
constexpr int kTorchWarmup = 1;  // torch pays page faults on every result: slow, keep it short
constexpr int kTorchReps = 5;

bool validate(const char* name, const ember::Tensor& out, const float* a, const float* b,
              bool is_add) {
  if (out.shape() != ember::Shape{kElements} || out.dtype() != ember::DType::f32) {
    std::fprintf(stderr, "%s: VALIDATION FAILED: result has shape %s (expected [%lld] f32)\n", name,
                 out.shape().to_string().c_str(), static_cast<long long>(kElements));
    return false;
  }
  std::vector<float> want(kElements);
  for (int64_t i = 0; i < kElements; ++i) want[i] = is_add ? a[i] + b[i] : a[i] * b[i];
  // One f32 rounding of an exact result: ember must agree to the last bit (rtol covers a
  // kernel that rounds through f64, which gives the same float anyway).
  return bench::report(name, "against a scalar loop",
                       bench::compare(out.data<float>(), want.data(), kElements, 0.0, 1e-7),
                       kElements);
}

}  // namespace

int main() {
  try {
    ember::manual_seed(0);
    const int threads = ember::get_num_threads();
    const ember::Tensor a = ember::rand({kElements}, {}, -1.0, 1.0);
    const ember::Tensor b = ember::rand({kElements}, {}, 0.5, 1.5);
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    std::vector<float> src(pa, pa + kElements), dst(kElements, 0.0f);  // both touched

    // ---- validate
    if (!validate("add_f32_16M", ember::add(a, b), pa, pb, true)) return 1;
    if (!validate("mul_f32_16M", ember::mul(a, b), pa, pb, false)) return 1;
    std::memcpy(dst.data(), src.data(), static_cast<size_t>(kBytes));
    if (std::memcmp(dst.data(), src.data(), static_cast<size_t>(kBytes)) != 0) {
      std::fprintf(stderr, "memcpy_64MB: VALIDATION FAILED: the copy differs from its source\n");
      return 1;
    }

    std::vector<std::function<void()>> fns = {
        [&] {
          ember::Tensor c = ember::add(a, b);  // released at the end of the iteration
          bench::do_not_optimize(c.data_ptr());
        },
        [&] {
          ember::Tensor c = ember::mul(a, b);
          bench::do_not_optimize(c.data_ptr());
        },
        [&] {
          std::memcpy(dst.data(), src.data(), static_cast<size_t>(kBytes));
          bench::do_not_optimize(dst.data());
        },
    };
    // ---- time: warm-up rounds fill the Pass cache; the timed rounds must be served from it
    for (int i = 0; i < kWarmup; ++i)
      for (const auto& fn : fns) fn();
    const ember::MemoryStats before = ember::memory_stats(ember::Device::cpu());
    const std::vector<bench::Timing> t = bench::time_interleaved(fns, 0, kReps);
    const ember::MemoryStats after = ember::memory_stats(ember::Device::cpu());
    std::vector<bench::Timing> torch_t;
#ifdef EMBER_HAVE_LIBTORCH
    // Timed after, not interleaved: each torch result is a fresh 64 MB allocation that the
    // kernel must fault in (and unmap), and that work spills into whatever runs next.
    at::set_num_threads(threads);
    const at::Tensor ta = torch::from_blob(const_cast<float*>(pa), {kElements}, torch::kFloat32);
    const at::Tensor tb = torch::from_blob(const_cast<float*>(pb), {kElements}, torch::kFloat32);
    torch_t.push_back(bench::time_it([&] { bench::do_not_optimize(torch::add(ta, tb).data_ptr()); },
                                     kTorchWarmup, kTorchReps));
    torch_t.push_back(bench::time_it([&] { bench::do_not_optimize(torch::mul(ta, tb).data_ptr()); },
                                     kTorchWarmup, kTorchReps));
#endif
    const int64_t system_allocs = after.system_allocs - before.system_allocs;
    std::fprintf(
        stderr,
        "bench_elementwise: %d ember thread(s), memcpy 1 thread; timed ember iterations: "
        "%lld allocation(s), %lld from the Pass cache, %lld from the system%s\n",
        threads, static_cast<long long>(after.alloc_count - before.alloc_count),
        static_cast<long long>(after.cache_hits - before.cache_hits),
        static_cast<long long>(system_allocs),
        system_allocs ? " (NOT steady state: allocation is being timed)" : " (steady state)");

    const double memcpy_gbps = 2.0 * kBytes / t[2].median * 1e-9;
    std::fprintf(stderr, "memcpy_64MB: median of %d %.2f ms = %.1f GB/s (2 x 64 MB moved)\n", kReps,
                 t[2].median * 1e3, memcpy_gbps);
    const char* names[2] = {"add_f32_16M", "mul_f32_16M"};
    for (int k = 0; k < 2; ++k) {
      const double gbps = 3.0 * kBytes / t[k].median * 1e-9;
      std::vector<bench::Field> extra = {
          bench::str("reference_impl", "memcpy 64 MB (1 thread)"),
          bench::num("threads", threads),
          bench::num("ember_ms", t[k].median * 1e3),
          bench::num("reference_ms", t[2].median * 1e3),
          bench::num("ember_best_ms", t[k].best * 1e3),
          bench::num("reference_best_ms", t[2].best * 1e3),
          bench::num("timed_system_allocs", static_cast<double>(system_allocs))};
      double torch_gbps = 0.0;
      if (!torch_t.empty()) {
        torch_gbps = 3.0 * kBytes / torch_t[k].median * 1e-9;
        extra.push_back(bench::num("torch", torch_gbps));
      }
      bench::emit(names[k], gbps, memcpy_gbps, "GB/s", /*higher_is_better=*/true, kTarget, extra);
      std::fprintf(stderr,
                   "%s: 3 x 64 MB moved, %.1f Mflop; median of %d: ember %.2f ms = %.1f GB/s "
                   "(%.2f GFLOP/s)",
                   names[k], kElements * 1e-6, kReps, t[k].median * 1e3, gbps,
                   kElements / t[k].median * 1e-9);
      if (!torch_t.empty())
        std::fprintf(stderr, ", torch %.2f ms = %.1f GB/s (median of %d)", torch_t[k].median * 1e3,
                     torch_gbps, kTorchReps);
      std::fprintf(stderr, "; ember / memcpy = %.3f (target >= %.1f)\n", gbps / memcpy_gbps,
                   kTarget);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_elementwise: error: %s\n", e.what());
    return 1;
  }
}
