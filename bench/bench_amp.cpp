// bench/bench_amp.cpp — training steps under bf16 autocast (issue 10) against PyTorch's
// torch.autocast in the same run (bench/torch/amp_bench.py). Skips with a message (exit 0)
// when there is no CUDA device.
//
//   wide         train::mlp(784, {4096, 4096}, 10), batch 4096, cross-entropy, Adam lr 1e-3,
//                forward and loss under AutocastGuard(bf16): ms per step and TFLOP/s beside
//                the bf16 GEMM peak (795 TFLOP/s on the H200) and beside PyTorch; the f32 step
//                too, for the gain.
//   transformer  nn::TransformerEncoderLayer(512, 8 heads, 2048, dropout 0.1, batch_first),
//                batch 32, seq 256, MSE against a fixed target, AdamW lr 1e-4: ms per step
//                (target ≥ 1.5× PyTorch's eager autocast step) and TFLOP/s, counting 3 ×
//                forward = 3·(2·tokens·(4·d² + 2·d·ff) + 4·B·S²·d).
// Validation first: the autocast step's layers really run in bf16 (autocast cast the weights),
// and
// 5 autocast steps follow the f32 steps' losses within 5% (bf16 rounding).
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ember/ember.hpp"
#include "ember/nn/transformer.hpp"
#include "ember/optim/adam.hpp"
#include "ember/train/models.hpp"
#include "nlohmann/json.hpp"
#include "torch_reference.hpp"

namespace {

using ember::Device;
using ember::DType;
using ember::Tensor;

const Device kGpu = Device::cuda(0);
constexpr double kBf16Peak = 795.0;  // TFLOP/s, dense bf16 GEMM on the H200 (measured)
constexpr double kWideFlops = 6.0 * (784.0 * 4096 + 4096.0 * 4096 + 4096.0 * 10) * 4096;
constexpr int64_t kB = 32, kS = 256, kD = 512, kH = 8, kFF = 2048;
constexpr double kTelFlops =
    3.0 * (2.0 * kB * kS * (4.0 * kD * kD + 2.0 * kD * kFF) + 4.0 * kB * kS * kS * kD);

void sync() { ember::synchronize(kGpu); }

std::optional<double> ref(const nlohmann::json& py, const char* group, const char* key) {
  if (py.is_null() || !py.contains(group) || !py[group].contains(key) || py[group][key].is_null())
    return std::nullopt;
  return py[group][key].get<double>();
}

// One step: zero_grad, forward and loss (under autocast when asked), backward, optimizer.
struct Step {
  ember::nn::Module net;
  std::unique_ptr<ember::optim::Optimizer> opt;
  std::function<Tensor(const Tensor&, const Tensor&)> loss_fn;
  bool autocast = true;
  int64_t casts = 0;  // parameter casts autocast made in the last forward
  Tensor operator()(const Tensor& x, const Tensor& y) {
    opt->zero_grad();
    Tensor loss;
    {
      ember::AutocastGuard guard(DType::bf16, autocast);
      loss = loss_fn(net(x), y);
      casts = ember::autocast_cache_size();
    }
    loss.backward();
    opt->step();
    return loss;
  }
};

Step wide_step(bool autocast) {
  ember::manual_seed(0);
  Step s{ember::train::mlp(784, {4096, 4096}, 10), nullptr,
         [](const Tensor& o, const Tensor& y) { return ember::cross_entropy(o, y); }, autocast};
  s.net->to(kGpu);
  s.opt = std::make_unique<ember::optim::Adam>(s.net->parameters(),
                                               ember::optim::AdamOptions{.lr = 1e-3});
  return s;
}

Step transformer_step(bool autocast) {
  ember::manual_seed(0);
  ember::nn::TransformerEncoderLayer layer(ember::nn::TransformerEncoderLayerOptions{
      .d_model = kD, .nhead = kH, .dim_feedforward = kFF, .dropout = 0.1, .batch_first = true});
  Step s{layer, nullptr, [](const Tensor& o, const Tensor& y) { return ember::mse_loss(o, y); },
         autocast};
  s.net->to(kGpu);
  s.net->train();
  s.opt = std::make_unique<ember::optim::AdamW>(s.net->parameters(),
                                                ember::optim::AdamWOptions{.lr = 1e-4});
  return s;
}

// The autocast step runs in bf16 and follows the f32 step's losses.
bool validate(const char* name, Step bf16, Step f32, const Tensor& x, const Tensor& y) {
  std::vector<float> got, want;
  for (int i = 0; i < 5; ++i) {
    ember::manual_seed(100 + i);  // the same dropout masks in both runs
    got.push_back(bf16(x, y).item<float>());
    ember::manual_seed(100 + i);
    want.push_back(f32(x, y).item<float>());
  }
  if (bf16.casts == 0 || f32.casts != 0) {
    std::fprintf(stderr, "%s: FAILED: %lld parameter casts under autocast, %lld without\n", name,
                 static_cast<long long>(bf16.casts), static_cast<long long>(f32.casts));
    return false;
  }
  return bench::report(name, "bf16 autocast losses vs f32 losses (5 steps, rtol 5e-2)",
                       bench::compare(got.data(), want.data(), 5, 5e-2, 0.0), 5);
}

double step_ms(Step& s, const Tensor& x, const Tensor& y, int warmup, int blocks, int per_block) {
  return bench::time_blocks([&] { s(x, y); }, warmup, blocks, per_block, sync).median;
}

}  // namespace

int main() {
  if (!ember::cuda_available()) {
    std::fprintf(stderr, "bench_amp: no CUDA device; skipped\n");
    return 0;
  }
  const nlohmann::json py = bench::run_torch_script("bench_amp", "amp_bench.py");
  ember::manual_seed(1);
  const Tensor wx = ember::rand({4096, 784}, {.device = kGpu});
  const Tensor wy = ember::randint(0, 10, {4096}, {.device = kGpu});
  const Tensor tx = ember::randn({kB, kS, kD}, {.device = kGpu});
  const Tensor ty = ember::randn({kB, kS, kD}, {.device = kGpu});
  bool ok = validate("amp_wide", wide_step(true), wide_step(false), wx, wy);
  ok = validate("amp_transformer", transformer_step(true), transformer_step(false), tx, ty) && ok;
  if (!ok) return 1;

  Step wide_bf16 = wide_step(true), wide_f32 = wide_step(false);
  const double wide_ms = step_ms(wide_bf16, wx, wy, 5, 9, 5);
  const double wide_f32_ms = step_ms(wide_f32, wx, wy, 3, 5, 5);
  const double wide_tflops = kWideFlops / (wide_ms * 1e-3) / 1e12;
  const auto py_wide = ref(py, "wide", "bf16_ms");
  std::fprintf(stderr,
               "amp_wide: bf16 autocast %.3f ms/step = %.1f TFLOP/s (%.0f%% of the %.0f bf16 "
               "peak); f32 %.3f ms; PyTorch autocast %.3f ms (%.1f TFLOP/s), f32 %.3f ms\n",
               wide_ms, wide_tflops, 100.0 * wide_tflops / kBf16Peak, kBf16Peak, wide_f32_ms,
               py_wide.value_or(NAN), ref(py, "wide", "bf16_tflops").value_or(NAN),
               ref(py, "wide", "f32_ms").value_or(NAN));
  bench::emit("amp_wide_mlp_bf16", wide_ms, py_wide, "ms", false, 1.0,
              {bench::num("tflops", wide_tflops), bench::num("peak_tflops", kBf16Peak),
               bench::num("f32_ms", wide_f32_ms)});

  Step tel = transformer_step(true);
  const double tel_ms = step_ms(tel, tx, ty, 10, 15, 10);
  const double tel_tflops = kTelFlops / (tel_ms * 1e-3) / 1e12;
  const auto py_tel = ref(py, "transformer", "ms");
  std::fprintf(stderr,
               "amp_transformer: bf16 autocast %.3f ms/step = %.1f TFLOP/s; PyTorch autocast "
               "%.3f ms (%.1f TFLOP/s)\n",
               tel_ms, tel_tflops, py_tel.value_or(NAN),
               ref(py, "transformer", "tflops").value_or(NAN));
  bench::emit("amp_transformer_step_bf16", tel_ms, py_tel, "ms", false, 1.5,
              {bench::num("tflops", tel_tflops)});
  return 0;
}
