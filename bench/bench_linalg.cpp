// bench/bench_linalg.cpp — matrix decompositions of CUDA tensors on cuSOLVER against the host
// route (copies to host memory, the CPU's LAPACK, copies back), and torch.linalg on CUDA
// (bench/torch/linalg_bench.py) in the same run: the sizes from which cuSOLVER is faster, which
// Note [Which decompositions run on cuSOLVER] in src/cuda/lapack.cpp and docs/ops.md record.
// Skips with a message (exit 0) when there is no CUDA device or no cuSOLVER.
//
//   bench_linalg [--sizes 16,32,...] [--batch 1] [--dtype f32|f64] [--torch on|off]
//
// For each op and size n (matrices n×n; qr, svd and lu also take them so): the ms of one call
// under preferred_linalg_library "host", "cusolver" and "default" (median of 5 after 2
// warm-ups, synchronised), and torch's. Validation first: the cuSOLVER result equals the host
// route's within 1e-3 (f32) / 1e-9 (f64) relative, on gauge-free quantities (singular values,
// eigenvalues, products).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ember/ember.hpp"
#include "nlohmann/json.hpp"
#include "torch_reference.hpp"

namespace {

using ember::DType;
using ember::Tensor;

const ember::Device kGpu = ember::Device::cuda(0);

struct Config {
  std::vector<int64_t> sizes = {16, 32, 64, 128, 256, 512, 1024, 2048};
  int64_t batch = 1;
  DType dtype = DType::f32;
  bool torch = true;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_linalg: %s\nusage: bench_linalg [--sizes 16,32,...] [--batch N] [--dtype "
               "f32|f64] [--torch on|off]\n",
               why.c_str());
  std::exit(2);
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; i += 2) {
    const std::string f = argv[i];
    if (i + 1 >= argc) usage("missing value for " + f);
    const std::string v = argv[i + 1];
    if (f == "--sizes") {
      c.sizes.clear();
      std::stringstream in(v);
      for (std::string s; std::getline(in, s, ',');) c.sizes.push_back(std::stoll(s));
    } else if (f == "--batch") {
      c.batch = std::stoll(v);
    } else if (f == "--dtype" && (v == "f32" || v == "f64")) {
      c.dtype = v == "f32" ? DType::f32 : DType::f64;
    } else if (f == "--torch" && (v == "on" || v == "off")) {
      c.torch = v == "on";
    } else {
      usage("unknown flag or value: " + f + " " + v);
    }
  }
  if (c.sizes.empty() || c.batch < 1) usage("--sizes non-empty, --batch >= 1");
  return c;
}

Tensor eye_like(int64_t n, DType dt) {
  return ember::diag(ember::ones({n}, {.dtype = dt, .device = kGpu}));
}

// One op: what it computes (returning a gauge-free tensor to validate), by name.
struct Op {
  const char* name;
  std::function<Tensor(const Tensor& a, const Tensor& b)> run;
  int64_t max_size;  // larger sizes are skipped (the host route takes seconds)
};

std::vector<Op> ops() {
  return {
      {"inv", [](const Tensor& a, const Tensor&) { return ember::inv(a); }, 4096},
      {"det", [](const Tensor& a, const Tensor&) { return ember::det(a); }, 4096},
      {"solve", [](const Tensor& a, const Tensor& b) { return ember::solve(a, b); }, 4096},
      {"cholesky", [](const Tensor& a, const Tensor&) { return ember::cholesky(a); }, 4096},
      {"qr", [](const Tensor& a, const Tensor&) { return ember::qr(a).R.abs(); }, 4096},
      {"svd", [](const Tensor& a, const Tensor&) { return ember::svd(a).S; }, 1024},
      {"eigh", [](const Tensor& a, const Tensor&) { return ember::eigh(a).eigenvalues; }, 2048},
      {"lu_factor", [](const Tensor& a, const Tensor&) { return ember::lu_factor(a).LU; }, 4096},
      {"solve_triangular",
       [](const Tensor& a, const Tensor& b) { return ember::solve_triangular(a, b, false); }, 4096},
  };
}

// The operand each op takes: well conditioned, SPD for cholesky and eigh, lower for the
// triangular solve.
Tensor operand(const std::string& op, int64_t batch, int64_t n, DType dt) {
  ember::manual_seed(7);
  Tensor a = ember::randn({batch, n, n}, {.dtype = dt, .device = kGpu});
  if (op == "cholesky" || op == "eigh")
    return ember::matmul(a, a.transpose(-2, -1)) / static_cast<double>(n) + eye_like(n, dt);
  a = a / std::sqrt(static_cast<double>(n)) + 2.0 * eye_like(n, dt);
  // det: eigenvalues about 2 would make it 2^n (inf in f32 from n = 128); halved they lie around
  // 1 and log|det| stays near 0, so both routes' finite results can be compared.
  if (op == "det") a = a * 0.5;
  return op == "solve_triangular" ? ember::tril(a) : a;
}

double relative_error(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(DType::f64), w = want.to(DType::f64);
  const double scale = std::max(1.0, ember::max(ember::abs(w)).item<double>());
  return ember::max(ember::abs(g - w)).item<double>() / scale;
}

double time_ms(const std::function<void()>& fn) {
  return bench::time_blocks(fn, 2, 5, 1, [] { ember::synchronize(kGpu); }).median;
}

}  // namespace

int main(int argc, char** argv) {
  const Config c = parse(argc, argv);
  if (!ember::cuda_available()) {
    std::fprintf(stderr, "bench_linalg: skipped (no CUDA device)\n");
    return 0;
  }
  {
    ember::set_preferred_linalg_library("cusolver");
    ember::inv(eye_like(2, DType::f32));
    const std::string why = ember::linalg_fallback_reason();
    if (!why.empty()) {
      std::fprintf(stderr, "bench_linalg: skipped (cuSOLVER: %s)\n", why.c_str());
      return 0;
    }
  }
  const std::string dt_name(ember::dtype_name(c.dtype));
  nlohmann::json py;
  if (c.torch) {
    std::string sizes;
    for (int64_t n : c.sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(n);
    py = bench::run_torch_script("bench_linalg", "linalg_bench.py --sizes " + sizes + " --batch " +
                                                     std::to_string(c.batch) + " --dtype " +
                                                     dt_name);
  }
  const double tol = c.dtype == DType::f64 ? 1e-9 : 1e-3;
  bool ok = true;
  std::fprintf(stderr, "bench_linalg: %s, batch %lld, ms per call (median of 5)\n", dt_name.c_str(),
               static_cast<long long>(c.batch));
  std::fprintf(stderr, "%-17s %6s %10s %10s %10s %10s %8s %8s\n", "op", "n", "host", "cusolver",
               "default", "torch", "host/cus", "torch/def");
  for (const Op& op : ops()) {
    for (int64_t n : c.sizes) {
      if (n > op.max_size) continue;
      const Tensor a = operand(op.name, c.batch, n, c.dtype);
      const Tensor b = ember::randn({c.batch, n, 4}, {.dtype = c.dtype, .device = kGpu});
      std::map<std::string, double> ms;
      Tensor host_result;
      for (const char* lib : {"host", "cusolver", "default"}) {
        ember::set_preferred_linalg_library(lib);
        const Tensor result = op.run(a, b);
        if (std::string(lib) == "host") host_result = result;
        if (std::string(lib) == "cusolver") {
          const double err = relative_error(result, host_result);
          if (!(err < tol)) {
            std::fprintf(stderr,
                         "bench_linalg: VALIDATION FAILED: %s n=%lld: cuSOLVER against the host "
                         "route %.3g (expected < %.0e)\n",
                         op.name, static_cast<long long>(n), err, tol);
            ok = false;
          }
        }
        ms[lib] = time_ms([&] { bench::do_not_optimize(op.run(a, b).data_ptr()); });
      }
      std::optional<double> torch_ms;
      const std::string key = std::string(op.name) + "_" + std::to_string(n);
      if (py.is_object() && py.contains(key) && py[key].is_number())
        torch_ms = py[key].get<double>();
      std::fprintf(stderr, "%-17s %6lld %10.3f %10.3f %10.3f %10s %8.2f %8s\n", op.name,
                   static_cast<long long>(n), ms["host"], ms["cusolver"], ms["default"],
                   torch_ms ? std::to_string(*torch_ms).substr(0, 8).c_str() : "-",
                   ms["host"] / ms["cusolver"],
                   torch_ms ? std::to_string(*torch_ms / ms["default"]).substr(0, 5).c_str() : "-");
      bench::emit(std::string("linalg_") + op.name + "_" + dt_name + "_n" + std::to_string(n) +
                      "_b" + std::to_string(c.batch),
                  ms["default"], torch_ms, "ms", false, 1.0,
                  {bench::num("host_ms", ms["host"]), bench::num("cusolver_ms", ms["cusolver"])});
    }
  }
  ember::set_preferred_linalg_library("default");
  return ok ? 0 : 1;
}
