// bench/bench_vocab.cpp — issue 16's layers against PyTorch in the same run: on the GPU, or with
// --cpu on this machine's CPU (against PyTorch on the CPU). Without --cpu it skips with a
// message (exit 0) when there is no CUDA device.
//
//   lstm    nn::LSTM(512, 512, 2 layers), input [128, 64, 512] (seq, batch, feature): one SGD
//           step (lr 0.01) of mse_loss(output, target): ms per step. PyTorch: cuDNN's LSTM.
//   unet1d  Conv1d 8→32 (k3 p1) · relu · Conv1d 32→64 (k3 s2 p1) · relu · ConvTranspose1d 64→32
//           (k2 s2) · relu · cat(skip) · Conv1d 64→8 (k3 p1) on [32, 8, 1024]: one SGD step.
//   unet2d  the same shape of network in 2-D (Conv2d, ConvTranspose2d) on [16, 3, 64, 64].
//   einsum  einsum("bhqd,bhkd->bhqk"), b 8, h 16, q = k 1024, d 64, fp32: ms and TFLOP/s.
// Target for each: speedup >= 1.0 against eager PyTorch (issue 16).
//
// Validation first: the same network (same seed, same weights) on the CPU and on the GPU gives
// the same loss before and after one step; the einsum result against the CPU's. With --cpu
// the reference is the same network in f64. Timing: the
// device is synchronised (a 4-byte read-back) before the clock starts and before it stops.
// PyTorch's figures come from bench/torch/vocab_bench.py through popen ($EMBER_PYTHON).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ember/ember.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/rnn.hpp"
#include "ember/optim/sgd.hpp"
#include "nlohmann/json.hpp"
#include "torch_reference.hpp"

namespace {

using ember::Device;
using ember::Tensor;
namespace nn = ember::nn;

const Device kCpu = Device::cpu();
Device g_target = Device::cuda(0);  // the timed device (--cpu: the CPU)
bool on_cpu() { return !g_target.is_cuda(); }
std::string g_only;  // the benchmarks to run (--only), passed on to PyTorch's side

void sync() {
  if (on_cpu()) return;
  static const Tensor* probe = new Tensor(ember::zeros({1}, {.device = g_target}));
  bench::do_not_optimize(probe->item<float>());
}

double ms_per_call(const std::function<void()>& fn, int warmup, int blocks, int per_block) {
  for (int i = 0; i < warmup; ++i) fn();
  sync();
  std::vector<double> ms;
  for (int b = 0; b < blocks; ++b) {
    const auto start = bench::Clock::now();
    for (int i = 0; i < per_block; ++i) fn();
    sync();
    ms.push_back(std::chrono::duration<double>(bench::Clock::now() - start).count() * 1e3 /
                 per_block);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

nlohmann::json run_python() {
  return bench::run_torch_script(
      "bench_vocab", "vocab_bench.py --only " + g_only + (on_cpu() ? " --device cpu" : ""));
}

std::optional<double> ref(const nlohmann::json& py, const char* group, const char* key) {
  if (py.is_null() || py.is_discarded() || !py.contains(group) || !py[group].contains(key))
    return std::nullopt;
  return py[group][key].get<double>();
}

// A model as a forward function over its parameters.
struct Model {
  std::function<Tensor(const Tensor&)> forward;
  std::vector<Tensor> params;
  std::function<void(Device, ember::DType)> to;
};

Model make_lstm() {
  nn::LSTM lstm(nn::RNNOptions{.input_size = 512, .hidden_size = 512, .num_layers = 2});
  return {[lstm](const Tensor& x) mutable { return lstm->forward(x, nn::RNNState{}).output; },
          lstm->parameters(),
          [lstm](Device d, ember::DType t) mutable {
            lstm->to(d);
            lstm->to(t);
          }};
}

// The U-Net of either dimension from its four layers (built by the caller).
template <typename Conv, typename Up>
Model unet_of(Conv c1, Conv down, Up up, Conv out) {
  std::vector<Tensor> p;
  for (const auto& group :
       {c1->parameters(), down->parameters(), up->parameters(), out->parameters()})
    p.insert(p.end(), group.begin(), group.end());
  return {[=](const Tensor& x) {
            Tensor a = ember::relu(c1->forward(x));
            Tensor b = ember::relu(down->forward(a));
            Tensor c = ember::relu(up->forward(b));
            return out->forward(ember::cat({c, a}, 1));
          },
          p,
          [=](Device d, ember::DType t) {
            auto move = [&](auto& m) {
              m->to(d);
              m->to(t);
            };
            move(c1);
            move(down);
            move(up);
            move(out);
          }};
}

Model make_unet(int dims) {
  if (dims == 1)
    return unet_of(
        nn::Conv1d(nn::Conv1dOptions{
            .in_channels = 8, .out_channels = 32, .kernel_size = 3, .padding = 1}),
        nn::Conv1d(nn::Conv1dOptions{
            .in_channels = 32, .out_channels = 64, .kernel_size = 3, .stride = 2, .padding = 1}),
        nn::ConvTranspose1d(nn::ConvTranspose1dOptions{
            .in_channels = 64, .out_channels = 32, .kernel_size = 2, .stride = 2}),
        nn::Conv1d(nn::Conv1dOptions{
            .in_channels = 64, .out_channels = 8, .kernel_size = 3, .padding = 1}));
  return unet_of(
      nn::Conv2d(
          nn::Conv2dOptions{.in_channels = 3, .out_channels = 32, .kernel_size = 3, .padding = 1}),
      nn::Conv2d(nn::Conv2dOptions{
          .in_channels = 32, .out_channels = 64, .kernel_size = 3, .stride = 2, .padding = 1}),
      nn::ConvTranspose2d(nn::ConvTranspose2dOptions{
          .in_channels = 64, .out_channels = 32, .kernel_size = 2, .stride = 2}),
      nn::Conv2d(
          nn::Conv2dOptions{.in_channels = 64, .out_channels = 3, .kernel_size = 3, .padding = 1}));
}

// One SGD step of mse_loss(model(x), y); returns the loss before the step.
double step(Model& m, ember::optim::SGD& opt, const Tensor& x, const Tensor& y, bool read) {
  opt.zero_grad();
  Tensor loss = ember::mse_loss(m.forward(x), y);
  loss.backward();
  opt.step();
  return read ? loss.item<double>() : 0.0;
}

// Validates the timed network against the reference one (same seed, same weights: on the CPU,
// or with --cpu in f64), then times it.
bool bench_model(const char* name, const std::function<Model()>& make, const ember::Shape& shape,
                 const nlohmann::json& py, int warmup, int blocks, int per_block) {
  ember::manual_seed(1);
  const Tensor x = ember::randn(shape), y = ember::randn(shape);
  const ember::DType ref_dtype = on_cpu() ? ember::DType::f64 : ember::DType::f32;
  ember::manual_seed(7);
  Model ref_model = make();
  ref_model.to(kCpu, ref_dtype);
  ember::manual_seed(7);
  Model timed = make();
  timed.to(g_target, ember::DType::f32);
  ember::optim::SGD opt_ref(ref_model.params, {.lr = 0.01}), opt(timed.params, {.lr = 0.01});
  const Tensor xr = x.to(ref_dtype), yr = y.to(ref_dtype);
  const Tensor xg = x.to(g_target), yg = y.to(g_target);
  const char* ref_name = on_cpu() ? "CPU f64" : "CPU";
  const char* timed_name = on_cpu() ? "CPU f32" : "GPU";
  bool ok = true;
  for (int i = 0; i < 2; ++i) {
    const double lc = step(ref_model, opt_ref, xr, yr, true), lg = step(timed, opt, xg, yg, true);
    const double err = std::abs(lc - lg) / std::max(1e-12, std::abs(lc));
    std::fprintf(stderr, "%s: loss after %d step(s): %s %.7g, %s %.7g (rel %.2e)\n", name, i,
                 ref_name, lc, timed_name, lg, err);
    ok = ok && err < 1e-4;
  }
  if (!ok) {
    std::fprintf(stderr, "%s: the %s loss differs from the %s one: not timed\n", name, timed_name,
                 ref_name);
    return false;
  }
  const double ms =
      ms_per_call([&] { step(timed, opt, xg, yg, false); }, warmup, blocks, per_block);
  const auto torch_ms = ref(py, name, "ms");
  std::fprintf(stderr, "%s: ember %.3f ms/step, PyTorch %.3f ms/step\n", name, ms,
               torch_ms.value_or(NAN));
  bench::emit(std::string(on_cpu() ? "vocab_cpu_" : "vocab_") + name, ms, torch_ms, "ms/step",
              false, 1.0,
              {bench::str("reference_impl", on_cpu() ? "PyTorch CPU (Python), eager"
                                                     : "PyTorch CUDA (Python), eager")});
  return true;
}

bool bench_einsum(const nlohmann::json& py) {
  ember::manual_seed(3);
  const Tensor q = ember::randn({8, 16, 1024, 64}), k = ember::randn({8, 16, 1024, 64});
  const Tensor qg = q.to(g_target), kg = k.to(g_target);
  const char* eq = "bhqd,bhkd->bhqk";
  {
    // The reference: the CPU's result (with --cpu, the f64 one).
    const ember::DType rd = on_cpu() ? ember::DType::f64 : ember::DType::f32;
    const Tensor want = ember::einsum(eq, {q.narrow(0, 0, 1).to(rd), k.narrow(0, 0, 1).to(rd)})
                            .to(ember::DType::f32);
    const Tensor got = ember::einsum(eq, {qg.narrow(0, 0, 1), kg.narrow(0, 0, 1)}).to(kCpu);
    const std::vector<float> w = want.to_vector<float>(), g = got.to_vector<float>();
    if (!bench::report(
            "vocab_einsum", on_cpu() ? "f32 vs f64 (first batch)" : "GPU vs CPU (first batch)",
            bench::compare(g.data(), w.data(), static_cast<int64_t>(w.size()), 1e-3, 1e-4),
            static_cast<int64_t>(w.size())))
      return false;
  }
  ember::NoGradGuard no_grad;
  const double ms = ms_per_call(
      [&] {
        bench::do_not_optimize(ember::einsum(eq, {qg, kg}).data_ptr());
      },
      on_cpu() ? 1 : 5, on_cpu() ? 3 : 15, on_cpu() ? 1 : 10);
  const double flops = 2.0 * 8 * 16 * 1024 * 1024 * 64;
  const auto torch_ms = ref(py, "einsum", "ms");
  std::fprintf(stderr, "einsum: ember %.3f ms (%.1f TFLOP/s), PyTorch %.3f ms\n", ms,
               flops / (ms * 1e-3) / 1e12, torch_ms.value_or(NAN));
  bench::emit(
      on_cpu() ? "vocab_cpu_einsum" : "vocab_einsum", ms, torch_ms, "ms", false, 1.0,
      {bench::num("ember_tflops", flops / (ms * 1e-3) / 1e12),
       bench::str("reference_impl", on_cpu() ? "torch.einsum (CPU)" : "torch.einsum, TF32 off")});
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string only = "einsum,unet1d,unet2d,lstm";  // --only a,b: a subset
    bool cpu = false;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--cpu") {
        cpu = true;
      } else if (a == "--only" && i + 1 < argc) {
        only = argv[++i];
      } else {
        std::fprintf(stderr, "usage: bench_vocab [--cpu] [--only einsum,unet1d,unet2d,lstm]\n");
        return 2;
      }
    }
    g_only = only;
    auto wanted = [&](const char* name) {
      return ("," + only + ",").find(std::string(",") + name + ",") != std::string::npos;
    };
    if (cpu) {
      g_target = kCpu;
      std::fprintf(stderr, "bench_vocab: CPU, %d threads\n", ember::get_num_threads());
    } else if (!ember::cuda_available()) {
      std::fprintf(stderr, "bench_vocab: skipped: no CUDA device (or ember built without CUDA)\n");
      return 0;
    } else {
      std::fprintf(stderr, "bench_vocab: %s\n", ember::cuda_device_description(0).c_str());
    }
    // A CPU LSTM step takes about a second: fewer repetitions there.
    const int reps = on_cpu() ? 1 : 10;
    const nlohmann::json py = run_python();
    bool ok = !wanted("einsum") || bench_einsum(py);
    if (wanted("unet1d"))
      ok = bench_model(
               "unet1d", [] { return make_unet(1); }, {32, 8, 1024}, py, reps, on_cpu() ? 3 : 15,
               reps) &&
           ok;
    if (wanted("unet2d"))
      ok = bench_model(
               "unet2d", [] { return make_unet(2); }, {16, 3, 64, 64}, py, reps, on_cpu() ? 3 : 15,
               reps) &&
           ok;
    if (wanted("lstm"))
      ok = bench_model("lstm", make_lstm, {128, 64, 512}, py, on_cpu() ? 1 : 2, on_cpu() ? 3 : 5,
                       on_cpu() ? 1 : 2) &&
           ok;
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_vocab: error: %s\n", e.what());
    return 1;
  }
}
