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
// faster than the host route on the H200 (the host's OpenBLAS with its threads, the copies
// included); both routes scale with the batch (one matrix at a time each), so the size alone
// decides. Measured on an H100 (2026-12-05, f32, batch 1, ms a call, host / cuSOLVER):
//
//   n        32            128           512            1024           2048
//   inverse  2.40 / 2.48   0.34 / 2.66   440 / 3.59     804 / 7.38     712 / 16.1
//   det      2.40 / 2.46   2.40 / 2.61   483 / 3.39     869 / 6.94     -
//
// so inverse and det take cuSOLVER from 512 (256 was not measured). The other decompositions
// were not reached in that call (the host route's large sizes used up its time): until they
// are, "default" keeps them on the host route, as before cuSOLVER was added, and "cusolver"
// opts in: kNotMeasured below.
constexpr int64_t kNotMeasured = -1;
int64_t cusolver_from(Decomposition op) {
  switch (op) {
    case Decomposition::inverse:
    case Decomposition::det: return 512;
    default: return kNotMeasured;
  }
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
  if (library == 0 && from == kNotMeasured) {  // decided before cuSOLVER is loaded
    *why = detail::concat("cuSOLVER is opt-in until its speed against the host route is measured (",
                          name_of(op), "; set_preferred_linalg_library(\"cusolver\") takes it)");
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
