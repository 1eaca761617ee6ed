// src/cuda/lapack.cpp — the decompose slot on CUDA: cuSOLVER on the device (src/cuda/cusolver.cpp)
// or the host route, by Note [Which decompositions run on cuSOLVER]. The host route copies the
// operands to host memory, the CPU backend's LAPACK decomposes them, and the results are copied
// back; every Decomposition can go either way (eigh, lu with its i32 pivots, the triangular
// solves included), each operand copied as its own dtype.
#include <algorithm>
#include <string>
#include <vector>

#include "cuda/common.cuh"
#include "cuda/cusolver.hpp"
#include "ember/error.hpp"
#include "ember/runtime.hpp"

namespace ember::cuda {
namespace {

using backend::Decomposition;

// A host copy of a device view (empty when the view has no data).
struct HostCopy {
  std::vector<unsigned char> bytes;
  View view;
  HostCopy(const View& v, bool read) : view(v) {
    if (!v.data) return;
    bytes.resize(static_cast<size_t>(v.numel()) * element_size(v.dtype));
    if (read && !bytes.empty()) memcpy_to_host(v.device, bytes.data(), v.data, bytes.size());
    view.data = bytes.data();
  }
  void write_back(const View& device_view) const {
    if (device_view.data && !bytes.empty())
      memcpy_from_host(device_view.device, device_view.data, bytes.data(), bytes.size());
  }
};

int64_t host_decompose(Decomposition op, const View& a, const View& b, const View& out0,
                       const View& out1, const View& out2) {
  HostCopy ha(a, true), hb(b, true), h0(out0, false), h1(out1, false), h2(out2, false);
  const int64_t failed =
      backend::cpu_backend().decompose(op, ha.view, hb.view, h0.view, h1.view, h2.view);
  h0.write_back(out0);
  h1.write_back(out1);
  h2.write_back(out2);
  return failed;
}

const char* name_of(Decomposition op) {
  switch (op) {
    case Decomposition::inverse: return "inverse";
    case Decomposition::det: return "det";
    case Decomposition::solve: return "solve";
    case Decomposition::cholesky: return "cholesky";
    case Decomposition::qr: return "qr";
    case Decomposition::svd: return "svd";
    case Decomposition::eigh: return "eigh";
    case Decomposition::lu: return "lu";
    case Decomposition::solve_lower: return "solve_lower";
    case Decomposition::solve_upper: return "solve_upper";
  }
  return "?";
}

// Note [Which decompositions run on cuSOLVER]
// Under preferred_linalg_library("default") a decomposition is to run on cuSOLVER when its
// matrices' smaller side is at least the size from which bench/bench_linalg measures cuSOLVER
// faster than the host route (the host's OpenBLAS with its threads, the copies included); both
// routes scale with the batch (one matrix at a time each), so the size alone decides. Measured
// on an H100 (2026-12-06, f32, batch 1, ms a call, host / cuSOLVER; docs/benchmarks.md):
//
//   n           64             128            256            512            1024
//   inverse     0.065 / 0.153  0.321 / 0.279  1.372 / 0.558  3.863 / 1.204  13.87 / 2.573
//   det         0.028 / 0.124  0.074 / 0.224  0.924 / 0.454  2.417 / 1.010  10.25 / 2.130
//   solve       0.051 / 0.157  0.119 / 0.276  1.076 / 0.547  2.620 / 1.186  11.76 / 2.543
//   cholesky    0.038 / 0.073  0.123 / 0.111  0.346 / 0.200  1.229 / 0.376  8.936 / 0.869
//   qr          0.219 / 0.261  1.506 / 0.887  3.906 / 0.787  13.78 / 1.898  85.61 / 4.449
//   svd         0.669 / 2.728  2.969 / 7.832  12.37 / 18.98  51.40 / 45.38  274.0 / 125.3
//   eigh        0.355 / 0.705  1.746 / 1.451  6.079 / 2.030  23.01 / 4.860  92.58 / 11.07
//   lu          0.062 / 0.140  0.209 / 0.237  1.509 / 0.452  4.609 / 0.985  27.95 / 2.090
//   triangular  0.038 / 0.044  0.057 / 0.077  (not measured further)
//
// Each takes cuSOLVER from the first size where it is faster by a clear margin (at least
// 1.5x; a size where the two are within 20% stays on the host, whose result needs no device
// workspace): qr from 128, svd from 512, the rest from 256. The triangular solves were faster
// on the host at every size measured, so "default" keeps them there (kHostAlways) and
// "cusolver" opts in.
constexpr int64_t kHostAlways = -1;
int64_t cusolver_from(Decomposition op) {
  switch (op) {
    case Decomposition::qr: return 128;
    case Decomposition::svd: return 512;
    case Decomposition::inverse:
    case Decomposition::det:
    case Decomposition::solve:
    case Decomposition::cholesky:
    case Decomposition::eigh:
    case Decomposition::lu: return 256;
    case Decomposition::solve_lower:
    case Decomposition::solve_upper: return kHostAlways;
  }
  return kHostAlways;
}

// Whether `op` on `a` runs on cuSOLVER; *why says why not.
bool on_device(Decomposition op, const View& a, std::string* why) {
  const int library = detail::linalg_library();
  if (library == 2) {
    *why = "preferred_linalg_library(\"host\")";
    return false;
  }
#if defined(EMBER_HAVE_CUSOLVER_HEADERS)
  const int64_t from = cusolver_from(op);
  if (library == 0 && from == kHostAlways) {  // decided before cuSOLVER is loaded
    *why = detail::concat("the host route measured faster than cuSOLVER for ", name_of(op),
                          " at every size (set_preferred_linalg_library(\"cusolver\") takes it)");
    return false;
  }
  std::string missing;
  if (!cusolver_api(&missing)) {
    *why = missing;
    return false;
  }
  if (library == 1) return true;
  const size_t rank = a.shape.size();
  const int64_t m = a.shape[rank - 2], n = a.shape[rank - 1];
  if (std::min(m, n) < from) {
    *why = detail::concat("cuSOLVER: ", m, "x", n, " is below the ", from, "x", from,
                          " from which it is faster (", name_of(op),
                          "; preferred_linalg_library \"default\")");
    return false;
  }
  return true;
#else
  (void)op;
  (void)a;
  *why = "ember was built without cuSOLVER's headers";
  return false;
#endif
}

}  // namespace

int64_t decompose(Decomposition op, const View& a, const View& b, const View& out0,
                  const View& out1, const View& out2) {
  std::string why;
  if (on_device(op, a, &why)) {
    detail::set_linalg_fallback_reason("");
#if defined(EMBER_HAVE_CUSOLVER_HEADERS)
    return cusolver_decompose(op, a, b, out0, out1, out2);
#endif
  }
  detail::set_linalg_fallback_reason(why);
  return host_decompose(op, a, b, out0, out1, out2);
}

}  // namespace ember::cuda
