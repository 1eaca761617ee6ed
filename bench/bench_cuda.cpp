// bench/bench_cuda.cpp — ember on the GPU against PyTorch (CUDA) in the same run (issue 5,
// "Benchmarks on the H200"). Skips with a message (exit 0) when there is no CUDA device.
//
//   tiny   16 f32 elements on cuda:0, z = z * a + b 500 times = 1000 ops, forward only:
//          µs per op, with no graph (NoGradGuard) and with the graph recorded. target ≥ 3.
//   mlp    train::mlp(784, {256, 256}, 10), batch 128, data on the GPU; one Adam step
//          (zero_grad, forward, cross_entropy, backward, step): ms per step, the median of 25
//          blocks of 10 steps (250 steps after 30 warm-up). target ≥ 5 against fused Adam.
//   wide   train::mlp(784, {4096, 4096}, 10), batch 4096, fp32: ms per step and TFLOP/s
//          counting 6·(784·4096 + 4096·4096 + 4096·10)·4096 flops. target ≥ 0.95.
//   gemm   matmul 8192³ fp32 through ember (cuBLASLt, FP32 compute, no TF32) against torch.mm
//          with TF32 off (PyTorch's default): TFLOP/s, the measured peak for `wide`.
//   epoch  Fashion-MNIST (60000 train images resident on the GPU; synthetic data of the same
//          shape when the files are missing), one epoch of the mlp step over a random
//          permutation, then test accuracy: wall time and accuracy (reported, no target).
//
// Timing: the device is synchronised (a 4-byte read-back: it waits for the stream) before the clock
// starts and before it stops; there is no host sync inside a timed block other than those ember
// itself makes. Validation first: every figure's ember GPU result against ember's CPU result
// (losses of three Adam steps from the same weights, chain values, GEMM rows). PyTorch's figures
// come from bench/torch/cuda_bench.py, run through popen with $EMBER_PYTHON (default python3).
//
//   bench_cuda                 all figures
//   bench_cuda profile [N]     N (default 3) mlp steps between cudaProfilerStart/Stop, for
//                              `ncu --profile-from-start off` (kernels per step, GPU time)
//   EMBER_FASHION_MNIST=DIR    where the .gz files are (default: ember's loader's default)
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ember/data/fashion_mnist.hpp"
#include "ember/ember.hpp"
#include "ember/nn/loss.hpp"
#include "ember/optim/adam.hpp"
#include "ember/train/models.hpp"
#include "nlohmann/json.hpp"
#include "torch_reference.hpp"

namespace {

using ember::Device;
using ember::Tensor;

const Device kGpu = Device::cuda(0);
const Device kCpu = Device::cpu();
constexpr int kChainSteps = 500;  // 2 ops each
constexpr int kChainOps = 2 * kChainSteps;

/// Waits for the device's stream: reading a value back waits for all work queued before it
/// (the public API has no synchronize; this costs one 4-byte download, ~10 µs).
void sync() {
  static const Tensor* probe = new Tensor(ember::zeros({1}, {.device = kGpu}));  // never freed:
  bench::do_not_optimize(probe->item<float>());  // no device free after the runtime shut down
}

double seconds_since(bench::Clock::time_point start) {
  return std::chrono::duration<double>(bench::Clock::now() - start).count();
}

/// bench::time_blocks with the GPU's synchronisation.
bench::Timing time_blocks(const std::function<void()>& fn, int warmup, int blocks, int per_block) {
  return bench::time_blocks(fn, warmup, blocks, per_block, sync);
}

/// A result line whose figure has no target (reported only): as bench::emit, target and met null.
void emit_report(const std::string& name, double ember, std::optional<double> reference,
                 const std::string& unit, bool higher_is_better,
                 const std::vector<bench::Field>& extra) {
  std::optional<double> speedup;
  if (reference && ember > 0 && *reference > 0)
    speedup = higher_is_better ? ember / *reference : *reference / ember;
  std::string line = "{\"bench\": \"" + name + "\", \"ember\": " + bench::json_number(ember) +
                     ", \"reference\": " + bench::json_number(reference) + ", \"unit\": \"" + unit +
                     "\", \"speedup\": " + bench::json_number(speedup) +
                     ", \"target\": null, \"met\": null";
  for (const bench::Field& f : extra) line += ", \"" + f.key + "\": " + f.json;
  std::printf("%s}\n", line.c_str());
  std::fflush(stdout);
}

std::optional<double> ref(const nlohmann::json& py, const char* group, const char* key) {
  if (py.is_null() || !py.contains(group) || !py[group].contains(key)) return std::nullopt;
  return py[group][key].get<double>();
}

/// Runs bench/torch/cuda_bench.py; its last JSON line, or null when it failed.
nlohmann::json run_python(const std::string& data_dir) {
  return bench::run_torch_script("bench_cuda", "cuda_bench.py --data-dir '" + data_dir + "'");
}

// ---------------------------------------------------------------------------------------------
// tiny ops

Tensor chain(Tensor z, const Tensor& a, const Tensor& b) {
  for (int i = 0; i < kChainSteps; ++i) z = z * a + b;
  return z;
}

bool bench_tiny(const nlohmann::json& py) {
  ember::manual_seed(0);
  const Tensor x_cpu = ember::rand({16}, {}, -1.0, 1.0);
  const Tensor a_cpu = ember::full({16}, 1.0001), b_cpu = ember::full({16}, 0.0001);
  const Tensor x = x_cpu.to(kGpu), a = a_cpu.to(kGpu), b = b_cpu.to(kGpu);
  const Tensor xg = x.clone().requires_grad_();

  // validate: the GPU chain against the CPU chain, without and with the graph
  const std::vector<float> want = chain(x_cpu, a_cpu, b_cpu).to_vector<float>();
  bool ok = true;
  {
    ember::NoGradGuard no_grad;
    const std::vector<float> got = chain(x, a, b).to(kCpu).to_vector<float>();
    ok = bench::report("cuda_tiny_op", "GPU chain vs CPU chain (no grad)",
                       bench::compare(got.data(), want.data(), 16, 1e-6, 1e-5), 16) &&
         ok;
  }
  const std::vector<float> got = chain(xg, a, b).detach().to(kCpu).to_vector<float>();
  ok = bench::report("cuda_tiny_op", "GPU chain vs CPU chain (graph recorded)",
                     bench::compare(got.data(), want.data(), 16, 1e-6, 1e-5), 16) &&
       ok;
  if (!ok) return false;

  bench::Timing nograd;
  {
    ember::NoGradGuard no_grad;
    nograd = time_blocks([&] { bench::do_not_optimize(chain(x, a, b).data_ptr()); }, 3, 21, 1);
  }
  const bench::Timing grad =
      time_blocks([&] { bench::do_not_optimize(chain(xg, a, b).data_ptr()); }, 3, 21, 1);
  // Host-side cost alone: the same chain with no sync at its end (the queue absorbs it).
  double host_us = 0.0;
  {
    ember::NoGradGuard no_grad;
    sync();
    const auto start = bench::Clock::now();
    bench::do_not_optimize(chain(x, a, b).data_ptr());
    host_us = seconds_since(start) * 1e6 / kChainOps;
    sync();
  }
  const double ng = nograd.median * 1e3 / kChainOps, gr = grad.median * 1e3 / kChainOps;
  const auto py_ng = ref(py, "tiny", "nograd_us_per_op"), py_gr = ref(py, "tiny", "grad_us_per_op");
  std::fprintf(stderr,
               "cuda_tiny_op: ember %.2f µs/op (no grad), %.2f µs/op (graph), host issue %.2f "
               "µs/op; PyTorch %.2f / %.2f\n",
               ng, gr, host_us, py_ng.value_or(NAN), py_gr.value_or(NAN));
  const std::vector<bench::Field> extra = {bench::num("elements", 16), bench::num("ops", kChainOps),
                                           bench::str("reference_impl", "PyTorch CUDA (Python)")};
  auto with = [&](bench::Field f) {
    auto e = extra;
    e.push_back(f);
    return e;
  };
  bench::emit("cuda_tiny_op_nograd", ng, py_ng, "us/op", false, 3.0,
              with(bench::num("ember_host_issue_us_per_op", host_us)));
  bench::emit("cuda_tiny_op_graph", gr, py_gr, "us/op", false, 3.0, extra);
  return true;
}

// ---------------------------------------------------------------------------------------------
// training steps

struct Step {
  ember::nn::Module net;
  std::unique_ptr<ember::optim::Adam> opt;
  Tensor x, y;
  Tensor operator()() { return (*this)(x, y); }
  Tensor operator()(const Tensor& xb, const Tensor& yb) {
    opt->zero_grad();
    Tensor loss = ember::cross_entropy(net(xb), yb);
    loss.backward();
    opt->step();
    return loss;
  }
};

/// A model with seeded weights on `device` and its Adam (lr 1e-3); x, y as given (moved).
Step make_step(const std::vector<int64_t>& hidden, uint64_t seed, Device device, const Tensor& x,
               const Tensor& y) {
  ember::manual_seed(seed);
  Step s{ember::train::mlp(784, hidden, 10), nullptr, x.to(device), y.to(device)};
  s.net->to(device);
  s.net->train();
  s.opt = std::make_unique<ember::optim::Adam>(s.net->parameters(),
                                               ember::optim::AdamOptions{.lr = 1e-3});
  return s;
}

/// Three Adam steps from the same weights on the CPU and the GPU: the losses must agree.
bool validate_steps(const char* name, const std::vector<int64_t>& hidden, int64_t batch) {
  ember::manual_seed(7);
  const Tensor x = ember::rand({batch, 784}), y = ember::randint(0, 10, {batch});
  Step cpu = make_step(hidden, 42, kCpu, x, y), gpu = make_step(hidden, 42, kGpu, x, y);
  std::vector<double> want, got;
  for (int i = 0; i < 3; ++i) {
    want.push_back(cpu().item<float>());
    got.push_back(gpu().item<float>());
  }
  return bench::report(name, "GPU losses vs CPU losses (3 Adam steps, same weights)",
                       bench::compare(got.data(), want.data(), 3, 1e-5, 1e-4), 3);
}

struct Phases {
  double forward_ms, backward_ms, step_ms;
};

/// forward (zero_grad + forward + loss), backward, step: each followed by a sync (profiling).
Phases time_phases(Step& s, int steps) {
  std::vector<double> f, b, o;
  for (int i = 0; i < steps; ++i) {
    sync();
    const auto t0 = bench::Clock::now();
    s.opt->zero_grad();
    Tensor loss = ember::cross_entropy(s.net(s.x), s.y);
    sync();
    const auto t1 = bench::Clock::now();
    loss.backward();
    sync();
    const auto t2 = bench::Clock::now();
    s.opt->step();
    sync();
    const auto t3 = bench::Clock::now();
    f.push_back(std::chrono::duration<double>(t1 - t0).count());
    b.push_back(std::chrono::duration<double>(t2 - t1).count());
    o.push_back(std::chrono::duration<double>(t3 - t2).count());
  }
  auto median_ms = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2] * 1e3;
  };
  return {median_ms(f), median_ms(b), median_ms(o)};
}

bool bench_mlp(const nlohmann::json& py) {
  const char* name = "cuda_mlp_step";
  if (!validate_steps(name, {256, 256}, 128)) return false;
  ember::manual_seed(1);
  Step s = make_step({256, 256}, 42, kGpu, ember::rand({128, 784}), ember::randint(0, 10, {128}));
  const bench::Timing t = time_blocks([&] { bench::do_not_optimize(s().data_ptr()); }, 30, 25, 10);
  // Host issue time of one block of 10 steps with no sync at its end; bytes read back to the
  // host and allocations per step (a step that reads nothing back moves 0 bytes).
  sync();
  const ember::MemoryStats before = ember::memory_stats(kGpu);
  auto start = bench::Clock::now();
  for (int i = 0; i < 10; ++i) bench::do_not_optimize(s().data_ptr());
  const double host_ms = seconds_since(start) * 1e3 / 10;
  const ember::MemoryStats after = ember::memory_stats(kGpu);
  sync();
  const double d2h_bytes = double(after.device_to_host_bytes - before.device_to_host_bytes) / 10;
  const double allocs = double(after.alloc_count - before.alloc_count) / 10;
  const Phases p = time_phases(s, 50);
  const auto py_ms = ref(py, "mlp", "ms_per_step");
  std::fprintf(stderr,
               "%s: ember %.3f ms/step (best block %.3f; host issue %.3f), PyTorch fused Adam "
               "%.3f ms/step (foreach Adam %.3f)\n"
               "%s: phases with a sync after each: forward+loss %.3f ms, backward %.3f ms, "
               "step %.3f ms (PyTorch %.3f / %.3f / %.3f); %.0f device->host bytes and %.0f "
               "allocations per step\n",
               name, t.median, t.best, host_ms, py_ms.value_or(NAN),
               ref(py, "mlp", "foreach_ms_per_step").value_or(NAN), name, p.forward_ms,
               p.backward_ms, p.step_ms, ref(py, "mlp", "forward_ms").value_or(NAN),
               ref(py, "mlp", "backward_ms").value_or(NAN), ref(py, "mlp", "step_ms").value_or(NAN),
               d2h_bytes, allocs);
  bench::emit(
      name, t.median, py_ms, "ms/step", false, 5.0,
      {bench::str("model", "784-256-256-10"), bench::num("batch", 128),
       bench::str("reference_impl", "PyTorch CUDA, Adam(fused=True)"),
       bench::num("ember_host_issue_ms", host_ms), bench::num("ember_forward_ms", p.forward_ms),
       bench::num("ember_backward_ms", p.backward_ms), bench::num("ember_adam_ms", p.step_ms),
       bench::num("ember_d2h_bytes_per_step", d2h_bytes),
       bench::num("ember_allocs_per_step", allocs)});
  return true;
}

// The measured fp32 GEMM peak (TFLOP/s), for `wide`; 0 when validation failed.
double bench_gemm(const nlohmann::json& py) {
  const char* name = "cuda_gemm_f32_8192";
  constexpr int64_t n = 8192;
  constexpr int64_t rows = 16;
  ember::manual_seed(3);
  const Tensor a_cpu = ember::randn({n, n}), b_cpu = ember::randn({n, n});
  const Tensor a = a_cpu.to(kGpu), b = b_cpu.to(kGpu);
  const std::vector<float> got = ember::matmul(a, b).slice(0, 0, rows).to(kCpu).to_vector<float>();
  const std::vector<float> want =
      ember::matmul(a_cpu.slice(0, 0, rows).contiguous(), b_cpu).to_vector<float>();
  // Sums of 8192 products of N(0,1) values (magnitude ~90): f32 rounding in another order.
  if (!bench::report(name, "first 16 rows of the GPU product vs the CPU product",
                     bench::compare(got.data(), want.data(), rows * n, 2e-3, 1e-4), rows * n))
    return 0.0;
  const bench::Timing t =
      time_blocks([&] { bench::do_not_optimize(ember::matmul(a, b).data_ptr()); }, 3, 10, 1);
  const double tflops = 2.0 * n * n * n / (t.median * 1e-3) / 1e12;
  const auto py_tf = ref(py, "gemm", "tflops");
  std::fprintf(stderr,
               "%s: ember %.1f TFLOP/s (%.2f ms), torch.mm %.1f TFLOP/s (TF32 off; with TF32 on "
               "%.1f); ember uses FP32 compute, no TF32\n",
               name, tflops, t.median, py_tf.value_or(NAN),
               ref(py, "gemm", "tf32_tflops").value_or(NAN));
  emit_report(
      name, tflops, py_tf, "TFLOP/s", true,
      {bench::str("tf32", "off in both (ember: CUBLAS_COMPUTE_32F; torch: allow_tf32=False)"),
       bench::num("torch_tf32_tflops", ref(py, "gemm", "tf32_tflops").value_or(NAN))});
  return tflops;
}

bool bench_wide(const nlohmann::json& py, double peak_tflops) {
  const char* name = "cuda_wide_mlp_step";
  if (!validate_steps(name, {4096, 4096}, 256)) return false;
  ember::manual_seed(1);
  Step s =
      make_step({4096, 4096}, 42, kGpu, ember::rand({4096, 784}), ember::randint(0, 10, {4096}));
  const bench::Timing t = time_blocks([&] { bench::do_not_optimize(s().data_ptr()); }, 5, 6, 5);
  const Phases p = time_phases(s, 5);
  const double flops = 6.0 * (784.0 * 4096 + 4096.0 * 4096 + 4096.0 * 10) * 4096;
  const double tflops = flops / (t.median * 1e-3) / 1e12;
  const auto py_ms = ref(py, "wide", "ms_per_step");
  std::fprintf(
      stderr,
      "%s: ember %.3f ms/step = %.1f TFLOP/s (%.0f%% of ember's measured 8192³ GEMM %.1f); "
      "PyTorch %.3f ms/step = %.1f TFLOP/s; phases forward %.3f, backward %.3f, step %.3f ms\n",
      name, t.median, tflops, 100 * tflops / peak_tflops, peak_tflops, py_ms.value_or(NAN),
      ref(py, "wide", "tflops").value_or(NAN), p.forward_ms, p.backward_ms, p.step_ms);
  bench::emit(
      name, t.median, py_ms, "ms/step", false, 0.95,
      {bench::str("model", "784-4096-4096-10"), bench::num("batch", 4096),
       bench::num("ember_tflops", tflops),
       bench::num("torch_tflops", ref(py, "wide", "tflops").value_or(NAN)),
       bench::num("gemm_peak_tflops", peak_tflops), bench::str("tf32", "off in both"),
       bench::num("ember_forward_ms", p.forward_ms), bench::num("ember_backward_ms", p.backward_ms),
       bench::num("ember_adam_ms", p.step_ms)});
  return true;
}

// ---------------------------------------------------------------------------------------------
// an epoch of Fashion-MNIST with the data on the GPU

struct Data {
  Tensor x_train, y_train, x_test, y_test;  // on the GPU
  std::string source;
};

Data load_data() {
  Data d;
  try {
    const ember::data::FashionMnist train = ember::data::load_fashion_mnist("train");
    const ember::data::FashionMnist test = ember::data::load_fashion_mnist("test");
    d = {train.flat_images().to(kGpu), train.labels.to(kGpu), test.flat_images().to(kGpu),
         test.labels.to(kGpu), "fashion-mnist"};
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda: Fashion-MNIST not found (%s); using synthetic data\n",
                 e.what());
    ember::manual_seed(5);
    d = {ember::rand({60000, 784}).to(kGpu), ember::randint(0, 10, {60000}).to(kGpu),
         ember::rand({10000, 784}).to(kGpu), ember::randint(0, 10, {10000}).to(kGpu), "synthetic"};
  }
  return d;
}

void run_epoch(Step& s, const Data& d, uint64_t seed) {
  const int64_t n = d.x_train.size(0);
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(seed));
  const Tensor index = ember::from_vector(perm, {n}).to(kGpu);  // one 480 KB upload per epoch
  for (int64_t i = 0; i < n; i += 128) {
    const Tensor idx = index.narrow(0, i, std::min<int64_t>(128, n - i));
    s(ember::index_select(d.x_train, 0, idx), ember::index_select(d.y_train, 0, idx));
  }
}

double accuracy(Step& s, const Data& d) {
  ember::NoGradGuard no_grad;
  Tensor correct = ember::zeros({}, {.device = kGpu});
  const int64_t n = d.x_test.size(0);
  for (int64_t i = 0; i < n; i += 1000) {
    const Tensor pred = s.net(d.x_test.narrow(0, i, 1000)).argmax(1);
    correct = correct + ember::eq(pred, d.y_test.narrow(0, i, 1000)).to(ember::DType::f32).sum();
  }
  return correct.item<float>() / static_cast<double>(n);
}

bool bench_epoch(const nlohmann::json& py, const Data& d) {
  const char* name = "cuda_fashion_mnist_epoch";
  // validate the batch gather: GPU index_select against the CPU's for one batch
  const Tensor idx = ember::from_vector(std::vector<int64_t>{5, 59999, 0, 123, 7}, {5});
  const std::vector<float> got =
      ember::index_select(d.x_train, 0, idx.to(kGpu)).to(kCpu).to_vector<float>();
  const std::vector<float> want =
      ember::index_select(d.x_train.to(kCpu), 0, idx).to_vector<float>();
  if (!bench::report(name, "GPU index_select batch vs CPU",
                     bench::compare(got.data(), want.data(), 5 * 784, 0.0, 0.0), 5 * 784))
    return false;
  Step warm =
      make_step({256, 256}, 0, kGpu, d.x_train.narrow(0, 0, 128), d.y_train.narrow(0, 0, 128));
  run_epoch(warm, d, 0);  // warm-up: kernels loaded, pools filled
  Step s = make_step({256, 256}, 1, kGpu, d.x_train.narrow(0, 0, 128), d.y_train.narrow(0, 0, 128));
  sync();
  auto start = bench::Clock::now();
  run_epoch(s, d, 1);
  sync();
  const double seconds = seconds_since(start);
  start = bench::Clock::now();
  const double acc = accuracy(s, d);
  const double eval_seconds = seconds_since(start);
  const auto py_s = ref(py, "epoch", "seconds"), py_acc = ref(py, "epoch", "accuracy");
  std::fprintf(stderr,
               "%s (%s): ember %.3f s/epoch, test accuracy %.4f (eval %.3f s); PyTorch %.3f s, "
               "accuracy %.4f (eval %.3f s)\n",
               name, d.source.c_str(), seconds, acc, eval_seconds, py_s.value_or(NAN),
               py_acc.value_or(NAN), ref(py, "epoch", "eval_seconds").value_or(NAN));
  emit_report(
      name, seconds, py_s, "s/epoch", false,
      {bench::str("data", d.source), bench::str("model", "784-256-256-10"),
       bench::num("batch", 128), bench::num("ember_accuracy", acc),
       bench::num("torch_accuracy", py_acc.value_or(NAN)), bench::num("ember_eval_s", eval_seconds),
       bench::num("torch_eval_s", ref(py, "epoch", "eval_seconds").value_or(NAN))});
  return true;
}

// N mlp steps between cudaProfilerStart/Stop (looked up at run time: ember links cudart).
int profile(int steps) {
  using Fn = int (*)();
  const auto start = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "cudaProfilerStart"));
  const auto stop = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "cudaProfilerStop"));
  ember::manual_seed(1);
  Step s = make_step({256, 256}, 42, kGpu, ember::rand({128, 784}), ember::randint(0, 10, {128}));
  for (int i = 0; i < 5; ++i) s();
  sync();
  if (start) start();
  for (int i = 0; i < steps; ++i) s();
  sync();
  if (stop) stop();
  std::fprintf(stderr, "bench_cuda profile: %d mlp steps profiled (profiler API %s)\n", steps,
               start ? "found" : "NOT found");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (!ember::cuda_available()) {
      std::fprintf(stderr, "bench_cuda: skipped: no CUDA device (or ember built without CUDA)\n");
      return 0;
    }
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "profile") return profile(argc > 2 ? std::atoi(argv[2]) : 3);
    std::fprintf(stderr, "bench_cuda: %s\n", ember::cuda_device_description(0).c_str());
    ember::set_num_threads(std::min(16, ember::get_num_threads()));  // CPU validation only
    const Data data = load_data();
    const nlohmann::json py = run_python(
        data.source == "fashion-mnist" ? ember::data::fashion_mnist_directory() : std::string());
    bool ok = bench_tiny(py);
    ok = bench_mlp(py) && ok;
    const double peak = bench_gemm(py);
    ok = peak > 0 && ok;
    ok = bench_wide(py, peak) && ok;
    ok = bench_epoch(py, data) && ok;
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda: error: %s\n", e.what());
    return 1;
  }
}
