// bench/bench_gemm.cpp — ember::matmul (f32, square N×N) against OpenBLAS cblas_sgemm called
// directly on the same buffers, same thread count (ember keeps OpenBLAS's count equal to its
// own through set_num_threads); the two are timed in turns. With libtorch, torch::mm on the
// same buffers is timed afterwards too ("torch" field).
//
//   work: 2·N³ flops per product; figure: GFLOP/s (median), beside the measured FMA peak.
//   target: ember / cblas >= 0.9 (ember adds only the output allocation and dispatch).
#include <cblas.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ember/ember.hpp"

#ifdef EMBER_HAVE_LIBTORCH
#include <ATen/Parallel.h>
#include <torch/types.h>
#endif

namespace {

constexpr double kTarget = 0.9;

// One matrix size: validate, time, print. Returns false when validation fails.
bool run_size(int64_t n, int warmup, int reps, int threads, double peak) {
  const std::string name = "gemm_f32_" + std::to_string(n);
  const ember::Tensor a = ember::rand({n, n}, {}, -1.0, 1.0);
  const ember::Tensor b = ember::rand({n, n}, {}, -1.0, 1.0);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  std::vector<float> c_ref(static_cast<size_t>(n * n), 0.0f);  // touched: no page faults timed

  auto sgemm = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, pa, n, pb, n, 0.0f,
                c_ref.data(), n);
  };

  // ---- validate: ember against cblas on every element, and both against f64 dot products
  // on sampled elements (cblas is what ember calls, so it cannot be the only witness).
  const ember::Tensor c = ember::matmul(a, b);
  sgemm();
  if (c.shape() != ember::Shape{n, n} || c.dtype() != ember::DType::f32 || !c.is_contiguous()) {
    std::fprintf(stderr,
                 "%s: VALIDATION FAILED: matmul gave shape %s (expected [%lld, %lld] f32)\n",
                 name.c_str(), c.shape().to_string().c_str(), static_cast<long long>(n),
                 static_cast<long long>(n));
    return false;
  }
  const double atol = 1e-5 * static_cast<double>(n);  // f32 accumulation over n terms of |x|<=1
  if (!bench::report(name.c_str(), "ember vs cblas_sgemm",
                     bench::compare(c.data<float>(), c_ref.data(), n * n, atol, 1e-4), n * n))
    return false;
  std::mt19937_64 rng(7);
  std::vector<float> got(256);
  std::vector<double> want(256);
  for (int s = 0; s < 256; ++s) {
    const int64_t i = static_cast<int64_t>(rng() % n), j = static_cast<int64_t>(rng() % n);
    double dot = 0.0;
    for (int64_t k = 0; k < n; ++k) dot += static_cast<double>(pa[i * n + k]) * pb[k * n + j];
    want[s] = dot;
    got[s] = c.data<float>()[i * n + j];
  }
  if (!bench::report(name.c_str(), "ember vs f64 dot products (256 samples)",
                     bench::compare(got.data(), want.data(), 256, atol, 1e-4), 256))
    return false;

  // ---- time, interleaved
  std::vector<std::function<void()>> fns = {
      [&] {
        ember::Tensor out = ember::matmul(a, b);
        bench::do_not_optimize(out.data_ptr());
      },
      sgemm,
  };
#ifdef EMBER_HAVE_LIBTORCH
  at::set_num_threads(threads);
  const at::Tensor ta = torch::from_blob(const_cast<float*>(pa), {n, n}, torch::kFloat32);
  const at::Tensor tb = torch::from_blob(const_cast<float*>(pb), {n, n}, torch::kFloat32);
  {
    const at::Tensor tc = torch::mm(ta, tb).contiguous();
    if (!bench::report(name.c_str(), "torch::mm vs cblas_sgemm",
                       bench::compare(tc.data_ptr<float>(), c_ref.data(), n * n, atol, 1e-4),
                       n * n))
      return false;
  }
#endif
  std::vector<bench::Timing> t = bench::time_interleaved(fns, warmup, reps);
#ifdef EMBER_HAVE_LIBTORCH
  // Timed after the pair, not interleaved with it: torch allocates each result fresh and the
  // page faults and unmapping would spill into the next timing.
  t.push_back(bench::time_it(
      [&] {
        at::Tensor out = torch::mm(ta, tb);
        bench::do_not_optimize(out.data_ptr());
      },
      warmup, reps));
#endif
  const double flops = 2.0 * static_cast<double>(n) * n * n;
  const double ember_gflops = flops / t[0].median * 1e-9;
  const double blas_gflops = flops / t[1].median * 1e-9;
  std::vector<bench::Field> extra = {bench::str("reference_impl", "openblas cblas_sgemm"),
                                     bench::num("threads", threads),
                                     bench::num("ember_ms", t[0].median * 1e3),
                                     bench::num("reference_ms", t[1].median * 1e3),
                                     bench::num("ember_best_ms", t[0].best * 1e3),
                                     bench::num("reference_best_ms", t[1].best * 1e3),
                                     bench::num("peak", peak)};
  double torch_gflops = 0.0;
  if (t.size() > 2) {
    torch_gflops = flops / t[2].median * 1e-9;
    extra.push_back(bench::num("torch", torch_gflops));
  }
  bench::emit(name, ember_gflops, blas_gflops, "GFLOP/s", /*higher_is_better=*/true, kTarget,
              extra);

  std::fprintf(stderr,
               "%s: %.2f GFLOP per product; median of %d: ember %.2f ms = %.1f GFLOP/s (%.0f%% of "
               "peak %.0f), cblas_sgemm %.2f ms = %.1f GFLOP/s (%.0f%% of peak)",
               name.c_str(), flops * 1e-9, reps, t[0].median * 1e3, ember_gflops,
               100.0 * ember_gflops / peak, peak, t[1].median * 1e3, blas_gflops,
               100.0 * blas_gflops / peak);
  if (t.size() > 2)
    std::fprintf(stderr, ", torch::mm %.2f ms = %.1f GFLOP/s", t[2].median * 1e3, torch_gflops);
  std::fprintf(stderr, "; ember/cblas = %.3f (target >= %.1f)\n", ember_gflops / blas_gflops,
               kTarget);
  return true;
}

}  // namespace

int main() {
  try {
    ember::manual_seed(0);
    // Default thread count (the cores, or EMBER_NUM_THREADS); setting it explicitly makes
    // ember bring OpenBLAS's count in line before anything is timed.
    const int threads = ember::get_num_threads();
    ember::set_num_threads(threads);
    std::string isa;
    const double peak = bench::measured_peak_gflops(threads, &isa);
    std::fprintf(stderr,
                 "bench_gemm: %d thread(s) (ember %d, OpenBLAS %d); measured f32 FMA peak %.0f "
                 "GFLOP/s (%s)\n",
                 threads, ember::get_num_threads(), openblas_get_num_threads(), peak, isa.c_str());
    if (openblas_get_num_threads() != threads) {
      std::fprintf(stderr,
                   "bench_gemm: OpenBLAS runs %d threads, ember %d: the comparison would "
                   "be unfair\n",
                   openblas_get_num_threads(), threads);
      return 1;
    }
    bool ok = run_size(1024, 3, 15, threads, peak);
    ok = run_size(2048, 1, 5, threads, peak) && ok;
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gemm: error: %s\n", e.what());
    return 1;
  }
}
