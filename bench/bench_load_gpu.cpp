// bench/bench_load_gpu.cpp — issue 11's GPU figures: a 4 GiB model loaded from its file onto
// the GPU (warm and cold page cache) against safetensors' load_file(device="cuda") in the same
// run, and the cost of asynchronous checkpoints in training.
//
//   load:   16 × Linear(8192, 8192) (1.074 G parameters, 4.29 GB f32) saved with
//           io::save_model; io::load_state into the same network on cuda:0 (Note [Streaming
//           onto the GPU]: parallel pread into pinned staging, hashing, copies overlapped, the
//           copy into place after the checksum). Cold: the file's pages are dropped from the
//           page cache (posix_fadvise DONTNEED after fsync) before each load.
//           Reference: bench/torch/load_gpu.py, safetensors.torch.load_file(path, "cuda") of
//           the same file (it does not verify a checksum), warm and cold the same way.
//   async:  the 784-4096-4096-10 MLP, Adam, batch 4096, on cuda:0: ms per step without
//           checkpoints and with io::save_checkpoint_async every 50 steps (the state is 3 × 84
//           MB: parameters and two Adam moments). Target: within 5%.
// Validation first: the GPU model after load_state equals the CPU model bitwise; the run
// with checkpoints ends with the same weights as the one without, and its last checkpoint
// loads back to them.
// Skips (exit 0) without a CUDA device. Files go to $EMBER_BENCH_DIR (default /tmp).
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim/adam.hpp"
#include "nlohmann/json.hpp"
#include "torch_reference.hpp"

namespace {

using namespace ember;  // NOLINT: benchmark
const Device kGpu = Device::cuda(0);

void sync() { bench::do_not_optimize(zeros({1}, {.device = kGpu}).item<float>()); }

double seconds(const std::function<void()>& fn) {
  const auto t0 = bench::Clock::now();
  fn();
  sync();
  return std::chrono::duration<double>(bench::Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Drops the file's pages from the page cache (they are clean: fsync first).
void drop_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

nlohmann::json run_python(const std::string& file) {
  return bench::run_torch_script("bench_load_gpu", "load_gpu.py " + file);
}

std::optional<double> ref(const nlohmann::json& py, const char* key) {
  if (py.is_null() || py.is_discarded() || !py.contains(key)) return std::nullopt;
  return py[key].get<double>();
}

nn::Module big_model() {
  std::vector<nn::Module> layers;
  for (int i = 0; i < 16; ++i) layers.push_back(nn::Linear(8192, 8192));
  return nn::Sequential(layers);
}

bool bench_load(const std::string& dir) {
  const std::string path = dir + "/bench_load_gpu.safetensors";
  manual_seed(1);
  nn::Module cpu = big_model();
  const double gb = static_cast<double>(cpu->parameter_count()) * 4 / 1e9;
  io::save_model(cpu, path);
  manual_seed(2);
  nn::Module gpu = big_model();
  gpu->to(kGpu);
  io::load_state(gpu, path);
  const nn::StateDict want = cpu->state_dict(), got = gpu->state_dict();
  for (size_t i = 0; i < want.size(); ++i) {
    const Tensor g = got[i].second.to(Device::cpu());
    if (std::memcmp(g.data_ptr(), want[i].second.data_ptr(), static_cast<size_t>(g.numel()) * 4) !=
        0) {
      std::fprintf(stderr, "bench_load_gpu: VALIDATION FAILED: %s differs after the GPU load\n",
                   want[i].first.c_str());
      return false;
    }
  }
  std::fprintf(stderr, "bench_load_gpu: validated the GPU load of %.2f GB (%zu tensors bitwise)\n",
               gb, want.size());
  cpu = nn::Module();
  std::vector<double> warm, cold;
  for (int i = 0; i < 4; ++i) {  // the first is a warm-up
    const double s = seconds([&] { io::load_state(gpu, path); });
    if (i > 0) warm.push_back(s);
  }
  for (int i = 0; i < 3; ++i) {
    drop_cache(path);
    cold.push_back(seconds([&] { io::load_state(gpu, path); }));
  }
  gpu = nn::Module();
  const nlohmann::json py = run_python(path);
  const double w = gb / median(warm), c = gb / median(cold);
  const auto pw = ref(py, "warm_gbps"), pc = ref(py, "cold_gbps");
  std::fprintf(stderr,
               "load onto the GPU: ember warm %.2f GB/s, cold %.2f GB/s; safetensors "
               "warm %.2f GB/s, cold %.2f GB/s\n",
               w, c, pw.value_or(NAN), pc.value_or(NAN));
  bench::emit("checkpoint_load_gpu_4gb_warm", w, pw, "GB/s", true, 1.0,
              {bench::num("gb", gb), bench::num("target_gbps", 25.0),
               bench::str("met_25gbps", w >= 25.0 ? "yes" : "no"),
               bench::str("reference_impl", "safetensors.torch.load_file(device='cuda')")});
  bench::emit("checkpoint_load_gpu_4gb_cold", c, pc, "GB/s", true, 1.0,
              {bench::num("gb", gb),
               bench::str("note", "page cache dropped with posix_fadvise(DONTNEED) before each")});
  std::filesystem::remove(path);
  return true;
}

struct Mlp {
  nn::Module net;
  std::unique_ptr<optim::Adam> opt;
  Tensor x, y;
};

Mlp make_mlp() {
  manual_seed(5);
  Mlp m;
  m.net = nn::Sequential(std::vector<nn::Module>{
      nn::Linear(784, 4096), nn::ReLU(), nn::Linear(4096, 4096), nn::ReLU(), nn::Linear(4096, 10)});
  m.net->to(kGpu);
  m.opt = std::make_unique<optim::Adam>(m.net->parameters(), optim::AdamOptions{.lr = 1e-4});
  m.x = randn({4096, 784}, {.device = kGpu});
  m.y = randint(0, 10, {4096}, {.dtype = DType::i64, .device = kGpu});
  return m;
}

void train_step(Mlp& m) {
  m.opt->zero_grad();
  cross_entropy(m.net->forward(m.x), m.y).backward();
  m.opt->step();
}

bool bench_async(const std::string& dir) {
  const std::string path = dir + "/bench_async.safetensors";
  constexpr int kSteps = 400, kEvery = 50;
  double blocked_s = 0;  // inside save_checkpoint_async (the snapshot, or waiting for the last)
  auto run = [&](bool checkpoints, std::vector<float>* last) {
    Mlp m = make_mlp();
    for (int i = 0; i < 20; ++i) train_step(m);  // warm-up
    sync();
    const auto t0 = bench::Clock::now();
    for (int i = 1; i <= kSteps; ++i) {
      train_step(m);
      if (checkpoints && i % kEvery == 0) {
        const auto c0 = bench::Clock::now();
        io::save_checkpoint_async(path, m.net, *m.opt, nullptr, i);
        blocked_s += std::chrono::duration<double>(bench::Clock::now() - c0).count();
      }
    }
    sync();
    const double ms =
        std::chrono::duration<double>(bench::Clock::now() - t0).count() * 1e3 / kSteps;
    io::wait_for_checkpoint();
    if (last) *last = m.net->parameters()[2].to(Device::cpu()).to_vector<float>();
    return ms;
  };
  std::vector<float> plain, with;
  std::vector<double> off, on;
  for (int r = 0; r < 3; ++r) {  // interleaved, median of 3
    off.push_back(run(false, &plain));
    on.push_back(run(true, &with));
  }
  Mlp check = make_mlp();
  // What one checkpoint costs written synchronously (the background thread's work).
  const std::string sync_path = dir + "/bench_async_sync.safetensors";
  const double write_s = seconds([&] { io::save_checkpoint(sync_path, check.net, *check.opt); });
  std::filesystem::remove(sync_path);
  io::load_state(check.net, path);
  const std::vector<float> loaded = check.net->parameters()[2].to(Device::cpu()).to_vector<float>();
  if (plain != with || loaded != with) {
    std::fprintf(stderr,
                 "bench_load_gpu: VALIDATION FAILED: the run with asynchronous "
                 "checkpoints or its last checkpoint differs from the plain run\n");
    return false;
  }
  const double a = median(off), b = median(on), overhead = b / a - 1.0;
  const double blocked_ms = blocked_s * 1e3 / (3.0 * kSteps / kEvery);
  std::fprintf(stderr,
               "async checkpoints every %d steps to %s: %.3f ms/step vs %.3f without (%+.1f%%); "
               "%.1f ms per checkpoint inside the call; one synchronous write %.1f ms\n",
               kEvery, dir.c_str(), b, a, overhead * 100, blocked_ms, write_s * 1e3);
  bench::emit(
      "checkpoint_async_overhead_mlp4096", b, a, "ms/step", false, 1.0,
      {bench::str("dir", dir), bench::num("blocked_ms_per_checkpoint", blocked_ms),
       bench::num("sync_write_ms", write_s * 1e3), bench::num("overhead_pct", overhead * 100),
       bench::num("target_pct", 5.0), bench::str("met", overhead <= 0.05 ? "yes" : "no"),
       bench::str("reference_impl", "the same training without checkpoints")});
  std::filesystem::remove(path);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (!cuda_available()) {
      std::fprintf(stderr, "bench_load_gpu: skipped: no CUDA device\n");
      return 0;
    }
    const char* dir_env = std::getenv("EMBER_BENCH_DIR");
    const std::string dir = dir_env && *dir_env ? dir_env : "/tmp";
    // --async-only DIR...: only the checkpoint-overhead figure, once per folder given.
    if (argc > 1 && std::string(argv[1]) == "--async-only") {
      bool ok = true;
      for (int i = 2; i < argc; ++i) ok = bench_async(argv[i]) && ok;
      return ok ? 0 : 1;
    }
    bool ok = bench_async(dir);
    ok = bench_load(dir) && ok;
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_load_gpu: error: %s\n", e.what());
    return 1;
  }
}
