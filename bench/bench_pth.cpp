// bench/bench_pth.cpp — reading a ~1 GB PyTorch .pth state dict without Python (issue 31,
// target: io::load_pth within 1.5× of torch.load on the CPU).
//
//   file:      16 × Linear(4096, 4096) f32 weights and biases, written by torch.save
//              (bench/torch/pth_bench.py, Debian's python3-torch or any torch ≥ 1.6)
//   ember:     io::load_pth(file): the zip's central directory, the pickle, then one read
//              of each storage (stored entries) into fresh tensors, CRC-checked
//   reference: torch.load(file) in the same run (the script also times it), warm page cache,
//              median of 3 after a warm-up for both
// Validation first: every tensor's f64 sum equals the one torch computed before saving.
// Napkin math: a load reads the file once from the page cache and writes every byte once
// into new tensors (and hashes it for the CRC), so memory bandwidth bounds both.
// The file goes to $EMBER_BENCH_DIR (default: the current folder) and is removed at the end.
// EMBER_PYTHON names the Python with torch (Debian: /usr/bin/python3).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench_util.hpp"
#include "ember/ember.hpp"
#include "ember/io/pth.hpp"
#include "torch_reference.hpp"

int main() {
  using namespace ember;  // NOLINT: benchmark
  const char* dir = std::getenv("EMBER_BENCH_DIR");
  const std::string path = std::string(dir ? dir : ".") + "/bench_pth.pth";
  const nlohmann::json ref = bench::run_torch_script("bench_pth", "pth_bench.py " + path);
  if (ref.is_null()) {
    std::fprintf(stderr, "bench_pth: needs torch to write the file (set EMBER_PYTHON)\n");
    return 1;
  }
  // Validation: the sums of what ember read equal torch's.
  {
    const nn::StateDict sd = io::load_pth(path);
    if (sd.size() != ref["sums"].size()) {
      std::fprintf(stderr, "bench_pth: %zu tensors read, torch saved %zu\n", sd.size(),
                   ref["sums"].size());
      return 1;
    }
    for (const auto& [name, t] : sd) {
      const double want = ref["sums"][name].get<double>();
      const double got = sum(t.to(DType::f64)).item<double>();
      if (std::abs(got - want) > 1e-9 * std::max(1.0, std::abs(want))) {
        std::fprintf(stderr, "bench_pth: %s sums to %.17g, torch's to %.17g\n", name.c_str(), got,
                     want);
        return 1;
      }
    }
  }
  const bench::Timing t = bench::time_it([&] { bench::do_not_optimize(io::load_pth(path)); }, 1, 3);
  const bench::Timing c =
      bench::time_it([&] { bench::do_not_optimize(io::pth_catalogue(path)); }, 1, 3);
  const double gb = ref["bytes"].get<double>() / 1e9, torch_s = ref["load_s"].get<double>();
  std::fprintf(stderr,
               "bench_pth: %.3f GB: io::load_pth %.3f s (%.2f GB/s), torch.load %.3f s "
               "(%.2f GB/s, torch %s); pth_catalogue %.2f ms\n",
               gb, t.median, gb / t.median, torch_s, gb / torch_s,
               ref["torch"].get<std::string>().c_str(), c.median * 1e3);
  // speedup = torch's time / ember's; the target is "within 1.5× of torch.load": ≥ 1/1.5.
  bench::emit("pth_load_1gb", t.median, torch_s, "s", false, 1.0 / 1.5,
              {bench::num("gb", gb), bench::num("ember_gbps", gb / t.median),
               bench::num("torch_gbps", gb / torch_s), bench::num("catalogue_ms", c.median * 1e3)});
  std::filesystem::remove(path);
  return 0;
}
