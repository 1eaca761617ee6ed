// bench/bench_matmul_precision.cpp — f32 GEMMs on the GPU under set_float32_matmul_precision
// "highest" (CUBLAS_COMPUTE_32F) and "high" (CUBLAS_COMPUTE_32F_FAST_TF32): speed and error of
// each, beside torch.mm under the same settings (bench/torch/matmul_precision_bench.py), for
// docs/mixed_precision.md's table. Skips with a message (exit 0) when there is no CUDA device.
//
//   gemm  n x n x n, n = 4096 and 8192, N(0, 1) operands: TFLOP/s (median of 10) and the
//         relative error ‖C − C64‖ / ‖C64‖ against the f64 product on the GPU;
//   mlp   bench_capture's MLP Adam step (train::mlp(784, {256, 256}, 10), batch 128): ms per
//         step (eager), and the loss after 20 steps under each setting.
// Validation first: "highest" is within f32 rounding of the f64 product (‖Δ‖/‖C‖ < 1e-5) and
// "high" within TF32's (< 2e-3).
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "bench_util.hpp"
#include "ember/ember.hpp"
#include "ember/optim/adam.hpp"
#include "ember/train/models.hpp"
#include "nlohmann/json.hpp"
#include "torch_reference.hpp"

namespace {

using ember::Device;
using ember::Tensor;

const Device kGpu = Device::cuda(0);

double relative_error(const Tensor& c, const Tensor& exact) {
  const Tensor diff = c.to(ember::DType::f64) - exact;
  return std::sqrt(ember::sum(diff * diff).item<double>() /
                   ember::sum(exact * exact).item<double>());
}

std::optional<double> ref(const nlohmann::json& py, const std::string& key) {
  if (py.is_null() || !py.contains(key) || !py[key].is_number()) return std::nullopt;
  return py[key].get<double>();
}

bool bench_gemm(int64_t n) {
  ember::manual_seed(3);
  const Tensor a = ember::randn({n, n}, {.device = kGpu}),
               b = ember::randn({n, n}, {.device = kGpu});
  const Tensor exact = ember::matmul(a.to(ember::DType::f64), b.to(ember::DType::f64));
  const nlohmann::json py = bench::run_torch_script(
      "bench_matmul_precision", "matmul_precision_bench.py --n " + std::to_string(n));
  for (const char* precision : {"highest", "high"}) {
    ember::set_float32_matmul_precision(precision);
    const double err = relative_error(ember::matmul(a, b), exact);
    const double limit = std::string(precision) == "highest" ? 1e-5 : 2e-3;
    if (!(err < limit)) {
      std::fprintf(stderr,
                   "bench_matmul_precision: VALIDATION FAILED: %s gemm %lld: relative error %.3g "
                   "(expected < %.0e)\n",
                   precision, static_cast<long long>(n), err, limit);
      ember::set_float32_matmul_precision("highest");
      return false;
    }
    const bench::Timing t =
        bench::time_blocks([&] { bench::do_not_optimize(ember::matmul(a, b).data_ptr()); }, 3, 10,
                           1, [] { ember::synchronize(kGpu); });
    const double tflops = 2.0 * n * n * n / (t.median * 1e-3) / 1e12;
    const std::string p(precision);
    std::fprintf(stderr,
                 "bench_matmul_precision: gemm f32 %lld³ %-7s %.1f TFLOP/s (%.3f ms), relative "
                 "error %.3g | torch.mm %.1f TFLOP/s, error %.3g\n",
                 static_cast<long long>(n), precision, tflops, t.median, err,
                 ref(py, p + "_tflops").value_or(NAN), ref(py, p + "_err").value_or(NAN));
    bench::emit("matmul_precision_" + p + "_gemm_" + std::to_string(n), tflops,
                ref(py, p + "_tflops"), "TFLOP/s", true, 1.0,
                {bench::num("relative_error", err),
                 bench::num("torch_relative_error", ref(py, p + "_err").value_or(NAN))});
  }
  ember::set_float32_matmul_precision("highest");
  return true;
}

void bench_mlp() {
  for (const char* precision : {"highest", "high"}) {
    ember::set_float32_matmul_precision(precision);
    ember::manual_seed(42);
    ember::nn::Module net = ember::train::mlp(784, {256, 256}, 10);
    net->to(kGpu);
    ember::optim::Adam opt(net->parameters(), {.lr = 1e-3});
    const Tensor x = ember::randn({128, 784}, {.device = kGpu});
    const Tensor y = ember::randint(0, 10, {128}, {.dtype = ember::DType::i64, .device = kGpu});
    Tensor loss;
    const auto step = [&] {
      opt.zero_grad();
      loss = ember::cross_entropy(net(x), y);
      loss.backward();
      opt.step();
    };
    for (int i = 0; i < 20; ++i) step();
    const double loss20 = loss.item<double>();
    const bench::Timing t = bench::time_blocks(step, 5, 15, 20, [] { ember::synchronize(kGpu); });
    std::fprintf(stderr,
                 "bench_matmul_precision: mlp Adam step %-7s %.4f ms, loss after 20 steps %.6f\n",
                 precision, t.median, loss20);
    bench::emit(std::string("matmul_precision_") + precision + "_mlp_step", t.median, std::nullopt,
                "ms", false, 1.0, {bench::num("loss_after_20", loss20)});
  }
  ember::set_float32_matmul_precision("highest");
}

}  // namespace

int main() {
  if (!ember::cuda_available()) {
    std::fprintf(stderr, "bench_matmul_precision: skipped (no CUDA device)\n");
    return 0;
  }
  bool ok = true;
  for (const int64_t n : {4096, 8192}) ok = bench_gemm(n) && ok;
  bench_mlp();
  return ok ? 0 : 1;
}
