// bench/bench_checkpoint.cpp — saving and loading a ~1 GB f32 model (ARCHITECTURE §7, issue 4).
//
//   model:     4 × Linear(8192, 8192): 268.5 M parameters, 1.074 GB of f32
//   ember:     io::save_model (temporary file, XXH3 checksum, fsync, rename, fsync folder);
//              io::load_state into the existing model (one pread pass into fresh buffers
//              while hashing, then exchanged into the parameters: Note [Loading by exchange])
//              and io::load_model (rebuild without initialisation, then read straight into
//              it while hashing); both also timed as a process's first load (the allocator's
//              cache emptied first, so every buffer is new pages)
//   reference: libtorch torch::save(module) / torch::load(module) on the same-sized
//              torch::nn::Sequential, in the same run; torch::save does not fsync, so it is
//              also timed followed by an fsync of its file ("torch_save_fsync")
// Warm page cache: every file was just written, and each timing is the median of 3 after a
// warm-up. Napkin math: a load reads the file once from the page cache and writes every
// byte once into the model, so memcpy speed (a few GB/s per core) bounds it; a save writes
// every byte into the page cache and then to the disk (fsync), which the disk bounds.
// Files go to $EMBER_BENCH_DIR (default: the current folder) and are removed at the end.
#include <fcntl.h>
#include <unistd.h>

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

#ifdef EMBER_HAVE_LIBTORCH
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/serialize.h>
#endif

namespace {

using namespace ember;  // NOLINT: benchmark
constexpr int64_t kWidth = 8192, kLayers = 4;
constexpr int kWarmup = 1, kReps = 3;

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// Seconds to write `bytes` with plain write() calls, and then to fsync them (the disk's part).
std::pair<double, double> raw_write(const std::string& path, const std::vector<char>& buf,
                                    int64_t bytes) {
  const auto t0 = bench::Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (int64_t left = bytes; left > 0;) {
    const ssize_t n =
        ::write(fd, buf.data(),
                static_cast<size_t>(std::min<int64_t>(left, static_cast<int64_t>(buf.size()))));
    if (n <= 0) break;
    left -= n;
  }
  const auto t1 = bench::Clock::now();
  ::fsync(fd);
  ::close(fd);
  const auto t2 = bench::Clock::now();
  return {std::chrono::duration<double>(t1 - t0).count(),
          std::chrono::duration<double>(t2 - t1).count()};
}

}  // namespace

int main() {
  const char* dir_env = std::getenv("EMBER_BENCH_DIR");
  const std::string dir = dir_env && *dir_env ? dir_env : ".";
  const std::string ember_path = dir + "/bench_checkpoint.safetensors",
                    torch_path = dir + "/bench_checkpoint.pt",
                    raw_path = dir + "/bench_checkpoint.raw";
  manual_seed(1);
  std::vector<nn::Module> layers;
  for (int64_t i = 0; i < kLayers; ++i) layers.push_back(nn::Linear(kWidth, kWidth));
  nn::Module net = nn::Sequential(layers);
  const int64_t params = net->parameter_count();
  const double gb = static_cast<double>(params) * 4 / 1e9;
  std::fprintf(stderr, "bench_checkpoint: %lld parameters, %.3f GB f32, files in %s\n",
               static_cast<long long>(params), gb, dir.c_str());

  // ---- validate: a save and both loads give back every byte ----
  io::save_model(net, ember_path);
  nn::Module back = io::load_model(ember_path);
  manual_seed(2);
  std::vector<nn::Module> other;
  for (int64_t i = 0; i < kLayers; ++i) other.push_back(nn::Linear(kWidth, kWidth));
  nn::Module into = nn::Sequential(other);
  io::load_state(into, ember_path);
  const nn::StateDict want = net->state_dict(), got1 = back->state_dict(),
                      got2 = into->state_dict();
  for (size_t i = 0; i < want.size(); ++i) {
    const size_t bytes = static_cast<size_t>(want[i].second.numel()) * 4;
    if (std::memcmp(want[i].second.data_ptr(), got1[i].second.data_ptr(), bytes) != 0 ||
        std::memcmp(want[i].second.data_ptr(), got2[i].second.data_ptr(), bytes) != 0) {
      std::fprintf(stderr, "bench_checkpoint: VALIDATION FAILED: %s differs after a round trip\n",
                   want[i].first.c_str());
      return 1;
    }
  }
  back = nn::Module();
  std::fprintf(
      stderr,
      "bench_checkpoint: validated ember save/load_model/load_state (all %zu tensors bitwise)\n",
      want.size());

  std::optional<double> torch_save_s, torch_save_fsync_s, torch_load_s;
#ifdef EMBER_HAVE_LIBTORCH
  torch::manual_seed(1);
  torch::nn::Sequential tnet;
  for (int64_t i = 0; i < kLayers; ++i) tnet->push_back(torch::nn::Linear(kWidth, kWidth));
  torch::nn::Sequential tinto;
  for (int64_t i = 0; i < kLayers; ++i) tinto->push_back(torch::nn::Linear(kWidth, kWidth));
  {
    torch::NoGradGuard g;
    torch::save(tnet, torch_path);
    torch::load(tinto, torch_path);
    const auto a = tnet->parameters(), b = tinto->parameters();
    for (size_t i = 0; i < a.size(); ++i)
      if (!torch::equal(a[i], b[i])) {
        std::fprintf(stderr, "bench_checkpoint: VALIDATION FAILED: libtorch round trip differs\n");
        return 1;
      }
  }
  std::fprintf(stderr, "bench_checkpoint: validated libtorch save/load\n");
#endif

  // ---- time ----
  std::vector<std::function<void()>> fns = {
      [&] { io::save_model(net, ember_path); },
      [&] { io::load_state(into, ember_path); },
      [&] { bench::do_not_optimize(io::load_model(ember_path)); },
  };
#ifdef EMBER_HAVE_LIBTORCH
  fns.push_back([&] { torch::save(tnet, torch_path); });
  fns.push_back([&] {
    torch::save(tnet, torch_path);
    fsync_path(torch_path);
  });
  fns.push_back([&] { torch::load(tinto, torch_path); });
#endif
  const std::vector<bench::Timing> t = bench::time_interleaved(fns, kWarmup, kReps);
#ifdef EMBER_HAVE_LIBTORCH
  torch_save_s = t[3].median;
  torch_save_fsync_s = t[4].median;
  torch_load_s = t[5].median;
#endif
  // A first load in a process: the allocator's cache emptied before each (untimed), so the
  // load's fresh buffers (Note [Loading by exchange]) and load_model's module are new pages,
  // faulted in while the file is read into them. The timings above reuse the blocks the
  // previous load gave back, as a process that loads more than once does.
  auto time_cold = [&](const std::function<void()>& fn) {
    std::vector<double> s;
    for (int i = 0; i < kWarmup + kReps; ++i) {
      empty_cache(Device::cpu());
      const auto start = bench::Clock::now();
      fn();
      if (i >= kWarmup)
        s.push_back(std::chrono::duration<double>(bench::Clock::now() - start).count());
    }
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  };
  const double load_state_cold_s = time_cold([&] { io::load_state(into, ember_path); });
  const double load_model_cold_s =
      time_cold([&] { bench::do_not_optimize(io::load_model(ember_path)); });
  // The disk's share of a save: plain write() of the same bytes, then fsync.
  const std::vector<char> buf(8u << 20, 1);
  const auto [write_s, fsync_s] = raw_write(raw_path, buf, params * 4);

  auto gbps = [&](double s) { return gb / s; };
  auto opt_gbps = [&](std::optional<double> s) {
    return s ? std::optional<double>(gb / *s) : std::nullopt;
  };
  const std::vector<bench::Field> common = {
      bench::num("gb", gb), bench::str("model", "4x Linear(8192, 8192) f32"),
      bench::num("raw_write_gbps", gbps(write_s)), bench::num("raw_fsync_s", fsync_s)};
  auto fields = [&](std::vector<bench::Field> more) {
    more.insert(more.begin(), common.begin(), common.end());
    return more;
  };
  bench::emit(
      "checkpoint_save_1gb", gbps(t[0].median), opt_gbps(torch_save_s), "GB/s", true, 1.0,
      fields({bench::str("reference_name", "torch::save (no fsync)"),
              bench::num("ember_s", t[0].median),
              bench::str("note",
                         "ember includes fsync of file and folder; torch::save does not fsync")}));
  bench::emit("checkpoint_save_1gb_vs_torch_fsync", gbps(t[0].median), opt_gbps(torch_save_fsync_s),
              "GB/s", true, 1.0, fields({bench::str("reference_name", "torch::save + fsync")}));
  bench::emit("checkpoint_load_state_1gb", gbps(t[1].median), opt_gbps(torch_load_s), "GB/s", true,
              1.0,
              fields({bench::str("reference_name", "torch::load(module) into an existing module"),
                      bench::num("ember_s", t[1].median), bench::num("target_gbps", 2.0),
                      bench::str("met_2gbps", gbps(t[1].median) >= 2.0 ? "yes" : "no")}));
  bench::emit(
      "checkpoint_load_model_1gb", gbps(t[2].median), opt_gbps(torch_load_s), "GB/s", true, 1.0,
      fields({bench::str("reference_name", "torch::load(module) into an existing module"),
              bench::num("ember_s", t[2].median),
              bench::str("note",
                         "ember rebuilds the module from the file (allocation + init) first")}));
  bench::emit("checkpoint_load_state_first_1gb", gbps(load_state_cold_s), opt_gbps(torch_load_s),
              "GB/s", true, 1.0,
              fields({bench::str("reference_name", "torch::load(module) into an existing module"),
                      bench::num("ember_s", load_state_cold_s),
                      bench::str("note", "allocator cache emptied before each load (new pages)")}));
  bench::emit("checkpoint_load_model_first_1gb", gbps(load_model_cold_s), opt_gbps(torch_load_s),
              "GB/s", true, 1.0,
              fields({bench::str("reference_name", "torch::load(module) into an existing module"),
                      bench::num("ember_s", load_model_cold_s),
                      bench::str("note", "allocator cache emptied before each load (new pages)")}));
  std::fprintf(stderr,
               "bench_checkpoint: first load (new pages): load_state %.3f s, load_model %.3f s\n",
               load_state_cold_s, load_model_cold_s);
  std::fprintf(stderr,
               "bench_checkpoint: save %.3f s (%.2f GB/s; plain write %.3f s + fsync %.3f s), "
               "load_state %.3f s, "
               "load_model %.3f s",
               t[0].median, gbps(t[0].median), write_s, fsync_s, t[1].median, t[2].median);
  if (torch_load_s)
    std::fprintf(stderr, "; torch::save %.3f s (+fsync %.3f s), torch::load %.3f s", *torch_save_s,
                 *torch_save_fsync_s, *torch_load_s);
  std::fprintf(stderr, "\n");
  for (const std::string& p : {ember_path, torch_path, raw_path}) std::filesystem::remove(p);
  return 0;
}
