// bench/bench_train_step.cpp — one Adam training step of the Fashion-MNIST models, against
// PyTorch from C++ (libtorch) and from Python, each at its best thread count, in one run.
//
//   models: mlp  = train::mlp(784, {256, 256}, 10), batch 128 of [784]
//           cnn  = train::fashion_cnn(10) (2 conv + batch norm + pool, 1 hidden linear),
//                  batch 128 of [1, 28, 28]
//   step:   zero_grad (set to none), forward, cross_entropy, backward, Adam(lr 1e-3).step()
//   figure: median ms per step over kReps steps after warm-up, for 1 and 2 threads each;
//           the best thread count of each implementation is the one compared.
//   targets (issue 3): mlp ≥ 1.5 against Python, ≥ 5 against libtorch; cnn ≥ 1.0 against both.
//
// Validation first: all three start from ember's initial weights (written to a safetensors
// file that libtorch copies and bench/torch/train_step.py reads) and run three steps on the
// same batch; the three loss trajectories must agree to 1e-4 relative.
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ember/ember.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/nn/loss.hpp"
#include "ember/optim/adam.hpp"
#include "ember/train/models.hpp"
#include "nlohmann/json.hpp"

#ifdef EMBER_HAVE_LIBTORCH
#include <ATen/Parallel.h>
#include <torch/torch.h>
#endif

namespace {

constexpr int64_t kBatch = 128;
constexpr int kValidateSteps = 3;
constexpr int kWarmup = 5;

struct Case {
  std::string model;  // "mlp" or "cnn"
  int reps;
  double target_python, target_libtorch;
};

ember::Shape input_shape(const std::string& model) {
  return model == "mlp" ? ember::Shape{kBatch, 784} : ember::Shape{kBatch, 1, 28, 28};
}

ember::nn::Module build_ember(const std::string& model) {
  return model == "mlp" ? ember::train::mlp(784, {256, 256}, 10) : ember::train::fashion_cnn(10);
}

// One ember training step; returns the loss tensor (not read, so no sync is forced).
struct EmberStep {
  ember::nn::Module net;
  std::unique_ptr<ember::optim::Adam> opt;
  ember::Tensor x, y;
  ember::Tensor operator()() {
    opt->zero_grad();
    ember::Tensor loss = ember::cross_entropy(net(x), y);
    loss.backward();
    opt->step();
    return loss;
  }
};

#ifdef EMBER_HAVE_LIBTORCH
torch::nn::Sequential build_torch(const std::string& model) {
  namespace tn = torch::nn;
  if (model == "mlp")
    return tn::Sequential(tn::Linear(784, 256), tn::ReLU(), tn::Linear(256, 256), tn::ReLU(),
                          tn::Linear(256, 10));
  return tn::Sequential(tn::Conv2d(tn::Conv2dOptions(1, 32, 3).padding(1)), tn::BatchNorm2d(32),
                        tn::ReLU(), tn::MaxPool2d(2),
                        tn::Conv2d(tn::Conv2dOptions(32, 64, 3).padding(1)), tn::BatchNorm2d(64),
                        tn::ReLU(), tn::MaxPool2d(2), tn::Flatten(), tn::Linear(64 * 7 * 7, 128),
                        tn::ReLU(), tn::Linear(128, 10));
}

at::Tensor to_torch(const ember::Tensor& t) {
  const ember::Tensor c = t.contiguous();
  std::vector<int64_t> sizes(c.shape().begin(), c.shape().end());
  const auto type = c.dtype() == ember::DType::i64 ? torch::kInt64 : torch::kFloat32;
  return torch::from_blob(c.data_ptr(), sizes, type).clone();
}

// Copies every entry of ember's state dict into the libtorch module of the same names.
void copy_state(const ember::nn::Module& from, torch::nn::Sequential& to) {
  torch::NoGradGuard no_grad;
  auto params = to->named_parameters();
  auto buffers = to->named_buffers();
  for (const auto& [name, value] : from->state_dict()) {
    at::Tensor* dst = params.find(name);
    if (!dst) dst = buffers.find(name);
    EMBER_CHECK(dst != nullptr, "bench_train_step: libtorch module has no '", name, "'");
    dst->copy_(to_torch(value));
  }
}
#endif

// Runs bench/torch/train_step.py; returns its JSON (losses, ms_per_step) or null on failure.
nlohmann::json run_python(const std::string& model, int threads, int reps, const std::string& init,
                          const std::string& batch) {
  const char* src = std::getenv("EMBER_SOURCE_DIR");
  const std::string script =
      std::string(src ? src : EMBER_SOURCE_DIR_DEFAULT) + "/bench/torch/train_step.py";
  const std::string cmd = "/usr/bin/python3 " + script + " --model " + model + " --init " + init +
                          " --batch " + batch + " --threads " + std::to_string(threads) +
                          " --validate-steps " + std::to_string(kValidateSteps) + " --steps " +
                          std::to_string(reps) + " --warmup " + std::to_string(kWarmup) + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return nullptr;
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  const size_t brace = out.rfind("\n{") == std::string::npos ? out.find('{') : out.rfind("\n{") + 1;
  if (status != 0 || brace == std::string::npos) {
    std::fprintf(stderr, "bench_train_step: python reference failed (status %d):\n%s\n", status,
                 out.c_str());
    return nullptr;
  }
  return nlohmann::json::parse(out.substr(brace), nullptr, /*allow_exceptions=*/false);
}

bool losses_agree(const char* name, const char* what, const std::vector<double>& got,
                  const std::vector<double>& want) {
  const bench::Compare c =
      bench::compare(got.data(), want.data(), static_cast<int64_t>(got.size()), 1e-5, 1e-4);
  return bench::report(name, what, c, static_cast<int64_t>(got.size()));
}

bool run_case(const Case& c, const std::filesystem::path& dir) {
  const std::string name = "train_step_" + c.model;
  ember::manual_seed(42);
  EmberStep es{build_ember(c.model), nullptr, ember::rand(input_shape(c.model)),
               ember::randint(0, 10, {kBatch})};
  es.opt = std::make_unique<ember::optim::Adam>(es.net->parameters(),
                                                ember::optim::AdamOptions{.lr = 1e-3});
  es.net->train();
  const std::string init = (dir / (c.model + "_init.safetensors")).string();
  const std::string batch = (dir / (c.model + "_batch.safetensors")).string();
  ember::io::write_safetensors(init, es.net->state_dict(), {});
  ember::io::write_safetensors(batch, {{"x", es.x}, {"y", es.y}}, {});

#ifdef EMBER_HAVE_LIBTORCH
  torch::manual_seed(0);
  torch::nn::Sequential tnet = build_torch(c.model);
  copy_state(es.net, tnet);
  tnet->train();
  torch::optim::Adam topt(tnet->parameters(), torch::optim::AdamOptions(1e-3));
  const at::Tensor tx = to_torch(es.x), ty = to_torch(es.y);
  auto torch_step = [&] {
    for (at::Tensor& p : tnet->parameters()) p.mutable_grad() = at::Tensor();  // set_to_none
    at::Tensor loss = torch::nn::functional::cross_entropy(tnet->forward(tx), ty);
    loss.backward();
    topt.step();
    return loss;
  };
#endif

  // ---- validate: three steps from the same weights on the same batch
  std::vector<double> ember_losses;
  for (int i = 0; i < kValidateSteps; ++i) ember_losses.push_back(es().item<float>());
  bool ok = true;
#ifdef EMBER_HAVE_LIBTORCH
  std::vector<double> torch_losses;
  for (int i = 0; i < kValidateSteps; ++i) torch_losses.push_back(torch_step().item<float>());
  ok = losses_agree(name.c_str(), "ember losses vs libtorch losses (3 Adam steps)", ember_losses,
                    torch_losses) &&
       ok;
#endif
  std::optional<double> python_ms;
  int python_threads = 0;
  for (int threads : {1, 2}) {
    const nlohmann::json py = run_python(c.model, threads, c.reps, init, batch);
    if (py.is_null() || !py.contains("ms_per_step")) continue;
    if (threads == 1) {
      const std::vector<double> py_losses = py["losses"].get<std::vector<double>>();
      ok = losses_agree(name.c_str(), "ember losses vs PyTorch (Python) losses", ember_losses,
                        py_losses) &&
           ok;
    }
    const double ms = py["ms_per_step"].get<double>();
    std::fprintf(stderr, "%s: PyTorch (Python %s) %d thread(s): %.3f ms/step\n", name.c_str(),
                 py.value("torch", std::string("?")).c_str(), threads, ms);
    if (!python_ms || ms < *python_ms) python_ms = ms, python_threads = threads;
  }
  if (!ok) return false;

  // ---- time each implementation at 1 and 2 threads; keep its best
  double ember_ms = 0.0;
  int ember_threads = 0;
  std::optional<double> torch_ms;
  int torch_threads = 0;
  for (int threads : {1, 2}) {
    ember::set_num_threads(threads);
    std::vector<std::function<void()>> fns = {[&] { bench::do_not_optimize(es().data_ptr()); }};
#ifdef EMBER_HAVE_LIBTORCH
    at::set_num_threads(threads);
    fns.push_back([&] { bench::do_not_optimize(torch_step().data_ptr()); });
#endif
    const std::vector<bench::Timing> t = bench::time_interleaved(fns, kWarmup, c.reps);
    const double e = t[0].median * 1e3;
    std::fprintf(stderr, "%s: %d thread(s): ember %.3f ms/step", name.c_str(), threads, e);
    if (ember_threads == 0 || e < ember_ms) ember_ms = e, ember_threads = threads;
    if (t.size() > 1) {
      const double r = t[1].median * 1e3;
      std::fprintf(stderr, ", libtorch %.3f ms/step", r);
      if (!torch_ms || r < *torch_ms) torch_ms = r, torch_threads = threads;
    }
    std::fprintf(stderr, "\n");
  }

  const std::vector<bench::Field> common = {bench::str("model", c.model),
                                            bench::num("batch", kBatch),
                                            bench::num("ember_threads", ember_threads)};
  auto with = [&](std::vector<bench::Field> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  bench::emit(name + "_vs_python", ember_ms, python_ms, "ms/step", /*higher_is_better=*/false,
              c.target_python,
              with({bench::str("reference_impl", "PyTorch (Python), best of 1 and 2 threads"),
                    bench::num("reference_threads", python_threads)}));
  bench::emit(name + "_vs_libtorch", ember_ms, torch_ms, "ms/step", /*higher_is_better=*/false,
              c.target_libtorch,
              with({bench::str("reference_impl", "libtorch 1.13 C++, best of 1 and 2 threads"),
                    bench::num("reference_threads", torch_threads)}));
  std::fprintf(stderr, "%s: ember %.3f ms/step (%d threads)", name.c_str(), ember_ms,
               ember_threads);
  if (python_ms)
    std::fprintf(stderr, "; Python %.3f (%d) -> %.2fx (target >= %.1f)", *python_ms, python_threads,
                 *python_ms / ember_ms, c.target_python);
  if (torch_ms)
    std::fprintf(stderr, "; libtorch %.3f (%d) -> %.2fx (target >= %.1f)", *torch_ms, torch_threads,
                 *torch_ms / ember_ms, c.target_libtorch);
  std::fprintf(stderr, "\n");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string only = argc > 1 ? argv[1] : "";
    const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                      ("ember_bench_train_step_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    bool ok = true;
    for (const Case& c : {Case{"mlp", 101, 1.5, 5.0}, Case{"cnn", 21, 1.0, 1.0}})
      if (only.empty() || only == c.model) ok = run_case(c, dir) && ok;
    std::filesystem::remove_all(dir);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train_step: error: %s\n", e.what());
    return 1;
  }
}
